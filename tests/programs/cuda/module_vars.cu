// module_vars: module variables as nvcc registers them (__device__, __constant__, __managed__), written
// and read with cudaMemcpyToSymbol / cudaMemcpyFromSymbol (+ Async) through cuda_runtime.h's C++
// templates, their device addresses from cudaGetSymbolAddress, kernels using them, and CUDA 13's
// cuCtxCreate (the _v4 ABI) reached through cudaGetDriverEntryPointByVersion.
// Kernels that execute: _Z11apply_tablePfi 2, _Z10bump_countv 1.
#include <cstring>
#include <cuda.h>

static const char *prog_name = "module_vars";
#include "check.h"

__device__ float table[64];
__constant__ float coeffs[4];
__managed__ int counter;

__global__ void apply_table(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = table[i % 64] * coeffs[i % 4];
}

__global__ void bump_count() { atomicAdd(&counter, 1); }

int main() {
  float in[64], out[64], c[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  for (int i = 0; i < 64; i++) in[i] = float(i);
  CK(cudaMemcpyToSymbol(table, in, sizeof in));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *pinned;
  CK(cudaMallocHost(&pinned, sizeof c));
  memcpy(pinned, c, sizeof c);
  CK(cudaMemcpyToSymbolAsync(coeffs, pinned, sizeof c, 0, cudaMemcpyHostToDevice, s));
  const int n = 1 << 16;
  float *x;
  CK(cudaMalloc(&x, n * sizeof(float)));
  apply_table<<<n / 256, 256, 0, s>>>(x, n);
  CK(cudaGetLastError());
  float *table_addr = nullptr;
  CK(cudaGetSymbolAddress((void **)&table_addr, table));
  size_t table_size = 0;
  CK(cudaGetSymbolSize(&table_size, table));
  if (table_size != sizeof in) {
    fprintf(stderr, "module_vars: table is %zu bytes\n", table_size);
    return EXIT_WRONG_DATA;
  }
  // write half the table through its device address, device to device
  CK(cudaMemcpyAsync(table_addr + 32, x, 32 * sizeof(float), cudaMemcpyDeviceToDevice, s));
  apply_table<<<n / 256, 256, 0, s>>>(x, n);
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpyFromSymbol(out, table, 32 * sizeof(float)));
  if (memcmp(in, out, 32 * sizeof(float))) {
    fprintf(stderr, "module_vars: table round trip\n");
    return EXIT_WRONG_DATA;
  }
  float back[4] = {0, 0, 0, 0};
  CK(cudaMemcpyFromSymbolAsync(back, coeffs, sizeof back, 0, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  if (back[3] != 4.0f) {
    fprintf(stderr, "module_vars: coeffs %f\n", back[3]);
    return EXIT_WRONG_DATA;
  }
  counter = 41; // managed: written by the host directly
  bump_count<<<1, 1>>>();
  CK(cudaDeviceSynchronize());

  // CUDA 13's cuCtxCreate: (context, params, flags, device)
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuCtxCreate", &fn, 13000, cudaEnableDefault, &q));
  if (!fn || q != cudaDriverEntryPointSuccess) {
    fprintf(stderr, "module_vars: cuCtxCreate entry point (%d)\n", (int)q);
    return EXIT_WRONG_DATA;
  }
  auto ctx_create = reinterpret_cast<CUresult (*)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice)>(fn);
  CUcontext ctx = nullptr;
  if (ctx_create(&ctx, nullptr, 0, 0) != CUDA_SUCCESS || !ctx) {
    fprintf(stderr, "module_vars: cuCtxCreate failed\n");
    return EXIT_CUDA_ERROR;
  }
  CK(cudaFree(x));
  CK(cudaFreeHost(pinned));
  printf("module_vars: table_bytes=%zu coeff3=%.1f counter_host_write=%d ok\n", table_size, back[3], counter);
  return 0;
}
