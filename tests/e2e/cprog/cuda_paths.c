/* cuda_paths: launches, copies, memsets and syncs through the runtime paths tprof interposes.
 * usage: cuda_paths basic|ptsz|oom|missing
 *   basic    registered kernels launched with cudaLaunchKernel and cudaLaunchKernelExC, H2D/D2H/D2D
 *            copies, memsets, stream/event/device synchronisation
 *   ptsz     the same through the _ptsz / _ptds entry points (per-thread default stream)
 *   oom      1 GiB on device 1, then a 1 PiB request that must fail (requested size + reservation)
 *   missing  calls a runtime function the loaded libcudart does not define (looked up at run time)
 * With TPROF_TEST_INJECT=1 it first does what the CUDA driver does for CUDA_INJECTION64_PATH:
 * dlopen that library and call InitializeInjection (twice: it must be idempotent). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_min.h"

static const char stubs[3];
#define K_A "_Z8kernel_aPfi"
#define K_B "_ZN5tprof8kernel_bIiEEvPT_i"
#define K_C "_Z8kernel_cv"

__attribute__((constructor)) static void register_kernels(void) {
  void **h = __cudaRegisterFatBinary((void *)&tprof_fatbin_wrap);
  __cudaRegisterFunction(h, &stubs[0], (char *)K_A, K_A, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFunction(h, &stubs[1], (char *)K_B, K_B, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFunction(h, &stubs[2], (char *)K_C, K_C, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

static int inject(void) {
  const char *path = getenv("CUDA_INJECTION64_PATH");
  if (!path || !getenv("TPROF_TEST_INJECT")) return 0;
  void *h = dlopen(path, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "cuda_paths: cannot load %s: %s\n", path, dlerror());
    return 30;
  }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  if (!init || init() != 1 || init() != 1) {
    fprintf(stderr, "cuda_paths: InitializeInjection missing or failed\n");
    return 31;
  }
  return 0;
}

static int basic(int ptsz) {
  size_t n = 1 << 20;
  float *host, *d1, *d2;
  int count = 1 << 18;
  CK(cudaMallocHost((void **)&host, n));
  memset(host, 1, n);
  CK(cudaMalloc((void **)&d1, n));
  CK(cudaMalloc((void **)&d2, n));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  void *args[] = {&d1, &count};
  dim3 g = {256, 1, 1}, b = {128, 1, 1}, g2 = {16, 4, 1}, b2 = {64, 2, 1};
  if (!ptsz) {
    CK(cudaMemcpy(d1, host, n, cudaMemcpyHostToDevice));
    CK(cudaMemsetAsync(d2, 0, n / 2, s));
    CK(cudaLaunchKernel(&stubs[0], g, b, args, 0, s));
    cudaLaunchConfig_t cfg = {g2, b2, 256, s, NULL, 0};
    CK(cudaLaunchKernelExC(&cfg, &stubs[1], args));
    CK(cudaLaunchKernel(&stubs[2], g, b, NULL, 0, NULL));
    CK(cudaMemcpyAsync(d2, d1, n, cudaMemcpyDeviceToDevice, s));
    cudaEvent_t e;
    CK(cudaEventCreate(&e));
    CK(cudaEventRecord(e, s));
    CK(cudaStreamWaitEvent(NULL, e, 0));
    CK(cudaEventSynchronize(e));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemset(d1, 0, 4096));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(host, d2, n, cudaMemcpyDeviceToHost));
  } else {
    CK(cudaMemcpy_ptds(d1, host, n, cudaMemcpyHostToDevice));
    CK(cudaMemsetAsync_ptsz(d2, 0, n / 2, NULL));
    CK(cudaLaunchKernel_ptsz(&stubs[0], g, b, args, 0, NULL));
    CK(cudaLaunchKernel_ptsz(&stubs[2], g2, b2, NULL, 0, s));
    CK(cudaMemcpyAsync_ptsz(host, d2, n, cudaMemcpyDeviceToHost, NULL));
    CK(cudaStreamSynchronize_ptsz(NULL));
    CK(cudaStreamSynchronize_ptsz(s));
  }
  CK(cudaStreamDestroy(s));
  CK(cudaFree(d1));
  CK(cudaFree(d2));
  CK(cudaFreeHost(host));
  printf("cuda_paths %s: ok\n", ptsz ? "ptsz" : "basic");
  return 0;
}

static int oom(void) {
  void *a, *b;
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&a, (size_t)1 << 30));
  int e = cudaMalloc(&b, (size_t)1 << 50);
  printf("cuda_paths oom: 1 PiB request -> %s\n", e == 0 ? "succeeded?!" : "failed as expected");
  CK(cudaFree(a));
  return e == 0 ? 21 : 0;
}

static int missing(void) {
  /* cudaMemset2D_ptds is wrapped by tprof; the simulated runtime does not define it. */
  typedef int (*fn_t)(void *, size_t, int, size_t, size_t);
  fn_t f = (fn_t)dlsym(RTLD_DEFAULT, "cudaMemset2D_ptds");
  int r1 = -1, r2 = -1;
  static char row[64];
  if (f) {
    r1 = f(row, sizeof row, 0, sizeof row, 1);
    r2 = f(row, sizeof row, 0, sizeof row, 1);
  }
  printf("cuda_paths missing: %s\n", f ? "found" : "absent");
  fprintf(stderr, "cuda_paths missing: results %d %d\n", r1, r2);
  return 0;
}

int main(int argc, char **argv) {
  int r = inject();
  if (r) return r;
  const char *mode = argc > 1 ? argv[1] : "basic";
  if (!strcmp(mode, "basic")) return basic(0);
  if (!strcmp(mode, "ptsz")) return basic(1);
  if (!strcmp(mode, "oom")) return oom();
  if (!strcmp(mode, "missing")) return missing();
  fprintf(stderr, "usage: cuda_paths basic|ptsz|oom|missing\n");
  return 2;
}
