/* cuda_drv.c - mock CUDA driver (libcuda.so.1). Built like NVIDIA's: __CUDA_API_VERSION_INTERNAL
 * turns off the header's name remapping so the versioned and unversioned names can both be defined. */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_drv_internal.h"

#if CUDA_VERSION < 13000
/* CUDA 13's second ABIs (PFN_..._v13000), which the CUDA 12 headers this builds with lack. */
CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx);
CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx);
#endif

static int g_inited;
int sg_drv_initialized(void) { return g_inited; }
static __thread int t_has_ctx = -1; /* -1: none set explicitly -> current device's primary ctx */

/* CUDA_INJECTION64_PATH, as NVIDIA's driver: the first cuInit of the process dlopens the library
 * (RTLD_NOW | RTLD_GLOBAL) and calls its `int InitializeInjection(void)`, before cuInit returns.
 * A missing file or symbol is ignored silently. Once per process (a forked child inherits the
 * loaded library and is not injected again). Calls the injected library makes from
 * InitializeInjection (cuInit again, runtime calls that initialise the driver) go through; other
 * threads calling cuInit meanwhile wait until injection is done. */
static pthread_mutex_t g_inject_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int g_inject_state; /* 0 not yet, 1 in progress (the lock holder), 2 done */
static void inject_once(void)
{
    if (__atomic_load_n(&g_inject_state, __ATOMIC_ACQUIRE) == 2) return;
    pthread_mutex_lock(&g_inject_lock);
    if (g_inject_state == 0) {
        g_inject_state = 1;
        const char *path = getenv("CUDA_INJECTION64_PATH");
        if (path && *path) {
            void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
            if (h) {
                int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
                if (init) (void)init();
            } else {
                (void)dlerror();
            }
        }
        __atomic_store_n(&g_inject_state, 2, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_inject_lock);
}

CUresult cuInit(unsigned flags)
{
    (void)flags;
    sg_init();
    inject_once();
    DAPI("cuInit", NULL);
    g_inited = 1;
    DRET(CUDA_SUCCESS);
}
CUresult cuDriverGetVersion(int *v)
{
    DAPI("cuDriverGetVersion", NULL);
    if (!v) DRET(CUDA_ERROR_INVALID_VALUE);
    *v = 13000;
    DRET(CUDA_SUCCESS);
}
CUresult cuDeviceGetCount(int *n)
{
    DAPI("cuDeviceGetCount", NULL);
    if (!n) DRET(CUDA_ERROR_INVALID_VALUE);
    if (!g_inited) DRET(CUDA_ERROR_NOT_INITIALIZED);
    *n = sg_device_count();
    DRET(CUDA_SUCCESS);
}
CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    DAPI("cuDeviceGet", NULL);
    if (!d) DRET(CUDA_ERROR_INVALID_VALUE);
    if (!g_inited) DRET(CUDA_ERROR_NOT_INITIALIZED);
    if (ordinal < 0 || ordinal >= sg_device_count()) DRET(CUDA_ERROR_INVALID_DEVICE);
    *d = ordinal;
    DRET(CUDA_SUCCESS);
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    DAPI("cuDeviceGetName", NULL);
    if (!name || len <= 0) DRET(CUDA_ERROR_INVALID_VALUE);
    if (d < 0 || d >= sg_device_count()) DRET(CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "NVIDIA H100 80GB HBM3 (simulated)");
    DRET(CUDA_SUCCESS);
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    DAPI("cuDeviceTotalMem_v2", NULL);
    if (!bytes) DRET(CUDA_ERROR_INVALID_VALUE);
    if (d < 0 || d >= sg_device_count()) DRET(CUDA_ERROR_INVALID_DEVICE);
    *bytes = (size_t)sg_device_capacity(d);
    DRET(CUDA_SUCCESS);
}
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice d)
{
    DAPI("cuDeviceGetAttribute", NULL);
    if (!v) DRET(CUDA_ERROR_INVALID_VALUE);
    if (d < 0 || d >= sg_device_count()) DRET(CUDA_ERROR_INVALID_DEVICE);
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    default: *v = 0; break;
    }
    DRET(CUDA_SUCCESS);
}

/* contexts: one (primary) context per device; its handle is sg_context_handle(device) */
static int ctx_dev(CUcontext c) { return sg_context_device(c); }
int sg_drv_context_device(CUcontext c) { return ctx_dev(c); }
CUresult cuCtxGetCurrent(CUcontext *pc)
{
    DAPI("cuCtxGetCurrent", NULL);
    if (!pc) DRET(CUDA_ERROR_INVALID_VALUE);
    *pc = t_has_ctx == 0 ? NULL : (CUcontext)sg_context_handle(sg_current_device());
    DRET(CUDA_SUCCESS);
}
CUresult cuCtxSetCurrent(CUcontext c)
{
    DAPI("cuCtxSetCurrent", NULL);
    if (!c) {
        t_has_ctx = 0;
        DRET(CUDA_SUCCESS);
    }
    int d = ctx_dev(c);
    if (d < 0) DRET(CUDA_ERROR_INVALID_CONTEXT);
    sg_set_current_device(d);
    t_has_ctx = 1;
    DRET(CUDA_SUCCESS);
}
/* cuCtxCreate in its ABIs: a context on the device made current on the calling thread. There is one
 * context per device here (the primary one): every created context is it. Flags: at most one
 * scheduling flag, nothing outside CU_CTX_FLAGS_MASK. Execution affinity (an SM count up to the
 * device's) is accepted and has no effect; CIG (CUDA in graphics) contexts are not supported. */
static CUresult ctx_create(CUcontext *pc, unsigned flags, CUdevice d)
{
    if (!pc) return CUDA_ERROR_INVALID_VALUE;
    if (!g_inited) return CUDA_ERROR_NOT_INITIALIZED;
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    if ((flags & ~(unsigned)CU_CTX_FLAGS_MASK) || (sched & (sched - 1))) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sg_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *pc = (CUcontext)sg_context_handle(d);
    sg_set_current_device(d);
    t_has_ctx = 1;
    return CUDA_SUCCESS;
}
static CUresult check_affinity(const CUexecAffinityParam *p, int n)
{
    if (n < 0 || (n > 0 && !p)) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < n; i++)
        if (p[i].type != CU_EXEC_AFFINITY_TYPE_SM_COUNT || p[i].param.smCount.val == 0 || p[i].param.smCount.val > 132)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
CUresult cuCtxCreate(CUcontext *pc, unsigned flags, CUdevice d)
{
    DAPI("cuCtxCreate", NULL);
    DRET(ctx_create(pc, flags, d));
}
CUresult cuCtxCreate_v2(CUcontext *pc, unsigned flags, CUdevice d)
{
    DAPI("cuCtxCreate_v2", NULL);
    DRET(ctx_create(pc, flags, d));
}
CUresult cuCtxCreate_v3(CUcontext *pc, CUexecAffinityParam *params, int n, unsigned flags, CUdevice d)
{
    DAPI("cuCtxCreate_v3", NULL);
    CUresult r = check_affinity(params, n);
    DRET(r == CUDA_SUCCESS ? ctx_create(pc, flags, d) : r);
}
/* CUDA 13's cuCtxCreate (cuda.h: #define cuCtxCreate cuCtxCreate_v4); params may be NULL. */
CUresult cuCtxCreate_v4(CUcontext *pc, CUctxCreateParams *params, unsigned flags, CUdevice d)
{
    DAPI("cuCtxCreate_v4", NULL);
    if (params && params->cigParams) DRET(params->numExecAffinityParams ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED);
    CUresult r = params ? check_affinity(params->execAffinityParams, params->numExecAffinityParams) : CUDA_SUCCESS;
    DRET(r == CUDA_SUCCESS ? ctx_create(pc, flags, d) : r);
}
CUresult cuCtxDestroy_v2(CUcontext c)
{
    DAPI("cuCtxDestroy_v2", NULL);
    int d = ctx_dev(c);
    if (d < 0) DRET(CUDA_ERROR_INVALID_CONTEXT);
    sg_device_synchronize(d);
    DRET(CUDA_SUCCESS);
}
CUresult cuCtxSynchronize(void)
{
    DAPI("cuCtxSynchronize", NULL);
    sg_device_synchronize(sg_current_device());
    DRET(CUDA_SUCCESS);
}
/* CUDA 13: the context to wait for, NULL for the current one. */
CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    DAPI("cuCtxSynchronize_v2", NULL);
    int d = ctx ? ctx_dev(ctx) : sg_current_device();
    if (d < 0) DRET(CUDA_ERROR_INVALID_CONTEXT);
    sg_device_synchronize(d);
    DRET(CUDA_SUCCESS);
}
CUresult cuCtxGetDevice(CUdevice *d)
{
    DAPI("cuCtxGetDevice", NULL);
    if (!d) DRET(CUDA_ERROR_INVALID_VALUE);
    *d = sg_current_device();
    DRET(CUDA_SUCCESS);
}
/* CUDA 13: the device of a given context, NULL for the current one. */
CUresult cuCtxGetDevice_v2(CUdevice *d, CUcontext ctx)
{
    DAPI("cuCtxGetDevice_v2", NULL);
    if (!d) DRET(CUDA_ERROR_INVALID_VALUE);
    int dev = ctx ? ctx_dev(ctx) : sg_current_device();
    if (dev < 0) DRET(CUDA_ERROR_INVALID_CONTEXT);
    *d = dev;
    DRET(CUDA_SUCCESS);
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *pc, CUdevice d)
{
    DAPI("cuDevicePrimaryCtxRetain", NULL);
    if (!pc) DRET(CUDA_ERROR_INVALID_VALUE);
    if (d < 0 || d >= sg_device_count()) DRET(CUDA_ERROR_INVALID_DEVICE);
    *pc = (CUcontext)sg_context_handle(d);
    DRET(CUDA_SUCCESS);
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    DAPI("cuDevicePrimaryCtxRelease_v2", NULL);
    if (d < 0 || d >= sg_device_count()) DRET(CUDA_ERROR_INVALID_DEVICE);
    DRET(CUDA_SUCCESS);
}

/* modules and functions: a CUfunction is a core function handle (sg_func_handle), the same one
 * the runtime's cudaGetFuncBySymbol returns for that kernel */
CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    (void)image;
    DAPI("cuModuleLoadData", NULL);
    if (!m) DRET(CUDA_ERROR_INVALID_VALUE);
    static int token;
    *m = (CUmodule)&token;
    DRET(CUDA_SUCCESS);
}
/* The JIT options the driver writes back: log sizes (nothing was logged: 0, the buffers emptied) and
 * the wall time (0 ms: nothing is compiled). Other options are inputs and are accepted. */
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *options, void **values)
{
    DAPI("cuModuleLoadDataEx", NULL);
    if (!m || !image || (n && (!options || !values))) DRET(CUDA_ERROR_INVALID_VALUE);
    char *info = NULL, *error = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (options[i] == CU_JIT_INFO_LOG_BUFFER) info = values[i];
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER) error = values[i];
    }
    for (unsigned i = 0; i < n; i++) {
        switch (options[i]) {
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
            if (info && (uintptr_t)values[i]) info[0] = 0;
            values[i] = (void *)(uintptr_t)0;
            break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
            if (error && (uintptr_t)values[i]) error[0] = 0;
            values[i] = (void *)(uintptr_t)0;
            break;
        case CU_JIT_WALL_TIME: {
            float ms = 0.0f;
            memcpy(&values[i], &ms, sizeof ms);
            break;
        }
        default: break;
        }
    }
    static int token;
    *m = (CUmodule)&token;
    DRET(CUDA_SUCCESS);
}
CUresult cuModuleUnload(CUmodule m)
{
    (void)m;
    DAPI("cuModuleUnload", NULL);
    DRET(CUDA_SUCCESS);
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    (void)m;
    DAPI("cuModuleGetFunction", NULL);
    if (!f || !name) DRET(CUDA_ERROR_INVALID_VALUE);
    void *fn = sg_func_handle(name);
    if (!fn) DRET(CUDA_ERROR_OUT_OF_MEMORY);
    *f = (CUfunction)fn;
    DRET(CUDA_SUCCESS);
}

static CUresult launch(const char *api, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned smem, CUstream st, int pt, int coop)
{
    const char *fname = sg_func_name(f);
    const char *name = fname ? fname : "unknown_kernel";
    DAPI(api, name);
    if (!fname) DRET(CUDA_ERROR_INVALID_HANDLE);
    static uint64_t launch_ns = UINT64_MAX;
    if (launch_ns == UINT64_MAX) {
        const char *v = getenv("SIMGPU_LAUNCH_NS");
        launch_ns = v && *v ? strtoull(v, NULL, 10) : 2500;
    }
    for (uint64_t t0 = sg_now_ns(); sg_now_ns() - t0 < launch_ns;) {
    }
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) DRET(CUDA_ERROR_INVALID_HANDLE);
    sg_kernel_desc k;
    memset(&k, 0, sizeof k);
    k.name = name;
    k.grid[0] = gx, k.grid[1] = gy, k.grid[2] = gz;
    k.block[0] = bx, k.block[1] = by, k.block[2] = bz;
    k.dynamic_smem = smem;
    k.correlation = _c.correlation;
    k.launch_type = coop;
    sg_enqueue_kernel(s, &k);
    DRET(CUDA_SUCCESS);
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, CUstream st, void **params, void **extra)
{
    (void)params, (void)extra;
    return launch("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, smem, st, 0, 0);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned smem, CUstream st, void **params, void **extra)
{
    (void)params, (void)extra;
    return launch("cuLaunchKernel_ptsz", f, gx, gy, gz, bx, by, bz, smem, st, 1, 0);
}
static int cfg_coop(const CUlaunchConfig *c)
{
    for (unsigned i = 0; c->attrs && i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && c->attrs[i].value.cooperative) return 1;
    return 0;
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    (void)params, (void)extra;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    return launch("cuLaunchKernelEx", f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                  c->blockDimZ, c->sharedMemBytes, c->hStream, 0, cfg_coop(c));
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    (void)params, (void)extra;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    return launch("cuLaunchKernelEx_ptsz", f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                  c->blockDimZ, c->sharedMemBytes, c->hStream, 1, cfg_coop(c));
}

/* memory */
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
    DAPI("cuMemAlloc_v2", NULL);
    if (!p) DRET(CUDA_ERROR_INVALID_VALUE);
    void *m = NULL;
    int r = sg_dev_alloc(&m, size, sg_current_device(), SG_MEM_DEVICE, _c.correlation, 0, 0);
    *p = (CUdeviceptr)(uintptr_t)m;
    DRET((CUresult)r);
}
CUresult cuMemFree_v2(CUdeviceptr p)
{
    DAPI("cuMemFree_v2", NULL);
    DRET((CUresult)sg_dev_free((void *)(uintptr_t)p, _c.correlation, 0, 0));
}
CUresult cuMemGetInfo_v2(size_t *fr, size_t *tot)
{
    DAPI("cuMemGetInfo_v2", NULL);
    int d = sg_current_device();
    if (fr) *fr = (size_t)(sg_device_capacity(d) - sg_device_used(d));
    if (tot) *tot = (size_t)sg_device_capacity(d);
    DRET(CUDA_SUCCESS);
}
static CUresult copy(const char *api, void *dst, const void *src, size_t n, int kind, CUstream st, int pt, int async)
{
    DAPI(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) DRET(CUDA_ERROR_INVALID_HANDLE);
    mem_ent e;
    int pinned = 0;
    const void *host = kind == SG_COPY_HTOD ? src : kind == SG_COPY_DTOH ? dst : NULL;
    if (host && sg_mem_find(host, &e) && (e.kind == SG_MEM_PINNED || e.kind == SG_MEM_REGISTERED)) pinned = 1;
    if (n) memmove(dst, src, n);
    sg_copy_desc c;
    memset(&c, 0, sizeof c);
    c.copy_kind = kind;
    c.bytes = n;
    c.host_pinned = pinned;
    c.is_async = async;
    c.correlation = _c.correlation;
    int wait = !async || (host && !pinned);
    sg_op *op = sg_enqueue_copy(s, &c, wait);
    if (wait) {
        sg_op_wait(op);
        sg_op_release(op);
    }
    DRET(CUDA_SUCCESS);
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return copy("cuMemcpyHtoD_v2", (void *)(uintptr_t)dst, src, n, SG_COPY_HTOD, NULL, 0, 0);
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return copy("cuMemcpyDtoH_v2", dst, (const void *)(uintptr_t)src, n, SG_COPY_DTOH, NULL, 0, 0);
}
static int classify_ptr(CUdeviceptr p)
{
    mem_ent e;
    return sg_mem_find((const void *)(uintptr_t)p, &e) &&
           sg_mem_kind_is_device(e.kind);
}
static int unified_kind(CUdeviceptr dst, CUdeviceptr src)
{
    int d = classify_ptr(dst), s = classify_ptr(src);
    return d && s ? SG_COPY_DTOD : s ? SG_COPY_DTOH : d ? SG_COPY_HTOD : SG_COPY_HTOH;
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
    return copy("cuMemcpyAsync", (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, unified_kind(dst, src), st,
                0, 1);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
    return copy("cuMemcpyAsync_ptsz", (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, unified_kind(dst, src),
                st, 1, 1);
}

/* streams */
CUresult cuStreamCreate(CUstream *ps, unsigned flags)
{
    DAPI("cuStreamCreate", NULL);
    if (!ps) DRET(CUDA_ERROR_INVALID_VALUE);
    *ps = (CUstream)sg_stream_create(sg_current_device(), flags & CU_STREAM_NON_BLOCKING, 0);
    DRET(*ps ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
}
CUresult cuStreamDestroy_v2(CUstream st)
{
    DAPI("cuStreamDestroy_v2", NULL);
    sg_stream *s = sg_stream_resolve(st, 0);
    if (!s || !st) DRET(CUDA_ERROR_INVALID_HANDLE);
    sg_stream_destroy(s);
    DRET(CUDA_SUCCESS);
}
static CUresult stream_sync(const char *api, CUstream st, int pt)
{
    DAPI(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) DRET(CUDA_ERROR_INVALID_HANDLE);
    sg_stream_synchronize(s);
    DRET(CUDA_SUCCESS);
}
CUresult cuStreamSynchronize(CUstream st) { return stream_sync("cuStreamSynchronize", st, 0); }
CUresult cuStreamSynchronize_ptsz(CUstream st) { return stream_sync("cuStreamSynchronize_ptsz", st, 1); }
/* CUDA_ERROR_NOT_READY while work queued on the stream has not completed */
static CUresult stream_query(const char *api, CUstream st, int pt)
{
    DAPI(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) DRET(CUDA_ERROR_INVALID_HANDLE);
    DRET(sg_stream_idle(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}
CUresult cuStreamQuery(CUstream st) { return stream_query("cuStreamQuery", st, 0); }
CUresult cuStreamQuery_ptsz(CUstream st);
CUresult cuStreamQuery_ptsz(CUstream st) { return stream_query("cuStreamQuery_ptsz", st, 1); }

/* profiler control (cudaProfiler.h): marks for a profiler's capture range, always CUDA_SUCCESS; a
 * `profiler` ground-truth line, as the runtime's cudaProfilerStart / Stop write */
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
static CUresult profiler_mark(const char *api, const char *op)
{
    DAPI(api, NULL);
    if (!g_inited) DRET(CUDA_ERROR_NOT_INITIALIZED);
    char fields[32];
    snprintf(fields, sizeof fields, "\"op\":\"%s\"", op);
    sg_truth_host_line("profiler", sg_current_device(), -1, _c.correlation, fields);
    DRET(CUDA_SUCCESS);
}
CUresult cuProfilerStart(void) { return profiler_mark("cuProfilerStart", "start"); }
CUresult cuProfilerStop(void) { return profiler_mark("cuProfilerStop", "stop"); }

/* errors */
static const struct { CUresult r; const char *name, *desc; } g_errs[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
};
CUresult cuGetErrorString(CUresult e, const char **s)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof g_errs / sizeof g_errs[0]; i++)
        if (g_errs[i].r == e) {
            *s = g_errs[i].desc;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGetErrorName(CUresult e, const char **s)
{
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof g_errs / sizeof g_errs[0]; i++)
        if (g_errs[i].r == e) {
            *s = g_errs[i].name;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* cuGetProcAddress, as NVIDIA's: the symbol is a base name, the version picks its ABI and flag
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (2) the _ptsz / _ptds twin where there is one.
 * g_abis lists the base names with more than one ABI (cudaTypedefs.h: PFN_<base>_v<version>, valid
 * up to the next version) and where each starts: the caller gets the newest ABI not above its
 * version, nothing (VERSION_NOT_SUFFICIENT) below the first; sym NULL is an ABI this mock does not
 * implement. Any other name is the function exported under it. Not found: CUDA_SUCCESS with *pfn
 * NULL and the reason in the status, as cuda.h documents. */
static const struct {
    const char *base;
    int version;
    const char *sym;
} g_abis[] = {
    {"cuGetProcAddress", 11030, "cuGetProcAddress"},
    {"cuGetProcAddress", 12000, "cuGetProcAddress_v2"},
    {"cuCtxSynchronize", 2000, "cuCtxSynchronize"},
    {"cuCtxSynchronize", 13000, "cuCtxSynchronize_v2"},
    {"cuCtxGetDevice", 2000, "cuCtxGetDevice"},
    {"cuCtxGetDevice", 13000, "cuCtxGetDevice_v2"},
    {"cuCtxCreate", 2000, "cuCtxCreate"},
    {"cuCtxCreate", 3020, "cuCtxCreate_v2"},
    {"cuCtxCreate", 11040, "cuCtxCreate_v3"},
    {"cuCtxCreate", 12050, "cuCtxCreate_v4"},
    {"cuCtxDestroy", 2000, NULL},
    {"cuCtxDestroy", 4000, "cuCtxDestroy_v2"},
    {"cuDevicePrimaryCtxRelease", 7000, NULL},
    {"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2"},
    {"cuDeviceTotalMem", 2000, NULL},
    {"cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2"},
    {"cuMemAlloc", 2000, NULL},
    {"cuMemAlloc", 3020, "cuMemAlloc_v2"},
    {"cuMemFree", 2000, NULL},
    {"cuMemFree", 3020, "cuMemFree_v2"},
    {"cuMemGetInfo", 2000, NULL},
    {"cuMemGetInfo", 3020, "cuMemGetInfo_v2"},
    {"cuMemcpyHtoD", 2000, NULL},
    {"cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2"},
    {"cuMemcpyDtoH", 2000, NULL},
    {"cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2"},
    {"cuStreamDestroy", 2000, NULL},
    {"cuStreamDestroy", 4000, "cuStreamDestroy_v2"},
};
static void *self_handle(void)
{
    static void *h;
    if (!h) {
        Dl_info info;
        /* The address of a static function: an exported one (cuInit) may be interposed by a preload. */
        if (dladdr((void *)self_handle, &info) && info.dli_fname) h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    }
    return h;
}
static void *lookup(const char *sym, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *h = self_handle();
    if (!h || !sym) return NULL;
    const char *name = sym;
    int listed = 0, best = -1;
    for (size_t i = 0; i < sizeof g_abis / sizeof g_abis[0]; i++) {
        if (strcmp(g_abis[i].base, sym) != 0) continue;
        listed = 1;
        if (g_abis[i].version <= version && (best < 0 || g_abis[i].version > g_abis[best].version)) best = (int)i;
    }
    if (listed) {
        if (best < 0) {
            *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            return NULL;
        }
        name = g_abis[best].sym;
        if (!name) return NULL;
    }
    char buf[256];
    void *p = NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        snprintf(buf, sizeof buf, "%s_ptsz", name);
        p = dlsym(h, buf);
        if (!p) {
            snprintf(buf, sizeof buf, "%s_ptds", name);
            p = dlsym(h, buf);
        }
    }
    if (!p) p = dlsym(h, name);
    if (p) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return p;
}
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    CUdriverProcAddressQueryResult st;
    *pfn = lookup(symbol, version, flags, &st);
    if (status) *status = st;
    return CUDA_SUCCESS;
}
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
