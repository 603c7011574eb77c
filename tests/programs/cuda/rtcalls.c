/* rtcalls: plain C against the CUDA 12 runtime headers. The runtime calls a PyTorch training step
 * makes besides launches and copies: event records and completion queries, host functions and stream
 * callbacks, stream capture into CUDA graphs (a fork/join over two streams with a host node, the
 * per-thread default stream, capture into an existing graph, a graph launched inside a capture),
 * instantiation and replay, and kernels of a library loaded from PTX (cudaLibraryLoadData /
 * LoadFromFile + cudaLibraryGetKernel).
 *
 * Kernels that execute (what the ground truth must show):
 *   _Z8rtc_slowPfi 1, _Z8rtc_fillPfi 2x3 replays + 1 eager = 7, _Z9rtc_scalePfi 3,
 *   _Z10rtc_ptsz_kPfi 2 + 2 (as a child graph) = 4, _Z8rtc_intoPfi 1, _Z9rtc_outerPfi 2,
 *   _Z9lib_scalePfi 2, lib_plain 1 (library kernels).
 * Prints one line: rtcalls: host_funcs=5 host_callbacks=2 graph_host_funcs=3 event_not_ready=N
 * stream_not_ready=N host_fn_start_ns=T (CLOCK_MONOTONIC of the first host function's start). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog_name = "rtcalls";
#include "check.h"

extern void **__cudaRegisterFatBinary(void *fatCubin);
extern void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
extern void __cudaUnregisterFatBinary(void **fatCubinHandle);
extern void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                   const char *deviceName, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);

/* The per-thread default stream entry points (the header declares them only for
 * --default-stream per-thread builds; signatures as cuda_runtime_api.h). */
extern cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream);
extern cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
extern cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
extern cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus);
extern cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
extern cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
extern cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags);
extern cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
extern cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
extern cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData);
extern cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback, void *userData,
                                              unsigned int flags);

static const unsigned long long fatbin_image[2] = {0x00100001BA55ED50ull, 0ull};
static const struct {
  int magic, version;
  const unsigned long long *data;
  void *filename_or_fatbins;
} fatbin_wrap = {0x466243B1, 1, fatbin_image, NULL};

static const char stubs[6];
#define K_SLOW "_Z8rtc_slowPfi"
#define K_FILL "_Z8rtc_fillPfi"
#define K_SCALE "_Z9rtc_scalePfi"
#define K_PTSZ "_Z10rtc_ptsz_kPfi"
#define K_INTO "_Z8rtc_intoPfi"
#define K_OUTER "_Z9rtc_outerPfi"
static void **handle;

static void unregister(void) { __cudaUnregisterFatBinary(handle); }

__attribute__((constructor)) static void register_kernels(void) {
  static const char *names[6] = {K_SLOW, K_FILL, K_SCALE, K_PTSZ, K_INTO, K_OUTER};
  handle = __cudaRegisterFatBinary((void *)&fatbin_wrap);
  for (int i = 0; i < 6; i++)
    __cudaRegisterFunction(handle, &stubs[i], (char *)names[i], names[i], -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(handle);
  atexit(unregister);
}

/* hand-written PTX, as cudaLibraryLoadData accepts it */
static const char lib_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n\n"
    ".visible .entry _Z9lib_scalePfi(\n\t.param .u64 p,\n\t.param .u32 n\n)\n{\n\tret;\n}\n\n"
    ".visible .entry lib_plain()\n{\n\tret;\n}\n";

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int host_funcs, host_callbacks, graph_host_funcs;
static uint64_t first_host_fn_ns;

static void CUDART_CB on_host(void *arg) {
  (void)arg;
  if (!first_host_fn_ns) first_host_fn_ns = now_ns();
  __atomic_add_fetch(&host_funcs, 1, __ATOMIC_RELAXED);
}
static void CUDART_CB on_graph_host(void *arg) {
  (void)arg;
  __atomic_add_fetch(&graph_host_funcs, 1, __ATOMIC_RELAXED);
}
static void CUDART_CB on_callback(cudaStream_t s, cudaError_t status, void *arg) {
  (void)s, (void)arg;
  if (status == cudaSuccess) __atomic_add_fetch(&host_callbacks, 1, __ATOMIC_RELAXED);
}

static void launch(const char *stub, cudaStream_t s, void **args) {
  dim3 grid = {4, 1, 1}, block = {128, 1, 1};
  CK(cudaLaunchKernel((const void *)stub, grid, block, args, 0, s));
}

int main(void) {
  float *buf;
  int n = 1 << 12;
  CK(cudaMalloc((void **)&buf, n * sizeof(float)));
  void *args[] = {&buf, &n};
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t ev, fork, join;
  CK(cudaEventCreate(&ev));
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

  /* events and queries behind a slow kernel; host functions and callbacks after it */
  int event_not_ready = 0, stream_not_ready = 0;
  launch(&stubs[0], s1, args);
  CK(cudaEventRecord(ev, s1));
  CK(cudaLaunchHostFunc(s1, on_host, NULL));
  CK(cudaStreamAddCallback(s1, on_callback, NULL, 0));
  for (cudaError_t e; (e = cudaEventQuery(ev)) != cudaSuccess; usleep(1000)) {
    if (e != cudaErrorNotReady) CK(e);
    event_not_ready++;
  }
  for (cudaError_t e; (e = cudaStreamQuery(s1)) != cudaSuccess; usleep(1000)) {
    if (e != cudaErrorNotReady) CK(e);
    stream_not_ready++;
  }
  CK(cudaEventRecordWithFlags(ev, s2, cudaEventRecordDefault));
  CK(cudaEventRecord_ptsz(ev, NULL));
  CK(cudaEventRecordWithFlags_ptsz(ev, NULL, cudaEventRecordDefault));
  CK(cudaLaunchHostFunc_ptsz(NULL, on_host, NULL));
  CK(cudaStreamAddCallback_ptsz(NULL, on_callback, NULL, 0));
  CK(cudaLaunchHostFunc(s2, on_host, NULL));
  CK(cudaLaunchHostFunc(s2, on_host, NULL));
  CK(cudaLaunchHostFunc(s2, on_host, NULL));
  while (cudaStreamQuery_ptsz(NULL) == cudaErrorNotReady) usleep(1000);
  CK(cudaStreamSynchronize(s2));

  /* capture: a fork onto s2 (with a host node) joined back into s1 */
  enum cudaStreamCaptureStatus status;
  unsigned long long capture_id = 0;
  CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  launch(&stubs[1], s1, args);
  CK(cudaEventRecord(fork, s1));
  CK(cudaStreamWaitEvent(s2, fork, 0));
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = (dim3){8, 1, 1};
  cfg.blockDim = (dim3){64, 1, 1};
  cfg.stream = s2;
  CK(cudaLaunchKernelExC(&cfg, (const void *)&stubs[2], args));
  CK(cudaLaunchHostFunc(s2, on_graph_host, NULL));
  CK(cudaEventRecord(join, s2));
  CK(cudaStreamWaitEvent(s1, join, 0));
  launch(&stubs[1], s1, args);
  CK(cudaStreamIsCapturing(s2, &status));
  if (status != cudaStreamCaptureStatusActive) {
    fprintf(stderr, "rtcalls: the forked stream is not capturing\n");
    return EXIT_WRONG_DATA;
  }
  CK(cudaStreamGetCaptureInfo(s1, &status, &capture_id, NULL, NULL, NULL));
  cudaGraph_t fork_join;
  CK(cudaStreamEndCapture(s1, &fork_join));
  cudaGraphExec_t fork_join_exec;
  CK(cudaGraphInstantiate(&fork_join_exec, fork_join, 0));

  /* capture on the per-thread default stream */
  cudaGraph_t per_thread;
  CK(cudaStreamBeginCapture_ptsz(NULL, cudaStreamCaptureModeThreadLocal));
  CK(cudaStreamIsCapturing_ptsz(NULL, &status));
  dim3 grid = {2, 1, 1}, block = {32, 1, 1};
  CK(cudaLaunchKernel_ptsz((const void *)&stubs[3], grid, block, args, 0, NULL));
  CK(cudaStreamEndCapture_ptsz(NULL, &per_thread));
  cudaGraphExec_t per_thread_exec;
  CK(cudaGraphInstantiateWithFlags(&per_thread_exec, per_thread, 0));

  /* capture into an existing graph */
  cudaGraph_t into;
  CK(cudaGraphCreate(&into, 0));
  CK(cudaStreamBeginCaptureToGraph(s1, into, NULL, NULL, 0, cudaStreamCaptureModeRelaxed));
  launch(&stubs[4], s1, args);
  cudaGraph_t into_out;
  CK(cudaStreamEndCapture(s1, &into_out));
  cudaGraphExec_t into_exec;
  CK(cudaGraphInstantiate(&into_exec, into_out, 0));

  /* a graph launched inside a capture becomes a child graph */
  cudaGraph_t outer;
  CK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
  CK(cudaGraphLaunch(per_thread_exec, s2));
  launch(&stubs[5], s2, args);
  CK(cudaStreamEndCapture(s2, &outer));
  cudaGraphExec_t outer_exec;
  CK(cudaGraphInstantiate(&outer_exec, outer, 0));
  CK(cudaDeviceSynchronize()); /* nothing captured has run */

  /* replays */
  for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(fork_join_exec, s1));
  for (int i = 0; i < 2; i++) CK(cudaGraphLaunch_ptsz(per_thread_exec, NULL));
  CK(cudaGraphLaunch(into_exec, s1));
  for (int i = 0; i < 2; i++) CK(cudaGraphLaunch(outer_exec, s2));
  launch(&stubs[1], s1, args);
  CK(cudaDeviceSynchronize());
  CK(cudaStreamSynchronize_ptsz(NULL));

  /* library kernels: from PTX in memory and from a file */
  cudaLibrary_t lib, lib_file;
  CK(cudaLibraryLoadData(&lib, lib_ptx, NULL, NULL, 0, NULL, NULL, 0));
  char path[] = "/tmp/rtcalls-ptx-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || write(fd, lib_ptx, sizeof lib_ptx - 1) != (ssize_t)(sizeof lib_ptx - 1)) {
    fprintf(stderr, "rtcalls: cannot write %s\n", path);
    return EXIT_WRONG_DATA;
  }
  close(fd);
  CK(cudaLibraryLoadFromFile(&lib_file, path, NULL, NULL, 0, NULL, NULL, 0));
  unlink(path);
  cudaKernel_t scale, plain;
  CK(cudaLibraryGetKernel(&scale, lib, "_Z9lib_scalePfi"));
  CK(cudaLibraryGetKernel(&plain, lib_file, "lib_plain"));
  CK(cudaLaunchKernel((const void *)scale, grid, block, args, 0, s1));
  CK(cudaLaunchKernel((const void *)scale, grid, block, args, 0, s1));
  cfg.stream = s1;
  CK(cudaLaunchKernelExC(&cfg, (const void *)plain, NULL));
  CK(cudaStreamSynchronize(s1));
  CK(cudaLibraryUnload(lib));
  CK(cudaLibraryUnload(lib_file));

  CK(cudaGraphExecDestroy(fork_join_exec));
  CK(cudaGraphExecDestroy(per_thread_exec));
  CK(cudaGraphExecDestroy(into_exec));
  CK(cudaGraphExecDestroy(outer_exec));
  CK(cudaGraphDestroy(fork_join));
  CK(cudaGraphDestroy(per_thread));
  CK(cudaGraphDestroy(into));
  CK(cudaGraphDestroy(outer));
  printf("rtcalls: host_funcs=%d host_callbacks=%d graph_host_funcs=%d event_not_ready=%d stream_not_ready=%d "
         "host_fn_start_ns=%llu capture_id=%llu\n",
         host_funcs, host_callbacks, graph_host_funcs, event_not_ready, stream_not_ready,
         (unsigned long long)first_host_fn_ns, capture_id);
  return 0;
}
