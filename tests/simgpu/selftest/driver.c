/* driver: cuInit/contexts/modules, cuLaunchKernel[Ex], cuGetProcAddress, DRIVER records. */
#include "st_common.h"
#include <cuda.h>
#include <cupti.h>

static int g_drv_launch, g_nk;
static char g_name[128];
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 16); *s = 1 << 16; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER && (((CUpti_ActivityAPI *)r)->cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel ||
                                                      ((CUpti_ActivityAPI *)r)->cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ||
                                                      ((CUpti_ActivityAPI *)r)->cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz))
            g_drv_launch++;
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            g_nk++;
            snprintf(g_name, sizeof g_name, "%s", ((CUpti_ActivityKernel9 *)r)->name);
        }
    }
    free(b);
}

int main(void)
{
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    CK(cuInit(0));
    int n = 0;
    CK(cuDeviceGetCount(&n));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 2));
    char name[128];
    CK(cuDeviceGetName(name, sizeof name, dev));
    CHECK(strstr(name, "simulated") != NULL, "name %s", name);
    CUcontext ctx, cur;
    CK(cuCtxCreate(&ctx, 0, dev));
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == ctx, "current context");
    uint32_t cid = 0;
    CK(cuptiGetContextId(ctx, &cid));
    CHECK(cid == 3, "context id %u", cid);
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, "fake"));
    CK(cuModuleGetFunction(&f, m, "_Z9drv_gemmPf"));
    CUstream st;
    CK(cuStreamCreate(&st, 0));
    CK(cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, st, NULL, NULL));
    CUlaunchConfig cfg = {0};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32, cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = st;
    CK(cuLaunchKernelEx(&cfg, f, NULL, NULL));
    void *pfn = NULL;
    CUdriverProcAddressQueryResult qr;
    CK(cuGetProcAddress("cuLaunchKernel", &pfn, 12090, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &qr));
    CHECK(pfn != NULL && qr == CU_GET_PROC_ADDRESS_SUCCESS, "proc address");
    CK(((CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **,
                     void **))pfn)(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    void *ma = NULL;
    CK(cuGetProcAddress("cuMemAlloc", &ma, 12090, 0, NULL));
    CUdeviceptr dp = 0;
    CK(((CUresult(*)(CUdeviceptr *, size_t))ma)(&dp, 4096));
    char buf[4096] = {5};
    CK(cuMemcpyHtoD(dp, buf, sizeof buf));
    void *rt_pfn = NULL;
    CK(cudaGetDriverEntryPoint("cuMemFree", &rt_pfn, cudaEnableDefault, NULL));
    CHECK(rt_pfn != NULL, "cudaGetDriverEntryPoint");
    CK(cuStreamSynchronize(st));
    CK(cuCtxSynchronize());
    CK(cuMemFree(dp));
    const char *es = NULL;
    CK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &es));
    CK(cuptiActivityFlushAll(0));
    CHECK(g_nk == 3 && g_drv_launch == 3, "kernels %d driver launch records %d", g_nk, g_drv_launch);
    CHECK(strcmp(g_name, "_Z9drv_gemmPf") == 0, "kernel name %s", g_name);
    printf("driver: devices=%d kernels=%d launch_records=%d context_id=%u failures=%d\n", n, g_nk, g_drv_launch, cid,
           st_failures);
    return st_failures ? 1 : 0;
}
