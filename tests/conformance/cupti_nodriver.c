/* cupti_nodriver - what a libcupti returns on a machine without a CUDA driver.
 *   cupti_nodriver /path/to/libcupti.so.N
 * Each entry point tprof calls at start-up runs in its own fresh child process (probe_child.h): one
 * line per call, "<call> returned <CUptiResult>[ detail]" or how the child died. Declarations are
 * written out here (CUPTI's own types are plain C ABI), so this builds without the headers. */
#include "probe_child.h"
#include <stdint.h>

typedef unsigned CUptiResult;
typedef void (*cupti_callback)(void *, unsigned, unsigned, const void *);
typedef void (*buffer_request)(uint8_t **, size_t *, size_t *);
typedef void (*buffer_complete)(void *, uint32_t, uint8_t *, size_t, size_t);

/* Values of CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ERROR_NOT_COMPATIBLE,
 * CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2,
 * CUPTI_CB_DOMAIN_RUNTIME_API and CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 in every 12.x/13.x
 * CUPTI header (cupti-sys/tests/real_headers.rs checks cupti-sys's copies against them). */
#define KIND_CONCURRENT_KERNEL 10
#define RESULT_NOT_COMPATIBLE 14
#define THREAD_ID_TYPE_SYSTEM 1
#define EXTERNAL_KIND_CUSTOM2 5
#define CB_DOMAIN_RUNTIME_API 2
#define RUNTIME_CBID_CUDA_LAUNCH_KERNEL 211

static void no_callback(void *u, unsigned d, unsigned c, const void *p) { (void)u, (void)d, (void)c, (void)p; }
static void no_request(uint8_t **b, size_t *s, size_t *m) { *b = NULL, *s = 0, *m = 0; }
static void no_complete(void *c, uint32_t s, uint8_t *b, size_t n, size_t v) { (void)c, (void)s, (void)b, (void)n, (void)v; }

static void open_only(const char *path)
{
    probe_open(path);
    probe_say("returned 0");
}
static void get_version(const char *path)
{
    CUptiResult (*f)(uint32_t *) = (CUptiResult(*)(uint32_t *))probe_sym(probe_open(path), "cuptiGetVersion");
    uint32_t v = 12345;
    CUptiResult r = f(&v);
    probe_say("returned %u version=%u", r, v);
}
static void get_result_string(const char *path)
{
    CUptiResult (*f)(CUptiResult, const char **) =
        (CUptiResult(*)(CUptiResult, const char **))probe_sym(probe_open(path), "cuptiGetResultString");
    const char *s = "untouched";
    CUptiResult r = f(RESULT_NOT_COMPATIBLE, &s);
    probe_say("returned %u string(14)=%s", r, s ? s : "(null)");
}
static void subscribe(const char *path)
{
    CUptiResult (*f)(void **, cupti_callback, void *) =
        (CUptiResult(*)(void **, cupti_callback, void *))probe_sym(probe_open(path), "cuptiSubscribe");
    void *sub = NULL;
    probe_say("returned %u", f(&sub, no_callback, NULL));
}
static void activity_enable(const char *path)
{
    CUptiResult (*f)(unsigned) = (CUptiResult(*)(unsigned))probe_sym(probe_open(path), "cuptiActivityEnable");
    probe_say("returned %u", f(KIND_CONCURRENT_KERNEL));
}
static void register_callbacks(const char *path)
{
    CUptiResult (*f)(buffer_request, buffer_complete) = (CUptiResult(*)(buffer_request, buffer_complete))probe_sym(
        probe_open(path), "cuptiActivityRegisterCallbacks");
    probe_say("returned %u", f(no_request, no_complete));
}

static uint64_t zero_clock(void) { return 0; }
static void register_timestamp_callback(const char *path)
{
    CUptiResult (*f)(uint64_t (*)(void)) =
        (CUptiResult(*)(uint64_t (*)(void)))probe_sym(probe_open(path), "cuptiActivityRegisterTimestampCallback");
    probe_say("returned %u", f(zero_clock));
}
static void get_timestamp(const char *path)
{
    CUptiResult (*f)(uint64_t *) = (CUptiResult(*)(uint64_t *))probe_sym(probe_open(path), "cuptiGetTimestamp");
    uint64_t t = 0;
    CUptiResult r = f(&t);
    probe_say("returned %u nonzero=%d", r, t != 0);
}
static void set_thread_id_type(const char *path)
{
    CUptiResult (*f)(unsigned) = (CUptiResult(*)(unsigned))probe_sym(probe_open(path), "cuptiSetThreadIdType");
    probe_say("returned %u", f(THREAD_ID_TYPE_SYSTEM));
}
static void push_external_id(const char *path)
{
    CUptiResult (*f)(unsigned, uint64_t) =
        (CUptiResult(*)(unsigned, uint64_t))probe_sym(probe_open(path), "cuptiActivityPushExternalCorrelationId");
    probe_say("returned %u", f(EXTERNAL_KIND_CUSTOM2, 1));
}
static void flush_all(const char *path)
{
    CUptiResult (*f)(unsigned) = (CUptiResult(*)(unsigned))probe_sym(probe_open(path), "cuptiActivityFlushAll");
    probe_say("returned %u", f(0));
}
static void get_callback_name(const char *path)
{
    CUptiResult (*f)(unsigned, unsigned, const char **) =
        (CUptiResult(*)(unsigned, unsigned, const char **))probe_sym(probe_open(path), "cuptiGetCallbackName");
    const char *s = "untouched";
    CUptiResult r = f(CB_DOMAIN_RUNTIME_API, RUNTIME_CBID_CUDA_LAUNCH_KERNEL, &s);
    probe_say("returned %u name=%s", r, s ? s : "(null)");
}
static void unsubscribe_null(const char *path)
{
    CUptiResult (*f)(void *) = (CUptiResult(*)(void *))probe_sym(probe_open(path), "cuptiUnsubscribe");
    probe_say("returned %u", f(NULL));
}
static void activity_disable(const char *path)
{
    CUptiResult (*f)(unsigned) = (CUptiResult(*)(unsigned))probe_sym(probe_open(path), "cuptiActivityDisable");
    probe_say("returned %u", f(KIND_CONCURRENT_KERNEL));
}
static void flush_period(const char *path)
{
    CUptiResult (*f)(unsigned) = (CUptiResult(*)(unsigned))probe_sym(probe_open(path), "cuptiActivityFlushPeriod");
    probe_say("returned %u", f(100));
}
static void pop_external_id(const char *path)
{
    CUptiResult (*f)(unsigned, uint64_t *) =
        (CUptiResult(*)(unsigned, uint64_t *))probe_sym(probe_open(path), "cuptiActivityPopExternalCorrelationId");
    uint64_t last = 12345;
    CUptiResult r = f(EXTERNAL_KIND_CUSTOM2, &last);
    probe_say("returned %u last=%llu", r, (unsigned long long)last);
}
static void get_num_dropped(const char *path)
{
    CUptiResult (*f)(void *, uint32_t, size_t *) =
        (CUptiResult(*)(void *, uint32_t, size_t *))probe_sym(probe_open(path), "cuptiActivityGetNumDroppedRecords");
    size_t n = 12345;
    CUptiResult r = f(NULL, 0, &n);
    probe_say("returned %u dropped=%zu", r, n);
}
static void get_next_record_empty(const char *path)
{
    CUptiResult (*f)(uint8_t *, size_t, void **) =
        (CUptiResult(*)(uint8_t *, size_t, void **))probe_sym(probe_open(path), "cuptiActivityGetNextRecord");
    static uint8_t buffer[64] __attribute__((aligned(8)));
    void *rec = NULL;
    probe_say("returned %u", f(buffer, 0, &rec));
}
static void finalize(const char *path)
{
    CUptiResult (*f)(void) = (CUptiResult(*)(void))probe_sym(probe_open(path), "cuptiFinalize");
    probe_say("returned %u", f());
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s /path/to/libcupti.so\n", argv[0]);
        return 2;
    }
    probe_run("dlopen", open_only, argv[1]);
    probe_run("cuptiGetVersion", get_version, argv[1]);
    probe_run("cuptiGetResultString", get_result_string, argv[1]);
    probe_run("cuptiSubscribe", subscribe, argv[1]);
    probe_run("cuptiActivityEnable(CONCURRENT_KERNEL)", activity_enable, argv[1]);
    probe_run("cuptiActivityRegisterCallbacks", register_callbacks, argv[1]);
    probe_run("cuptiActivityRegisterTimestampCallback", register_timestamp_callback, argv[1]);
    probe_run("cuptiGetTimestamp", get_timestamp, argv[1]);
    probe_run("cuptiSetThreadIdType(SYSTEM)", set_thread_id_type, argv[1]);
    probe_run("cuptiActivityPushExternalCorrelationId", push_external_id, argv[1]);
    probe_run("cuptiActivityFlushAll", flush_all, argv[1]);
    probe_run("cuptiGetCallbackName", get_callback_name, argv[1]);
    probe_run("cuptiUnsubscribe(NULL)", unsubscribe_null, argv[1]);
    probe_run("cuptiActivityDisable(CONCURRENT_KERNEL)", activity_disable, argv[1]);
    probe_run("cuptiActivityFlushPeriod", flush_period, argv[1]);
    probe_run("cuptiActivityPopExternalCorrelationId", pop_external_id, argv[1]);
    probe_run("cuptiActivityGetNumDroppedRecords", get_num_dropped, argv[1]);
    probe_run("cuptiActivityGetNextRecord(empty)", get_next_record_empty, argv[1]);
    probe_run("cuptiFinalize", finalize, argv[1]);
    return 0;
}
