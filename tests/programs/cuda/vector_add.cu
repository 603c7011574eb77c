// vector_add: the smallest CUDA program, <<<>>> launches on the default stream.
// The simulated GPU does not execute device code, so only copies are checked for data.
#include <cstring>
#include <vector>

static const char *prog_name = "vector_add";
#include "check.h"

__global__ void vector_add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  const int n = 1 << 20;
  const size_t bytes = n * sizeof(float);
  int count = 0;
  CK(cudaGetDeviceCount(&count));
  std::vector<float> a(n), b(n), back(n);
  for (int i = 0; i < n; i++) {
    a[i] = float(i);
    b[i] = 2.0f * i;
  }
  float *da, *db, *dc;
  CK(cudaMalloc(&da, bytes));
  CK(cudaMalloc(&db, bytes));
  CK(cudaMalloc(&dc, bytes));
  CK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  const int block = 256, grid = (n + block - 1) / block;
  for (int rep = 0; rep < 3; rep++) vector_add<<<grid, block>>>(da, db, dc, n);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(back.data(), da, bytes, cudaMemcpyDeviceToHost));  // round trip of a
  if (std::memcmp(back.data(), a.data(), bytes) != 0) {
    std::fprintf(stderr, "vector_add: H2D/D2H round trip changed the data\n");
    return EXIT_WRONG_DATA;
  }
  CK(cudaMemcpy(back.data(), dc, bytes, cudaMemcpyDeviceToHost));
  CK(cudaFree(da));
  CK(cudaFree(db));
  CK(cudaFree(dc));
  std::printf("vector_add: %d devices, 3 launches of vector_add<<<%d, %d>>>: ok\n", count, grid,
              block);
  return 0;
}
