/* drv_abi_versions: one base name, two ABIs. CUDA 13 has cuCtxSynchronize(void) (PFN_..._v2000) and
 * cuCtxSynchronize_v2(CUcontext) (PFN_..._v13000); NVIDIA's libcudart 13 asks for both. This
 * resolves each through cuGetProcAddress (versions 2000 and 13000, as libcudart 13 asks) and
 * through libcudart 13's cudaGetDriverEntryPointByVersion and cudaGetDriverEntryPoint (the
 * runtime's own version, 13.x),
 * then calls each with its own ABI. The CUcontext one must see the context it is given: a context
 * that is none fails with CUDA_ERROR_INVALID_CONTEXT (201).
 * Prints one line per call: "<how> <arg> -> <result>", then "drv_abi_versions: ok" or exits 60+. */
#include <dlfcn.h>
#include <stdio.h>

typedef int CUresult;
typedef void *CUcontext;
CUresult cuInit(unsigned flags);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, int dev);
CUresult cuCtxSetCurrent(CUcontext ctx);

typedef CUresult (*sync_v2000)(void);
typedef CUresult (*sync_v13000)(CUcontext);
typedef int (*by_version_fn)(const char *, void **, unsigned, unsigned long long, int *);
typedef int (*entry_point_fn)(const char *, void **, unsigned long long, int *);

#define INVALID_CONTEXT 201

static int failures;
static void expect(const char *how, const char *arg, CUresult got, CUresult want)
{
  printf("%s %s -> %d\n", how, arg, got);
  if (got != want) {
    fprintf(stderr, "drv_abi_versions: %s(%s) returned %d, want %d\n", how, arg, got, want);
    failures++;
  }
}

static void call_v13000(const char *how, sync_v13000 f, CUcontext ctx1)
{
  static int not_a_context;
  expect(how, "ctx1", f(ctx1), 0);
  expect(how, "bogus", f((CUcontext)&not_a_context), INVALID_CONTEXT);
  expect(how, "NULL", f(NULL), 0);
}

int main(void)
{
  if (cuInit(0)) return 61;
  CUcontext ctx0, ctx1;
  if (cuDevicePrimaryCtxRetain(&ctx0, 0) || cuDevicePrimaryCtxRetain(&ctx1, 1) || cuCtxSetCurrent(ctx0)) return 62;

  void *old_abi = NULL, *new_abi = NULL;
  if (cuGetProcAddress_v2("cuCtxSynchronize", &old_abi, 2000, 0, NULL) || !old_abi) return 63;
  if (cuGetProcAddress_v2("cuCtxSynchronize", &new_abi, 13000, 0, NULL) || !new_abi) return 63;
  if (old_abi == new_abi) {
    fprintf(stderr, "drv_abi_versions: versions 2000 and 13000 gave one function for two ABIs\n");
    failures++;
  }
  expect("cuGetProcAddress-2000", "-", ((sync_v2000)old_abi)(), 0);
  call_v13000("cuGetProcAddress-13000", (sync_v13000)new_abi, ctx1);

  void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!rt) return 64;
  by_version_fn by_version = (by_version_fn)dlsym(rt, "cudaGetDriverEntryPointByVersion");
  entry_point_fn entry_point = (entry_point_fn)dlsym(rt, "cudaGetDriverEntryPoint");
  if (!by_version || !entry_point) return 65;
  void *p = NULL;
  int st = -1;
  if (by_version("cuCtxSynchronize", &p, 13000, 0, &st) || !p) return 66;
  call_v13000("ByVersion-13000", (sync_v13000)p, ctx1);
  if (by_version("cuCtxSynchronize", &p, 12000, 0, &st) || !p) return 66;
  expect("ByVersion-12000", "-", ((sync_v2000)p)(), 0);
  if (entry_point("cuCtxSynchronize", &p, 0, &st) || !p) return 67;
  call_v13000("EntryPoint-runtime13", (sync_v13000)p, ctx1);

  if (failures) return 60;
  printf("drv_abi_versions: ok\n");
  return 0;
}
