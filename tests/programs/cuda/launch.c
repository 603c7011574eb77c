/* launch: plain C against the CUDA 12 runtime headers. Registers kernels the way nvcc's
 * generated host code does, then launches them through every runtime path: cudaLaunchKernel,
 * cudaLaunchKernelExC (launch config), and the driver's cuLaunchKernel reached through
 * cudaGetDriverEntryPoint + cudaGetFuncBySymbol, as libraries that bypass the runtime do. */
#include <stdint.h>
#include <string.h>

#include <cuda.h>

static const char *prog_name = "launch";
#include "check.h"

extern void **__cudaRegisterFatBinary(void *fatCubin);
extern void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
extern void __cudaUnregisterFatBinary(void **fatCubinHandle);
extern void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                   const char *deviceName, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);

/* an empty, well-formed fat binary and the wrapper nvcc puts in .nvFatBinSegment */
static const unsigned long long fatbin_image[2] = {0x00100001BA55ED50ull, 0ull};
static const struct {
  int magic, version;
  const unsigned long long *data;
  void *filename_or_fatbins;
} fatbin_wrap = {0x466243B1, 1, fatbin_image, NULL};

static const char stubs[3];
#define K_RT "_Z16rt_launch_kernelPfi"
#define K_EX "_Z20launch_ex_cfg_kernelPKfPfi"
#define K_DRV "_ZN3drv13driver_kernelIiEEvPT_i"
static void **handle;

static void unregister(void) { __cudaUnregisterFatBinary(handle); }

__attribute__((constructor)) static void register_kernels(void) {
  handle = __cudaRegisterFatBinary((void *)&fatbin_wrap);
  __cudaRegisterFunction(handle, &stubs[0], (char *)K_RT, K_RT, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFunction(handle, &stubs[1], (char *)K_EX, K_EX, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFunction(handle, &stubs[2], (char *)K_DRV, K_DRV, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(handle);
  atexit(unregister);
}

typedef CUresult (*cuLaunchKernel_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, unsigned, CUstream, void **, void **);

int main(void) {
  float *buf;
  int n = 1 << 16;
  CK(cudaMalloc((void **)&buf, n * sizeof(float)));
  void *args[] = {&buf, &n};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  dim3 grid = {64, 1, 1}, block = {256, 1, 1};
  CK(cudaLaunchKernel((const void *)&stubs[0], grid, block, args, 0, s));

  void *args3[] = {&buf, &buf, &n};
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = (dim3){32, 2, 1};
  cfg.blockDim = (dim3){128, 1, 1};
  cfg.stream = s;
  CK(cudaLaunchKernelExC(&cfg, (const void *)&stubs[1], args3));

  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPoint("cuLaunchKernel", &fn, cudaEnableDefault, &q));
  if (!fn || q != cudaDriverEntryPointSuccess) {
    fprintf(stderr, "launch: cuLaunchKernel entry point not found (status %d)\n", (int)q);
    return EXIT_WRONG_DATA;
  }
  cudaFunction_t f;
  CK(cudaGetFuncBySymbol(&f, (const void *)&stubs[2]));
  CUresult r = ((cuLaunchKernel_fn)fn)((CUfunction)f, 16, 1, 1, 64, 1, 1, 0, (CUstream)s, args, NULL);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "launch: cuLaunchKernel returned %d\n", (int)r);
    return EXIT_CUDA_ERROR;
  }
  CK(cudaStreamSynchronize(s));
  CK(cudaStreamDestroy(s));
  CK(cudaFree(buf));
  printf("launch: cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel: ok\n");
  return 0;
}
