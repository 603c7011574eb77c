// A CUDA program for the tprof GPU validation kit, built with `nvcc -cudart static`: its CUDA
// runtime is inside the executable, so no interposer sees its calls; only CUPTI can report its
// kernels. Launches tprof_validate_saxpy SAXPY_LAUNCHES times and tprof_validate_scale<float>
// SCALE_LAUNCHES times, checks the result, prints one line and exits 0 (1 on a CUDA error or a
// wrong result).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define SAXPY_LAUNCHES 200
#define SCALE_LAUNCHES 100

#define CHECK(x)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "static_kernels: %s: %s\n", #x, cudaGetErrorString(e_));               \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

__global__ void tprof_validate_saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

template <typename T>
__global__ void tprof_validate_scale(int n, T s, T *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * s;
}

int main() {
  const int n = 1 << 20;
  float *hx = (float *)std::malloc(n * sizeof(float));
  float *hy = (float *)std::malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) {
    hx[i] = 1.0f;
    hy[i] = 0.0f;
  }
  float *x = nullptr, *y = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  const int block = 256, grid = (n + block - 1) / block;
  for (int i = 0; i < SAXPY_LAUNCHES; i++) tprof_validate_saxpy<<<grid, block, 0, s>>>(n, 0.5f, x, y);
  for (int i = 0; i < SCALE_LAUNCHES; i++) tprof_validate_scale<float><<<grid, block, 0, s>>>(n, 1.0f, y);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost));
  const float want = 0.5f * SAXPY_LAUNCHES;
  for (int i = 0; i < n; i += 4097) {
    if (hy[i] != want) {
      std::fprintf(stderr, "static_kernels: y[%d] = %f, want %f\n", i, hy[i], want);
      return 1;
    }
  }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  std::free(hx);
  std::free(hy);
  std::printf("static_kernels: ok: %d x tprof_validate_saxpy, %d x tprof_validate_scale<float>\n", SAXPY_LAUNCHES,
              SCALE_LAUNCHES);
  return 0;
}
