/* fidelity: read the mock's activity buffers with the REAL cupti_activity.h structs and
 * cuptiActivityGetNextRecord, and find every kernel/memcpy/memset the ground truth lists, with its
 * exact start, end, stream, device, correlation, name and grid. */
#include "st_common.h"
#include <cupti.h>
#include <pthread.h>

#define BUF_SIZE (32 * 1024) /* small: forces many buffers */
#define MAXREC 20000

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_ActivityKernel9 g_k[MAXREC];
static int g_nk;
static CUpti_ActivityMemcpy6 g_mc[MAXREC];
static int g_nmc;
static CUpti_ActivityMemset4 g_ms[MAXREC];
static int g_nms;
static CUpti_ActivityAPI g_api[MAXREC];
static int g_napi;
static CUpti_ActivityExternalCorrelation g_ext[MAXREC];
static int g_next;
static int g_sync, g_mem, g_overhead, g_buffers, g_requests, g_other;
static pthread_t g_main;
static int g_on_main_thread;
static uint64_t g_last_end; /* GPU records arrive in completion order */
static int g_order_violations;

static void CUPTIAPI req(uint8_t **buf, size_t *size, size_t *max)
{
    *buf = aligned_alloc(8, BUF_SIZE);
    *size = BUF_SIZE;
    *max = 0;
    __atomic_add_fetch(&g_requests, 1, __ATOMIC_RELAXED);
}

static void CUPTIAPI done(CUcontext ctx, uint32_t sid, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx, (void)sid, (void)size;
    pthread_mutex_lock(&g_lock);
    if (pthread_equal(pthread_self(), g_main)) g_on_main_thread++;
    g_buffers++;
    CUpti_Activity *r = NULL;
    CUptiResult st;
    while ((st = cuptiActivityGetNextRecord(buf, valid, &r)) == CUPTI_SUCCESS) {
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            CUpti_ActivityKernel9 *k = (CUpti_ActivityKernel9 *)r;
            if (g_nk < MAXREC) g_k[g_nk++] = *k;
            if (k->end < g_last_end) g_order_violations++;
            g_last_end = k->end;
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY:
            if (g_nmc < MAXREC) g_mc[g_nmc++] = *(CUpti_ActivityMemcpy6 *)r;
            break;
        case CUPTI_ACTIVITY_KIND_MEMSET:
            if (g_nms < MAXREC) g_ms[g_nms++] = *(CUpti_ActivityMemset4 *)r;
            break;
        case CUPTI_ACTIVITY_KIND_RUNTIME:
            if (g_napi < MAXREC) g_api[g_napi++] = *(CUpti_ActivityAPI *)r;
            break;
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
            if (g_next < MAXREC) g_ext[g_next++] = *(CUpti_ActivityExternalCorrelation *)r;
            break;
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: g_sync++; break;
        case CUPTI_ACTIVITY_KIND_MEMORY2: g_mem++; break;
        case CUPTI_ACTIVITY_KIND_OVERHEAD: g_overhead++; break;
        default: g_other++; break;
        }
    }
    if (st != CUPTI_ERROR_MAX_LIMIT_REACHED) {
        fprintf(stderr, "FAIL: GetNextRecord ended with %d, not MAX_LIMIT_REACHED\n", st);
        st_failures++;
    }
    pthread_mutex_unlock(&g_lock);
    free(buf);
}

static void k_gemm(void) {}
static void k_flash(void) {}
static void k_softmax(void) {}
static void k_misc(void) {}

int main(void)
{
    g_main = pthread_self();
    uint32_t ver = 0;
    CK(cuptiGetVersion(&ver));
    CHECK(ver == 28, "cupti version %u", ver);
    CK(cuptiActivityRegisterCallbacks(req, done));
    CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME,
                                  CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                  CUPTI_ACTIVITY_KIND_MEMORY2,           CUPTI_ACTIVITY_KIND_OVERHEAD};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) CK(cuptiActivityEnable(kinds[i]));
    st_register((const void *)k_gemm, "_Z17ampere_sgemm_128x64PKfS0_Pf");
    st_register((const void *)k_flash, "_ZN5flash21flash_fwd_kernel_implEv");
    st_register((const void *)k_softmax, "_Z14softmax_kernelPf");
    st_register((const void *)k_misc, "_Z11misc_kernelv");
    const void *fns[] = {(const void *)k_gemm, (const void *)k_flash, (const void *)k_softmax, (const void *)k_misc};
    cudaStream_t s[3];
    CK(cudaStreamCreate(&s[0]));
    CK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithPriority(&s[2], cudaStreamNonBlocking, -1));
    void *d = NULL, *pinned = NULL;
    CK(cudaMalloc(&d, 8 << 20));
    CK(cudaMallocHost(&pinned, 1 << 20));
    char *pageable = malloc(1 << 20);
    memset(pageable, 1, 1 << 20);
    int launched = 0;
    for (int step = 0; step < 60; step++) {
        CK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1000 + (uint64_t)step));
        for (int i = 0; i < 8; i++) {
            int st = (step + i) % 4; /* 3 = legacy default stream */
            cudaStream_t str = st == 3 ? 0 : s[st];
            CK(cudaLaunchKernel(fns[i % 4], (dim3){(unsigned)(1 + i * 7), 1, 1}, (dim3){128, 1, 1}, NULL, 0, str));
            launched++;
        }
        uint64_t last = 0;
        CK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last));
        CHECK(last == 1000 + (uint64_t)step, "popped %llu", (unsigned long long)last);
        if (step % 10 == 0) {
            CK(cudaMemcpyAsync(d, pinned, 1 << 20, cudaMemcpyHostToDevice, s[1]));
            CK(cudaMemcpyAsync(d, pageable, 1 << 20, cudaMemcpyHostToDevice, s[0]));
            CK(cudaMemsetAsync(d, 0, 8 << 20, s[2]));
        }
        if (step % 20 == 0) CK(cudaStreamSynchronize(s[0]));
        if (step == 30) CK(cuptiActivityFlushAll(0)); /* mid-run flush */
    }
    uint64_t dummy;
    CHECK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &dummy) ==
              CUPTI_ERROR_QUEUE_EMPTY, "pop on empty stack");
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    CK(cudaFreeHost(pinned));
    CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    size_t dropped = 99;
    CK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
    CHECK(dropped == 0, "dropped %zu", dropped);

    st_truth t = st_truth_load();
    int tk = 0, matched = 0, tcopy = 0, copy_matched = 0;
    for (int i = 0; i < t.n; i++) {
        const char *l = t.lines[i];
        long long corr = st_num(l, "correlation"), start = st_num(l, "start_ns"), end = st_num(l, "end_ns");
        long long stream = st_num(l, "stream"), dev = st_num(l, "device");
        if (st_is(l, "kernel")) {
            tk++;
            char name[256];
            st_str(l, "name", name, sizeof name);
            int found = 0;
            for (int j = 0; j < g_nk; j++)
                if (g_k[j].correlationId == (uint32_t)corr) {
                    found = 1;
                    CHECK((long long)g_k[j].start == start && (long long)g_k[j].end == end, "kernel %lld times", corr);
                    CHECK((long long)g_k[j].streamId == stream && (long long)g_k[j].deviceId == dev &&
                              g_k[j].contextId == (uint32_t)dev + 1,
                          "kernel %lld stream/device", corr);
                    CHECK(strcmp(g_k[j].name, name) == 0, "kernel %lld name %s vs %s", corr, g_k[j].name, name);
                    char grid[64];
                    snprintf(grid, sizeof grid, "\"grid\":[%d,%d,%d]", g_k[j].gridX, g_k[j].gridY, g_k[j].gridZ);
                    CHECK(strstr(l, grid) != NULL, "kernel %lld grid", corr);
                    matched += (long long)g_k[j].start == start && (long long)g_k[j].end == end;
                }
            CHECK(found, "truth kernel correlation %lld not in CUPTI", corr);
        } else if (st_is(l, "memcpy") || st_is(l, "memset")) {
            tcopy++;
            int is_set = st_is(l, "memset");
            for (int j = 0; j < (is_set ? g_nms : g_nmc); j++) {
                uint32_t c = is_set ? g_ms[j].correlationId : g_mc[j].correlationId;
                uint64_t s0 = is_set ? g_ms[j].start : g_mc[j].start, e0 = is_set ? g_ms[j].end : g_mc[j].end;
                if (c == (uint32_t)corr && (long long)s0 == start && (long long)e0 == end) copy_matched++;
            }
        }
    }
    /* every kernel record has a runtime API record with the same correlation, and the launches made
     * under a pushed external id have an ExternalCorrelation record for it */
    int api_ok = 0, ext_ok = 0;
    for (int j = 0; j < g_nk; j++) {
        for (int a = 0; a < g_napi; a++)
            if (g_api[a].correlationId == g_k[j].correlationId &&
                g_api[a].cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 && g_api[a].end <= g_k[j].start + 1000000000ull) {
                api_ok++;
                break;
            }
        for (int e = 0; e < g_next; e++)
            if (g_ext[e].correlationId == g_k[j].correlationId && g_ext[e].externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 &&
                g_ext[e].externalId >= 1000 && g_ext[e].externalId < 1060) {
                ext_ok++;
                break;
            }
    }
    CHECK(tk == launched, "truth kernels %d, launched %d", tk, launched);
    CHECK(g_nk == launched, "CUPTI kernels %d, launched %d", g_nk, launched);
    CHECK(matched == tk, "matched %d of %d", matched, tk);
    CHECK(tcopy == 18 && copy_matched == 18, "copies: truth %d matched %d", tcopy, copy_matched);
    CHECK(api_ok == g_nk, "kernels with a launch API record: %d", api_ok);
    CHECK(ext_ok == g_nk, "kernels with an external id: %d", ext_ok);
    CHECK(g_order_violations == 0, "%d kernel records out of completion order", g_order_violations);
    CHECK(g_sync >= 4, "sync records %d", g_sync);
    CHECK(g_mem == 4, "memory records %d", g_mem);
    CHECK(g_buffers > 3, "buffers %d", g_buffers);
    CHECK(g_overhead == g_requests, "overhead records %d vs requests %d", g_overhead, g_requests);
    printf("fidelity: truth_kernels=%d cupti_kernels=%d exact=%d copies=%d/%d api=%d ext=%d sync=%d memory=%d "
           "buffers=%d (on main thread %d) dropped=%zu failures=%d\n",
           tk, g_nk, matched, copy_matched, tcopy, api_ok, ext_ok, g_sync, g_mem, g_buffers, g_on_main_thread,
           dropped, st_failures);
    return st_failures ? 1 : 0;
}
