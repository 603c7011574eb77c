/* cupti_core.h - CUPTI entry points implemented in libsimgpu.so, forwarded by libcupti.so.12. */
#ifndef SIMGPU_CUPTI_CORE_H
#define SIMGPU_CUPTI_CORE_H
#include <cupti.h>
#include "simgpu_core.h"
#define SGC SG_EXPORT
SGC int sgc_cbid(int domain, const char *func);
/* cuptiGetCallbackName: the name of a RUNTIME (with its _vNNNN suffix) or DRIVER callback id, or NULL. */
SGC const char *sgc_callback_name(int domain, uint32_t cbid);
SGC CUptiResult sgc_cuptiActivityEnable(CUpti_ActivityKind kind);
SGC CUptiResult sgc_cuptiActivityDisable(CUpti_ActivityKind kind);
SGC CUptiResult sgc_cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
SGC CUptiResult sgc_cuptiActivityFlushAll(uint32_t flag);
SGC CUptiResult sgc_cuptiActivityFlushPeriod(uint32_t ms);
SGC CUptiResult sgc_cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record);
SGC CUptiResult sgc_cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped);
SGC CUptiResult sgc_cuptiActivityAttribute(int set, CUpti_ActivityAttribute attr, size_t *size, void *value);
SGC CUptiResult sgc_cuptiGetTimestamp(uint64_t *ts);
SGC CUptiResult sgc_cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f);
SGC CUptiResult sgc_cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id);
SGC CUptiResult sgc_cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last);
SGC CUptiResult sgc_cuptiActivityEnableApi(int domain, CUpti_CallbackId cbid, uint8_t enable);
SGC CUptiResult sgc_cuptiSetThreadIdType(CUpti_ActivityThreadIdType t);
SGC CUptiResult sgc_cuptiGetThreadIdType(CUpti_ActivityThreadIdType *t);
SGC CUptiResult sgc_cuptiFinalize(void);
SGC CUptiResult sgc_cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *userdata);
SGC CUptiResult sgc_cuptiUnsubscribe(CUpti_SubscriberHandle sub);
SGC CUptiResult sgc_cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
SGC CUptiResult sgc_cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain);
SGC CUptiResult sgc_cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle sub);
SGC CUptiResult sgc_cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
#endif
