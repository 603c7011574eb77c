/* profiler: cudaProfilerStart / Stop and cuProfilerStart / Stop succeed every time (also twice in a
 * row), are API records with their own names, write `profiler` ground-truth lines with the call's
 * correlation id, and change nothing else: kernels between and outside them all run and are recorded. */
#include "st_common.h"
#include <cuda.h>
#include <cupti.h>

cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);

static uint32_t g_corr[8];
static int g_ncorr, g_nk;
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 16); *s = 1 << 16; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS) {
        CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_nk++;
        int rt = r->kind == CUPTI_ACTIVITY_KIND_RUNTIME && (a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000 ||
                                                            a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
        int drv = r->kind == CUPTI_ACTIVITY_KIND_DRIVER && (a->cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart ||
                                                            a->cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
        if ((rt || drv) && g_ncorr < 8) g_corr[g_ncorr++] = a->correlationId;
    }
    free(b);
}
static void k(void) {}

int main(void)
{
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    st_register((const void *)k, "_Z12profiled_kerv");
    CK(cudaLaunchKernel((const void *)k, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, 0));
    CK(cudaProfilerStart());
    CK(cudaProfilerStart());
    CK(cudaLaunchKernel((const void *)k, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, 0));
    CK(cudaProfilerStop());
    CK(cudaLaunchKernel((const void *)k, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, 0));
    CK(cuInit(0));
    CK(cuProfilerStart());
    CK(cuProfilerStop());
    CK(cuProfilerStop());
    CK(cudaDeviceSynchronize());
    CK(cuptiActivityFlushAll(1));
    st_truth t = st_truth_load();
    int lines = 0, starts = 0, matched = 0, kernels = 0;
    char op[16];
    for (int i = 0; i < t.n; i++) {
        kernels += st_is(t.lines[i], "kernel");
        if (!st_is(t.lines[i], "profiler")) continue;
        lines++;
        st_str(t.lines[i], "op", op, sizeof op);
        starts += !strcmp(op, "start");
        long long c = st_num(t.lines[i], "correlation");
        for (int j = 0; j < g_ncorr; j++) matched += c == g_corr[j];
    }
    CHECK(lines == 6 && starts == 3, "profiler lines %d (starts %d)", lines, starts);
    CHECK(g_ncorr == 6 && matched == 6, "API records %d, truth lines with their correlation %d", g_ncorr, matched);
    CHECK(kernels == 3 && g_nk == 3, "kernels: truth %d, CUPTI %d", kernels, g_nk);
    printf("profiler: lines=%d api_records=%d matched=%d kernels=%d failures=%d\n", lines, g_ncorr, matched, kernels,
           st_failures);
    return st_failures ? 1 : 0;
}
