/* callbacks: one subscriber; ENTER/EXIT pairs with the activity records' correlation ids. */
#include "st_common.h"
#include <cupti.h>

static int g_enter, g_exit, g_sym_ok, g_corrdata_ok, g_ret_ok, g_launch_exit;
static uint32_t g_launch_corr[64];
static void CUPTIAPI cb(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
    (void)ud;
    const CUpti_CallbackData *d = data;
    if (dom != CUPTI_CB_DOMAIN_RUNTIME_API) return;
    if (d->callbackSite == CUPTI_API_ENTER) {
        g_enter++;
        *d->correlationData = 42000 + d->correlationId;
        return;
    }
    g_exit++;
    if (*d->correlationData == 42000 + d->correlationId) g_corrdata_ok++;
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
        if (d->symbolName && strcmp(d->symbolName, "_Z13my_cb_kernelv") == 0 && !strcmp(d->functionName, "cudaLaunchKernel"))
            g_sym_ok++;
        if (g_launch_exit < 64) g_launch_corr[g_launch_exit++] = d->correlationId;
    }
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020 && *(cudaError_t *)d->functionReturnValue == cudaErrorInvalidDevice)
        g_ret_ok++;
}

static uint32_t g_kcorr[64];
static int g_nk;
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 16); *s = 1 << 16; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g_nk < 64) g_kcorr[g_nk++] = ((CUpti_ActivityKernel9 *)r)->correlationId;
    free(b);
}
static void k(void) {}

int main(void)
{
    CUpti_SubscriberHandle sub, sub2;
    CK(cuptiSubscribe(&sub, cb, NULL));
    CHECK(cuptiSubscribe(&sub2, cb, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "second subscriber");
    CK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API));
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    st_register((const void *)k, "_Z13my_cb_kernelv");
    for (int i = 0; i < 20; i++) CK(cudaLaunchKernel((const void *)k, (dim3){1, 1, 1}, (dim3){64, 1, 1}, NULL, 0, 0));
    CHECK(cudaSetDevice(77) == cudaErrorInvalidDevice, "set device");
    CK(cudaDeviceSynchronize());
    CK(cuptiActivityFlushAll(0));
    int same = 0;
    for (int i = 0; i < g_launch_exit; i++)
        for (int j = 0; j < g_nk; j++) same += g_launch_corr[i] == g_kcorr[j];
    CHECK(g_enter == g_exit && g_enter >= 22, "enter %d exit %d", g_enter, g_exit);
    CHECK(g_sym_ok == 20, "symbolName ok %d", g_sym_ok);
    CHECK(g_corrdata_ok == g_exit, "correlationData %d", g_corrdata_ok);
    CHECK(g_ret_ok == 1, "functionReturnValue");
    CHECK(same == 20, "launch callbacks matching kernel records %d", same);
    CK(cuptiUnsubscribe(sub));
    CK(cuptiSubscribe(&sub2, cb, NULL));
    printf("callbacks: enter=%d exit=%d symbol=%d matched_kernels=%d second_subscriber=39 failures=%d\n", g_enter,
           g_exit, g_sym_ok, same, st_failures);
    return st_failures ? 1 : 0;
}
