/* cudart.c - mock CUDA runtime (libcudart.so.12 and libcudart.so.13 from this one source). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core_internal.h"
#include "cudart_internal.h"

/* ---------------------------------------------------------------- call plumbing */

__thread cudaError_t sg_rt_last_error;
/* Set by rt_init() (the call needs the driver) and rt_init_light() (it does not) at the start of
 * every entry point; read by API() of the same call (cudart_internal.h). */
__thread int sg_rt_call_needs_driver;

static uint64_t g_launch_ns = 2500;
static pthread_once_t g_rt_once = PTHREAD_ONCE_INIT;
static void rt_init_once(void)
{
    const char *v = getenv("SIMGPU_LAUNCH_NS");
    if (v && *v) g_launch_ns = strtoull(v, NULL, 10);
}
/* Without the driver: kernel registration, error and version queries. */
static void rt_init_light(void)
{
    sg_init();
    pthread_once(&g_rt_once, rt_init_once);
    sg_rt_call_needs_driver = 0;
}
/* The runtime's implicit initialisation reaches the driver's cuInit, as NVIDIA's does (through
 * libcuda.so.1, so CUDA_INJECTION64_PATH is honoured there). Recursive lock: calls the injected
 * library makes from InitializeInjection on this thread go through; other threads wait. */
static pthread_mutex_t g_drv_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int g_drv_state; /* 0 not yet, 1 in progress, 2 done */
static void rt_driver_init(void)
{
    if (__atomic_load_n(&g_drv_state, __ATOMIC_ACQUIRE) == 2) return;
    pthread_mutex_lock(&g_drv_lock);
    if (g_drv_state == 0) {
        g_drv_state = 1;
        void *h = sg_no_driver() ? NULL : dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (h) {
            int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
            if (cu_init) (void)cu_init(0);
        } else {
            (void)dlerror();
        }
        __atomic_store_n(&g_drv_state, 2, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_drv_lock);
}
static void rt_init(void)
{
    rt_init_light();
    rt_driver_init();
    sg_rt_call_needs_driver = 1;
}
void sg_rt_init(void) { rt_init(); }

static void launch_overhead(void)
{
    if (!g_launch_ns) return;
    uint64_t t0 = sg_now_ns();
    while (sg_now_ns() - t0 < g_launch_ns) {
    }
}
void sg_rt_launch_overhead(void) { launch_overhead(); }

/* ---------------------------------------------------------------- kernel names */

#define FN_BUCKETS 4096
typedef struct fn_ent { const void *host; const char *name; struct fn_ent *next; } fn_ent;
static fn_ent *g_fn[FN_BUCKETS];
static pthread_mutex_t g_fn_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned ptr_hash(const void *p) { return (unsigned)(((uintptr_t)p >> 4) * 2654435761u) % FN_BUCKETS; }

static void fn_register(const void *host, const char *name)
{
    fn_ent *e = malloc(sizeof *e);
    if (!e) return;
    e->host = host;
    e->name = sg_intern(name);
    pthread_mutex_lock(&g_fn_lock);
    unsigned b = ptr_hash(host);
    e->next = g_fn[b];
    g_fn[b] = e;
    pthread_mutex_unlock(&g_fn_lock);
}

/* The registered (or exported) name of a host stub, else NULL. */
static const char *fn_lookup(const void *func)
{
    pthread_mutex_lock(&g_fn_lock);
    for (fn_ent *e = g_fn[ptr_hash(func)]; e; e = e->next)
        if (e->host == func) {
            pthread_mutex_unlock(&g_fn_lock);
            return e->name;
        }
    pthread_mutex_unlock(&g_fn_lock);
    Dl_info info;
    if (func && dladdr(func, &info) && info.dli_sname && info.dli_saddr == func) {
        fn_register(func, info.dli_sname);
        return sg_intern(info.dli_sname);
    }
    return NULL;
}

const char *sg_rt_kernel_name(const void *func)
{
    /* a cudaFunction_t from cudaGetFuncBySymbol (or a CUfunction) launched through the runtime */
    const char *handle_name = sg_func_name(func);
    if (handle_name) return handle_name;
    pthread_mutex_lock(&g_fn_lock);
    for (fn_ent *e = g_fn[ptr_hash(func)]; e; e = e->next)
        if (e->host == func) {
            pthread_mutex_unlock(&g_fn_lock);
            return e->name;
        }
    pthread_mutex_unlock(&g_fn_lock);
    Dl_info info;
    if (dladdr(func, &info) && info.dli_sname && info.dli_saddr == func) {
        fn_register(func, info.dli_sname);
        return sg_intern(info.dli_sname);
    }
    char buf[64];
    snprintf(buf, sizeof buf, "kernel_%p", func);
    fn_register(func, buf);
    return sg_intern(buf);
}

/* ---------------------------------------------------------------- launches */

cudaError_t sg_rt_launch(const char *api, const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                         int per_thread, int launch_type)
{
    rt_init();
    API(api, name);
    launch_overhead();
    sg_stream *s = sg_stream_resolve(stream, per_thread);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
        (uint64_t)block.x * block.y * block.z > 1024)
        RET(cudaErrorInvalidConfiguration);
    sg_kernel_desc k;
    memset(&k, 0, sizeof k);
    k.name = name;
    k.grid[0] = grid.x, k.grid[1] = grid.y, k.grid[2] = grid.z;
    k.block[0] = block.x, k.block[1] = block.y, k.block[2] = block.z;
    k.dynamic_smem = smem;
    k.correlation = _c.correlation;
    k.launch_type = launch_type;
    sg_graph_node n;
    memset(&n, 0, sizeof n);
    n.type = SG_NODE_KERNEL;
    n.k = k;
    n.k.name = sg_intern(name);
    cudaError_t err;
    if (sg_rt_capture_node(s, &n, &err)) RET(err);
    sg_enqueue_kernel(s, &k);
    RET(cudaSuccess);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st)
{
    (void)args;
    rt_init();
    return sg_rt_launch("cudaLaunchKernel", sg_rt_kernel_name(func), g, b, smem, st, 0, 0);
}
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st);
cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st)
{
    (void)args;
    rt_init();
    return sg_rt_launch("cudaLaunchKernel_ptsz", sg_rt_kernel_name(func), g, b, smem, st, 1, 0);
}
cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st)
{
    (void)args;
    rt_init();
    return sg_rt_launch("cudaLaunchCooperativeKernel", sg_rt_kernel_name(func), g, b, smem, st, 0, 1);
}
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t smem,
                                             cudaStream_t st);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t smem,
                                             cudaStream_t st)
{
    (void)args;
    rt_init();
    return sg_rt_launch("cudaLaunchCooperativeKernel_ptsz", sg_rt_kernel_name(func), g, b, smem, st, 1, 1);
}

static int config_cooperative(const cudaLaunchConfig_t *c)
{
    for (unsigned i = 0; c->attrs && i < c->numAttrs; i++)
        if (c->attrs[i].id == cudaLaunchAttributeCooperative && c->attrs[i].val.cooperative) return 1;
    return 0;
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    (void)args;
    rt_init();
    if (!config) return cudaErrorInvalidValue;
    return sg_rt_launch("cudaLaunchKernelExC", sg_rt_kernel_name(func), config->gridDim, config->blockDim,
                        config->dynamicSmemBytes, config->stream, 0, config_cooperative(config));
}
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    (void)args;
    rt_init();
    if (!config) return cudaErrorInvalidValue;
    return sg_rt_launch("cudaLaunchKernelExC_ptsz", sg_rt_kernel_name(func), config->gridDim, config->blockDim,
                        config->dynamicSmemBytes, config->stream, 1, config_cooperative(config));
}

/* nvcc stub path */
typedef struct { dim3 g, b; size_t smem; void *stream; } call_cfg;
static __thread call_cfg t_cfg[16];
static __thread int t_ncfg;

void **__cudaRegisterFatBinary(void *fatCubin);
void **__cudaRegisterFatBinary(void *fatCubin)
{
    rt_init_light();
    void **h = calloc(2, sizeof(void *));
    if (h) h[0] = fatCubin;
    return h;
}
void __cudaRegisterFatBinaryEnd(void **h);
void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void __cudaUnregisterFatBinary(void **h);
void __cudaUnregisterFatBinary(void **h) { (void)h; }
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int tl,
                            uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int tl,
                            uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)h, (void)deviceFun, (void)tl, (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
    rt_init_light();
    fn_register(hostFun, deviceName ? deviceName : deviceFun);
}
char __cudaInitModule(void **h);
char __cudaInitModule(void **h) { (void)h; return 1; }

unsigned __cudaPushCallConfiguration(dim3 g, dim3 b, size_t smem, void *stream);
unsigned __cudaPushCallConfiguration(dim3 g, dim3 b, size_t smem, void *stream)
{
    if (t_ncfg < 16) t_cfg[t_ncfg++] = (call_cfg){g, b, smem, stream};
    return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3 *g, dim3 *b, size_t *smem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *g, dim3 *b, size_t *smem, void *stream)
{
    if (t_ncfg == 0) return cudaErrorMissingConfiguration;
    call_cfg c = t_cfg[--t_ncfg];
    if (g) *g = c.g;
    if (b) *b = c.b;
    if (smem) *smem = c.smem;
    if (stream) *(void **)stream = c.stream;
    return cudaSuccess;
}
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    if (!kernel) return cudaErrorInvalidValue;
    *kernel = (cudaKernel_t)func; /* the host stub identifies the kernel */
    return cudaSuccess;
}
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st)
{
    (void)args;
    rt_init();
    return sg_rt_launch("cudaLaunchKernel", sg_rt_kernel_name(kernel), g, b, smem, st, 0, 0);
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t st)
{
    (void)args;
    rt_init();
    return sg_rt_launch("cudaLaunchKernel_ptsz", sg_rt_kernel_name(kernel), g, b, smem, st, 1, 0);
}

/* CUDA 12.0+: the driver function (CUfunction) of a kernel's host stub, for cuLaunchKernel & co. */
cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
    rt_init();
    API("cudaGetFuncBySymbol", NULL);
    if (!functionPtr || !symbolPtr) RET(cudaErrorInvalidValue);
    const char *name = sg_func_name(symbolPtr) ? sg_func_name(symbolPtr) : fn_lookup(symbolPtr);
    if (!name) RET(cudaErrorInvalidDeviceFunction);
    void *h = sg_func_handle(name);
    if (!h) RET(cudaErrorMemoryAllocation);
    *functionPtr = (cudaFunction_t)h;
    RET(cudaSuccess);
}

/* ---------------------------------------------------------------- devices */

cudaError_t cudaGetDeviceCount(int *count)
{
    rt_init();
    API("cudaGetDeviceCount", NULL);
    if (!count) RET(cudaErrorInvalidValue);
    *count = sg_device_count();
    RET(cudaSuccess);
}
cudaError_t cudaSetDevice(int dev)
{
    rt_init();
    API("cudaSetDevice", NULL);
    RET(sg_set_current_device(dev) == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}
cudaError_t cudaGetDevice(int *dev)
{
    rt_init();
    API("cudaGetDevice", NULL);
    if (!dev) RET(cudaErrorInvalidValue);
    *dev = sg_current_device();
    RET(cudaSuccess);
}
cudaError_t cudaSetDeviceFlags(unsigned flags)
{
    (void)flags;
    rt_init();
    API("cudaSetDeviceFlags", NULL);
    RET(cudaSuccess);
}
cudaError_t cudaGetDeviceFlags(unsigned *flags)
{
    rt_init();
    API("cudaGetDeviceFlags", NULL);
    if (flags) *flags = 0;
    RET(cudaSuccess);
}
cudaError_t cudaRuntimeGetVersion(int *v)
{
    rt_init_light();
    API("cudaRuntimeGetVersion", NULL);
    if (!v) RET(cudaErrorInvalidValue);
    *v = sg_cudart_version();
    RET(cudaSuccess);
}
cudaError_t cudaDriverGetVersion(int *v)
{
    /* Without a driver NVIDIA's runtime reports version 0 (success), not an error. */
    if (sg_no_driver()) rt_init_light();
    else rt_init();
    API("cudaDriverGetVersion", NULL);
    if (!v) RET(cudaErrorInvalidValue);
    *v = sg_no_driver() ? 0 : 13000;
    RET(cudaSuccess);
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    rt_init();
    API("cudaDeviceGetAttribute", NULL);
    if (!value) RET(cudaErrorInvalidValue);
    if (device < 0 || device >= sg_device_count()) RET(cudaErrorInvalidDevice);
    int v = 0;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = 1024; break;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: v = 64; break;
    case cudaDevAttrMaxGridDimX: v = 2147483647; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: v = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = 49152; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = 232448; break;
    case cudaDevAttrWarpSize: v = 32; break;
    case cudaDevAttrMultiProcessorCount: v = 132; break;
    case cudaDevAttrComputeCapabilityMajor: v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: v = 0; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = 2048; break;
    case cudaDevAttrMaxRegistersPerBlock: v = 65536; break;
    case cudaDevAttrL2CacheSize: v = 52428800; break;
    case cudaDevAttrGlobalMemoryBusWidth: v = 5120; break;
    case cudaDevAttrConcurrentKernels: case cudaDevAttrUnifiedAddressing: case cudaDevAttrManagedMemory:
    case cudaDevAttrCooperativeLaunch: case cudaDevAttrConcurrentManagedAccess: case cudaDevAttrMemoryPoolsSupported:
    case cudaDevAttrCanUseHostPointerForRegisteredMem: v = 1; break;
    case cudaDevAttrAsyncEngineCount: v = 3; break;
    case cudaDevAttrPciBusId: v = 0x18 + device; break;
    default: v = 0; break;
    }
    *value = v;
    RET(cudaSuccess);
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    rt_init();
    API("cudaDeviceGetStreamPriorityRange", NULL);
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    RET(cudaSuccess);
}
/* Function attributes: those of the kernel's function handle, shared with the driver's
 * cuFuncGetAttribute / cuFuncSetAttribute (core.c). */
cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    rt_init();
    API("cudaFuncSetAttribute", NULL);
    if (!func) RET(cudaErrorInvalidDeviceFunction);
    void *h = sg_func_handle(sg_rt_kernel_name(func));
    RET(sg_func_attr_update(h, (int)attr, value) == 0 ? cudaSuccess : cudaErrorInvalidValue);
}
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    rt_init();
    API("cudaFuncGetAttributes", NULL);
    if (!attr) RET(cudaErrorInvalidValue);
    if (!func) RET(cudaErrorInvalidDeviceFunction);
    void *h = sg_func_handle(sg_rt_kernel_name(func));
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = sg_func_attr_value(h, 0);
    attr->numRegs = sg_func_attr_value(h, 4);
    attr->ptxVersion = sg_func_attr_value(h, 5);
    attr->binaryVersion = sg_func_attr_value(h, 6);
    attr->maxDynamicSharedSizeBytes = sg_func_attr_value(h, cudaFuncAttributeMaxDynamicSharedMemorySize);
    attr->preferredShmemCarveout = sg_func_attr_value(h, cudaFuncAttributePreferredSharedMemoryCarveout);
    attr->requiredClusterWidth = sg_func_attr_value(h, cudaFuncAttributeRequiredClusterWidth);
    attr->requiredClusterHeight = sg_func_attr_value(h, cudaFuncAttributeRequiredClusterHeight);
    attr->requiredClusterDepth = sg_func_attr_value(h, cudaFuncAttributeRequiredClusterDepth);
    attr->nonPortableClusterSizeAllowed = sg_func_attr_value(h, cudaFuncAttributeNonPortableClusterSizeAllowed);
    attr->clusterSchedulingPolicyPreference = sg_func_attr_value(h, cudaFuncAttributeClusterSchedulingPolicyPreference);
    RET(cudaSuccess);
}
cudaError_t cudaDeviceSynchronize(void)
{
    rt_init();
    API("cudaDeviceSynchronize", NULL);
    cudaError_t e = sg_rt_capture_check_unsafe();
    if (e != cudaSuccess) RET(e);
    uint64_t t0 = sg_now_ns();
    int d = sg_current_device();
    sg_device_synchronize(d);
    sgc_emit_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, t0, sg_now_ns(), _c.correlation, d,
                  (uint32_t)-1, (uint32_t)-1, 0);
    sg_rt_pool_sync_trim(_c.correlation);
    RET(cudaSuccess);
}
cudaError_t cudaDeviceReset(void)
{
    rt_init();
    API("cudaDeviceReset", NULL);
    sg_device_synchronize(sg_current_device());
    sg_rt_peer_reset(sg_current_device());
    RET(cudaSuccess);
}
cudaError_t cudaThreadSynchronize(void) { return cudaDeviceSynchronize(); }

/* ---------------------------------------------------------------- streams */

static cudaError_t stream_create(const char *api, cudaStream_t *ps, unsigned flags, int prio)
{
    rt_init();
    API(api, NULL);
    if (!ps) RET(cudaErrorInvalidValue);
    sg_stream *s = sg_stream_create(sg_current_device(), flags, prio);
    if (!s) RET(cudaErrorMemoryAllocation);
    *ps = (cudaStream_t)s;
    RET(cudaSuccess);
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return stream_create("cudaStreamCreate", s, 0, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    return stream_create("cudaStreamCreateWithFlags", s, flags, 0);
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int prio)
{
    return stream_create("cudaStreamCreateWithPriority", s, flags, prio);
}
cudaError_t cudaStreamDestroy(cudaStream_t st)
{
    rt_init();
    API("cudaStreamDestroy", NULL);
    sg_stream *s = sg_stream_resolve(st, 0);
    if (!s || st == NULL || st == cudaStreamLegacy || st == cudaStreamPerThread) RET(cudaErrorInvalidResourceHandle);
    sg_stream_destroy(s);
    RET(cudaSuccess);
}

static cudaError_t stream_sync(const char *api, cudaStream_t st, int pt)
{
    rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    cudaError_t e = sg_rt_capture_check_stream(s);
    if (e != cudaSuccess) RET(e);
    uint64_t t0 = sg_now_ns();
    sg_stream_synchronize(s);
    sgc_emit_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, t0, sg_now_ns(), _c.correlation,
                  sg_stream_device(s), sg_stream_id(s), (uint32_t)-1, 0);
    sg_rt_pool_sync_trim(_c.correlation);
    RET(cudaSuccess);
}
cudaError_t cudaStreamSynchronize(cudaStream_t st) { return stream_sync("cudaStreamSynchronize", st, 0); }
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t st);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t st) { return stream_sync("cudaStreamSynchronize_ptsz", st, 1); }

static cudaError_t stream_query(const char *api, cudaStream_t st, int pt)
{
    rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    cudaError_t e = sg_rt_capture_check_stream(s);
    if (e != cudaSuccess) RET(e);
    RET(sg_stream_idle(s) ? cudaSuccess : cudaErrorNotReady);
}
cudaError_t cudaStreamQuery(cudaStream_t st) { return stream_query("cudaStreamQuery", st, 0); }
cudaError_t cudaStreamQuery_ptsz(cudaStream_t st);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t st) { return stream_query("cudaStreamQuery_ptsz", st, 1); }

static cudaError_t stream_get_priority(const char *api, cudaStream_t st, int *p, int pt)
{
    rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s || !p) RET(cudaErrorInvalidResourceHandle);
    *p = sg_stream_priority(s);
    RET(cudaSuccess);
}
cudaError_t cudaStreamGetPriority(cudaStream_t st, int *p) { return stream_get_priority("cudaStreamGetPriority", st, p, 0); }
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t st, int *p);
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t st, int *p) { return stream_get_priority("cudaStreamGetPriority_ptsz", st, p, 1); }
static cudaError_t stream_get_flags(const char *api, cudaStream_t st, unsigned *f, int pt)
{
    rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s || !f) RET(cudaErrorInvalidResourceHandle);
    *f = sg_stream_nonblocking(s) ? cudaStreamNonBlocking : 0;
    RET(cudaSuccess);
}
cudaError_t cudaStreamGetFlags(cudaStream_t st, unsigned *f) { return stream_get_flags("cudaStreamGetFlags", st, f, 0); }
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t st, unsigned *f);
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t st, unsigned *f) { return stream_get_flags("cudaStreamGetFlags_ptsz", st, f, 1); }

/* ---------------------------------------------------------------- events */

#define EVENT_MAGIC 0x45564e54u
typedef struct sg_event {
    uint32_t magic;
    uint32_t id;
    unsigned flags;
    sg_op *marker;          /* the last record outside a capture */
    sg_capture_mark capture; /* the last record, when it was in a capture */
} sg_event;
static uint32_t g_event_ids;

static sg_event *event_get(cudaEvent_t e)
{
    sg_event *ev = (sg_event *)e;
    return ev && ev->magic == EVENT_MAGIC ? ev : NULL;
}

static cudaError_t event_create(const char *api, cudaEvent_t *pe, unsigned flags)
{
    rt_init();
    API(api, NULL);
    if (!pe) RET(cudaErrorInvalidValue);
    sg_event *ev = calloc(1, sizeof *ev);
    if (!ev) RET(cudaErrorMemoryAllocation);
    ev->magic = EVENT_MAGIC;
    ev->id = __atomic_add_fetch(&g_event_ids, 1, __ATOMIC_RELAXED);
    ev->flags = flags;
    *pe = (cudaEvent_t)ev;
    RET(cudaSuccess);
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return event_create("cudaEventCreate", e, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    return event_create("cudaEventCreateWithFlags", e, flags);
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    rt_init();
    API("cudaEventDestroy", NULL);
    sg_event *ev = event_get(e);
    if (!ev) RET(cudaErrorInvalidResourceHandle);
    ev->magic = 0;
    if (ev->marker) sg_op_release(ev->marker);
    free(ev);
    RET(cudaSuccess);
}
static cudaError_t event_record(const char *api, cudaEvent_t e, cudaStream_t st, int pt)
{
    rt_init();
    API(api, NULL);
    sg_event *ev = event_get(e);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!ev || !s) RET(cudaErrorInvalidResourceHandle);
    cudaError_t err;
    if (sg_rt_capture_event_record(s, &ev->capture, &err)) RET(err); /* a node of the capture's graph */
    sg_op *m = sg_stream_record_marker(s);
    sg_op *old = ev->marker;
    ev->marker = m;
    if (old) sg_op_release(old);
    RET(cudaSuccess);
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st) { return event_record("cudaEventRecord", e, st, 0); }
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t st);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t st) { return event_record("cudaEventRecord_ptsz", e, st, 1); }
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t st, unsigned flags)
{
    (void)flags;
    return event_record("cudaEventRecordWithFlags", e, st, 0);
}
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t st, unsigned flags);
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t st, unsigned flags)
{
    (void)flags;
    return event_record("cudaEventRecordWithFlags_ptsz", e, st, 1);
}
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    rt_init();
    API("cudaEventQuery", NULL);
    sg_event *ev = event_get(e);
    if (!ev) RET(cudaErrorInvalidResourceHandle);
    cudaError_t captured = sg_rt_capture_check_event(&ev->capture);
    if (captured != cudaSuccess) RET(captured);
    RET(!ev->marker || sg_op_done(ev->marker, NULL) ? cudaSuccess : cudaErrorNotReady);
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    rt_init();
    API("cudaEventSynchronize", NULL);
    sg_event *ev = event_get(e);
    if (!ev) RET(cudaErrorInvalidResourceHandle);
    cudaError_t captured = sg_rt_capture_check_event(&ev->capture);
    if (captured != cudaSuccess) RET(captured);
    uint64_t t0 = sg_now_ns();
    if (ev->marker) sg_op_wait(ev->marker);
    sgc_emit_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, t0, sg_now_ns(), _c.correlation,
                  sg_current_device(), (uint32_t)-1, ev->id, 0);
    sg_rt_pool_sync_trim(_c.correlation);
    RET(cudaSuccess);
}
static cudaError_t elapsed(const char *api, float *ms, cudaEvent_t a, cudaEvent_t b)
{
    rt_init();
    API(api, NULL);
    sg_event *x = event_get(a), *y = event_get(b);
    if (!ms || !x || !y) RET(cudaErrorInvalidResourceHandle);
    if ((x->flags | y->flags) & cudaEventDisableTiming) RET(cudaErrorInvalidResourceHandle);
    if (!x->marker || !y->marker) RET(cudaErrorInvalidResourceHandle);
    uint64_t ea, eb;
    if (!sg_op_done(x->marker, &ea) || !sg_op_done(y->marker, &eb)) RET(cudaErrorNotReady);
    *ms = (float)(((double)eb - (double)ea) / 1e6);
    RET(cudaSuccess);
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) { return elapsed("cudaEventElapsedTime", ms, a, b); }
cudaError_t cudaEventElapsedTime_v2(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    return elapsed("cudaEventElapsedTime_v2", ms, a, b);
}
static cudaError_t stream_wait_event(const char *api, cudaStream_t st, cudaEvent_t e, unsigned flags, int pt)
{
    rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    sg_event *ev = event_get(e);
    if (!s || !ev) RET(cudaErrorInvalidResourceHandle);
    cudaError_t err;
    if (sg_rt_capture_event_wait(s, &ev->capture, ev->marker || ev->capture.capture_id, flags, &err)) RET(err);
    uint64_t t0 = sg_now_ns();
    if (ev->marker) sg_stream_wait_op(s, ev->marker);
    sgc_emit_sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, t0, sg_now_ns(), _c.correlation,
                  sg_stream_device(s), sg_stream_id(s), ev->id, 0);
    RET(cudaSuccess);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned flags)
{
    return stream_wait_event("cudaStreamWaitEvent", st, e, flags, 0);
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t st, cudaEvent_t e, unsigned flags);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t st, cudaEvent_t e, unsigned flags)
{
    return stream_wait_event("cudaStreamWaitEvent_ptsz", st, e, flags, 1);
}

/* ---------------------------------------------------------------- memory */

cudaError_t cudaMalloc(void **p, size_t size)
{
    rt_init();
    API("cudaMalloc", NULL);
    cudaError_t e = sg_rt_capture_check_unsafe();
    if (e != cudaSuccess) RET(e);
    RET((cudaError_t)sg_dev_alloc(p, size, sg_current_device(), SG_MEM_DEVICE, _c.correlation, 0, 0));
}
cudaError_t cudaMallocManaged(void **p, size_t size, unsigned flags)
{
    (void)flags;
    rt_init();
    API("cudaMallocManaged", NULL);
    RET((cudaError_t)sg_dev_alloc(p, size, sg_current_device(), SG_MEM_MANAGED, _c.correlation, 0, 0));
}
cudaError_t cudaFree(void *p)
{
    rt_init();
    API("cudaFree", NULL);
    if (p) sg_device_synchronize(sg_current_device()); /* cudaFree synchronises, as CUDA's does */
    RET(sg_rt_free(p, NULL, _c.correlation));
}
static cudaError_t host_alloc(void **p, size_t size, unsigned flags, uint32_t corr)
{
    if (!p) return cudaErrorInvalidValue;
    if (!size) {
        *p = NULL;
        return cudaSuccess;
    }
    void *m = mmap(NULL, sg_page_round(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return cudaErrorMemoryAllocation;
    sg_mem_add_ext((uintptr_t)m, size, sg_current_device(), SG_MEM_PINNED, NULL, NULL, flags);
    *p = m;
    sgc_emit_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, corr,
                    (uint64_t)(uintptr_t)m, size, sg_current_device(), 0, 0);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t size)
{
    rt_init();
    API("cudaMallocHost", NULL);
    RET(host_alloc(p, size, cudaHostAllocDefault, _c.correlation));
}
cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    rt_init();
    API("cudaHostAlloc", NULL);
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        RET(cudaErrorInvalidValue);
    RET(host_alloc(p, size, flags, _c.correlation));
}
cudaError_t cudaFreeHost(void *p)
{
    rt_init();
    API("cudaFreeHost", NULL);
    if (!p) RET(cudaSuccess);
    mem_ent e;
    if (!sg_mem_remove(p, &e) || e.kind != SG_MEM_PINNED) RET(cudaErrorInvalidValue);
    munmap(p, sg_page_round(e.size));
    sgc_emit_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, _c.correlation,
                    (uint64_t)(uintptr_t)p, e.size, e.device, 0, 0);
    RET(cudaSuccess);
}
cudaError_t cudaHostRegister(void *p, size_t size, unsigned flags)
{
    rt_init();
    API("cudaHostRegister", NULL);
    if (!p || !size) RET(cudaErrorInvalidValue);
    if (sg_mem_find(p, NULL)) RET(cudaErrorHostMemoryAlreadyRegistered);
    sg_mem_add_ext((uintptr_t)p, size, sg_current_device(), SG_MEM_REGISTERED, NULL, NULL, flags);
    RET(cudaSuccess);
}
cudaError_t cudaHostUnregister(void *p)
{
    rt_init();
    API("cudaHostUnregister", NULL);
    mem_ent e;
    if (!sg_mem_find(p, &e) || e.kind != SG_MEM_REGISTERED || e.base != (uintptr_t)p) RET(cudaErrorHostMemoryNotRegistered);
    sg_mem_remove(p, NULL);
    RET(cudaSuccess);
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    rt_init();
    API("cudaMemGetInfo", NULL);
    int d = sg_current_device();
    uint64_t cap = sg_device_capacity(d), used = sg_device_used(d);
    if (free_b) *free_b = (size_t)(cap - used);
    if (total) *total = (size_t)cap;
    RET(cudaSuccess);
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    rt_init();
    API("cudaPointerGetAttributes", NULL);
    if (!a) RET(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    mem_ent e;
    if (sg_mem_find(p, &e)) {
        int dev = sg_mem_kind_is_device(e.kind) && e.kind != SG_MEM_MANAGED;
        a->type = dev                        ? cudaMemoryTypeDevice
                  : e.kind == SG_MEM_MANAGED ? cudaMemoryTypeManaged
                                             : cudaMemoryTypeHost;
        a->device = e.device;
        a->devicePointer = (void *)p;
        a->hostPointer = dev ? NULL : (void *)p;
    } else {
        a->type = cudaMemoryTypeUnregistered;
        a->device = -2;
        a->hostPointer = (void *)p;
    }
    RET(cudaSuccess);
}

/* ---------------------------------------------------------------- errors */

cudaError_t cudaGetLastError(void)
{
    rt_init_light();
    API("cudaGetLastError", NULL);
    /* The failed driver initialisation is sticky: reading it does not reset it. */
    cudaError_t e = sg_no_driver() ? cudaErrorInsufficientDriver : sg_rt_last_error;
    sg_rt_last_error = cudaSuccess;
    sg_api_exit(&_c, (int)e);
    return e;
}
cudaError_t cudaPeekAtLastError(void)
{
    rt_init_light();
    API("cudaPeekAtLastError", NULL);
    cudaError_t e = sg_no_driver() ? cudaErrorInsufficientDriver : sg_rt_last_error;
    sg_api_exit(&_c, (int)e);
    return e;
}

static const struct { int code; const char *name, *desc; } g_errs[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorMissingConfiguration, "cudaErrorMissingConfiguration", "__global__ function call is not configured"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {cudaErrorGraphExecUpdateFailure, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
};
const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof g_errs / sizeof g_errs[0]; i++)
        if (g_errs[i].code == (int)e) return g_errs[i].desc;
    return "unrecognized error code";
}
const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof g_errs / sizeof g_errs[0]; i++)
        if (g_errs[i].code == (int)e) return g_errs[i].name;
    return "cudaErrorUnknown";
}

/* ---------------------------------------------------------------- driver entry points */

typedef int (*get_proc_fn)(const char *, void **, int, unsigned long long, int *);

static cudaError_t entry_point(const char *symbol, void **fp, unsigned version, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status)
{
    if (!symbol || !fp) return cudaErrorInvalidValue;
    static void *h;
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    get_proc_fn gp = h ? (get_proc_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    int st = 1;
    *fp = NULL;
    int r = gp ? gp(symbol, fp, (int)version, flags, &st) : 1;
    if (status) *status = (r == 0 && *fp) ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return (r == 0 && *fp) ? cudaSuccess : cudaErrorSymbolNotFound;
}
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fp, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status)
{
    rt_init();
    API("cudaGetDriverEntryPoint", NULL);
    RET(entry_point(symbol, fp, (unsigned)sg_cudart_version(), flags, status));
}
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fp, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *status);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fp, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *status)
{
    rt_init();
    API("cudaGetDriverEntryPoint_ptsz", NULL);
    RET(entry_point(symbol, fp, (unsigned)sg_cudart_version(), flags | 2, status));
}
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fp, unsigned int v, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    rt_init();
    API("cudaGetDriverEntryPointByVersion", NULL);
    RET(entry_point(symbol, fp, v, flags, status));
}
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fp, unsigned int v,
                                                  unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *status);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fp, unsigned int v,
                                                  unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *status)
{
    rt_init();
    API("cudaGetDriverEntryPointByVersion_ptsz", NULL);
    RET(entry_point(symbol, fp, v, flags | 2, status));
}
