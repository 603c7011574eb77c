// templated: kernels in a namespace, templated on type and value, plus a functor template, so
// their mangled names are non-trivial; launched with <<<>>> and through cudaLaunchKernel.
static const char *prog_name = "templated";
#include "check.h"

namespace tprof_test {

template <typename T, int UNROLL>
__global__ void scale(T *x, T alpha, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; u++)
    if (i + u < n) x[i + u] *= alpha;
}

struct Square {
  __device__ float operator()(float v) const { return v * v; }
};

template <typename F>
__global__ void apply(float *x, int n, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = f(x[i]);
}

}  // namespace tprof_test

int main() {
  const int n = 1 << 16;
  float *xf;
  double *xd;
  CK(cudaMalloc(&xf, n * sizeof(float)));
  CK(cudaMalloc(&xd, n * sizeof(double)));
  CK(cudaMemset(xf, 0, n * sizeof(float)));
  tprof_test::scale<float, 4><<<n / 4 / 128, 128>>>(xf, 2.0f, n);
  tprof_test::scale<double, 2><<<n / 2 / 128, 128>>>(xd, 0.5, n);
  tprof_test::apply<<<n / 256, 256>>>(xf, n, tprof_test::Square());
  CK(cudaGetLastError());
  // The same kernel through the runtime API, by host-stub address, as frameworks do.
  float alpha = 3.0f;
  int nn = n;
  void *args[] = {&xf, &alpha, &nn};
  CK(cudaLaunchKernel((const void *)tprof_test::scale<float, 4>, dim3(n / 4 / 256), dim3(256),
                      args, 0, 0));
  CK(cudaDeviceSynchronize());
  CK(cudaFree(xf));
  CK(cudaFree(xd));
  std::printf("templated: 4 launches of namespaced template kernels: ok\n");
  return 0;
}
