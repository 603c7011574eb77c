/* symbols: module variables registered as nvcc's host code does (__cudaRegisterVar, __cudaRegisterManagedVar)
 * and copied with cudaMemcpyToSymbol / FromSymbol (+ Async), cudaGetSymbolAddress / Size. Checked: the
 * bytes round-trip, each device has its own copy, every copy is a ground-truth memcpy of the right kind,
 * size and pinnedness with the call's correlation (as CUPTI's runtime record has it), the documented errors. */
#include "st_common.h"
#include <cupti.h>

void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext, size_t size,
                       int constant, int global);
void __cudaRegisterManagedVar(void **h, void **hostVarPtrAddress, char *deviceAddress, const char *deviceName,
                              int ext, size_t size, int constant, int global);

/* host shadows of `__device__ float table[64]`, `__constant__ int coeffs[4]`, `__managed__ int counter` */
static float table[64];
static int coeffs[4];
static int *counter_ptr;
static int not_a_symbol;

static uint32_t g_api_corr[16];
static int g_napi;
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 16); *s = 1 << 16; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME && g_napi < 16) {
            CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
            if (a->returnValue == 0 && (a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020 ||
                a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020 ||
                a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020 ||
                a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020))
                g_api_corr[g_napi++] = a->correlationId;
        }
    free(b);
}

int main(void)
{
    void **h = __cudaRegisterFatBinary((void *)(int[4]){0x466243B1, 1, 0, 0});
    __cudaRegisterVar(h, (char *)table, (char *)"table", "table", 0, sizeof table, 0, 0);
    __cudaRegisterVar(h, (char *)coeffs, (char *)"_ZL6coeffs", "_ZL6coeffs", 0, sizeof coeffs, 1, 0);
    __cudaRegisterManagedVar(h, (void **)&counter_ptr, (char *)"counter", "counter", 0, sizeof(int), 0, 0);
    __cudaRegisterFatBinaryEnd(h);
    CHECK(counter_ptr != NULL, "managed variable allocated at registration");
    if (counter_ptr) *counter_ptr = 41;
    struct cudaPointerAttributes pa;
    if (counter_ptr) CK(cudaPointerGetAttributes(&pa, counter_ptr));
    CHECK(counter_ptr && pa.type == cudaMemoryTypeManaged, "managed variable is managed memory");

    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
    float in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = (float)i * 0.5f;
    CK(cudaMemcpyToSymbol(table, in, sizeof in, 0, cudaMemcpyHostToDevice));
    memset(out, 0, sizeof out);
    CK(cudaMemcpyFromSymbol(out, table, sizeof out, 0, cudaMemcpyDeviceToHost));
    CHECK(!memcmp(in, out, sizeof in), "round trip");
    int c4[4] = {1, 2, 3, 4}, back[2] = {0, 0};
    CK(cudaMemcpyToSymbol(coeffs, c4, sizeof c4, 0, cudaMemcpyDefault));
    CK(cudaMemcpyFromSymbol(back, coeffs, sizeof back, 2 * sizeof(int), cudaMemcpyDefault));
    CHECK(back[0] == 3 && back[1] == 4, "offset read %d %d", back[0], back[1]);
    size_t sz = 0;
    CK(cudaGetSymbolSize(&sz, table));
    CHECK(sz == sizeof table, "symbol size %zu", sz);
    void *addr = NULL;
    CK(cudaGetSymbolAddress(&addr, table));
    CK(cudaPointerGetAttributes(&pa, addr));
    CHECK(pa.type == cudaMemoryTypeDevice && pa.device == 0, "symbol address is device memory");
    float first = -1;
    CK(cudaMemcpy(&first, (char *)addr + 4, sizeof first, cudaMemcpyDeviceToHost));
    CHECK(first == 0.5f, "read through the symbol address: %f", first);
    CHECK(cudaFree(addr) == cudaErrorInvalidValue, "cudaFree of a module variable");
    /* device to device into a symbol, async from pinned memory */
    void *dbuf, *pinned;
    CK(cudaMalloc(&dbuf, sizeof in));
    CK(cudaMemcpy(dbuf, in, sizeof in, cudaMemcpyHostToDevice));
    CK(cudaMemcpyToSymbol(table, dbuf, 8 * sizeof(float), 8 * sizeof(float), cudaMemcpyDeviceToDevice));
    CK(cudaMallocHost(&pinned, sizeof in));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaMemcpyToSymbolAsync(table, pinned, sizeof in, 0, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyFromSymbolAsync(pinned, table, sizeof in, 0, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    /* errors */
    CHECK(cudaMemcpyToSymbol(table, in, sizeof in, 0, cudaMemcpyDeviceToHost) == cudaErrorInvalidMemcpyDirection, "direction");
    CHECK(cudaMemcpyFromSymbol(out, table, 4, 0, cudaMemcpyHostToDevice) == cudaErrorInvalidMemcpyDirection, "direction back");
    CHECK(cudaMemcpyToSymbol(&not_a_symbol, in, 4, 0, cudaMemcpyHostToDevice) == cudaErrorInvalidSymbol, "unknown symbol");
    CHECK(cudaMemcpyToSymbol(table, in, sizeof in, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "past the end");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "last error");
    /* device 1 has its own copy, zero-filled */
    CK(cudaSetDevice(1));
    memset(out, 0xff, sizeof out);
    CK(cudaMemcpyFromSymbol(out, table, sizeof out, 0, cudaMemcpyDeviceToHost));
    CHECK(out[1] == 0.0f && out[63] == 0.0f, "device 1's copy");
    CK(cudaSetDevice(0));
    CK(cuptiActivityFlushAll(1));

    /* the truth: one memcpy per successful copy (6 through symbols, 2 plain), with the call's correlation */
    st_truth t = st_truth_load();
    int copies = 0, with_api_corr = 0, pinned_async = 0, dtod = 0;
    char kind[16];
    for (int i = 0; i < t.n; i++) {
        if (!st_is(t.lines[i], "memcpy")) continue;
        copies++;
        long long corr = st_num(t.lines[i], "correlation");
        for (int j = 0; j < g_napi; j++) with_api_corr += corr == g_api_corr[j];
        st_str(t.lines[i], "copy_kind", kind, sizeof kind);
        if (st_num(t.lines[i], "host_pinned") == 1) pinned_async++;
        if (!strcmp(kind, "DtoD")) dtod += st_num(t.lines[i], "bytes") == 32;
    }
    /* symbol copies: 2 + 2 + 1 DtoD + 2 async + 1 on device 1 = 8; plain: the read through the address, dbuf fill */
    CHECK(copies == 10, "truth copies %d", copies);
    CHECK(g_napi == 8 && with_api_corr == 8, "symbol copies with their call's correlation: %d of %d calls", with_api_corr,
          g_napi);
    CHECK(pinned_async == 2 && dtod == 1, "pinned async %d, DtoD %d", pinned_async, dtod);
    printf("symbols: truth_copies=%d symbol_calls=%d correlated=%d failures=%d\n", copies, g_napi, with_api_corr,
           st_failures);
    return st_failures ? 1 : 0;
}
