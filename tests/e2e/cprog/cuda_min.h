/* cuda_min.h: the few CUDA runtime declarations the tprof e2e C programs need (no CUDA headers,
 * so they build anywhere; the ABI is the CUDA 12 runtime's). */
#ifndef TPROF_CUDA_MIN_H
#define TPROF_CUDA_MIN_H
#include <stddef.h>

typedef struct { unsigned x, y, z; } dim3;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
typedef struct {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  void *attrs;
  unsigned numAttrs;
} cudaLaunchConfig_t;
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };

int cudaGetDeviceCount(int *n);
int cudaSetDevice(int d);
int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
int cudaMallocHost(void **p, size_t n);
int cudaFreeHost(void *p);
int cudaMemcpy(void *d, const void *s, size_t n, int kind);
int cudaMemcpyAsync(void *d, const void *s, size_t n, int kind, cudaStream_t st);
int cudaMemset(void *p, int v, size_t n);
int cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st);
int cudaStreamCreate(cudaStream_t *s);
int cudaStreamDestroy(cudaStream_t s);
int cudaStreamSynchronize(cudaStream_t s);
int cudaDeviceSynchronize(void);
int cudaEventCreate(cudaEvent_t *e);
int cudaEventRecord(cudaEvent_t e, cudaStream_t s);
int cudaEventSynchronize(cudaEvent_t e);
int cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
int cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t s);
int cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *f, void **args);
const char *cudaGetErrorString(int e);
int cudaGetLastError(void);

/* per-thread default stream twins */
int cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t s);
int cudaMemcpyAsync_ptsz(void *d, const void *s, size_t n, int kind, cudaStream_t st);
int cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t st);
int cudaStreamSynchronize_ptsz(cudaStream_t s);
int cudaMemcpy_ptds(void *d, const void *s, size_t n, int kind);

/* nvcc's registration calls */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **h);
void __cudaUnregisterFatBinary(void **h);
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int tl,
                            void *tid, void *bid, void *bDim, void *gDim, int *wSize);

/* an empty, well-formed fat binary and its wrapper */
static const unsigned long long tprof_fatbin_image[2] = {0x00100001BA55ED50ull, 0ull};
static const struct {
  int magic, version;
  const unsigned long long *data;
  void *filename_or_fatbins;
} tprof_fatbin_wrap = {0x466243B1, 1, tprof_fatbin_image, NULL};

#define CK(call)                                                                   \
  do {                                                                             \
    int e_ = (call);                                                               \
    if (e_ != 0) {                                                                 \
      fprintf(stderr, "%s:%d %s failed: %d\n", __FILE__, __LINE__, #call, e_);     \
      return 20;                                                                   \
    }                                                                              \
  } while (0)
#endif
