/* drv_module_loader: a driver-API-only program in the JAX / Triton pattern. It links cuInit and
 * cuGetProcAddress_v2 and resolves everything else through cuGetProcAddress, then starts up the
 * way those frameworks do: device, primary context, module from an image, function, stream; one
 * allocation, one launch, a stream poll and sync, the module unloaded. Prints "drv_module_loader: ok". */
#include <stdio.h>

typedef int CUresult;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
CUresult cuInit(unsigned flags);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

#define GET(var, name)                                                           \
  if (cuGetProcAddress_v2(name, (void **)&var, 12000, 0, NULL) || !var) {        \
    fprintf(stderr, "drv_module_loader: no %s\n", name);                        \
    return 50;                                                                   \
  }

int main(void) {
  if (cuInit(0)) return 51;
  CUresult (*deviceGet)(int *, int) = 0;
  CUresult (*primaryRetain)(CUcontext *, int) = 0;
  CUresult (*setCurrent)(CUcontext) = 0;
  CUresult (*loadData)(CUmodule *, const void *) = 0;
  CUresult (*getFunction)(CUfunction *, CUmodule, const char *) = 0;
  CUresult (*streamCreate)(CUstream *, unsigned) = 0;
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = 0;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void **, void **) = 0;
  CUresult (*streamQuery)(CUstream) = 0;
  CUresult (*streamSync)(CUstream) = 0;
  CUresult (*unload)(CUmodule) = 0;
  GET(deviceGet, "cuDeviceGet");
  GET(primaryRetain, "cuDevicePrimaryCtxRetain");
  GET(setCurrent, "cuCtxSetCurrent");
  GET(loadData, "cuModuleLoadData");
  GET(getFunction, "cuModuleGetFunction");
  GET(streamCreate, "cuStreamCreate");
  GET(memAlloc, "cuMemAlloc");
  GET(launch, "cuLaunchKernel");
  GET(streamQuery, "cuStreamQuery");
  GET(streamSync, "cuStreamSynchronize");
  GET(unload, "cuModuleUnload");
  int dev;
  CUcontext ctx;
  CUmodule m;
  CUfunction f;
  CUstream s;
  CUdeviceptr d;
  int e = deviceGet(&dev, 0);
  e |= primaryRetain(&ctx, dev);
  e |= setCurrent(ctx);
  e |= loadData(&m, "fake cubin image");
  e |= getFunction(&f, m, "_Z13loader_kernelPf");
  e |= streamCreate(&s, 0);
  e |= memAlloc(&d, 1 << 20);
  void *args[] = {&d};
  e |= launch(f, 8, 1, 1, 128, 1, 1, 0, s, args, NULL);
  int q = streamQuery(s);
  if (q != 0 && q != 600) e |= q;
  e |= streamSync(s);
  e |= unload(m);
  printf("drv_module_loader: %s\n", e ? "error" : "ok");
  return e ? 52 : 0;
}
