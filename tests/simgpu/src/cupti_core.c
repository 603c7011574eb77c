/* cupti_core.c - the CUPTI state inside libsimgpu.so: activity records (staging, delivery into
 * client buffers on the worker thread), callbacks (subscriber), timestamps, external ids.
 * libcupti.so.12 (cupti.c) exports the real API names and forwards here. */
#define _GNU_SOURCE
#include "core_internal.h"
#include "cupti_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cbid_tables.h" /* generated from cupti_runtime_cbid.h / cupti_driver_cbid.h */

/* ---------------------------------------------------------------- state */

static uint8_t g_kind_on[CUPTI_ACTIVITY_KIND_COUNT];
static int g_cupti_off = -1; /* SIMGPU_CUPTI=0 */
static int g_cupti_busy;     /* SIMGPU_CUPTI_BUSY=1 */
/* SIMGPU_CUPTI_REFUSE_KIND=<kind>[:<result>],...: cuptiActivityEnable(kind) returns result
 * (default CUPTI_ERROR_NOT_COMPATIBLE), as a CUPTI or device that cannot record that kind does. */
static CUptiResult g_kind_refusal[CUPTI_ACTIVITY_KIND_COUNT];
static uint64_t g_drop_every;
static uint64_t g_record_count;

static CUpti_BuffersCallbackRequestFunc g_req;
static CUpti_BuffersCallbackCompleteFunc g_cmp;

/* staging: records in final layout, monotonic timestamps, 8-byte aligned */
static pthread_mutex_t g_stage_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *g_stage, *g_stage_spare;
static size_t g_stage_len, g_stage_cap, g_stage_spare_cap;

/* delivery */
static pthread_mutex_t g_deliver_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *g_cur;
static size_t g_cur_size, g_cur_used;
static size_t g_dropped;         /* atomic: dropped since the last cuptiActivityGetNumDroppedRecords */
static uint64_t g_dropped_total; /* atomic: dropped in this process (the ground truth's cupti_dropped) */
static uint64_t g_period_ns;
static uint64_t g_last_period_flush;
static size_t g_attr_buffer_size = 3 << 20, g_attr_pool_limit = 250;

/* One activity record dropped (async-signal-safe: atomics only). */
static void count_drop(void)
{
    __atomic_add_fetch(&g_dropped, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&g_dropped_total, 1, __ATOMIC_RELAXED);
}

/* timestamps */
static CUpti_TimestampCallbackFunc g_ts_cb;
static pthread_mutex_t g_ts_lock = PTHREAD_MUTEX_INITIALIZER;
static double g_ts_scale = 1.0;
static double g_ts_anchor_mono, g_ts_anchor_cb; /* latest sample */
static double g_ts_first_mono, g_ts_first_cb;   /* registration sample */

/* callbacks */
static pthread_mutex_t g_sub_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_subscribed;
static CUpti_CallbackFunc g_sub_cb;
static void *g_sub_userdata;
static uint8_t g_cb_rt[CUPTI_RUNTIME_TRACE_CBID_SIZE];
static uint8_t g_cb_drv[CUPTI_DRIVER_TRACE_CBID_SIZE];
static uint8_t g_act_rt_off[CUPTI_RUNTIME_TRACE_CBID_SIZE];  /* cuptiActivityEnableRuntimeApi(cbid,0) */
static uint8_t g_act_drv_off[CUPTI_DRIVER_TRACE_CBID_SIZE];
static int g_thread_id_type;

/* external correlation: per-thread stacks per kind */
#define EXT_KINDS CUPTI_EXTERNAL_CORRELATION_KIND_SIZE
#define EXT_DEPTH 64
static __thread uint64_t t_ext[EXT_KINDS][EXT_DEPTH];
static __thread int t_ext_n[EXT_KINDS];
static __thread int t_in_callback;

static void env_init(void)
{
    if (g_cupti_off != -1) return;
    const char *v = getenv("SIMGPU_CUPTI");
    g_cupti_off = v && strcmp(v, "0") == 0;
    v = getenv("SIMGPU_CUPTI_BUSY");
    g_cupti_busy = v && strcmp(v, "1") == 0;
    v = getenv("SIMGPU_CUPTI_DROP_EVERY");
    g_drop_every = v ? strtoull(v, NULL, 10) : 0;
    for (v = getenv("SIMGPU_CUPTI_REFUSE_KIND"); v && *v;) {
        char *end;
        unsigned long kind = strtoul(v, &end, 10);
        CUptiResult result = CUPTI_ERROR_NOT_COMPATIBLE;
        if (*end == ':') result = (CUptiResult)strtoul(end + 1, &end, 10);
        if (end != v && kind > 0 && kind < CUPTI_ACTIVITY_KIND_COUNT) g_kind_refusal[kind] = result;
        v = strchr(end, ',');
        if (v) v++;
    }
}

int sgc_kind_enabled(int kind)
{
    return kind > 0 && kind < CUPTI_ACTIVITY_KIND_COUNT && __atomic_load_n(&g_kind_on[kind], __ATOMIC_RELAXED);
}

uint32_t sgc_thread_id(void)
{
    if (g_thread_id_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) return (uint32_t)syscall(SYS_gettid);
    return (uint32_t)(uintptr_t)pthread_self();
}

/* ---------------------------------------------------------------- cbid lookup */

#define CBID_BUCKETS 2048
typedef struct { const char *name; int cbid; } cbid_ent;
static cbid_ent g_cbid_rt[CBID_BUCKETS], g_cbid_drv[CBID_BUCKETS];
static pthread_once_t g_cbid_once = PTHREAD_ONCE_INIT;

static unsigned name_hash(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void cbid_put(cbid_ent *tab, const char *name, int cbid)
{
    unsigned h = name_hash(name);
    for (unsigned i = 0; i < CBID_BUCKETS; i++) {
        cbid_ent *e = &tab[(h + i) % CBID_BUCKETS];
        if (!e->name || strcmp(e->name, name) == 0) { /* later (newer) entries win */
            e->name = name;
            e->cbid = cbid;
            return;
        }
    }
}

static void cbid_init(void)
{
    for (size_t i = 0; i < sizeof sg_rt_cbid_table / sizeof sg_rt_cbid_table[0]; i++)
        cbid_put(g_cbid_rt, sg_rt_cbid_table[i].name, sg_rt_cbid_table[i].cbid);
    for (size_t i = 0; i < sizeof sg_drv_cbid_table / sizeof sg_drv_cbid_table[0]; i++)
        cbid_put(g_cbid_drv, sg_drv_cbid_table[i].name, sg_drv_cbid_table[i].cbid);
}

const char *sgc_callback_name(int domain, uint32_t cbid)
{
    if (domain == SG_DOMAIN_RUNTIME) {
        for (size_t i = 0; i < sizeof sg_rt_cbid_names / sizeof sg_rt_cbid_names[0]; i++)
            if (sg_rt_cbid_names[i].cbid == (int)cbid) return sg_rt_cbid_names[i].name;
    } else if (domain == SG_DOMAIN_DRIVER) {
        for (size_t i = 0; i < sizeof sg_drv_cbid_table / sizeof sg_drv_cbid_table[0]; i++)
            if (sg_drv_cbid_table[i].cbid == (int)cbid) return sg_drv_cbid_table[i].name;
    }
    return NULL;
}

int sgc_cbid(int domain, const char *func)
{
    pthread_once(&g_cbid_once, cbid_init);
    cbid_ent *tab = domain == SG_DOMAIN_DRIVER ? g_cbid_drv : g_cbid_rt;
    unsigned h = name_hash(func);
    for (unsigned i = 0; i < CBID_BUCKETS; i++) {
        cbid_ent *e = &tab[(h + i) % CBID_BUCKETS];
        if (!e->name) return 0;
        if (strcmp(e->name, func) == 0) return e->cbid;
    }
    return 0;
}

/* ---------------------------------------------------------------- staging */

/* A signal handler that calls the CUDA API on a thread interrupted inside stage() (it holds
 * g_stage_lock, maybe inside realloc) must neither take the lock nor allocate: its records wait in
 * a per-thread buffer that the interrupted call stages before it returns (dropped, and counted, if
 * the handler makes more than fits). */
#define STAGE_PENDING_BYTES 2048
static __thread int t_staging;
static __thread size_t t_pend_len; /* written by the handler, consumed by the interrupted call */
static __thread uint8_t t_pend[STAGE_PENDING_BYTES];

/* g_stage_lock, with this thread marked as staging (a signal handler on it then does not lock) */
static void stage_lock(void)
{
    __atomic_store_n(&t_staging, 1, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pthread_mutex_lock(&g_stage_lock);
}
static void stage_unlock(void)
{
    pthread_mutex_unlock(&g_stage_lock);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&t_staging, 0, __ATOMIC_RELAXED);
}

/* Staging buffers come from mmap/mremap, never malloc: a signal handler may call the CUDA API on a
 * thread interrupted inside malloc (holding its arena lock), and the staging it does there would
 * deadlock on that lock if it grew the buffer with realloc. */
static uint8_t *stage_buf_grow(uint8_t *buf, size_t cap, size_t new_cap)
{
    void *n = buf ? mremap(buf, cap, new_cap, MREMAP_MAYMOVE)
                  : mmap(NULL, new_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return n == MAP_FAILED ? NULL : (uint8_t *)n;
}
static void stage_buf_free(uint8_t *buf, size_t cap)
{
    if (buf) munmap(buf, cap);
}

static int stage_append_locked(const void *rec, size_t size, size_t asz)
{
    if (g_stage_len + asz > g_stage_cap) {
        size_t nc = g_stage_cap ? g_stage_cap * 2 : 1 << 16;
        while (nc < g_stage_len + asz) nc *= 2;
        uint8_t *n = stage_buf_grow(g_stage, g_stage_cap, nc);
        if (!n) return -1;
        g_stage = n;
        g_stage_cap = nc;
    }
    memcpy(g_stage + g_stage_len, rec, size);
    memset(g_stage + g_stage_len + size, 0, asz - size);
    g_stage_len += asz;
    return 0;
}

static void stage(const void *rec, size_t size)
{
    size_t asz = (size + 7) & ~(size_t)7;
    if (__atomic_load_n(&t_staging, __ATOMIC_RELAXED)) {
        /* re-entered from a signal handler on this thread: [uint64 padded size][record] */
        size_t at = __atomic_load_n(&t_pend_len, __ATOMIC_RELAXED);
        if (at + 8 + asz > STAGE_PENDING_BYTES) {
            count_drop();
            return;
        }
        uint64_t hdr = asz;
        memcpy(t_pend + at, &hdr, 8);
        memcpy(t_pend + at + 8, rec, size);
        memset(t_pend + at + 8 + size, 0, asz - size);
        __atomic_store_n(&t_pend_len, at + 8 + asz, __ATOMIC_RELEASE);
        return;
    }
    stage_lock();
    if (stage_append_locked(rec, size, asz) != 0) count_drop();
    /* records of handlers that interrupted this thread (this call or, rarely, an earlier one) */
    size_t done = 0;
    for (;;) {
        size_t len = __atomic_load_n(&t_pend_len, __ATOMIC_ACQUIRE);
        while (done < len) {
            uint64_t hdr;
            memcpy(&hdr, t_pend + done, 8);
            if (stage_append_locked(t_pend + done + 8, (size_t)hdr, (size_t)hdr) != 0)
                count_drop();
            done += 8 + (size_t)hdr;
        }
        size_t expect = len;
        if (__atomic_compare_exchange_n(&t_pend_len, &expect, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
    }
    stage_unlock();
}

static size_t record_size(uint32_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: return sizeof(CUpti_ActivityKernel9);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
    default: return 0;
    }
}

/* ---------------------------------------------------------------- GPU records */

int sgc_op_traced(int op_kind)
{
    switch (op_kind) {
    case SG_OP_KERNEL:
        return sgc_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) || sgc_kind_enabled(CUPTI_ACTIVITY_KIND_KERNEL);
    case SG_OP_MEMCPY: return sgc_kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY);
    case SG_OP_MEMSET: return sgc_kind_enabled(CUPTI_ACTIVITY_KIND_MEMSET);
    default: return 0;
    }
}

void sgc_emit_op(const sg_op *op)
{
    if (!op->cupti_traced) return;
    if (op->kind == SG_OP_KERNEL) {
        int kind = sgc_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
                   : sgc_kind_enabled(CUPTI_ACTIVITY_KIND_KERNEL)          ? CUPTI_ACTIVITY_KIND_KERNEL
                                                                           : 0;
        if (!kind) return;
        CUpti_ActivityKernel9 r;
        memset(&r, 0, sizeof r);
        r.kind = (CUpti_ActivityKind)kind;
        r.registersPerThread = 32;
        r.partitionedGlobalCacheRequested = CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_NOT_SUPPORTED;
        r.partitionedGlobalCacheExecuted = CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_NOT_SUPPORTED;
        r.start = op->start_ns;
        r.end = op->end_ns;
        r.completed = op->end_ns;
        r.deviceId = (uint32_t)op->device;
        r.contextId = sg_context_id(op->device);
        r.streamId = op->stream_id;
        r.gridX = (int32_t)op->grid[0];
        r.gridY = (int32_t)op->grid[1];
        r.gridZ = (int32_t)op->grid[2];
        r.blockX = (int32_t)op->block[0];
        r.blockY = (int32_t)op->block[1];
        r.blockZ = (int32_t)op->block[2];
        r.dynamicSharedMemory = (int32_t)op->dyn_smem;
        r.correlationId = op->correlation;
        r.gridId = (int64_t)op->correlation;
        r.name = op->name;
        r.launchType = (uint8_t)op->launch_type;
        r.graphNodeId = op->graph_node_id;
        r.graphId = op->graph_id;
        r.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
        r.clusterX = r.clusterY = r.clusterZ = 1;
        stage(&r, sizeof r);
    } else if (op->kind == SG_OP_MEMCPY) {
        if (!sgc_kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
        CUpti_ActivityMemcpy6 r;
        memset(&r, 0, sizeof r);
        r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        r.copyKind = (uint8_t)op->copy_kind;
        int host = op->host_pinned ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
        switch (op->copy_kind) {
        case SG_COPY_HTOD: r.srcKind = (uint8_t)host; r.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE; break;
        case SG_COPY_DTOH: r.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE; r.dstKind = (uint8_t)host; break;
        case SG_COPY_HTOH: r.srcKind = r.dstKind = (uint8_t)host; break;
        default: r.srcKind = r.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE; break;
        }
        r.flags = (uint8_t)(op->is_async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0);
        r.bytes = op->bytes;
        r.start = op->start_ns;
        r.end = op->end_ns;
        r.deviceId = (uint32_t)op->device;
        r.contextId = sg_context_id(op->device);
        r.streamId = op->stream_id;
        r.correlationId = op->correlation;
        r.graphNodeId = op->graph_node_id;
        r.graphId = op->graph_id;
        r.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
        r.copyCount = 1;
        stage(&r, sizeof r);
    } else if (op->kind == SG_OP_MEMSET) {
        if (!sgc_kind_enabled(CUPTI_ACTIVITY_KIND_MEMSET)) return;
        CUpti_ActivityMemset4 r;
        memset(&r, 0, sizeof r);
        r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        r.value = op->memset_value;
        r.bytes = op->bytes;
        r.start = op->start_ns;
        r.end = op->end_ns;
        r.deviceId = (uint32_t)op->device;
        r.contextId = sg_context_id(op->device);
        r.streamId = op->stream_id;
        r.correlationId = op->correlation;
        r.flags = (uint16_t)(op->is_async ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0);
        r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        r.graphNodeId = op->graph_node_id;
        r.graphId = op->graph_id;
        r.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
        stage(&r, sizeof r);
    }
}

void sgc_emit_sync(int type, uint64_t start, uint64_t end, uint32_t corr, int device, uint32_t stream_id,
                   uint32_t event_id, int ret)
{
    if (!sgc_kind_enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) return;
    CUpti_ActivitySynchronization2 r;
    memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.type = (CUpti_ActivitySynchronizationType)type;
    r.start = start;
    r.end = end;
    r.correlationId = corr;
    r.contextId = sg_context_id(device);
    r.streamId = stream_id;
    r.cudaEventId = event_id;
    r.returnValue = (uint32_t)ret;
    stage(&r, sizeof r);
}

void sgc_emit_memory(int op_type, int mem_kind, uint32_t corr, uint64_t addr, uint64_t bytes, int device,
                     uint32_t stream_id, int is_async)
{
    if (!sgc_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
    CUpti_ActivityMemory4 r;
    memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = (CUpti_ActivityMemoryOperationType)op_type;
    r.memoryKind = (CUpti_ActivityMemoryKind)mem_kind;
    r.correlationId = corr;
    r.address = addr;
    r.bytes = bytes;
    r.timestamp = sg_now_ns();
    r.processId = (uint32_t)getpid();
    r.deviceId = (uint32_t)device;
    r.contextId = sg_context_id(device);
    r.streamId = stream_id;
    r.isAsync = (uint32_t)is_async;
    stage(&r, sizeof r);
}

void sgc_emit_memory_pool(int op_type, uint32_t corr, uint64_t addr, uint64_t bytes, int device, uint32_t stream_id,
                          uint64_t release_threshold, uint64_t pool_size, uint64_t pool_used)
{
    if (!sgc_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
    CUpti_ActivityMemory4 r;
    memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = (CUpti_ActivityMemoryOperationType)op_type;
    r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    r.correlationId = corr;
    r.address = addr;
    r.bytes = bytes;
    r.timestamp = sg_now_ns();
    r.processId = (uint32_t)getpid();
    r.deviceId = (uint32_t)device;
    r.contextId = sg_context_id(device);
    r.streamId = stream_id;
    r.isAsync = 1;
    r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    r.memoryPoolConfig.releaseThreshold = release_threshold;
    r.memoryPoolConfig.pool.size = pool_size;
    r.memoryPoolConfig.utilizedSize = pool_used;
    stage(&r, sizeof r);
}

/* ---------------------------------------------------------------- API calls */

static int cb_enabled(int domain, int cbid)
{
    if (!__atomic_load_n(&g_subscribed, __ATOMIC_ACQUIRE) || cbid <= 0) return 0;
    if (domain == SG_DOMAIN_RUNTIME) return cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE && g_cb_rt[cbid];
    if (domain == SG_DOMAIN_DRIVER) return cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && g_cb_drv[cbid];
    return 0;
}

static void call_cb(sg_api_call *c, int site, int *ret)
{
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.callbackSite = (CUpti_ApiCallbackSite)site;
    d.functionName = c->func;
    d.functionParams = c->params;
    d.functionReturnValue = site == CUPTI_API_EXIT ? ret : NULL;
    d.symbolName = c->symbol;
    d.context = (CUcontext)sg_context_handle(c->device);
    d.contextUid = sg_context_id(c->device);
    d.correlationData = &c->correlation_data;
    d.correlationId = c->correlation;
    CUpti_CallbackFunc f = g_sub_cb;
    void *ud = g_sub_userdata;
    if (!f) return;
    t_in_callback = 1;
    f(ud, (CUpti_CallbackDomain)c->domain, (CUpti_CallbackId)c->cbid, &d);
    t_in_callback = 0;
}

void sg_api_enter(sg_api_call *c, int domain, const char *func, const char *symbol, const void *params)
{
    sg_init();
    memset(c, 0, sizeof *c);
    c->correlation = sg_next_correlation();
    c->domain = domain;
    c->func = func;
    c->symbol = symbol;
    c->params = params;
    c->device = sg_current_device();
    c->cbid = sgc_cbid(domain, func);
    c->start_ns = sg_now_ns();
    if (!t_in_callback && cb_enabled(domain, c->cbid)) {
        c->callbacks = 1;
        call_cb(c, CUPTI_API_ENTER, NULL);
    }
}

void sg_api_exit(sg_api_call *c, int ret)
{
    uint64_t end = sg_now_ns();
    if (c->callbacks) call_cb(c, CUPTI_API_EXIT, &ret);
    int kind = c->domain == SG_DOMAIN_DRIVER ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    if (t_in_callback || !sgc_kind_enabled(kind)) return;
    if (c->domain == SG_DOMAIN_RUNTIME && c->cbid > 0 && c->cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE &&
        g_act_rt_off[c->cbid])
        return;
    if (c->domain == SG_DOMAIN_DRIVER && c->cbid > 0 && c->cbid < CUPTI_DRIVER_TRACE_CBID_SIZE &&
        g_act_drv_off[c->cbid])
        return;
    if (sgc_kind_enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
        for (int k = 0; k < EXT_KINDS; k++)
            if (t_ext_n[k] > 0) {
                CUpti_ActivityExternalCorrelation e;
                memset(&e, 0, sizeof e);
                e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
                e.externalKind = (CUpti_ExternalCorrelationKind)k;
                e.externalId = t_ext[k][t_ext_n[k] - 1];
                e.correlationId = c->correlation;
                stage(&e, sizeof e);
            }
    }
    CUpti_ActivityAPI r;
    memset(&r, 0, sizeof r);
    r.kind = (CUpti_ActivityKind)kind;
    r.cbid = (CUpti_CallbackId)c->cbid;
    r.start = c->start_ns;
    r.end = end;
    r.processId = (uint32_t)getpid();
    r.threadId = sgc_thread_id();
    r.correlationId = c->correlation;
    r.returnValue = (uint32_t)ret;
    stage(&r, sizeof r);
}

/* ---------------------------------------------------------------- timestamps */

/* One (monotonic, callback) pair: the callback read bracketed by two clock reads, best of 7 (a
 * thread preempted between the reads would put the midpoint microseconds off). */
static void ts_sample(double *mono, double *cb)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 7; i++) {
        uint64_t m1 = sg_now_ns();
        uint64_t c = g_ts_cb();
        uint64_t m2 = sg_now_ns();
        if (m2 - m1 < best) {
            best = m2 - m1;
            *mono = ((double)m1 + (double)m2) / 2.0;
            *cb = (double)c;
        }
    }
}

/* Recalibrate: scale from the registration sample to the latest one, offset from the latest. */
static void ts_calibrate(void)
{
    if (!g_ts_cb) return;
    double m, c;
    ts_sample(&m, &c);
    pthread_mutex_lock(&g_ts_lock);
    if (m - g_ts_first_mono > 1e6) g_ts_scale = (c - g_ts_first_cb) / (m - g_ts_first_mono);
    g_ts_anchor_mono = m;
    g_ts_anchor_cb = c;
    pthread_mutex_unlock(&g_ts_lock);
}

static uint64_t ts_map(uint64_t mono)
{
    if (!mono) return 0;
    double v = g_ts_anchor_cb + g_ts_scale * ((double)mono - g_ts_anchor_mono);
    return v <= 0 ? 0 : (uint64_t)(v + 0.5);
}

static void map_record(uint8_t *rec)
{
    if (!g_ts_cb) return;
    uint32_t kind;
    memcpy(&kind, rec, 4);
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
        CUpti_ActivityKernel9 *r = (CUpti_ActivityKernel9 *)rec;
        r->start = ts_map(r->start);
        r->end = ts_map(r->end);
        r->completed = ts_map(r->completed);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        CUpti_ActivityMemcpy6 *r = (CUpti_ActivityMemcpy6 *)rec;
        r->start = ts_map(r->start);
        r->end = ts_map(r->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        CUpti_ActivityMemset4 *r = (CUpti_ActivityMemset4 *)rec;
        r->start = ts_map(r->start);
        r->end = ts_map(r->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        CUpti_ActivityAPI *r = (CUpti_ActivityAPI *)rec;
        r->start = ts_map(r->start);
        r->end = ts_map(r->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        CUpti_ActivitySynchronization2 *r = (CUpti_ActivitySynchronization2 *)rec;
        r->start = ts_map(r->start);
        r->end = ts_map(r->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
        CUpti_ActivityMemory4 *r = (CUpti_ActivityMemory4 *)rec;
        r->timestamp = ts_map(r->timestamp);
        break;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        CUpti_ActivityOverhead3 *r = (CUpti_ActivityOverhead3 *)rec;
        r->start = ts_map(r->start);
        r->end = ts_map(r->end);
        break;
    }
    default: break;
    }
}

/* ---------------------------------------------------------------- delivery */

static void complete_cur_locked(void)
{
    if (!g_cur) return;
    uint8_t *b = g_cur;
    size_t size = g_cur_size, used = g_cur_used;
    g_cur = NULL;
    g_cur_size = g_cur_used = 0;
    if (g_cmp) g_cmp(NULL, 0, b, size, used);
}

static int request_locked(void)
{
    if (!g_req) return 0;
    uint8_t *b = NULL;
    size_t size = 0, maxrec = 0;
    uint64_t t0 = sg_now_ns();
    g_req(&b, &size, &maxrec);
    uint64_t t1 = sg_now_ns();
    if (!b || size < 64) return 0;
    g_cur = b;
    g_cur_size = size;
    g_cur_used = 0;
    if (sgc_kind_enabled(CUPTI_ACTIVITY_KIND_OVERHEAD)) {
        CUpti_ActivityOverhead3 o;
        memset(&o, 0, sizeof o);
        o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
        o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST;
        o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
        o.objectId.pt.processId = (uint32_t)getpid();
        o.objectId.pt.threadId = sgc_thread_id();
        o.start = t0;
        o.end = t1;
        stage(&o, sizeof o);
    }
    return 1;
}

/* Delivers the records staged so far into the tool's buffers; returns how many buffers it requested
 * from the tool (each stages an OVERHEAD record of its own, delivered by the next pass). */
static unsigned deliver_staged(void)
{
    unsigned requests = 0;
    /* take the staged records, leaving the spare buffer in their place: staging then (almost)
     * never allocates, which matters when a signal handler interrupted malloc to call CUDA */
    stage_lock();
    uint8_t *st = g_stage;
    size_t len = g_stage_len, cap = g_stage_cap;
    g_stage = g_stage_spare;
    g_stage_cap = g_stage_spare_cap;
    g_stage_len = 0;
    g_stage_spare = NULL;
    g_stage_spare_cap = 0;
    stage_unlock();
    for (size_t off = 0; off < len;) {
        uint8_t *rec = st + off;
        uint32_t kind;
        memcpy(&kind, rec, 4);
        size_t size = record_size(kind);
        size_t asz = (size + 7) & ~(size_t)7;
        off += asz;
        if (!size) break;
        g_record_count++;
        if (g_drop_every && g_record_count % g_drop_every == 0) {
            count_drop();
            continue;
        }
        map_record(rec);
        if (g_cur && g_cur_used + asz > g_cur_size) complete_cur_locked();
        if (!g_cur) {
            if (!request_locked()) {
                count_drop();
                continue;
            }
            requests++;
        }
        if (g_cur_used + asz > g_cur_size) {
            count_drop();
            continue;
        }
        memcpy(g_cur + g_cur_used, rec, size);
        memset(g_cur + g_cur_used + size, 0, asz - size);
        g_cur_used += asz;
    }
    stage_lock();
    if (!g_stage_spare) {
        g_stage_spare = st;
        g_stage_spare_cap = cap;
        st = NULL;
    }
    stage_unlock();
    stage_buf_free(st, cap);
    return requests;
}

void sgc_deliver(int flush_partial, int forced)
{
    pthread_mutex_lock(&g_deliver_lock);
    if (g_ts_cb) ts_calibrate();
    /* A delivery also hands over what it recorded itself, the OVERHEAD records of the buffers it
     * requested: after a forced flush nothing is left staged, not even the flush's own overhead. */
    while (deliver_staged() > 0) {
    }
    uint64_t now = sg_now_ns();
    if (!flush_partial && g_period_ns && now - g_last_period_flush >= g_period_ns) flush_partial = 1;
    if (flush_partial) {
        g_last_period_flush = now;
        if (g_cur && (g_cur_used > 0 || forced)) complete_cur_locked();
    }
    pthread_mutex_unlock(&g_deliver_lock);
}

int sgc_worker_has_period(uint64_t *p)
{
    *p = g_period_ns;
    return g_period_ns != 0;
}

void sgc_atfork_child(void)
{
    __atomic_store_n(&g_dropped, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_dropped_total, 0, __ATOMIC_RELAXED);
    pthread_mutex_init(&g_stage_lock, NULL);
    pthread_mutex_init(&g_deliver_lock, NULL);
    pthread_mutex_init(&g_ts_lock, NULL);
    pthread_mutex_init(&g_sub_lock, NULL);
    g_stage_len = 0;
}

/* The ground truth of what this process's CUPTI dropped, once at exit, when a tool took activity
 * records: {"type":"cupti_dropped","records":N}. */
void sgc_write_truth(void)
{
    if (!g_cmp) return;
    char j[192];
    snprintf(j, sizeof j,
             "{\"type\":\"cupti_dropped\",\"pid\":%d,\"rank\":%d,\"device\":-1,\"stream\":-1,\"records\":%llu}",
             (int)getpid(), sg_rank(), (unsigned long long)__atomic_load_n(&g_dropped_total, __ATOMIC_RELAXED));
    sg_truth_line(j);
}

/* ---------------------------------------------------------------- the API (forwarded by libcupti) */

CUptiResult sgc_cuptiActivityEnable(CUpti_ActivityKind kind)
{
    sg_init();
    env_init();
    if (g_cupti_off) return CUPTI_ERROR_NOT_INITIALIZED;
    if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
    if (g_kind_refusal[kind]) return g_kind_refusal[kind];
    if (!record_size(kind) && kind != CUPTI_ACTIVITY_KIND_GRAPH_TRACE) return CUPTI_ERROR_NOT_COMPATIBLE;
    __atomic_store_n(&g_kind_on[kind], 1, __ATOMIC_RELAXED);
    sg_worker_kick();
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityDisable(CUpti_ActivityKind kind)
{
    env_init();
    if (g_cupti_off) return CUPTI_ERROR_NOT_INITIALIZED;
    if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
    __atomic_store_n(&g_kind_on[kind], 0, __ATOMIC_RELAXED);
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                               CUpti_BuffersCallbackCompleteFunc cmp)
{
    sg_init();
    env_init();
    if (!req || !cmp) return CUPTI_ERROR_INVALID_PARAMETER;
    g_req = req;
    g_cmp = cmp;
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityFlushAll(uint32_t flag)
{
    sg_init();
    sg_progress(0);
    sg_truth_flush();
    sgc_deliver(1, (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityFlushPeriod(uint32_t ms)
{
    g_period_ns = (uint64_t)ms * 1000000ull;
    sg_worker_kick();
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
    if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t off = 0;
    if (*record) {
        uint8_t *cur = (uint8_t *)*record;
        if (cur < buffer || cur >= buffer + valid) return CUPTI_ERROR_INVALID_PARAMETER;
        uint32_t kind;
        memcpy(&kind, cur, 4);
        size_t sz = record_size(kind);
        if (!sz) return CUPTI_ERROR_INVALID_KIND;
        off = (size_t)(cur - buffer) + ((sz + 7) & ~(size_t)7);
    }
    if (off + 4 > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    uint32_t kind;
    memcpy(&kind, buffer + off, 4);
    size_t sz = record_size(kind);
    if (!sz || off + sz > valid) return CUPTI_ERROR_INVALID_KIND;
    *record = (CUpti_Activity *)(buffer + off);
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx;
    (void)stream;
    if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
    *dropped = __atomic_exchange_n(&g_dropped, 0, __ATOMIC_RELAXED);
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityAttribute(int set, CUpti_ActivityAttribute attr, size_t *size, void *value)
{
    if (!size || !value) return CUPTI_ERROR_INVALID_PARAMETER;
    size_t *slot = NULL;
    static size_t misc[16];
    switch (attr) {
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE: slot = &g_attr_buffer_size; break;
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT: slot = &g_attr_pool_limit; break;
    default:
        if ((unsigned)attr < 16) {
            slot = &misc[attr];
            break;
        }
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if (set) {
        if (*size == sizeof(size_t))
            memcpy(slot, value, sizeof(size_t));
        else if (*size == 1)
            *slot = *(uint8_t *)value;
        else if (*size == 4)
            *slot = *(uint32_t *)value;
        else
            return CUPTI_ERROR_INVALID_PARAMETER;
    } else {
        if (*size < sizeof(size_t)) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
        memcpy(value, slot, sizeof(size_t));
        *size = sizeof(size_t);
    }
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiGetTimestamp(uint64_t *ts)
{
    if (!ts) return CUPTI_ERROR_INVALID_PARAMETER;
    *ts = g_ts_cb ? g_ts_cb() : sg_now_ns();
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    if (!f) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_deliver_lock);
    g_ts_cb = f;
    double m, c;
    ts_sample(&m, &c);
    uint64_t m0 = sg_now_ns();
    while (sg_now_ns() - m0 < 2000000) {
    } /* 2 ms baseline for an initial scale */
    double m2, c2;
    ts_sample(&m2, &c2);
    pthread_mutex_lock(&g_ts_lock);
    g_ts_first_mono = m;
    g_ts_first_cb = c;
    g_ts_scale = m2 > m ? (c2 - c) / (m2 - m) : 1.0;
    g_ts_anchor_mono = m2;
    g_ts_anchor_cb = c2;
    pthread_mutex_unlock(&g_ts_lock);
    pthread_mutex_unlock(&g_deliver_lock);
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    if ((int)kind <= 0 || kind >= EXT_KINDS) return CUPTI_ERROR_INVALID_PARAMETER;
    if (t_ext_n[kind] >= EXT_DEPTH) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    t_ext[kind][t_ext_n[kind]++] = id;
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last)
{
    if ((int)kind <= 0 || kind >= EXT_KINDS) return CUPTI_ERROR_INVALID_PARAMETER;
    if (t_ext_n[kind] == 0) return CUPTI_ERROR_QUEUE_EMPTY;
    uint64_t v = t_ext[kind][--t_ext_n[kind]];
    if (last) *last = v;
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiActivityEnableApi(int domain, CUpti_CallbackId cbid, uint8_t enable)
{
    if (domain == SG_DOMAIN_RUNTIME && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
        g_act_rt_off[cbid] = !enable;
    else if (domain == SG_DOMAIN_DRIVER && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
        g_act_drv_off[cbid] = !enable;
    else
        return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiSetThreadIdType(CUpti_ActivityThreadIdType t)
{
    if (t != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && t != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
        return CUPTI_ERROR_INVALID_PARAMETER;
    g_thread_id_type = t;
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiGetThreadIdType(CUpti_ActivityThreadIdType *t)
{
    if (!t) return CUPTI_ERROR_INVALID_PARAMETER;
    *t = (CUpti_ActivityThreadIdType)g_thread_id_type;
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiFinalize(void)
{
    sg_progress(0);
    sgc_deliver(1, 1);
    memset(g_kind_on, 0, sizeof g_kind_on);
    pthread_mutex_lock(&g_sub_lock);
    g_subscribed = 0;
    g_sub_cb = NULL;
    memset(g_cb_rt, 0, sizeof g_cb_rt);
    memset(g_cb_drv, 0, sizeof g_cb_drv);
    pthread_mutex_unlock(&g_sub_lock);
    return CUPTI_SUCCESS;
}

/* callbacks API */
static int g_sub_token;

CUptiResult sgc_cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *userdata)
{
    sg_init();
    env_init();
    if (!sub) return CUPTI_ERROR_INVALID_PARAMETER;
    if (g_cupti_off) return CUPTI_ERROR_NOT_INITIALIZED;
    if (g_cupti_busy) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    pthread_mutex_lock(&g_sub_lock);
    if (g_subscribed) {
        pthread_mutex_unlock(&g_sub_lock);
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    g_sub_cb = cb;
    g_sub_userdata = userdata;
    memset(g_cb_rt, 0, sizeof g_cb_rt);
    memset(g_cb_drv, 0, sizeof g_cb_drv);
    *sub = (CUpti_SubscriberHandle)&g_sub_token;
    __atomic_store_n(&g_subscribed, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_sub_lock);
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    if (sub != (CUpti_SubscriberHandle)&g_sub_token || !g_subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&g_sub_lock);
    __atomic_store_n(&g_subscribed, 0, __ATOMIC_RELEASE);
    memset(g_cb_rt, 0, sizeof g_cb_rt);
    memset(g_cb_drv, 0, sizeof g_cb_drv);
    pthread_mutex_unlock(&g_sub_lock);
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain,
                                    CUpti_CallbackId cbid)
{
    if (sub != (CUpti_SubscriberHandle)&g_sub_token || !g_subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
        g_cb_rt[cbid] = !!enable;
    else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
        g_cb_drv[cbid] = !!enable;
    else if (domain > CUPTI_CB_DOMAIN_INVALID && domain < CUPTI_CB_DOMAIN_SIZE)
        return CUPTI_SUCCESS; /* other domains: accepted, never called */
    else
        return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain)
{
    if (sub != (CUpti_SubscriberHandle)&g_sub_token || !g_subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        memset(g_cb_rt, !!enable, sizeof g_cb_rt);
    else if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
        memset(g_cb_drv, !!enable, sizeof g_cb_drv);
    else if (!(domain > CUPTI_CB_DOMAIN_INVALID && domain < CUPTI_CB_DOMAIN_SIZE))
        return CUPTI_ERROR_INVALID_PARAMETER;
    g_cb_rt[0] = g_cb_drv[0] = 0;
    return CUPTI_SUCCESS;
}

CUptiResult sgc_cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle sub)
{
    CUptiResult r = sgc_cuptiEnableDomain(enable, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    if (r == CUPTI_SUCCESS) r = sgc_cuptiEnableDomain(enable, sub, CUPTI_CB_DOMAIN_DRIVER_API);
    return r;
}

CUptiResult sgc_cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle sub, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid)
{
    if (!enable || sub != (CUpti_SubscriberHandle)&g_sub_token) return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
        *enable = g_cb_rt[cbid];
    else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
        *enable = g_cb_drv[cbid];
    else
        *enable = 0;
    return CUPTI_SUCCESS;
}
