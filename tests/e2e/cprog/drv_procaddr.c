/* drv_procaddr: driver functions obtained only through cuGetProcAddress (as statically linked runtimes,
 * NCCL and cuBLAS do): cuLaunchKernel (legacy and per-thread flavours), cuMemAlloc, cuMemcpyHtoD. */
#include <stdio.h>

typedef int CUresult;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;
CUresult cuInit(unsigned flags);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

typedef CUresult (*launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
#define GET(var, name, flags)                                                    \
  if (cuGetProcAddress_v2(name, (void **)&var, 12000, flags, NULL) || !var) {    \
    fprintf(stderr, "drv_procaddr: no %s\n", name);                             \
    return 50;                                                                   \
  }

int main(void) {
  if (cuInit(0)) return 51;
  CUresult (*loadData)(CUmodule *, const void *) = 0;
  CUresult (*getFunction)(CUfunction *, CUmodule, const char *) = 0;
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = 0;
  CUresult (*htod)(CUdeviceptr, const void *, size_t) = 0;
  CUresult (*ctxSync)(void) = 0;
  CUresult (*primaryRetain)(void **, int) = 0;
  CUresult (*setCurrent)(void *) = 0;
  launch_t launch = 0, launch_pt = 0;
  GET(primaryRetain, "cuDevicePrimaryCtxRetain", 0);
  GET(setCurrent, "cuCtxSetCurrent", 0);
  GET(loadData, "cuModuleLoadData", 0);
  GET(getFunction, "cuModuleGetFunction", 0);
  GET(memAlloc, "cuMemAlloc", 0);
  GET(htod, "cuMemcpyHtoD", 0);
  GET(ctxSync, "cuCtxSynchronize", 0);
  GET(launch, "cuLaunchKernel", 1);
  GET(launch_pt, "cuLaunchKernel", 2);
  void *ctx;
  CUmodule m;
  CUfunction f;
  CUdeviceptr d;
  static char host[4096];
  int e = primaryRetain(&ctx, 0) | setCurrent(ctx);
  e |= loadData(&m, "fake image");
  e |= getFunction(&f, m, "_Z10drv_kernelPi");
  e |= memAlloc(&d, sizeof host);
  e |= htod(d, host, sizeof host);
  void *args[] = {&d};
  e |= launch(f, 4, 1, 1, 64, 1, 1, 0, NULL, args, NULL);
  e |= launch_pt(f, 2, 2, 1, 32, 1, 1, 0, NULL, args, NULL);
  e |= ctxSync();
  printf("drv_procaddr: %s\n", e ? "error" : "ok");
  return e ? 52 : 0;
}
