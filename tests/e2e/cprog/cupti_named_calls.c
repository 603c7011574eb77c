/* cupti_named_calls: runtime and driver calls that only CUPTI sees when tprof is injected without
 * LD_PRELOAD (no interposer is bound): graph life cycle, device queries, the last error, a stream's
 * destruction, a module unloaded. With TPROF_TEST_INJECT=1 it first loads CUDA_INJECTION64_PATH and
 * calls InitializeInjection, as the driver does. Prints "cupti_named_calls: ok". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_min.h"

typedef void *cudaGraph_t;
typedef void *cudaGraphExec_t;
typedef void *cudaGraphNode_t;
int cudaStreamBeginCapture(cudaStream_t s, int mode);
int cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
int cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags);
int cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
int cudaGraphExecDestroy(cudaGraphExec_t e);
int cudaGraphDestroy(cudaGraph_t g);
int cudaDeviceGetAttribute(int *v, int attr, int dev);
int cudaMemGetInfo(size_t *free_bytes, size_t *total);

int main(void) {
  const char *path = getenv("CUDA_INJECTION64_PATH");
  if (path && getenv("TPROF_TEST_INJECT")) {
    void *h = dlopen(path, RTLD_NOW);
    int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
    if (!init || init() != 1) {
      fprintf(stderr, "cupti_named_calls: InitializeInjection failed\n");
      return 30;
    }
  }
  void *drv = dlopen("libcuda.so.1", RTLD_NOW);
  int (*loadData)(void **, const void *) = drv ? (int (*)(void **, const void *))dlsym(drv, "cuModuleLoadData") : NULL;
  int (*unload)(void *) = drv ? (int (*)(void *))dlsym(drv, "cuModuleUnload") : NULL;
  if (!loadData || !unload) {
    fprintf(stderr, "cupti_named_calls: no cuModuleLoadData / cuModuleUnload\n");
    return 31;
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  void *d;
  CK(cudaMalloc(&d, 4096));
  CK(cudaStreamBeginCapture(s, 0));
  CK(cudaMemsetAsync(d, 0, 4096, s));
  cudaGraph_t g;
  CK(cudaStreamEndCapture(s, &g));
  size_t nodes = 0;
  CK(cudaGraphGetNodes(g, NULL, &nodes));
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, 16, 0));
  size_t free_bytes = 0, total = 0;
  CK(cudaMemGetInfo(&free_bytes, &total));
  CK(cudaGetLastError());
  CK(cudaStreamDestroy(s));
  void *m;
  CK(loadData(&m, "fake image"));
  CK(unload(m));
  CK(cudaFree(d));
  printf("cupti_named_calls: ok\n");
  return 0;
}
