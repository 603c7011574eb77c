/* cupti.c - mock libcupti.so.12: the real CUPTI 12.9 entry points, forwarded to libsimgpu.so. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cupti_core.h"

static uint32_t api_version(void)
{
    const char *v = getenv("SIMGPU_CUPTI_VERSION");
    return v && *v ? (uint32_t)strtoul(v, NULL, 10) : CUPTI_API_VERSION;
}

/* ---------------------------------------------------------------- without a driver
 * SIMGPU_NO_DRIVER=1: each entry point answers as NVIDIA's CUPTI of the simulated API version
 * (SIMGPU_CUPTI_VERSION) does on a machine without libcuda.so.1, measured by
 * tests/conformance/cupti_nodriver.c (table in docs/conformance.md):
 *   12.x         calls that need the driver return CUPTI_ERROR_NOT_INITIALIZED, the others work
 *   13.0, 13.1   the same calls return CUPTI_ERROR_UNKNOWN, the others work
 *   13.2         every call overflows the stack (its initialisation recurses): the process dies by SIGSEGV
 *   13.3 and on  every call returns CUPTI_ERROR_UNKNOWN and writes nothing
 * NO_DRIVER_PROCEED: go on as with a driver. */
#define NO_DRIVER_PROCEED (-1)
enum driver_use { DRIVER_FREE, NEEDS_DRIVER };

/* How NVIDIA's library dies there: SIGSEGV with the default action (a handler cannot run on an
 * overflowed stack). */
static void die_by_sigsegv(void)
{
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    _exit(128 + SIGSEGV);
}

static int without_driver(enum driver_use use)
{
    if (!sg_no_driver()) return NO_DRIVER_PROCEED;
    uint32_t v = api_version();
    if (v >= 130300) return CUPTI_ERROR_UNKNOWN;
    if (v >= 130200) die_by_sigsegv();
    if (use == DRIVER_FREE) return NO_DRIVER_PROCEED;
    return v >= 130000 ? CUPTI_ERROR_UNKNOWN : CUPTI_ERROR_NOT_INITIALIZED;
}
#define NO_DRIVER_RETURN(use)                                                                                  \
    do {                                                                                                       \
        int _nd = without_driver(use);                                                                         \
        if (_nd != NO_DRIVER_PROCEED) return (CUptiResult)_nd;                                                 \
    } while (0)

/* ---------------------------------------------------------------- entry points */

CUptiResult cuptiGetVersion(uint32_t *version)
{
    NO_DRIVER_RETURN(DRIVER_FREE);
    if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
    *version = api_version();
    return CUPTI_SUCCESS;
}

static const struct { CUptiResult r; const char *s; } g_res[] = {
    {CUPTI_SUCCESS, "CUPTI_SUCCESS"},
    {CUPTI_ERROR_INVALID_PARAMETER, "CUPTI_ERROR_INVALID_PARAMETER"},
    {CUPTI_ERROR_INVALID_DEVICE, "CUPTI_ERROR_INVALID_DEVICE"},
    {CUPTI_ERROR_INVALID_CONTEXT, "CUPTI_ERROR_INVALID_CONTEXT"},
    {CUPTI_ERROR_INVALID_OPERATION, "CUPTI_ERROR_INVALID_OPERATION"},
    {CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT, "CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT"},
    {CUPTI_ERROR_MAX_LIMIT_REACHED, "CUPTI_ERROR_MAX_LIMIT_REACHED"},
    {CUPTI_ERROR_NOT_COMPATIBLE, "CUPTI_ERROR_NOT_COMPATIBLE"},
    {CUPTI_ERROR_NOT_INITIALIZED, "CUPTI_ERROR_NOT_INITIALIZED"},
    {CUPTI_ERROR_QUEUE_EMPTY, "CUPTI_ERROR_QUEUE_EMPTY"},
    {CUPTI_ERROR_INVALID_KIND, "CUPTI_ERROR_INVALID_KIND"},
    {CUPTI_ERROR_NOT_SUPPORTED, "CUPTI_ERROR_NOT_SUPPORTED"},
    {CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"},
    {CUPTI_ERROR_UNKNOWN, "CUPTI_ERROR_UNKNOWN"},
};
CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
    NO_DRIVER_RETURN(DRIVER_FREE);
    if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t i = 0; i < sizeof g_res / sizeof g_res[0]; i++)
        if (g_res[i].r == result) {
            *str = g_res[i].s;
            return CUPTI_SUCCESS;
        }
    *str = "CUPTI_ERROR_UNKNOWN";
    return CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
    NO_DRIVER_RETURN(DRIVER_FREE);
    if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
    /* SIMGPU_CUPTI_CALLBACK_NAMES=0: a CUPTI that knows none of the ids (older than the runtime) */
    const char *names = getenv("SIMGPU_CUPTI_CALLBACK_NAMES");
    if (names && strcmp(names, "0") == 0) return CUPTI_ERROR_INVALID_PARAMETER;
    *name = sgc_callback_name((int)domain, cbid);
    return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult cuptiGetErrorMessage(CUptiResult result, const char **str) { return cuptiGetResultString(result, str); }

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiActivityEnable(kind);
}
CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiActivityEnable(kind);
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiActivityDisable(kind);
}
CUptiResult cuptiActivityEnableContext(CUcontext ctx, CUpti_ActivityKind kind)
{
    (void)ctx;
    return sgc_cuptiActivityEnable(kind);
}
CUptiResult cuptiActivityDisableContext(CUcontext ctx, CUpti_ActivityKind kind)
{
    (void)ctx;
    return sgc_cuptiActivityDisable(kind);
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc cmp)
{
    NO_DRIVER_RETURN(DRIVER_FREE);
    return sgc_cuptiActivityRegisterCallbacks(req, cmp);
}
CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiActivityFlushAll(flag);
}
CUptiResult cuptiActivityFlush(CUcontext ctx, uint32_t streamId, uint32_t flag)
{
    (void)ctx, (void)streamId;
    return sgc_cuptiActivityFlushAll(flag);
}
CUptiResult cuptiActivityFlushPeriod(uint32_t time)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiActivityFlushPeriod(time);
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
    NO_DRIVER_RETURN(DRIVER_FREE);
    return sgc_cuptiActivityGetNextRecord(buffer, valid, record);
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t streamId, size_t *dropped)
{
    NO_DRIVER_RETURN(DRIVER_FREE);
    return sgc_cuptiActivityGetNumDroppedRecords(ctx, streamId, dropped);
}
CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value)
{
    return sgc_cuptiActivityAttribute(0, attr, size, value);
}
CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value)
{
    return sgc_cuptiActivityAttribute(1, attr, size, value);
}
CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
    NO_DRIVER_RETURN(DRIVER_FREE);
    return sgc_cuptiGetTimestamp(ts);
}
CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiActivityRegisterTimestampCallback(f);
}
CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiActivityPushExternalCorrelationId(kind, id);
}
CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiActivityPopExternalCorrelationId(kind, last);
}
CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
    return sgc_cuptiActivityEnableApi(SG_DOMAIN_RUNTIME, cbid, enable);
}
CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
    return sgc_cuptiActivityEnableApi(SG_DOMAIN_DRIVER, cbid, enable);
}
CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t enable) { (void)enable; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableLaunchAttributes(uint8_t enable) { (void)enable; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t enable) { (void)enable; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableAllocationSource(uint8_t enable) { (void)enable; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableDeviceGraph(uint8_t enable) { (void)enable; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableHWTrace(uint8_t enable) { (void)enable; return CUPTI_ERROR_NOT_SUPPORTED; }
CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiSetThreadIdType(t);
}
CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType *t) { return sgc_cuptiGetThreadIdType(t); }
/* Without a driver NVIDIA's 12.x cuptiFinalize crashes (SIGSEGV); 13.0/13.1 return success. */
CUptiResult cuptiFinalize(void)
{
    if (sg_no_driver() && api_version() < 130000) die_by_sigsegv();
    NO_DRIVER_RETURN(DRIVER_FREE);
    return sgc_cuptiFinalize();
}
CUptiResult cuptiGetLastError(void) { return CUPTI_SUCCESS; }

CUptiResult cuptiGetDeviceId(CUcontext ctx, uint32_t *id)
{
    if (!id) return CUPTI_ERROR_INVALID_PARAMETER;
    int d = ctx ? sg_context_device(ctx) : sg_current_device();
    if (d < 0) return CUPTI_ERROR_INVALID_CONTEXT;
    *id = (uint32_t)d;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiGetContextId(CUcontext ctx, uint32_t *id)
{
    if (!id) return CUPTI_ERROR_INVALID_PARAMETER;
    int d = ctx ? sg_context_device(ctx) : sg_current_device();
    if (d < 0) return CUPTI_ERROR_INVALID_CONTEXT;
    *id = sg_context_id(d);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiGetStreamIdEx(CUcontext ctx, CUstream stream, uint8_t perThreadStream, uint32_t *id)
{
    (void)ctx;
    if (!id) return CUPTI_ERROR_INVALID_PARAMETER;
    sg_stream *s = sg_stream_resolve(stream, perThreadStream);
    if (!s) return CUPTI_ERROR_INVALID_PARAMETER;
    *id = sg_stream_id(s);
    return CUPTI_SUCCESS;
}
CUptiResult cuptiGetStreamId(CUcontext ctx, CUstream stream, uint32_t *id)
{
    return cuptiGetStreamIdEx(ctx, stream, 0, id);
}
CUptiResult cuptiDeviceSupported(CUdevice dev, int *support)
{
    if (!support) return CUPTI_ERROR_INVALID_PARAMETER;
    *support = dev >= 0 && dev < sg_device_count();
    return CUPTI_SUCCESS;
}
CUptiResult cuptiComputeCapabilitySupported(int major, int minor, int *support)
{
    (void)minor;
    if (!support) return CUPTI_ERROR_INVALID_PARAMETER;
    *support = major >= 7;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *userdata)
{
    NO_DRIVER_RETURN(NEEDS_DRIVER);
    return sgc_cuptiSubscribe(sub, cb, userdata);
}
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    NO_DRIVER_RETURN(DRIVER_FREE);
    return sgc_cuptiUnsubscribe(sub);
}
CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid)
{
    return sgc_cuptiEnableCallback(enable, sub, domain, cbid);
}
CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain)
{
    return sgc_cuptiEnableDomain(enable, sub, domain);
}
CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle sub)
{
    return sgc_cuptiEnableAllDomains(enable, sub);
}
CUptiResult cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain,
                                  CUpti_CallbackId cbid)
{
    return sgc_cuptiGetCallbackState(enable, sub, domain, cbid);
}
CUptiResult cuptiSupportedDomains(size_t *domainCount, CUpti_DomainTable *domainTable)
{
    static CUpti_CallbackDomain doms[] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API};
    if (!domainCount || !domainTable) return CUPTI_ERROR_INVALID_PARAMETER;
    *domainCount = 2;
    *domainTable = doms;
    return CUPTI_SUCCESS;
}
