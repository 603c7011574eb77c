/* memory: plain C against the CUDA 12 runtime headers (-lcudart = libcudart.so.12):
 * properties, memory info, pinned and pageable copies both ways, memsets, events, and the
 * error path (an invalid device, cudaGetLastError). Copies and memsets are checked for data. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <string.h>

static const char *prog_name = "memory";
#include "check.h"

#define N (4u << 20)

int main(void) {
  int count = 0, dev = -1;
  CK(cudaGetDeviceCount(&count));
  CK(cudaSetDevice(count - 1));
  CK(cudaGetDevice(&dev));
  struct cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));

  unsigned char *pinned, *pageable = malloc(N), *d0, *d1;
  if (!pageable) return 1;
  CK(cudaMallocHost((void **)&pinned, N));
  CK(cudaMalloc((void **)&d0, N));
  CK(cudaMalloc((void **)&d1, N));
  for (unsigned i = 0; i < N; i++) pageable[i] = (unsigned char)(i * 7u + 3u);

  cudaStream_t s;
  cudaEvent_t a, b;
  CK(cudaStreamCreate(&s));
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  CK(cudaMemcpyAsync(d0, pageable, N, cudaMemcpyHostToDevice, s));   /* pageable H2D */
  CK(cudaMemcpyAsync(d1, d0, N, cudaMemcpyDeviceToDevice, s));       /* D2D */
  CK(cudaMemcpyAsync(pinned, d1, N, cudaMemcpyDeviceToHost, s));     /* pinned D2H */
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  if (memcmp(pinned, pageable, N) != 0) {
    fprintf(stderr, "memory: H2D -> D2D -> D2H changed the data\n");
    return EXIT_WRONG_DATA;
  }
  CK(cudaMemsetAsync(d0, 0xab, N / 2, s));
  CK(cudaMemset(d0 + N / 2, 0x5c, N / 2));
  CK(cudaMemcpy(pageable, d0, N, cudaMemcpyDeviceToHost)); /* pageable D2H, synchronous */
  if (pageable[0] != 0xab || pageable[N / 2 - 1] != 0xab || pageable[N / 2] != 0x5c ||
      pageable[N - 1] != 0x5c) {
    fprintf(stderr, "memory: memset values not visible after the copy\n");
    return EXIT_WRONG_DATA;
  }
  CK(cudaMemcpy(d1, pinned, N, cudaMemcpyHostToDevice)); /* pinned H2D, synchronous */

  /* the error path: an invalid device is reported, then cleared by cudaGetLastError */
  cudaError_t e = cudaSetDevice(count + 100);
  if (e != cudaErrorInvalidDevice || cudaGetLastError() != cudaErrorInvalidDevice ||
      cudaGetLastError() != cudaSuccess) {
    fprintf(stderr, "memory: cudaSetDevice(%d) returned %d (%s), expected cudaErrorInvalidDevice\n",
            count + 100, (int)e, cudaGetErrorName(e));
    return EXIT_WRONG_DATA;
  }
  CK(cudaFree(d0));
  CK(cudaFree(d1));
  CK(cudaFreeHost(pinned));
  CK(cudaStreamDestroy(s));
  free(pageable);
  printf("memory: %d devices, device %d '%s' sm_%d%d, %zu of %zu MiB free, copies %.3f ms: ok\n",
         count, dev, prop.name, prop.major, prop.minor, free_b >> 20, total_b >> 20, ms);
  return 0;
}
