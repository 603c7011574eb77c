/* tsclock: with a timestamp callback, GPU and API record times are in the callback's timebase. */
#include "st_common.h"
#include <cupti.h>

static uint64_t CUPTIAPI ticks(void) { return st_now() * 3 + 1000000007ull; } /* a "TSC" at 3 GHz */
static CUpti_ActivityKernel9 g_k[64];
static int g_nk;
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 16); *s = 1 << 16; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g_nk < 64) g_k[g_nk++] = *(CUpti_ActivityKernel9 *)r;
    free(b);
}
static void k(void) {}

int main(void)
{
    CK(cuptiActivityRegisterTimestampCallback(ticks));
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    st_register((const void *)k, "_Z8gemm_tsv");
    uint64_t ts;
    CK(cuptiGetTimestamp(&ts));
    CHECK(ts > st_now() * 3, "cuptiGetTimestamp in callback timebase");
    for (int i = 0; i < 30; i++) {
        CK(cudaLaunchKernel((const void *)k, (dim3){64, 1, 1}, (dim3){256, 1, 1}, NULL, 0, 0));
        usleep(1000);
    }
    CK(cudaDeviceSynchronize());
    CK(cuptiActivityFlushAll(0));
    st_truth t = st_truth_load();
    double maxerr = 0;
    int matched = 0;
    for (int i = 0; i < t.n; i++) {
        if (!st_is(t.lines[i], "kernel")) continue;
        long long corr = st_num(t.lines[i], "correlation");
        for (int j = 0; j < g_nk; j++)
            if (g_k[j].correlationId == (uint32_t)corr) {
                double want = (double)st_num(t.lines[i], "start_ns") * 3 + 1000000007.0;
                double err = (double)g_k[j].start - want;
                if (err < 0) err = -err;
                if (err > maxerr) maxerr = err;
                double dur = (double)(g_k[j].end - g_k[j].start) / 3.0;
                CHECK(dur > 34268 - 50 && dur < 34268 + 50, "duration %.0f ns", dur);
                matched++;
            }
    }
    CHECK(matched == 30, "matched %d", matched);
    CHECK(maxerr < 3000, "max error %.0f ticks", maxerr);
    printf("tsclock: kernels=%d max_error_ticks=%.0f failures=%d\n", matched, maxerr, st_failures);
    return st_failures ? 1 : 0;
}
