/* signals: a 100 us interval timer whose handler calls the CUDA runtime (cudaSetDevice,
 * cudaGetDevice) while the main thread launches kernels and copies with CUPTI RUNTIME activity
 * enabled: the handler may interrupt the mock inside its CUPTI staging (lock held, realloc), which
 * must not deadlock, and the handler's API records must still be delivered. */
#include "st_common.h"
#include <cupti.h>
#include <signal.h>
#include <sys/time.h>

static volatile sig_atomic_t g_handler_calls;
static uint64_t g_setdevice_records;
static void on_alarm(int sig)
{
    (void)sig;
    int d = -1;
    cudaSetDevice(0);
    cudaGetDevice(&d);
    g_handler_calls++;
}
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 20); *s = 1 << 20; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME &&
            ((CUpti_ActivityAPI *)r)->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020)
            g_setdevice_records++;
    free(b);
}
static void k_elem(void) {}

int main(void)
{
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    st_register((const void *)k_elem, "_Z19elementwise_kernelPf");
    void *d = NULL;
    char host[256];
    CK(cudaMalloc(&d, sizeof host));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 100}, {0, 100}};
    setitimer(ITIMER_REAL, &it, NULL);
    int launches = 0;
    /* at least 0.4 s and 200 interruptions (a loaded host coalesces timer signals), at most 20 s */
    uint64_t t0 = st_now();
    for (; (st_now() - t0 < 400000000ull || g_handler_calls < 200) && st_now() - t0 < 20000000000ull; launches++) {
        CK(cudaLaunchKernel((const void *)k_elem, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, 0));
        CK(cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, 0));
        if (launches % 64 == 0) CK(cudaDeviceSynchronize());
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    CK(cudaDeviceSynchronize());
    CK(cuptiActivityFlushAll(1));
    size_t dropped = 1;
    CK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
    CHECK(g_handler_calls >= 200, "only %d handler calls", (int)g_handler_calls);
    CHECK(g_setdevice_records + dropped == (uint64_t)g_handler_calls, "cudaSetDevice records %llu + dropped %zu "
          "!= handler calls %d", (unsigned long long)g_setdevice_records, dropped, (int)g_handler_calls);
    printf("signals: launches=%d handler_calls=%d setdevice_records=%llu dropped=%zu failures=%d\n", launches,
           (int)g_handler_calls, (unsigned long long)g_setdevice_records, dropped, st_failures);
    return st_failures ? 1 : 0;
}
