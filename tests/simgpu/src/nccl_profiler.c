/*
 * nccl_profiler.c - loads and drives an NCCL profiler plugin as NCCL does (see nccl_profiler.h),
 * through the structs of nccl_profiler_abi.h; and the node / NIC model of the simulated NCCL.
 */
#define _GNU_SOURCE
#include "nccl_profiler.h"
#include "nccl_profiler_abi.h"
#include "nic_counters.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_loaded;  /* 0: not tried, 1: tried */
static int g_version; /* of the table in use; 0: none */
static sgp_profiler_v1 *g_v1;
static sgp_profiler_v2 *g_v2;
static sgp_profiler_v3 *g_v3;
static sgp_profiler_v4 *g_v4;
static sgp_profiler_v5 *g_v5;
static sgp_profiler_v6 *g_v6;

static double env_num(const char *name, double def)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end;
    double d = strtod(v, &end);
    return end != v ? d : def;
}

/* Ranks per node (0: one node). */
static int ranks_per_node(void)
{
    int nodes = (int)env_num("SIMGPU_NODES", 1);
    if (nodes <= 1) return 0;
    int world = (int)env_num("WORLD_SIZE", nodes);
    int per = (int)env_num("SIMGPU_RANKS_PER_NODE", (world + nodes - 1) / nodes);
    return per < 1 ? 1 : per;
}

int sgp_node(void)
{
    const char *r = getenv("RANK");
    int per = ranks_per_node();
    return per && r && *r ? atoi(r) / per : 0;
}

int sgp_rank_on_node(void)
{
    const char *r = getenv("RANK");
    int per = ranks_per_node();
    return per && r && *r ? atoi(r) % per : 0;
}

double sgp_nic_gbps(int node)
{
    char name[64];
    snprintf(name, sizeof name, "SIMGPU_NIC_GBPS_NODE%d", node);
    double g = env_num(name, env_num("SIMGPU_NIC_GBPS", 25.0));
    /* other traffic on the NIC takes its share of the line (NCCL keeps at least 5%) */
    double left = g - sgn_nic_other_gbps(node);
    if (left < 0.05 * g) left = 0.05 * g;
    return left > 0 ? left : 1e-9;
}

double sgp_nic_latency_ns(void) { return env_num("SIMGPU_NIC_LATENCY_US", 10.0) * 1000.0; }

/* dlopen + newest-first lookup, once per process. */
static void load_plugin(void)
{
    pthread_mutex_lock(&g_load_lock);
    if (!g_loaded) {
        g_loaded = 1;
        const char *name = getenv("NCCL_PROFILER_PLUGIN");
        void *lib = name && *name && strcasecmp(name, "none") != 0 ? dlopen(name, RTLD_NOW | RTLD_LOCAL) : NULL;
        int max = (int)env_num("SIMGPU_NCCL_PROFILER_MAX_VERSION", 6);
        static const char *const syms[] = {"ncclProfiler_v6", "ncclProfiler_v5", "ncclProfiler_v4",
                                           "ncclProfiler_v3", "ncclProfiler_v2", "ncclProfiler_v1"};
        for (int i = 0; lib && i < 6 && !g_version; i++) {
            int v = 6 - i;
            void *t = v <= max ? dlsym(lib, syms[i]) : NULL;
            if (!t) continue;
            if (v == 6) g_v6 = t;
            if (v == 5) g_v5 = t;
            if (v == 4) g_v4 = t;
            if (v == 3) g_v3 = t;
            if (v == 2) g_v2 = t;
            if (v == 1) g_v1 = t;
            g_version = v;
        }
    }
    pthread_mutex_unlock(&g_load_lock);
}

void sgp_comm_init(sgp_comm *pc, uint64_t hash, const char *name, int nnodes, int nranks, int rank)
{
    memset(pc, 0, sizeof *pc);
    pc->hash = hash;
    pc->name = name;
    load_plugin();
    int mask = 0, err = 1;
    void *ctx = NULL;
    if (g_version == 3) err = g_v3->init(&ctx, &mask);
    if (g_version == 2) err = g_v2->init(&ctx, &mask);
    if (g_version == 1) err = g_v1->init(&ctx, &mask);
    if (g_version == 6) err = g_v6->init(&ctx, hash, &mask, name, nnodes, nranks, rank, NULL);
    if (g_version == 5) err = g_v5->init(&ctx, hash, &mask, name, nnodes, nranks, rank, NULL);
    if (g_version == 4) err = g_v4->init(&ctx, &mask, name, hash, nnodes, nranks, rank, NULL);
    if (err) return; /* NCCL: "Profiler init failed ... Continue without profiler" */
    pc->ctx = ctx;
    pc->mask = mask;
}

/* NCCL 2.23's numbering (ncclFunc_t, ncclDataType_t, NCCL_ALGO_*, NCCL_PROTO_*) for v1's fields. */
static uint8_t index_of(const char *name, const char *const *names, int n, uint8_t none)
{
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, names[i]) == 0) return (uint8_t)i;
    return none;
}
static uint8_t v1_func(const char *f)
{
    static const char *const n[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce",
                                    "SendRecv", "Send", "Recv"};
    return index_of(f, n, 8, 8);
}
static uint8_t v1_dtype(const char *d)
{
    static const char *const n[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                                    "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};
    return index_of(d, n, 10, 255);
}
static uint8_t v1_algo(const char *a)
{
    static const char *const n[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
    return index_of(a, n, 7, 255);
}
static uint8_t v1_proto(const char *p)
{
    static const char *const n[] = {"LL", "LL128", "SIMPLE"};
    return index_of(p, n, 3, 255);
}

/* Versions 1-3: the v6 descriptor narrowed to NCCL 2.23-2.24's (the group parents the task; the
 * communicator's name and hash in the task; v1 numeric, v2 with trafficBytes). */
static void *start_event_v123(void *ctx, const sgp_descr_v6 *d, const sgp_comm *pc)
{
    void *h = NULL;
    if (d->type >= SGP_GROUP_API || (d->type == SGP_KERNEL_CH && g_version < 3)) return NULL;
    void *parent = d->type == SGP_COLL ? d->coll.parentGroup : d->type == SGP_P2P ? d->p2p.parentGroup : d->parentObj;
    uint64_t hash = pc ? pc->hash : 0;
    const char *name = pc ? pc->name : NULL;
    if (g_version == 1) {
        sgp_descr_v1 x;
        memset(&x, 0, sizeof x);
        x.type = (uint8_t)d->type, x.parentObj = parent, x.rank = d->rank;
        if (d->type == SGP_COLL) {
            x.coll.name = name, x.coll.commHash = hash, x.coll.seqNumber = d->coll.seqNumber;
            x.coll.func = v1_func(d->coll.func), x.coll.sendBuff = d->coll.sendBuff, x.coll.recvBuff = d->coll.recvBuff;
            x.coll.count = d->coll.count, x.coll.root = d->coll.root, x.coll.datatype = v1_dtype(d->coll.datatype);
            x.coll.nMaxChannels = d->coll.nChannels, x.coll.nWarps = d->coll.nWarps;
            x.coll.algo = v1_algo(d->coll.algo), x.coll.proto = v1_proto(d->coll.proto);
        } else if (d->type == SGP_P2P) {
            x.p2p.name = name, x.p2p.commHash = hash, x.p2p.func = v1_func(d->p2p.func), x.p2p.buff = d->p2p.buff;
            x.p2p.datatype = v1_dtype(d->p2p.datatype), x.p2p.count = d->p2p.count, x.p2p.peer = d->p2p.peer;
        } else if (d->type == SGP_PROXY_OP) {
            x.proxyOp = d->proxyOp;
        } else if (d->type == SGP_PROXY_STEP) {
            x.proxyStep = d->proxyStep;
        }
        g_v1->startEvent(ctx, &h, &x);
        return h;
    }
    /* v2 and v3 share the members tprof's simulated NCCL fills, by name (v2 has trafficBytes). */
#define SGP_NARROW_V23(T, table)                                                                                    \
    do {                                                                                                            \
        T x;                                                                                                        \
        memset(&x, 0, sizeof x);                                                                                    \
        x.type = (uint8_t)d->type, x.parentObj = parent, x.rank = d->rank;                                          \
        if (d->type == SGP_COLL) {                                                                                  \
            x.coll.name = name, x.coll.commHash = hash, x.coll.seqNumber = d->coll.seqNumber;                       \
            x.coll.func = d->coll.func, x.coll.sendBuff = d->coll.sendBuff, x.coll.recvBuff = d->coll.recvBuff;     \
            x.coll.count = d->coll.count, x.coll.root = d->coll.root, x.coll.datatype = d->coll.datatype;           \
            x.coll.nMaxChannels = d->coll.nChannels, x.coll.nWarps = d->coll.nWarps;                                \
            x.coll.algo = d->coll.algo, x.coll.proto = d->coll.proto;                                               \
        } else if (d->type == SGP_P2P) {                                                                            \
            x.p2p.name = name, x.p2p.commHash = hash, x.p2p.func = d->p2p.func, x.p2p.buff = d->p2p.buff;           \
            x.p2p.datatype = d->p2p.datatype, x.p2p.count = d->p2p.count, x.p2p.peer = d->p2p.peer;                 \
        } else if (d->type == SGP_PROXY_OP) {                                                                       \
            x.proxyOp = d->proxyOp;                                                                                 \
        } else if (d->type == SGP_PROXY_STEP) {                                                                     \
            x.proxyStep = d->proxyStep;                                                                             \
        }                                                                                                           \
        SGP_NARROW_KERNEL_CH(x);                                                                                    \
        table->startEvent(ctx, &h, &x);                                                                             \
    } while (0)
#define SGP_NARROW_KERNEL_CH(x) (void)0
    if (g_version == 2) SGP_NARROW_V23(sgp_descr_v2, g_v2);
#undef SGP_NARROW_KERNEL_CH
#define SGP_NARROW_KERNEL_CH(x)                                                                                     \
    if (d->type == SGP_KERNEL_CH) x.kernelCh.channelId = d->kernelCh.channelId
    if (g_version == 3) SGP_NARROW_V23(sgp_descr_v3, g_v3);
#undef SGP_NARROW_KERNEL_CH
#undef SGP_NARROW_V23
    return h;
}

/* startEvent through the table in use: the descriptor is built as v6 and narrowed as NCCL's
 * adapters narrow it (v4: one-byte type, no API events, the group as the task's parent; v1-v3:
 * start_event_v123). `pc`: the communicator, for the tasks of v1-v3 (NULL on the proxy thread). */
static void *start_event(void *ctx, sgp_descr_v6 *d, const sgp_comm *pc)
{
    void *h = NULL;
    if (g_version >= 1 && g_version <= 3) return start_event_v123(ctx, d, pc);
    if (g_version == 6) {
        g_v6->startEvent(ctx, &h, d);
    } else if (g_version == 5) {
        sgp_descr_v5 d5;
        memset(&d5, 0, sizeof d5);
        d5.type = d->type;
        d5.parentObj = d->parentObj;
        d5.rank = d->rank;
        memcpy(&d5.coll, &d->coll, sizeof d5 - offsetof(sgp_descr_v5, coll)); /* same members, same offsets */
        g_v5->startEvent(ctx, &h, &d5);
    } else if (g_version == 4) {
        if (d->type >= SGP_GROUP_API) return NULL;
        sgp_descr_v4 d4;
        memset(&d4, 0, sizeof d4);
        d4.type = (uint8_t)d->type;
        d4.parentObj = d->parentObj;
        d4.rank = d->rank;
        if (d->type == SGP_COLL) {
            d4.parentObj = d->coll.parentGroup;
            memcpy(&d4.coll, &d->coll, sizeof d4.coll); /* v5's collective = v4's + parentGroup at the end */
        } else if (d->type == SGP_P2P) {
            d4.parentObj = d->p2p.parentGroup;
            d4.p2p.func = d->p2p.func;
            d4.p2p.buff = d->p2p.buff;
            d4.p2p.datatype = d->p2p.datatype;
            d4.p2p.count = d->p2p.count;
            d4.p2p.peer = d->p2p.peer;
            d4.p2p.nChannels = d->p2p.nChannels;
        } else if (d->type == SGP_PROXY_OP) {
            d4.proxyOp = d->proxyOp;
        } else if (d->type == SGP_PROXY_STEP) {
            d4.proxyStep = d->proxyStep;
        } else if (d->type == SGP_KERNEL_CH) {
            d4.kernelCh = d->kernelCh;
        }
        g_v4->startEvent(ctx, &h, &d4);
    }
    return h;
}

static void stop_event(void *h)
{
    if (!h) return;
    if (g_version == 6) g_v6->stopEvent(h);
    if (g_version == 5) g_v5->stopEvent(h);
    if (g_version == 4) g_v4->stopEvent(h);
    if (g_version == 3) g_v3->stopEvent(h);
    if (g_version == 2) g_v2->stopEvent(h);
    if (g_version == 1) g_v1->stopEvent(h);
}

/* A proxy operation's own state (versions 1-3): its steps so far and the bytes transferred so far. */
static void record_op_state(void *h, int state, int steps, size_t trans_size)
{
    if (!h) return;
    sgp_args_v1 a = {.proxyOp = {trans_size, steps}};
    if (g_version == 3) g_v3->recordEventState(h, state, &a);
    if (g_version == 2) g_v2->recordEventState(h, state, &a);
    if (g_version == 1) g_v1->recordEventState(h, state, &a);
}

/* A step's state: versions 4+ with its transfer size, 1-3 without arguments (as NCCL 2.23-2.24). */
static void record_state(void *h, int state, sgp_args_v4 *a)
{
    if (!h) return;
    if (g_version == 3) g_v3->recordEventState(h, state, NULL);
    if (g_version == 2) g_v2->recordEventState(h, state, NULL);
    if (g_version == 1) g_v1->recordEventState(h, state, NULL);
    if (g_version == 6) g_v6->recordEventState(h, state, a);
    if (g_version == 5) g_v5->recordEventState(h, state, a);
    if (g_version == 4) g_v4->recordEventState(h, state, a);
}

/* ---------------------------------------------------------------- the proxy thread */

static pthread_mutex_t g_q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_q_cond = PTHREAD_COND_INITIALIZER;
static sgp_job *g_q_head, *g_q_tail;
static int g_q_busy;      /* jobs queued or being run */
static pid_t g_proxy_pid; /* process whose proxy thread runs (a fork child starts its own) */

static void sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
}

#define MAX_OPS 64
static void run_job(const sgp_job *j)
{
    sgp_descr_v6 d;
    void *ops[MAX_OPS];
    int is_send[MAX_OPS], nops = 0;
    int nsteps = 4;
    if ((j->mask & SGP_PROXY_OP) && j->task) {
        for (int ch = 0; ch < j->nchannels; ch++)
            for (int s = 0; s < 2 && nops < MAX_OPS; s++) {
                int peer = s ? j->recv_peer : j->send_peer;
                if (peer < 0) continue;
                memset(&d, 0, sizeof d);
                d.type = SGP_PROXY_OP;
                d.parentObj = j->task;
                d.proxyOp.pid = getpid();
                d.proxyOp.channelId = (uint8_t)ch;
                d.proxyOp.peer = peer;
                d.proxyOp.nSteps = nsteps;
                d.proxyOp.chunkSize = (int)(j->bytes_per_op / (uint64_t)nsteps);
                d.proxyOp.isSend = !s;
                is_send[nops] = !s;
                ops[nops++] = start_event(j->ctx, &d, NULL);
            }
    }
    if (nops) {
        uint64_t wire_end = j->own_ns && j->xfer_ns + j->own_ns < j->end_ns ? j->xfer_ns + j->own_ns : j->end_ns;
        uint64_t seg = (wire_end - j->xfer_ns) / (uint64_t)nsteps;
        sleep_until(j->start_ns);
        /* Versions 1-3: the operation's own states carry the bytes transferred so far (NCCL 2.24). */
        int old = g_version <= 3;
        size_t moved[MAX_OPS] = {0};
        for (int k = 0; k < nsteps; k++) {
            void *steps[MAX_OPS] = {0};
            uint64_t chunk = j->bytes_per_op / (uint64_t)nsteps + (k == nsteps - 1 ? j->bytes_per_op % (uint64_t)nsteps : 0);
            for (int i = 0; i < nops; i++) {
                if (old) record_op_state(ops[i], is_send[i] ? SGP_OP_SEND_POSTED : SGP_OP_RECV_POSTED, k, moved[i]);
                if (!(j->mask & SGP_PROXY_STEP)) continue;
                memset(&d, 0, sizeof d);
                d.type = SGP_PROXY_STEP;
                d.parentObj = ops[i];
                d.proxyStep.step = k;
                steps[i] = ops[i] ? start_event(j->ctx, &d, NULL) : NULL;
                sgp_args_v4 a = {.proxyStep = {(size_t)chunk}};
                int send_first = old ? SGP_STEP_SEND_GPU_WAIT : SGP_STEP_SEND_PEER_WAIT_V4; /* PeerWait is v4's */
                record_state(steps[i], is_send[i] ? send_first : SGP_STEP_RECV_WAIT, &a);
            }
            if (k == 0) sleep_until(j->xfer_ns); /* the first step waits for the peers */
            for (int i = 0; i < nops; i++) {
                if (!is_send[i]) continue;
                sgp_args_v4 a = {.proxyStep = {(size_t)chunk}};
                if (old) {
                    record_op_state(ops[i], SGP_OP_SEND_REM_FIFO_WAIT, k, moved[i]);
                    moved[i] += chunk;
                    record_op_state(ops[i], SGP_OP_SEND_TRANSMITTED, k + 1, moved[i]);
                }
                record_state(steps[i], SGP_STEP_SEND_WAIT, &a);
            }
            sleep_until(k == nsteps - 1 ? wire_end : j->xfer_ns + (uint64_t)(k + 1) * seg);
            for (int i = 0; i < nops; i++) {
                if (old && !is_send[i]) {
                    moved[i] += chunk;
                    record_op_state(ops[i], SGP_OP_RECV_RECEIVED, k + 1, moved[i]);
                    record_op_state(ops[i], SGP_OP_RECV_TRANSMITTED, k + 1, moved[i]);
                }
                stop_event(steps[i]);
                if (old) record_op_state(ops[i], is_send[i] ? SGP_OP_SEND_DONE : SGP_OP_RECV_DONE, k + 1, moved[i]);
            }
        }
        sleep_until(j->end_ns); /* the slowest rank's transfer */
        for (int i = 0; i < nops; i++) stop_event(ops[i]);
    }
    if ((j->mask & SGP_KERNEL_CH) && j->task) {
        sleep_until(j->end_ns);
        for (int ch = 0; ch < j->nchannels; ch++) {
            memset(&d, 0, sizeof d);
            d.type = SGP_KERNEL_CH;
            d.parentObj = j->task;
            d.kernelCh.channelId = (uint8_t)ch;
            d.kernelCh.pTimer = j->start_ns;
            void *h = start_event(j->ctx, &d, NULL);
            sgp_args_v4 a = {.kernelCh = {j->end_ns}};
            if (g_version >= 4) record_state(h, SGP_KERNEL_CH_STOP, &a); /* v3: no timers, no stop state */
            stop_event(h);
        }
    }
}

static void *proxy_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g_q_lock);
        while (!g_q_head) pthread_cond_wait(&g_q_cond, &g_q_lock);
        sgp_job *j = g_q_head;
        g_q_head = j->next;
        if (!g_q_head) g_q_tail = NULL;
        pthread_mutex_unlock(&g_q_lock);
        run_job(j);
        free(j);
        pthread_mutex_lock(&g_q_lock);
        g_q_busy--;
        pthread_cond_broadcast(&g_q_cond);
        pthread_mutex_unlock(&g_q_lock);
    }
    return NULL;
}

void sgp_complete(const sgp_job *src)
{
    if (!src->ctx || !src->task || !(src->mask & (SGP_PROXY_OP | SGP_KERNEL_CH))) return;
    sgp_job *j = malloc(sizeof *j);
    if (!j) return;
    *j = *src;
    j->next = NULL;
    pthread_mutex_lock(&g_q_lock);
    if (g_proxy_pid != getpid()) {
        g_q_head = g_q_tail = NULL; /* a fork child: the parent's jobs are not its own */
        g_q_busy = 0;
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, proxy_main, NULL) == 0) g_proxy_pid = getpid();
        pthread_attr_destroy(&at);
        if (g_proxy_pid != getpid()) {
            pthread_mutex_unlock(&g_q_lock);
            free(j);
            return;
        }
    }
    if (g_q_tail) g_q_tail->next = j;
    else g_q_head = j;
    g_q_tail = j;
    g_q_busy++;
    pthread_cond_broadcast(&g_q_cond);
    pthread_mutex_unlock(&g_q_lock);
}

void sgp_comm_fini(sgp_comm *pc)
{
    if (!pc->ctx) return;
    /* NCCL's proxy finishes its operations before the communicator goes: wait (at most 5 s). */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct timespec until = {now.tv_sec + 5, now.tv_nsec};
    pthread_mutex_lock(&g_q_lock);
    while (g_q_busy > 0 && g_proxy_pid == getpid())
        if (pthread_cond_timedwait(&g_q_cond, &g_q_lock, &until) != 0) break;
    pthread_mutex_unlock(&g_q_lock);
    if (g_version == 6) g_v6->finalize(pc->ctx);
    if (g_version == 5) g_v5->finalize(pc->ctx);
    if (g_version == 4) g_v4->finalize(pc->ctx);
    if (g_version == 3) g_v3->finalize(pc->ctx);
    if (g_version == 2) g_v2->finalize(pc->ctx);
    if (g_version == 1) g_v1->finalize(pc->ctx);
    pc->ctx = NULL;
}

/* ---------------------------------------------------------------- host-side events */

void *sgp_api_start(const sgp_comm *pc, const sgp_task *t, void *stream, int captured)
{
    int bit = t->p2p ? SGP_P2P_API : SGP_COLL_API;
    if (!pc->ctx || !(pc->mask & bit)) return NULL;
    sgp_descr_v6 d;
    memset(&d, 0, sizeof d);
    d.type = (uint64_t)bit;
    if (t->p2p) {
        d.p2pApi.func = t->func;
        d.p2pApi.count = t->count;
        d.p2pApi.datatype = t->datatype;
        d.p2pApi.stream = stream;
        d.p2pApi.graphCaptured = captured != 0;
    } else {
        d.collApi.func = t->func;
        d.collApi.count = t->count;
        d.collApi.datatype = t->datatype;
        d.collApi.root = t->root_or_peer;
        d.collApi.stream = stream;
        d.collApi.graphCaptured = captured != 0;
    }
    return start_event(pc->ctx, &d, pc);
}

void *sgp_group_start(const sgp_comm *pc)
{
    int any = SGP_GROUP | SGP_COLL | SGP_P2P | SGP_PROXY_OP | SGP_PROXY_STEP | SGP_KERNEL_CH | SGP_NET_PLUGIN;
    if (!pc->ctx || !(pc->mask & any)) return NULL;
    sgp_descr_v6 d;
    memset(&d, 0, sizeof d);
    d.type = SGP_GROUP;
    return start_event(pc->ctx, &d, pc);
}

void *sgp_task_start(const sgp_comm *pc, void *api, void *group, int rank, const sgp_task *t)
{
    int any = SGP_COLL | SGP_P2P | SGP_PROXY_OP | SGP_PROXY_STEP | SGP_KERNEL_CH | SGP_NET_PLUGIN;
    if (!pc->ctx || !(pc->mask & any)) return NULL;
    sgp_descr_v6 d;
    memset(&d, 0, sizeof d);
    d.parentObj = api;
    d.rank = rank;
    if (t->p2p) {
        d.type = SGP_P2P;
        d.p2p.parentGroup = group;
        d.p2p.func = t->func;
        d.p2p.datatype = t->datatype;
        d.p2p.count = t->count;
        d.p2p.peer = t->root_or_peer;
        d.p2p.nChannels = (uint8_t)t->nchannels;
    } else {
        d.type = SGP_COLL;
        d.coll.parentGroup = group;
        d.coll.seqNumber = t->seq;
        d.coll.func = t->func;
        d.coll.count = t->count;
        d.coll.root = t->root_or_peer;
        d.coll.datatype = t->datatype;
        d.coll.nChannels = (uint8_t)t->nchannels;
        d.coll.nWarps = (uint8_t)t->nwarps;
        d.coll.algo = t->algo;
        d.coll.proto = t->proto;
    }
    return start_event(pc->ctx, &d, pc);
}

void sgp_stop(const sgp_comm *pc, void *handle)
{
    if (pc->ctx) stop_event(handle);
}
