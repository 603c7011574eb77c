/* driver_apis: driver calls JAX/Triton-style programs make at start-up. cuCtxCreate in its four ABIs
 * (cuda.h's names and cuGetProcAddress by version: _v4 is CUDA 13's cuCtxCreate), cuModuleLoadDataEx
 * with JIT log options, cuFuncGetAttribute / cuFuncSetAttribute (shared with the runtime's
 * cudaFuncGetAttributes / cudaFuncSetAttribute), cuPointerGetAttribute / cuPointerGetAttributes on
 * every kind of memory. Kernels launched through the loaded module are in the ground truth. */
#include "st_common.h"
#include <cuda.h>
#include <cupti.h>

static void k_rt(void) {}

int main(void)
{
    CK(cuInit(0));
    CUcontext ctx = NULL, cur = NULL;
    CK(cuCtxCreate_v4(&ctx, NULL, 0, 3));
    CK(cuCtxGetCurrent(&cur));
    uint32_t cid = 0;
    CK(cuptiGetContextId(ctx, &cid));
    CHECK(cur == ctx && cid == 4, "v4 context on device 3: current %d, id %u", cur == ctx, cid);
    CUctxCreateParams params = {0};
    CUexecAffinityParam aff = {CU_EXEC_AFFINITY_TYPE_SM_COUNT, {{66}}};
    params.execAffinityParams = &aff;
    params.numExecAffinityParams = 1;
    CK(cuCtxCreate_v4(&ctx, &params, CU_CTX_SCHED_BLOCKING_SYNC, 1));
    CHECK(cuCtxCreate_v4(&ctx, NULL, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD, 1) == CUDA_ERROR_INVALID_VALUE, "two sched flags");
    CHECK(cuCtxCreate_v4(&ctx, NULL, 0, 99) == CUDA_ERROR_INVALID_DEVICE, "bad device");
    CUctxCigParam cig = {0};
    CUctxCreateParams with_cig = {NULL, 0, &cig};
    CHECK(cuCtxCreate_v4(&ctx, &with_cig, 0, 1) == CUDA_ERROR_NOT_SUPPORTED, "CIG");
    aff.param.smCount.val = 1000;
    CHECK(cuCtxCreate_v3(&ctx, &aff, 1, 0, 1) == CUDA_ERROR_INVALID_VALUE, "more SMs than the device");
    aff.param.smCount.val = 32;
    CK(cuCtxCreate_v3(&ctx, &aff, 1, 0, 2));
    CK(cuCtxCreate(&ctx, 0, 0)); /* cuda.h 12: cuCtxCreate_v2 */
    /* cuGetProcAddress: the ABI by version */
    void *v1 = NULL, *v2 = NULL, *v3 = NULL, *v4 = NULL, *v13 = NULL;
    CUdriverProcAddressQueryResult q;
    CK(cuGetProcAddress("cuCtxCreate", &v1, 2000, 0, &q));
    CK(cuGetProcAddress("cuCtxCreate", &v2, 3020, 0, &q));
    CK(cuGetProcAddress("cuCtxCreate", &v3, 11040, 0, &q));
    CK(cuGetProcAddress("cuCtxCreate", &v4, 12050, 0, &q));
    CK(cuGetProcAddress("cuCtxCreate", &v13, 13000, 0, &q));
    CHECK(v1 && v2 && v3 && v4 && v1 != v2 && v2 != v3 && v3 != v4 && v13 == v4 && v4 == (void *)cuCtxCreate_v4,
          "cuCtxCreate ABIs by version");
    CUresult (*create13)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice) =
        (CUresult(*)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice))v13;
    CK(create13(&ctx, NULL, 0, 0));

    /* a module from PTX with JIT log options: the logs come back empty, the wall time 0 */
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry _Z7jax_addPf(.param .u64 p)\n{\n\tret;\n}\n";
    char info[256] = "stale", error[256] = "stale";
    CUjit_option opts[5] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_WALL_TIME};
    void *vals[5] = {info, (void *)(uintptr_t)sizeof info, error, (void *)(uintptr_t)sizeof error, NULL};
    CUmodule mod;
    CK(cuModuleLoadDataEx(&mod, ptx, 5, opts, vals));
    float wall = -1;
    memcpy(&wall, &vals[4], sizeof wall);
    CHECK(info[0] == 0 && error[0] == 0 && (uintptr_t)vals[1] == 0 && (uintptr_t)vals[3] == 0 && wall == 0.0f,
          "JIT outputs: info '%s' error '%s'", info, error);
    CHECK(cuModuleLoadDataEx(&mod, ptx, 1, NULL, NULL) == CUDA_ERROR_INVALID_VALUE, "options without arrays");
    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, "_Z7jax_addPf"));

    /* function attributes: defaults, settable ones, read-only ones; the runtime sees the same values */
    int v = 0;
    CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    CHECK(v == 1024, "max threads %d", v);
    CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    CHECK(v == 49152, "default dynamic smem %d", v);
    CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200 * 1024));
    CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    CHECK(v == 200 * 1024, "dynamic smem set %d", v);
    CHECK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300 * 1024) == CUDA_ERROR_INVALID_VALUE,
          "past the opt-in maximum");
    CHECK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 64) == CUDA_ERROR_INVALID_VALUE, "read-only");
    CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)&v) == CUDA_ERROR_INVALID_HANDLE, "not a function");
    st_register((const void *)k_rt, "_Z10rt_flashyv");
    CK(cudaFuncSetAttribute((const void *)k_rt, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000));
    CK(cudaFuncSetAttribute((const void *)k_rt, cudaFuncAttributePreferredSharedMemoryCarveout, 50));
    cudaFunction_t rf;
    CK(cudaGetFuncBySymbol(&rf, (const void *)k_rt));
    CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (CUfunction)rf));
    int carve = 0;
    CK(cuFuncGetAttribute(&carve, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, (CUfunction)rf));
    CHECK(v == 100000 && carve == 50, "the runtime's settings through the driver: %d %d", v, carve);
    CK(cuFuncSetAttribute((CUfunction)rf, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    struct cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, (const void *)k_rt));
    CHECK(fa.maxDynamicSharedSizeBytes == 65536 && fa.preferredShmemCarveout == 50 && fa.numRegs == 32,
          "the driver's settings through the runtime: %d %d", fa.maxDynamicSharedSizeBytes, fa.preferredShmemCarveout);
    CHECK(cudaFuncSetAttribute((const void *)k_rt, cudaFuncAttributePreferredSharedMemoryCarveout, 101) == cudaErrorInvalidValue,
          "carveout over 100");
    (void)cudaGetLastError();

    /* pointer attributes */
    CK(cuCtxSetCurrent(ctx)); /* device 0 */
    CUdeviceptr dp;
    CK(cuMemAlloc(&dp, 1 << 20));
    unsigned mt = 0;
    int ord = -1, managed = -1, mapped = -1;
    CUcontext pctx = NULL;
    unsigned long long id1 = 0, id2 = 0;
    CUdeviceptr start = 0;
    size_t range = 0;
    void *hostp = (void *)1;
    CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp + 100));
    CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dp));
    CK(cuPointerGetAttribute(&pctx, CU_POINTER_ATTRIBUTE_CONTEXT, dp));
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dp + 100));
    CK(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dp + 100));
    CK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp));
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, dp));
    CHECK(mt == CU_MEMORYTYPE_DEVICE && ord == 0 && pctx == ctx && start == dp && range == (1 << 20) && managed == 0,
          "device memory: type %u ordinal %d range %zu", mt, ord, range);
    CHECK(cuPointerGetAttribute(&hostp, CU_POINTER_ATTRIBUTE_HOST_POINTER, dp) == CUDA_ERROR_INVALID_VALUE,
          "device memory has no host pointer");
    CUdeviceptr dp2;
    CK(cuMemAlloc(&dp2, 4096));
    CK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp2));
    CHECK(id1 && id2 && id1 != id2, "buffer ids %llu %llu", id1, id2);
    void *pinned;
    CK(cudaMallocHost(&pinned, 4096));
    CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)pinned));
    CK(cuPointerGetAttribute(&hostp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(uintptr_t)pinned));
    CHECK(mt == CU_MEMORYTYPE_HOST && hostp == pinned, "pinned memory: type %u", mt);
    void *um;
    CK(cudaMallocManaged(&um, 4096, cudaMemAttachGlobal));
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)(uintptr_t)um));
    CHECK(managed == 1, "managed");
    static char pageable[64];
    CHECK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)pageable) == CUDA_ERROR_INVALID_VALUE,
          "pageable memory is unknown to CUDA");
    /* pool memory: its pool handle */
    cudaMemPool_t pool, got = NULL;
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    void *pm;
    CK(cudaMallocAsync(&pm, 1 << 16, 0));
    CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, (CUdeviceptr)(uintptr_t)pm));
    CHECK(got == pool, "mempool handle");
    CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, dp));
    CHECK(got == NULL, "no pool for cuMemAlloc memory");
    /* the plural call: no error for an unknown pointer, default values */
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_MAPPED};
    void *data[3] = {&mt, &ord, &mapped};
    mt = 77, mapped = 77;
    CK(cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)pageable));
    CHECK(mt == 0 && mapped == 0 && ord == -2, "defaults: type %u ordinal %d mapped %d", mt, ord, mapped);
    CK(cuPointerGetAttributes(3, attrs, data, dp2));
    CHECK(mt == CU_MEMORYTYPE_DEVICE && ord == 0 && mapped == 1, "plural on device memory");

    /* the module's kernel runs and is in the truth */
    CK(cuLaunchKernel(f, 8, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL));
    CK(cuCtxSynchronize());
    st_truth t = st_truth_load();
    int jax = 0;
    char name[64];
    for (int i = 0; i < t.n; i++)
        if (st_is(t.lines[i], "kernel")) {
            st_str(t.lines[i], "name", name, sizeof name);
            jax += !strcmp(name, "_Z7jax_addPf") && st_num(t.lines[i], "device") == 0;
        }
    CHECK(jax == 1, "module kernel in the truth: %d", jax);
    printf("driver_apis: ctx_abis=4 module_kernels=%d failures=%d\n", jax, st_failures);
    return st_failures ? 1 : 0;
}
