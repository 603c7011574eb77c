/* real_apis: plain C against the CUDA 12 runtime headers. The calls NVIDIA's public samples and
 * PyTorch's allocator make beyond launches and plain copies, in the patterns they use them:
 *   - a profiler capture range (cudaProfilerStart / Stop) around everything;
 *   - simpleP2P: cudaDeviceCanAccessPeer, cudaDeviceEnablePeerAccess both ways, cudaMemcpyPeer;
 *   - simpleZeroCopy: cudaSetDeviceFlags(cudaDeviceMapHost), cudaHostAlloc(Mapped), cudaHostGetDevicePointer;
 *   - module variables: __cudaRegisterVar as nvcc emits it, cudaMemcpyToSymbol / FromSymbol;
 *   - simpleCudaGraphs: a graph built node by node (memset, memcpy, two kernels, memcpy back, host node),
 *     uploaded, launched, cloned, its kernel node updated, the executable updated from the clone;
 *   - PyTorch's cudaMallocAsync backend: the default pool kept whole (release threshold UINT64_MAX),
 *     cudaMallocAsync / cudaFreeAsync per step, the reserved / used counters, cudaMemPoolTrimTo;
 *   - driver calls through cudaGetDriverEntryPoint (as JAX / Triton reach them): cuCtxCreate,
 *     cuModuleLoadDataEx of PTX, cuFuncSetAttribute / cuFuncGetAttribute, cuLaunchKernel,
 *     cuPointerGetAttribute.
 *
 * Kernels that execute (what the ground truth must show):
 *   _Z9p2p_scalePfi 1, _Z13zero_copy_addPfi 1, _Z9lut_applyPfi 1, _Z12graph_reducePKfPfi 6,
 *   _Z11graph_finalPfi 6 (6 graph launches), _Z9pool_stepPfi 10, jit_saxpy 1.
 * Prints one line: real_apis: kernels=26 graph_launches=6 host_nodes=6 pool_reserved_high=N
 * pool_steps=10 peer=1 lut_sum=S; exit 3 on a CUDA error, 4 on wrong data. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

static const char *prog_name = "real_apis";
#include "check.h"

extern void **__cudaRegisterFatBinary(void *fatCubin);
extern void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
extern void __cudaUnregisterFatBinary(void **fatCubinHandle);
extern void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                   const char *deviceName, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
extern void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global);
/* cuda_profiler_api.h */
extern cudaError_t cudaProfilerStart(void);
extern cudaError_t cudaProfilerStop(void);

static const unsigned long long fatbin_image[2] = {0x00100001BA55ED50ull, 0ull};
static const struct {
  int magic, version;
  const unsigned long long *data;
  void *filename_or_fatbins;
} fatbin_wrap = {0x466243B1, 1, fatbin_image, NULL};

#define K_P2P "_Z9p2p_scalePfi"
#define K_ZC "_Z13zero_copy_addPfi"
#define K_LUT "_Z9lut_applyPfi"
#define K_RED "_Z12graph_reducePKfPfi"
#define K_FIN "_Z11graph_finalPfi"
#define K_POOL "_Z9pool_stepPfi"
static const char stubs[6];
/* the host shadow of `__constant__ float lut[256]` */
static float lut[256];
static void **handle;

static void unregister(void) { __cudaUnregisterFatBinary(handle); }

__attribute__((constructor)) static void register_module(void) {
  static const char *names[6] = {K_P2P, K_ZC, K_LUT, K_RED, K_FIN, K_POOL};
  handle = __cudaRegisterFatBinary((void *)&fatbin_wrap);
  for (int i = 0; i < 6; i++)
    __cudaRegisterFunction(handle, &stubs[i], (char *)names[i], names[i], -1, 0, 0, 0, 0, 0);
  __cudaRegisterVar(handle, (char *)lut, (char *)"lut", "lut", 0, sizeof lut, 1, 0);
  __cudaRegisterFatBinaryEnd(handle);
  atexit(unregister);
}

#define WRONG(...)                                  \
  do {                                              \
    fprintf(stderr, "real_apis: " __VA_ARGS__);     \
    fprintf(stderr, "\n");                          \
    exit(EXIT_WRONG_DATA);                          \
  } while (0)

static int host_nodes;
static void CUDART_CB host_node(void *arg) { __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST); }

static int peer_copy(void) {
  int n = 0, can = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) return 0;
  CK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) return 0;
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaSetDevice(1));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  const size_t bytes = 4 << 20;
  float *d0, *d1;
  CK(cudaMalloc((void **)&d1, bytes));
  CK(cudaMemset(d1, 0x3f, bytes));
  CK(cudaSetDevice(0));
  CK(cudaMalloc((void **)&d0, bytes));
  CK(cudaMemcpyPeer(d0, 0, d1, 1, bytes));
  int count = (int)(bytes / sizeof(float));
  void *args[] = {&d0, &count};
  CK(cudaLaunchKernel(&stubs[0], (dim3){(unsigned)count / 256, 1, 1}, (dim3){256, 1, 1}, args, 0, 0));
  unsigned char b = 0;
  CK(cudaMemcpy(&b, (char *)d0 + bytes - 1, 1, cudaMemcpyDeviceToHost));
  if (b != 0x3f) WRONG("peer copy delivered %#x", b);
  CK(cudaDeviceDisablePeerAccess(1));
  CK(cudaFree(d0));
  CK(cudaSetDevice(1));
  CK(cudaDeviceDisablePeerAccess(0));
  CK(cudaFree(d1));
  CK(cudaSetDevice(0));
  return 1;
}

static void zero_copy(void) {
  CK(cudaSetDeviceFlags(cudaDeviceMapHost));
  float *h, *dh;
  int count = 1 << 16;
  CK(cudaHostAlloc((void **)&h, count * sizeof(float), cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&dh, h, 0));
  void *args[] = {&dh, &count};
  CK(cudaLaunchKernel(&stubs[1], (dim3){(unsigned)count / 256, 1, 1}, (dim3){256, 1, 1}, args, 0, 0));
  CK(cudaDeviceSynchronize());
  CK(cudaFreeHost(h));
}

static double module_variable(void) {
  float in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = (float)i / 8.0f;
  CK(cudaMemcpyToSymbol(lut, in, sizeof in, 0, cudaMemcpyHostToDevice));
  float *d;
  int count = 1 << 14;
  CK(cudaMalloc((void **)&d, count * sizeof(float)));
  void *args[] = {&d, &count};
  CK(cudaLaunchKernel(&stubs[2], (dim3){(unsigned)count / 128, 1, 1}, (dim3){128, 1, 1}, args, 0, 0));
  CK(cudaMemcpyFromSymbol(out, lut, sizeof out, 0, cudaMemcpyDeviceToHost));
  if (memcmp(in, out, sizeof in)) WRONG("module variable round trip");
  CK(cudaFree(d));
  double sum = 0;
  for (int i = 0; i < 256; i++) sum += out[i];
  return sum;
}

/* simpleCudaGraphs: memset -> H2D -> reduce -> final -> D2H -> host node */
static int graphs(void) {
  const int count = 1 << 18;
  const size_t bytes = count * sizeof(float);
  float *h_in, *h_out, *d_in, *d_out;
  CK(cudaMallocHost((void **)&h_in, bytes));
  CK(cudaMallocHost((void **)&h_out, 64 * sizeof(float)));
  for (int i = 0; i < count; i++) h_in[i] = 1.0f;
  memset(h_out, 0, 64 * sizeof(float));
  CK(cudaMalloc((void **)&d_in, bytes));
  CK(cudaMalloc((void **)&d_out, 64 * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t n_set, n_h2d, n_red, n_fin, n_d2h, n_host;
  struct cudaMemsetParams mp = {0};
  mp.dst = d_out;
  mp.value = 0;
  mp.elementSize = sizeof(float);
  mp.width = 64;
  mp.height = 1;
  CK(cudaGraphAddMemsetNode(&n_set, g, NULL, 0, &mp));
  struct cudaMemcpy3DParms cp = {0};
  cp.srcPtr = (struct cudaPitchedPtr){h_in, bytes, (size_t)count, 1};
  cp.dstPtr = (struct cudaPitchedPtr){d_in, bytes, (size_t)count, 1};
  cp.extent = (struct cudaExtent){bytes, 1, 1};
  cp.kind = cudaMemcpyHostToDevice;
  CK(cudaGraphAddMemcpyNode(&n_h2d, g, &n_set, 1, &cp));
  int n = count;
  void *red_args[] = {&d_in, &d_out, &n};
  struct cudaKernelNodeParams kp = {0};
  kp.func = (void *)&stubs[3];
  kp.gridDim = (dim3){64, 1, 1};
  kp.blockDim = (dim3){512, 1, 1};
  kp.sharedMemBytes = 512 * sizeof(float);
  kp.kernelParams = red_args;
  CK(cudaGraphAddKernelNode(&n_red, g, &n_h2d, 1, &kp));
  int one = 64;
  void *fin_args[] = {&d_out, &one};
  struct cudaKernelNodeParams kf = {0};
  kf.func = (void *)&stubs[4];
  kf.gridDim = (dim3){1, 1, 1};
  kf.blockDim = (dim3){64, 1, 1};
  kf.kernelParams = fin_args;
  CK(cudaGraphAddKernelNode(&n_fin, g, &n_red, 1, &kf));
  CK(cudaGraphAddMemcpyNode1D(&n_d2h, g, &n_fin, 1, h_out, d_out, 64 * sizeof(float), cudaMemcpyDeviceToHost));
  struct cudaHostNodeParams hp = {host_node, &host_nodes};
  CK(cudaGraphAddHostNode(&n_host, g, &n_d2h, 1, &hp));
  cudaGraphExec_t e, ec;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphUpload(e, s));
  int launches = 0;
  for (int i = 0; i < 3; i++, launches++) CK(cudaGraphLaunch(e, s));
  cudaGraph_t clone;
  CK(cudaGraphClone(&clone, g));
  CK(cudaGraphInstantiate(&ec, clone, 0));
  CK(cudaGraphLaunch(ec, s));
  launches++;
  kp.gridDim = (dim3){128, 1, 1};
  CK(cudaGraphExecKernelNodeSetParams(e, n_red, &kp));
  CK(cudaGraphLaunch(e, s));
  launches++;
  cudaGraphExecUpdateResultInfo info;
  CK(cudaGraphExecUpdate(e, clone, &info));
  CK(cudaGraphLaunch(e, s));
  launches++;
  CK(cudaStreamSynchronize(s));
  if (host_nodes != launches) WRONG("host nodes ran %d times for %d launches", host_nodes, launches);
  unsigned char probe[4] = {1, 1, 1, 1};
  CK(cudaMemcpy(probe, d_in + count - 1, 4, cudaMemcpyDeviceToHost));
  if (probe[3] != 0x3f) WRONG("graph H2D node did not move the bytes (%#x)", probe[3]);
  CK(cudaGraphExecDestroy(ec));
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(clone));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(s));
  CK(cudaFree(d_in));
  CK(cudaFree(d_out));
  CK(cudaFreeHost(h_in));
  CK(cudaFreeHost(h_out));
  return launches;
}

/* PyTorch's CUDAMallocAsyncAllocator: the default pool, nothing released between steps */
static uint64_t pool_steps(int steps) {
  cudaMemPool_t pool;
  CK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t threshold = UINT64_MAX;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < steps; i++) {
    float *act, *grad;
    CK(cudaMallocAsync((void **)&act, 6u << 20, s));
    CK(cudaMallocAsync((void **)&grad, 1u << 20, s));
    int count = (1u << 20) / sizeof(float);
    void *args[] = {&act, &count};
    CK(cudaLaunchKernel(&stubs[5], (dim3){(unsigned)count / 256, 1, 1}, (dim3){256, 1, 1}, args, 0, s));
    CK(cudaMemsetAsync(grad, 0, 1u << 20, s));
    CK(cudaFreeAsync(grad, s));
    CK(cudaFreeAsync(act, s));
    uint64_t used = 1;
    CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    if (used != 0) WRONG("pool still uses %llu bytes after the step's frees", (unsigned long long)used);
  }
  CK(cudaStreamSynchronize(s));
  uint64_t reserved = 0, high = 0;
  CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high));
  if (reserved == 0) WRONG("the pool released memory despite its threshold");
  CK(cudaMemPoolTrimTo(pool, 0));
  CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  if (reserved != 0) WRONG("the pool kept %llu bytes after cudaMemPoolTrimTo(0)", (unsigned long long)reserved);
  CK(cudaStreamDestroy(s));
  return high;
}

typedef CUresult (*ctx_create_fn)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice);
typedef CUresult (*load_ex_fn)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
typedef CUresult (*get_function_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*func_set_fn)(CUfunction, CUfunction_attribute, int);
typedef CUresult (*func_get_fn)(int *, CUfunction_attribute, CUfunction);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
typedef CUresult (*pointer_get_fn)(void *, CUpointer_attribute, CUdeviceptr);

static void *entry(const char *name) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q));
  if (!fn || q != cudaDriverEntryPointSuccess) WRONG("driver entry point %s not found (%d)", name, (int)q);
  return fn;
}
#define DRV(call)                                                               \
  do {                                                                          \
    CUresult dr = (call);                                                       \
    if (dr != CUDA_SUCCESS) {                                                   \
      fprintf(stderr, "real_apis: driver error %d at %s\n", (int)dr, #call);    \
      exit(EXIT_CUDA_ERROR);                                                    \
    }                                                                           \
  } while (0)

static void driver_calls(void) {
  static const char ptx[] =
      ".version 8.0\n.target sm_90\n.address_size 64\n\n"
      ".visible .entry jit_saxpy(\n\t.param .u64 x,\n\t.param .u32 n\n)\n{\n\tret;\n}\n";
  /* the runtime is CUDA 12.x: cuCtxCreate is the _v4 ABI (params, flags, device) from 12.5 on */
  ctx_create_fn ctx_create = (ctx_create_fn)entry("cuCtxCreate");
  CUcontext ctx;
  DRV(ctx_create(&ctx, NULL, 0, 0));
  char log[512];
  CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
  CUmodule mod;
  DRV(((load_ex_fn)entry("cuModuleLoadDataEx"))(&mod, ptx, 2, opts, vals));
  CUfunction f;
  DRV(((get_function_fn)entry("cuModuleGetFunction"))(&f, mod, "jit_saxpy"));
  DRV(((func_set_fn)entry("cuFuncSetAttribute"))(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 96 * 1024));
  int smem = 0;
  DRV(((func_get_fn)entry("cuFuncGetAttribute"))(&smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  if (smem != 96 * 1024) WRONG("cuFuncGetAttribute gave %d", smem);
  CUdeviceptr x;
  CK(cudaMalloc((void **)&x, 1 << 20));
  unsigned type = 0;
  DRV(((pointer_get_fn)entry("cuPointerGetAttribute"))(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, x));
  if (type != CU_MEMORYTYPE_DEVICE) WRONG("cudaMalloc memory reported as type %u", type);
  int n = 1 << 18;
  void *args[] = {&x, &n};
  DRV(((launch_fn)entry("cuLaunchKernel"))(f, (unsigned)n / 256, 1, 1, 256, 1, 1, 64 * 1024, NULL, args, NULL));
  CK(cudaDeviceSynchronize());
  CK(cudaFree((void *)x));
}

int main(void) {
  CK(cudaProfilerStart());
  int peer = peer_copy();
  zero_copy();
  double lut_sum = module_variable();
  int launches = graphs();
  const int steps = 10;
  uint64_t high = pool_steps(steps);
  driver_calls();
  CK(cudaDeviceSynchronize());
  CK(cudaProfilerStop());
  int kernels = peer + 1 + 1 + 2 * launches + steps + 1;
  printf("real_apis: kernels=%d graph_launches=%d host_nodes=%d pool_reserved_high=%llu pool_steps=%d peer=%d "
         "lut_sum=%.1f\n",
         kernels, launches, host_nodes, (unsigned long long)high, steps, peer, lut_sum);
  return 0;
}
