/*
 * nccl.c - mock libnccl.so.2 on the simulated GPU core.
 *
 * Ranks are separate processes (or several communicators of one process, ncclCommInitAll) that
 * meet in a POSIX shared-memory segment named in the ncclUniqueId. Every data-moving call enqueues
 * a deferred kernel on the caller's stream (inside a DRIVER-domain cuLaunchKernelEx API call, as
 * real NCCL launches); the kernel's start is this rank's arrival, published in the segment when
 * the core first polls it; it ends, on every rank, at max(arrivals) + latency + bus bytes / link
 * bandwidth (nccl-tests bus factors; the transport, channels and protocol NCCL_* settings give
 * and their rates: nccl_tuning.h). Layout of the segment: nccl_internal.h.
 *
 * Groups: collectives queued between ncclGroupStart/End are launched one kernel each, in call
 * order, at the outermost ncclGroupEnd; the send/recv of a group are fused into one
 * ncclDevKernel_SendRecv kernel per (communicator, stream), as real NCCL does (so a ring exchange
 * does not deadlock). Outside a group every call launches at once.
 *
 * Derived communicators: ncclCommSplit is a host rendezvous in the parent's segment (every rank
 * publishes its color and key, then joins the child of its color); ncclCommShrink (the surviving
 * ranks) and ncclCommGrow (the parent's ranks plus the joining ones, which hold the id from
 * ncclCommGetUniqueId) compute the child's key from the parent's. Each new communicator writes an
 * `nccl_comm` ground-truth line.
 *
 * One-sided calls: ncclPutSignal / ncclSignal publish, when their kernel ends (put: latency + bytes
 * / link bandwidth), the landing time of one signal per (source, destination) in the segment;
 * ncclWaitSignal's kernel ends when the signals it waits for have all landed. Signals are matched
 * by (source, destination) in order; the mock ignores sigIdx and ctx. Real NCCL moves RMA data with
 * copy engines and stream memory operations; the mock runs one deferred kernel per call.
 *
 * NVTX: like real NCCL (NVTX3, domain "NCCL"), the API calls real NCCL instruments emit a push/pop
 * range named after the function (a registered string) with the same extended payload (schema id,
 * struct layout); the domain is created at first use (ncclGetUniqueId / the init calls). Set
 * NCCL_NVTX_DISABLE=1 to turn that off, as with real NCCL.
 */
#define _GNU_SOURCE
#include "nccl_internal.h"
#include "nccl_profiler.h"
#include "nccl_profiler_abi.h"
#include "nccl_tuning.h"
#include "nic_counters.h"
#include "core_internal.h"
#include "simgpu_core.h"

#include <nvtx3/nvToolsExt.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NX __attribute__((visibility("default")))

/* ------------------------------------------------------------------ helpers */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;    /* comm list; never held over sg_* */
static pthread_mutex_t g_mm_lock = PTHREAD_MUTEX_INITIALIZER; /* mismatch queue; taken inside poll */
static char g_last_error[256];

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_lock);
    memcpy(g_last_error, buf, sizeof buf);
    pthread_mutex_unlock(&g_lock);
}

static double env_double(const char *name, double def)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end;
    double d = strtod(v, &end);
    return end == v ? def : d;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int pid_alive(int32_t pid)
{
    if (pid <= 0) return 0;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

static size_t dtype_size(int dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}
static const char *dtype_name(int dt)
{
    static const char *n[] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2"};
    return dt >= 0 && dt < ncclNumTypes ? n[dt] : "unknown";
}
static const char *redop_name(int op)
{
    switch (op) {
    case ncclSum: return "Sum";
    case ncclProd: return "Prod";
    case ncclMax: case ncclMin: return "MinMax";
    case ncclAvg: return "PreMulSum";
    default: return "Sum";
    }
}

/* ------------------------------------------------------------------ communicators */

enum { OP_ALLREDUCE = 1, OP_ALLGATHER, OP_REDUCESCATTER, OP_BROADCAST, OP_REDUCE, OP_ALLTOALL, OP_SEND, OP_RECV };
static const char *op_truth_name(int op)
{
    static const char *n[] = {"?", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll", "Send", "Recv"};
    return op >= 1 && op <= OP_RECV ? n[op] : "?";
}

#define COMM_MAGIC 0x434f4d4d53474e31ull
struct ncclComm {
    uint64_t magic;
    int rank, nranks, device;
    uint64_t key, gen;
    char hex[17];
    char shm_name[64];
    sgn_shm *hdr;
    size_t map_size;
    pid_t owner;
    uint64_t seq;      /* data-moving calls (ground truth seq, as the shim counts) */
    uint64_t coll_idx; /* collectives (the rendezvous index) */
    uint32_t *send_cnt, *recv_cnt;
    uint32_t *sig_sent, *sig_waited; /* signals sent to / waited for from each peer */
    uint64_t children;               /* split / shrink / grow children made (NCCL's childCount) */
    uint64_t grow_key;               /* key of the unconsumed ncclCommGetUniqueId, 0 when none */
    uint64_t one_sided;              /* one-sided calls (their ground-truth seq) */
    uint64_t coll_seq[OP_RECV + 1];  /* NCCL's per-function sequence numbers (the plugin's seqNumber) */
    int gone;
    int64_t async_error_at;
    sgp_comm prof;               /* the profiler plugin's context (nccl_profiler.c) */
    int node, nnodes;            /* this rank's node; nodes the communicator spans */
    int ppn;                     /* the communicator's ranks on this rank's node */
    int ring_send, ring_recv;    /* ring neighbours on other nodes (-1: same node) */
    struct ncclComm *next;
};
static struct ncclComm *g_comms;

static size_t shm_size(int nranks)
{
    size_t n = (size_t)nranks;
    return sizeof(sgn_shm) + n * sizeof(sgn_rank_slot) + (size_t)SGN_COLL_SLOTS * n * sizeof(sgn_entry) +
           n * n * SGN_P2P_SLOTS * 2 * sizeof(sgn_entry) + n * SGN_SPLIT_SLOTS * sizeof(sgn_split_entry) +
           n * n * SGN_SIG_SLOTS * sizeof(sgn_signal);
}
static sgn_rank_slot *shm_ranks(sgn_shm *h) { return (sgn_rank_slot *)(h + 1); }
static sgn_entry *shm_coll(sgn_shm *h, int nranks, uint64_t idx, int rank)
{
    sgn_entry *base = (sgn_entry *)(shm_ranks(h) + nranks);
    return base + (idx % SGN_COLL_SLOTS) * (size_t)nranks + (size_t)rank;
}
static sgn_entry *shm_p2p(sgn_shm *h, int nranks, int src, int dst, uint64_t k, int recv_side)
{
    sgn_entry *base = (sgn_entry *)(shm_ranks(h) + nranks) + (size_t)SGN_COLL_SLOTS * (size_t)nranks;
    size_t i = (((size_t)src * (size_t)nranks + (size_t)dst) * SGN_P2P_SLOTS + (size_t)(k % SGN_P2P_SLOTS)) * 2;
    return base + i + (size_t)recv_side;
}
static sgn_split_entry *shm_split(sgn_shm *h, int nranks, int rank, uint64_t k)
{
    sgn_entry *end = (sgn_entry *)(shm_ranks(h) + nranks) + (size_t)SGN_COLL_SLOTS * (size_t)nranks +
                     (size_t)nranks * (size_t)nranks * SGN_P2P_SLOTS * 2;
    return (sgn_split_entry *)end + (size_t)rank * SGN_SPLIT_SLOTS + (size_t)(k % SGN_SPLIT_SLOTS);
}
static sgn_signal *shm_sig(sgn_shm *h, int nranks, int src, int dst, uint64_t k)
{
    sgn_signal *base = (sgn_signal *)shm_split(h, nranks, nranks, 0);
    return base + ((size_t)src * (size_t)nranks + (size_t)dst) * SGN_SIG_SLOTS + (size_t)(k % SGN_SIG_SLOTS);
}
static uint64_t make_tag(uint64_t gen, uint64_t idx) { return (gen << 40) | ((idx + 1) & ((1ull << 40) - 1)); }

static void shm_lock(sgn_shm *h)
{
    uint32_t me = (uint32_t)getpid();
    for (;;) {
        uint32_t cur = 0;
        if (__atomic_compare_exchange_n(&h->lock, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        if (cur != me && !pid_alive((int32_t)cur) &&
            __atomic_compare_exchange_n(&h->lock, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return; /* the holder died */
        sleep_ns(100000);
    }
}
static void shm_unlock(sgn_shm *h) { __atomic_store_n(&h->lock, 0, __ATOMIC_RELEASE); }

/* Maps the segment and takes the slot of `rank` (no waiting for the others). */
static ncclResult_t comm_join(struct ncclComm **out, const sgn_id *id, uint64_t digest, int nranks, int rank,
                              int device)
{
    if (nranks < 1 || nranks > SGN_MAX_RANKS || rank < 0 || rank >= nranks) {
        set_error("ncclCommInitRank: invalid nranks %d / rank %d (the mock supports up to %d ranks)", nranks, rank,
                  SGN_MAX_RANKS);
        return ncclInvalidArgument;
    }
    if (id->magic != SGN_ID_MAGIC || id->shm_name[0] != '/' || !memchr(id->shm_name, 0, sizeof id->shm_name)) {
        set_error("ncclCommInitRank: not a unique id from this libnccl's ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    size_t size = shm_size(nranks);
    int fd = shm_open(id->shm_name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        set_error("shm_open(%s): %s", id->shm_name, strerror(errno));
        return ncclSystemError;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || ((size_t)st.st_size < size && ftruncate(fd, (off_t)size) != 0)) {
        set_error("sizing %s: %s", id->shm_name, strerror(errno));
        close(fd);
        return ncclSystemError;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        set_error("mmap %s: %s", id->shm_name, strerror(errno));
        return ncclSystemError;
    }
    sgn_shm *h = p;
    sgn_rank_slot *slots = shm_ranks(h);
    shm_lock(h);
    int stale = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SGN_SHM_MAGIC || h->key != id->key ||
                h->nranks != (uint32_t)nranks;
    if (!stale) {
        /* A previous run with the same id: its ranks are gone or dead, or it holds our slot. */
        if (slots[rank].state != SGN_SLOT_EMPTY) stale = 1;
        for (int r = 0; r < nranks && !stale; r++) {
            if (slots[r].state == SGN_SLOT_GONE) stale = 1;
            if (slots[r].state == SGN_SLOT_JOINED && !pid_alive(slots[r].pid)) stale = 1;
        }
    }
    if (stale) {
        uint64_t gen = (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == SGN_SHM_MAGIC) ? h->generation + 1 : 1;
        memset(slots, 0, (size_t)nranks * sizeof(*slots));
        h->key = id->key;
        h->nranks = (uint32_t)nranks;
        h->generation = gen & 0xffffff;
        if (h->generation == 0) h->generation = 1;
        h->ids_digest = digest;
        __atomic_store_n(&h->magic, SGN_SHM_MAGIC, __ATOMIC_RELEASE);
    } else if (h->ids_digest != digest) {
        shm_unlock(h);
        munmap(p, size);
        set_error("ncclCommInitRankScalable: the ranks passed different ncclUniqueIds (number or order)");
        return ncclInvalidArgument;
    }
    slots[rank].pid = (int32_t)getpid();
    slots[rank].device = device;
    slots[rank].pad = (uint32_t)(sgp_node() + 1); /* the node, for the other ranks */
    slots[rank].joined_ns = sg_now_ns();
    __atomic_store_n(&slots[rank].state, SGN_SLOT_JOINED, __ATOMIC_RELEASE);
    uint64_t gen = h->generation;
    shm_unlock(h);

    struct ncclComm *c = calloc(1, sizeof(*c));
    if (!c) {
        munmap(p, size);
        return ncclSystemError;
    }
    c->magic = COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->device = device;
    c->key = id->key;
    c->gen = gen;
    snprintf(c->hex, sizeof c->hex, "%016" PRIx64, id->key);
    memcpy(c->shm_name, id->shm_name, sizeof c->shm_name);
    c->hdr = h;
    c->map_size = size;
    c->owner = getpid();
    c->send_cnt = calloc((size_t)nranks, sizeof(uint32_t));
    c->recv_cnt = calloc((size_t)nranks, sizeof(uint32_t));
    c->sig_sent = calloc((size_t)nranks, sizeof(uint32_t));
    c->sig_waited = calloc((size_t)nranks, sizeof(uint32_t));
    const char *ae = getenv("SIMGPU_NCCL_ASYNC_ERROR_AT");
    c->async_error_at = (ae && *ae) ? strtoll(ae, NULL, 10) : -1;
    pthread_mutex_lock(&g_lock);
    c->next = g_comms;
    g_comms = c;
    pthread_mutex_unlock(&g_lock);
    *out = c;
    return ncclSuccess;
}

/* Marks the rank gone; the last one out removes the segment name. The mapping stays (pending
 * kernels may still poll it). */
static void comm_leave(struct ncclComm *c)
{
    if (c->gone || c->owner != getpid()) return;
    c->gone = 1;
    sgn_shm *h = c->hdr;
    sgn_rank_slot *slots = shm_ranks(h);
    shm_lock(h);
    int all_gone = 1;
    if (h->key == c->key && h->generation == c->gen && slots[c->rank].pid == (int32_t)getpid()) {
        __atomic_store_n(&slots[c->rank].state, SGN_SLOT_GONE, __ATOMIC_RELEASE);
        for (int r = 0; r < c->nranks; r++)
            if (slots[r].state == SGN_SLOT_JOINED) all_gone = 0;
    } else {
        all_gone = 0; /* a newer run owns the segment */
    }
    if (all_gone) shm_unlink(c->shm_name);
    shm_unlock(h);
}

/* Every rank is there: the nodes it spans, its ring neighbours across nodes, the profiler plugin. */
static void comm_ready(struct ncclComm *c)
{
    sgn_rank_slot *slots = shm_ranks(c->hdr);
    int n = c->nranks, nnodes = 0;
    c->node = sgp_node();
    for (int r = 0; r < n; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++) seen |= slots[q].pad == slots[r].pad;
        nnodes += !seen;
    }
    c->nnodes = nnodes ? nnodes : 1;
    c->ppn = 0;
    for (int r = 0; r < n; r++) c->ppn += slots[r].pad == slots[c->rank].pad;
    int next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n;
    c->ring_send = slots[next].pad != slots[c->rank].pad ? next : -1;
    c->ring_recv = slots[prev].pad != slots[c->rank].pad ? prev : -1;
    sgp_comm_init(&c->prof, c->key, NULL, c->nnodes, n, c->rank);
    sgn_nic_start();
}

/* Waits until every rank joined; SIMGPU_NCCL_INIT_TIMEOUT_S (default 60). */
static ncclResult_t comm_barrier(struct ncclComm *c)
{
    double tmo = env_double("SIMGPU_NCCL_INIT_TIMEOUT_S", 60.0);
    uint64_t deadline = sg_now_ns() + (uint64_t)(tmo * 1e9);
    sgn_rank_slot *slots = shm_ranks(c->hdr);
    for (;;) {
        int n = 0;
        for (int r = 0; r < c->nranks; r++)
            if (__atomic_load_n(&slots[r].state, __ATOMIC_ACQUIRE) != SGN_SLOT_EMPTY) n++;
        if (n == c->nranks) {
            comm_ready(c);
            return ncclSuccess;
        }
        if (sg_now_ns() >= deadline) {
            set_error("ncclCommInitRank: %d of %d ranks arrived within SIMGPU_NCCL_INIT_TIMEOUT_S=%g s", n,
                      c->nranks, tmo);
            return ncclSystemError;
        }
        sleep_ns(1000000);
    }
}

static void comm_free(struct ncclComm *c)
{
    pthread_mutex_lock(&g_lock);
    for (struct ncclComm **pp = &g_comms; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    c->magic = 0;
    free(c->send_cnt);
    free(c->recv_cnt);
    free(c->sig_sent);
    free(c->sig_waited);
    free(c);
}

static int comm_ok(const struct ncclComm *c) { return c && c->magic == COMM_MAGIC; }

/* ------------------------------------------------------------------ mismatch records */

typedef struct mismatch {
    struct mismatch *next;
    char *json;
} mismatch;
static mismatch *g_mm_head;
static int g_mm_pending;

static void mm_push(char *json) /* called from poll (core lock held): no sg_* calls */
{
    mismatch *m = malloc(sizeof(*m));
    if (!m) {
        free(json);
        return;
    }
    m->json = json;
    pthread_mutex_lock(&g_mm_lock);
    m->next = g_mm_head;
    g_mm_head = m;
    __atomic_store_n(&g_mm_pending, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_mm_lock);
}
static void mm_flush(void)
{
    if (!__atomic_load_n(&g_mm_pending, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_mm_lock);
    mismatch *m = g_mm_head;
    g_mm_head = NULL;
    __atomic_store_n(&g_mm_pending, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_mm_lock);
    /* oldest first */
    mismatch *rev = NULL;
    while (m) {
        mismatch *n = m->next;
        m->next = rev;
        rev = m;
        m = n;
    }
    while (rev) {
        mismatch *n = rev->next;
        sg_truth_line(rev->json);
        free(rev->json);
        free(rev);
        rev = n;
    }
}

/* ------------------------------------------------------------------ deferred kernels */

typedef struct coll_arg {
    sgn_shm *hdr;
    int nranks, rank, op;
    uint64_t gen, idx, seq;
    uint64_t dur_ns, sig, count, bus_bytes;
    sg_device_counters *ctr; /* NVLink bytes for NVML (may be NULL) */
    int published;
    pid_t pid;
    int env_rank;
    char hex[17];
    sgp_job prof; /* for the profiler plugin's proxy thread: times filled in at resolution */
    uint64_t nic_tx, nic_rx; /* bytes its ring edges across nodes carry through this node's NIC */
    struct coll_arg *next;   /* a graph's replays waiting for their host node */
} coll_arg;

static int coll_poll(void *varg, uint64_t start_ns, uint64_t *end_ns)
{
    coll_arg *a = varg;
    uint64_t tag = make_tag(a->gen, a->idx);
    if (!a->published) {
        sgn_entry *e = shm_coll(a->hdr, a->nranks, a->idx, a->rank);
        e->arrival_ns = start_ns;
        e->dur_ns = a->dur_ns;
        e->sig = a->sig;
        e->count = a->count;
        __atomic_store_n(&e->tag, tag, __ATOMIC_RELEASE);
        a->published = 1;
    }
    uint64_t max_arr = 0, max_dur = 0;
    int mismatch = 0;
    for (int r = 0; r < a->nranks; r++) {
        sgn_entry *e = shm_coll(a->hdr, a->nranks, a->idx, r);
        if (__atomic_load_n(&e->tag, __ATOMIC_ACQUIRE) != tag) return 0;
        if (e->arrival_ns > max_arr) max_arr = e->arrival_ns;
        if (e->dur_ns > max_dur) max_dur = e->dur_ns;
        if (e->sig != a->sig || e->count != a->count) mismatch = 1;
    }
    *end_ns = max_arr + max_dur;
    a->prof.start_ns = start_ns;
    a->prof.xfer_ns = max_arr;
    a->prof.end_ns = *end_ns;
    a->prof.own_ns = a->dur_ns;
    sgp_complete(&a->prof);
    sgn_nic_transfer(max_arr, *end_ns, a->nic_tx, a->nic_rx);
    if (a->ctr) {
        __atomic_add_fetch(&a->ctr->nvlink_tx_bytes, a->bus_bytes, __ATOMIC_RELAXED);
        __atomic_add_fetch(&a->ctr->nvlink_rx_bytes, a->bus_bytes, __ATOMIC_RELAXED);
    }
    if (mismatch) {
        size_t cap = 256 + (size_t)a->nranks * 64;
        char *j = malloc(cap);
        if (j) {
            int n = snprintf(j, cap,
                             "{\"type\":\"nccl_mismatch\",\"pid\":%d,\"rank\":%d,\"comm\":\"%s\",\"seq\":%" PRIu64
                             ",\"coll_index\":%" PRIu64 ",\"comm_rank\":%d,\"end_ns\":%" PRIu64 ",\"ranks\":[",
                             (int)a->pid, a->env_rank, a->hex, a->seq, a->idx, a->rank, *end_ns);
            for (int r = 0; r < a->nranks && n > 0 && (size_t)n < cap; r++) {
                sgn_entry *e = shm_coll(a->hdr, a->nranks, a->idx, r);
                int op = (int)(e->sig & 0xff), dt = (int)((e->sig >> 8) & 0xff);
                n += snprintf(j + n, cap - (size_t)n, "%s{\"op\":\"%s\",\"datatype\":\"%s\",\"redop\":%d,\"count\":%" PRIu64 "}",
                              r ? "," : "", op_truth_name(op), dtype_name(dt), (int)((e->sig >> 16) & 0xff),
                              e->count);
            }
            if (n > 0 && (size_t)n < cap) snprintf(j + n, cap - (size_t)n, "]}");
            j[cap - 1] = 0;
            mm_push(j);
        }
    }
    free(a);
    return 1;
}

typedef struct p2p_item {
    int peer, is_send;
    uint64_t k, dur_ns, bytes;
    sgp_job prof;
} p2p_item;
typedef struct p2p_arg {
    sgn_shm *hdr;
    sg_device_counters *ctr;
    int nranks, rank;
    uint64_t gen;
    int published, n;
    p2p_item items[];
} p2p_arg;

static int p2p_poll(void *varg, uint64_t start_ns, uint64_t *end_ns)
{
    p2p_arg *a = varg;
    if (!a->published) {
        for (int i = 0; i < a->n; i++) {
            p2p_item *it = &a->items[i];
            int src = it->is_send ? a->rank : it->peer, dst = it->is_send ? it->peer : a->rank;
            sgn_entry *e = shm_p2p(a->hdr, a->nranks, src, dst, it->k, !it->is_send);
            e->arrival_ns = start_ns;
            e->dur_ns = it->dur_ns;
            e->count = it->bytes;
            __atomic_store_n(&e->tag, make_tag(a->gen, it->k), __ATOMIC_RELEASE);
        }
        a->published = 1;
    }
    uint64_t end = start_ns;
    for (int i = 0; i < a->n; i++) {
        p2p_item *it = &a->items[i];
        int src = it->is_send ? a->rank : it->peer, dst = it->is_send ? it->peer : a->rank;
        sgn_entry *o = shm_p2p(a->hdr, a->nranks, src, dst, it->k, it->is_send);
        if (__atomic_load_n(&o->tag, __ATOMIC_ACQUIRE) != make_tag(a->gen, it->k)) return 0;
        uint64_t arr = o->arrival_ns > start_ns ? o->arrival_ns : start_ns;
        uint64_t dur = o->dur_ns > it->dur_ns ? o->dur_ns : it->dur_ns;
        if (arr + dur > end) end = arr + dur;
    }
    *end_ns = end;
    for (int i = 0; i < a->n; i++) {
        sgp_job *j = &a->items[i].prof;
        j->start_ns = start_ns;
        j->xfer_ns = end - a->items[i].dur_ns > start_ns ? end - a->items[i].dur_ns : start_ns;
        j->end_ns = end;
        sgp_complete(j);
    }
    for (int i = 0; i < a->n && a->ctr; i++)
        __atomic_add_fetch(a->items[i].is_send ? &a->ctr->nvlink_tx_bytes : &a->ctr->nvlink_rx_bytes,
                           a->items[i].bytes, __ATOMIC_RELAXED);
    free(a);
    return 1;
}

static sg_device_counters *dev_counters(int device)
{
    sg_counters_shm *sh = sg_counters();
    return sh && device >= 0 && device < SG_MAX_DEVICES ? &sh->dev[device] : NULL;
}

/* Resolves a stream on the communicator's device. */
static sg_stream *comm_stream(struct ncclComm *c, void *stream)
{
    int prev = sg_current_device();
    if (prev != c->device) sg_set_current_device(c->device);
    sg_stream *s = sg_stream_resolve(stream, 0);
    if (prev != c->device) sg_set_current_device(prev);
    return s;
}

/* A point-to-point transfer's time across nodes: bounded by this rank's NIC (and its path to it). */
static uint64_t net_ns(const struct ncclComm *c, double bus_bytes)
{
    double gbps = sg_link_gbps(), nic = sgt_nic_path_gbps(c->node, sgp_nic_gbps(c->node));
    if (nic < gbps) gbps = nic;
    if (gbps <= 0) gbps = 1e-9;
    return (uint64_t)(sg_link_latency_us() * 1000.0 + sgp_nic_latency_ns() + bus_bytes / gbps + 0.5);
}

/* A collective's time: latency (and the NIC's across nodes) + bus bytes at the rate its transport,
 * channels and protocol reach (nccl_tuning.c). */
static uint64_t coll_ns(const struct ncclComm *c, int kind, double bytes, double bus_bytes, const sgp_task *t)
{
    double nic = sgp_nic_gbps(c->node);
    double gbps = sgt_rate(c->nnodes, c->ppn, c->node, kind, bytes, t, sg_link_gbps(), nic);
    if (gbps <= 0) gbps = 1e-9;
    double lat = sg_link_latency_us() * 1000.0 + (c->nnodes > 1 ? sgp_nic_latency_ns() : 0.0);
    return (uint64_t)(lat + bus_bytes / gbps + 0.5);
}

static const char *nccl_func_name(int op)
{
    static const char *n[] = {"?", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AlltoAll", "Send", "Recv"};
    return op >= 1 && op <= OP_RECV ? n[op] : "?";
}
static const char *nccl_dtype_name(int dt)
{
    static const char *n[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                              "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3",
                              "ncclFloat8e5m2"};
    return dt >= 0 && dt < ncclNumTypes ? n[dt] : "?";
}

static uint64_t link_ns(double bus_bytes)
{
    double gbps = sgt_intra_gbps(sg_link_gbps(), sgp_nic_gbps(sgp_node()));
    double lat = sg_link_latency_us() * 1000.0;
    if (gbps <= 0) gbps = 1e-9;
    return (uint64_t)(lat + bus_bytes / gbps + 0.5); /* GB/s = bytes per ns */
}

/* Launches one deferred kernel inside a DRIVER cuLaunchKernelEx call. */
static void launch(struct ncclComm *c, sg_stream *s, const char *kname, unsigned grid, sg_end_poll_fn poll,
                   void *arg, const sg_collective_desc *cd)
{
    int prev = sg_current_device();
    if (prev != c->device) sg_set_current_device(c->device);
    sg_api_call call;
    sg_api_enter(&call, SG_DOMAIN_DRIVER, "cuLaunchKernelEx", kname, NULL);
    sg_kernel_desc k;
    memset(&k, 0, sizeof k);
    k.name = kname;
    k.grid[0] = grid;
    k.grid[1] = k.grid[2] = 1;
    k.block[0] = 512;
    k.block[1] = k.block[2] = 1;
    k.correlation = call.correlation;
    k.duration_ns = 1;
    sg_op *op = sg_enqueue_deferred_kernel(s, &k, poll, arg, cd);
    if (op) sg_op_release(op);
    sg_api_exit(&call, 0);
    if (prev != c->device) sg_set_current_device(prev);
}

/* ------------------------------------------------------------------ queued operations */

typedef struct qop {
    struct ncclComm *comm;
    sg_stream *stream;
    int op, dtype, redop, root, peer;
    size_t count;
    uint64_t seq, idx; /* idx: collective index or p2p pair counter */
    void *api;         /* the profiler plugin's API event (stopped when the call returns) */
    void *capture;     /* the stream capture the call's stream belongs to (NULL: none) */
} qop;

/* ------------------------------------------------------------------ collectives in CUDA graphs
 *
 * As NCCL's enqueue.cc does for a persistent plan (the stream is capturing, ncclLaunchPrepare): the
 * call's API event says graphCaptured; no group or task event at capture; the kernel becomes a node
 * of the graph (cuLaunchKernelEx on the capturing stream) and, when the plan has proxy operations
 * (the communicator spans nodes, or the plugin wants kernel-channel events: the profiler's proxy
 * op), a host node before it (hostStreamPlanCallback). Each graph launch runs the kernel again on
 * the GPU (a new rendezvous index, taken in launch order, the same on every rank as every rank
 * replays its graph) and its host node starts the group and the task (parent: the capture-time API
 * handle, seqNumber advanced only when kernel-channel events are on, as profiler.cc does for
 * persistent plans), queues the proxy operations, and stops both. The plan lives as long as the
 * process (NCCL frees it with the graph; the mock never does). */

#define GRAPH_READY 64
typedef struct graph_coll {
    struct ncclComm *comm;
    coll_arg tmpl;  /* each replay's kernel argument, but for its rendezvous index */
    sgp_task task;  /* what the replay's task event says (its seq taken at the replay) */
    void *api;      /* the capture-time API event: the task's parent */
    int host_node;  /* the plan has proxy operations: its host node drives the plugin */
    sg_collective_desc cd;
    char op_name[16];
    pthread_mutex_t lock;
    coll_arg *pending_head, *pending_tail; /* launched replays whose host node has not run yet */
    /* tasks whose host node ran before the launching thread queued the replay's kernel (the stream
     * was idle: the host node runs at once), oldest first */
    void *ready[GRAPH_READY];
    unsigned ready_first, ready_n;
} graph_coll;

static void graph_replay_kernel(void *ctx, sg_stream *s, const sg_kernel_desc *k, uint32_t graph_id, uint64_t node_id)
{
    graph_coll *g = ctx;
    struct ncclComm *c = g->comm;
    coll_arg *a = malloc(sizeof *a);
    if (!a) return;
    *a = g->tmpl;
    a->idx = __atomic_fetch_add(&c->coll_idx, 1, __ATOMIC_RELAXED);
    a->next = NULL;
    if (g->host_node) {
        pthread_mutex_lock(&g->lock);
        if (g->ready_n > 0) {
            /* its host node ran already: take the task it started */
            a->prof.task = g->ready[g->ready_first];
            g->ready_first = (g->ready_first + 1) % GRAPH_READY;
            g->ready_n--;
        } else {
            if (g->pending_tail) g->pending_tail->next = a;
            else g->pending_head = a;
            g->pending_tail = a;
        }
        pthread_mutex_unlock(&g->lock);
    }
    int prev = sg_current_device();
    if (prev != c->device) sg_set_current_device(c->device);
    sg_op *op = sg_enqueue_deferred_kernel_graph(s, k, coll_poll, a, &g->cd, graph_id, node_id);
    if (op) sg_op_release(op);
    if (prev != c->device) sg_set_current_device(prev);
}

/* hostStreamPlanCallback: runs before the replay's kernel (it holds the stream until it returns). */
static void graph_replay_task(void *ctx)
{
    graph_coll *g = ctx;
    struct ncclComm *c = g->comm;
    sgp_task t = g->task;
    int op = g->tmpl.op;
    t.seq = __atomic_load_n(&c->coll_seq[op], __ATOMIC_RELAXED);
    if (c->prof.ctx && (c->prof.mask & SGP_KERNEL_CH)) __atomic_fetch_add(&c->coll_seq[op], 1, __ATOMIC_RELAXED);
    void *group = sgp_group_start(&c->prof);
    void *task = sgp_task_start(&c->prof, g->api, group, c->rank, &t);
    /* hand the task to this replay's kernel argument, queued before or after this node ran */
    pthread_mutex_lock(&g->lock);
    coll_arg *a = g->pending_head;
    if (a) {
        g->pending_head = a->next;
        if (!g->pending_head) g->pending_tail = NULL;
        a->prof.task = task;
    } else if (g->ready_n < GRAPH_READY) {
        g->ready[(g->ready_first + g->ready_n) % GRAPH_READY] = task;
        g->ready_n++;
    }
    pthread_mutex_unlock(&g->lock);
    sgp_stop(&c->prof, task);
    sgp_stop(&c->prof, group);
}

/* The capture-time half of a collective on a capturing stream: the graph's nodes (see above). */
static void capture_coll(const qop *q, coll_arg *a, const sgp_task *t, const char *kname, const sg_collective_desc *cd)
{
    struct ncclComm *c = q->comm;
    graph_coll *g = calloc(1, sizeof *g);
    if (!g) {
        free(a);
        return;
    }
    g->comm = c;
    g->tmpl = *a;
    free(a);
    g->task = *t;
    g->api = q->api;
    g->host_node = c->nnodes > 1 || (c->prof.ctx && (c->prof.mask & SGP_KERNEL_CH));
    snprintf(g->op_name, sizeof g->op_name, "%s", cd->op);
    g->cd = *cd;
    g->cd.op = g->op_name;
    g->cd.comm = c->hex;
    pthread_mutex_init(&g->lock, NULL);
    int prev = sg_current_device();
    if (prev != c->device) sg_set_current_device(c->device);
    int err = 0;
    if (g->host_node) {
        sg_capture_item h = {0};
        h.host_fn = graph_replay_task;
        h.host_arg = g;
        sg_capture_external(q->stream, &h, &err);
    }
    sg_api_call call;
    sg_api_enter(&call, SG_DOMAIN_DRIVER, "cuLaunchKernelEx", kname, NULL);
    sg_capture_item it = {0};
    it.k.name = kname;
    it.k.grid[0] = 16;
    it.k.grid[1] = it.k.grid[2] = 1;
    it.k.block[0] = 512;
    it.k.block[1] = it.k.block[2] = 1;
    it.k.correlation = call.correlation;
    it.k.duration_ns = 1;
    it.replay = graph_replay_kernel;
    it.replay_ctx = g;
    if (!err) sg_capture_external(q->stream, &it, &err);
    sg_api_exit(&call, err);
    if (prev != c->device) sg_set_current_device(prev);
}

static void launch_coll(const qop *q)
{
    struct ncclComm *c = q->comm;
    int n = c->nranks;
    double bytes = (double)q->count * (double)dtype_size(q->dtype);
    double bus;
    switch (q->op) {
    case OP_ALLREDUCE: bus = 2.0 * (n - 1) / n * bytes; break;
    case OP_ALLGATHER: case OP_REDUCESCATTER: case OP_ALLTOALL: bus = (double)(n - 1) * bytes; break;
    default: bus = bytes; break; /* broadcast, reduce */
    }
    char kname[128];
    switch (q->op) {
    case OP_ALLREDUCE:
        snprintf(kname, sizeof kname, "ncclDevKernel_AllReduce_%s_%s_RING_LL", redop_name(q->redop), dtype_name(q->dtype));
        break;
    case OP_REDUCESCATTER:
        snprintf(kname, sizeof kname, "ncclDevKernel_ReduceScatter_%s_%s_RING_LL", redop_name(q->redop),
                 dtype_name(q->dtype));
        break;
    case OP_REDUCE:
        snprintf(kname, sizeof kname, "ncclDevKernel_Reduce_%s_%s_RING_LL", redop_name(q->redop), dtype_name(q->dtype));
        break;
    case OP_ALLGATHER: snprintf(kname, sizeof kname, "ncclDevKernel_AllGather_RING_LL"); break;
    case OP_BROADCAST: snprintf(kname, sizeof kname, "ncclDevKernel_Broadcast_RING_LL"); break;
    default: snprintf(kname, sizeof kname, "ncclDevKernel_SendRecv"); break;
    }
    coll_arg *a = calloc(1, sizeof(*a));
    if (!a) return;
    a->hdr = c->hdr;
    a->nranks = n;
    a->rank = c->rank;
    a->op = q->op;
    a->gen = c->gen;
    a->idx = q->idx;
    a->seq = q->seq;
    a->sig = (uint64_t)q->op | ((uint64_t)(q->dtype & 0xff) << 8) | ((uint64_t)(q->redop & 0xff) << 16) |
             ((uint64_t)((q->root + 1) & 0xffff) << 24);
    a->count = q->count;
    a->bus_bytes = (uint64_t)bus;
    a->nic_tx = c->nnodes > 1 && c->ring_send >= 0 ? (uint64_t)bus : 0;
    a->nic_rx = c->nnodes > 1 && c->ring_recv >= 0 ? (uint64_t)bus : 0;
    a->ctr = dev_counters(c->device);
    a->pid = getpid();
    a->env_rank = sg_rank();
    memcpy(a->hex, c->hex, sizeof a->hex);
    sg_collective_desc cd = {op_truth_name(q->op), c->hex, q->seq, (uint64_t)bytes, n};
    sgp_task t = {0, c->coll_seq[q->op]++, nccl_func_name(q->op), nccl_dtype_name(q->dtype), NULL, NULL, q->count,
                  q->root, 0, 0};
    int kind = q->op == OP_ALLREDUCE ? SGT_ALLREDUCE : q->op == OP_REDUCE ? SGT_REDUCE : SGT_OTHER;
    sgt_choose(c->nnodes, kind, bytes, &t);
    a->dur_ns = coll_ns(c, kind, bytes, bus, &t);
    if (q->capture) {
        c->coll_seq[q->op]--; /* no task at capture: each replay takes the number (graph_replay_task) */
        sgp_job j = {c->prof.ctx, NULL, c->prof.mask, t.nchannels, 0, 0, 0, c->ring_send, c->ring_recv,
                     (uint64_t)(bus / t.nchannels), NULL, 0};
        a->prof = j;
        capture_coll(q, a, &t, kname, &cd);
        return;
    }
    void *group = sgp_group_start(&c->prof);
    void *task = sgp_task_start(&c->prof, q->api, group, c->rank, &t);
    sgp_job j = {c->prof.ctx, task, c->prof.mask, t.nchannels, 0, 0, 0, c->ring_send, c->ring_recv,
                 (uint64_t)(bus / t.nchannels), NULL, 0};
    a->prof = j;
    launch(c, q->stream, kname, 16, coll_poll, a, &cd);
    sgp_stop(&c->prof, task);
    sgp_stop(&c->prof, group);
}

/* Send/recv ops q[0..n) of one communicator and stream, fused into one kernel. */
static void launch_p2p(const qop *q, int n)
{
    struct ncclComm *c = q[0].comm;
    p2p_arg *a = calloc(1, sizeof(*a) + (size_t)n * sizeof(p2p_item));
    if (!a) return;
    a->hdr = c->hdr;
    a->nranks = c->nranks;
    a->rank = c->rank;
    a->gen = c->gen;
    a->ctr = dev_counters(c->device);
    a->n = n;
    uint64_t total = 0;
    int sends = 0;
    for (int i = 0; i < n; i++) {
        uint64_t b = (uint64_t)q[i].count * dtype_size(q[i].dtype);
        a->items[i].peer = q[i].peer;
        a->items[i].is_send = q[i].op == OP_SEND;
        a->items[i].k = q[i].idx;
        a->items[i].bytes = b;
        int cross = c->nnodes > 1 && shm_ranks(c->hdr)[q[i].peer].pad != shm_ranks(c->hdr)[c->rank].pad;
        a->items[i].dur_ns = cross ? net_ns(c, (double)b) : link_ns((double)b);
        total += b;
        sends += q[i].op == OP_SEND;
    }
    const char *opn = sends == n ? "Send" : sends == 0 ? "Recv" : "SendRecv";
    sg_collective_desc cd = {opn, c->hex, q[0].seq, total, c->nranks};
    void *group = sgp_group_start(&c->prof);
    void *tasks[n > 0 ? n : 1];
    for (int i = 0; i < n; i++) {
        sgp_task t = {1, 0, nccl_func_name(q[i].op), nccl_dtype_name(q[i].dtype), NULL, NULL, q[i].count, q[i].peer, 1, 0};
        tasks[i] = sgp_task_start(&c->prof, q[i].api, group, c->rank, &t);
        int cross = c->nnodes > 1 && shm_ranks(c->hdr)[q[i].peer].pad != shm_ranks(c->hdr)[c->rank].pad;
        int send = q[i].op == OP_SEND;
        sgp_job j = {c->prof.ctx, tasks[i], c->prof.mask, 1, 0, 0, 0, cross && send ? q[i].peer : -1,
                     cross && !send ? q[i].peer : -1, a->items[i].bytes, NULL, 0};
        a->items[i].prof = j;
    }
    launch(c, q[0].stream, "ncclDevKernel_SendRecv", 8, p2p_poll, a, &cd);
    for (int i = 0; i < n; i++) sgp_stop(&c->prof, tasks[i]);
    sgp_stop(&c->prof, group);
}

/* thread-local group state */
static __thread int t_group_depth;
static __thread qop *t_q;
static __thread int t_nq, t_capq;
static __thread struct ncclComm **t_init; /* communicators whose init barrier waits for GroupEnd */
static __thread int t_ninit, t_capinit;
static __thread ncclResult_t t_group_err;

static int q_push(const qop *q)
{
    if (t_nq == t_capq) {
        int cap = t_capq ? 2 * t_capq : 16;
        qop *n = realloc(t_q, (size_t)cap * sizeof(*n));
        if (!n) return -1;
        t_q = n;
        t_capq = cap;
    }
    t_q[t_nq++] = *q;
    return 0;
}

static void flush_ops(qop *q, int n)
{
    char *done = calloc((size_t)n + 1, 1);
    if (!done) return;
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        if (q[i].op != OP_SEND && q[i].op != OP_RECV) {
            launch_coll(&q[i]);
            done[i] = 1;
            continue;
        }
        /* fuse every p2p op of this comm and stream */
        qop *f = malloc((size_t)n * sizeof(*f));
        int nf = 0;
        for (int j = i; j < n && f; j++)
            if (!done[j] && (q[j].op == OP_SEND || q[j].op == OP_RECV) && q[j].comm == q[i].comm &&
                q[j].stream == q[i].stream) {
                f[nf++] = q[j];
                done[j] = 1;
            }
        if (f) launch_p2p(f, nf);
        free(f);
        done[i] = 1;
    }
    free(done);
}

/* One data-moving call: seq/index assignment at call time, launch now or at GroupEnd. */
static ncclResult_t enqueue(const char *api, struct ncclComm *c, int op, size_t count, int dtype, int redop, int root,
                            int peer, void *stream)
{
    mm_flush();
    if (!comm_ok(c)) {
        set_error("%s: invalid communicator", api);
        return ncclInvalidArgument;
    }
    if (dtype_size(dtype) == 0) {
        set_error("%s: invalid datatype %d", api, dtype);
        return ncclInvalidArgument;
    }
    if ((op == OP_ALLREDUCE || op == OP_REDUCE || op == OP_REDUCESCATTER) && (redop < 0 || redop >= ncclNumOps)) {
        set_error("%s: invalid reduction op %d", api, redop);
        return ncclInvalidArgument;
    }
    if ((op == OP_BROADCAST || op == OP_REDUCE) && (root < 0 || root >= c->nranks)) {
        set_error("%s: invalid root %d (nranks %d)", api, root, c->nranks);
        return ncclInvalidArgument;
    }
    if ((op == OP_SEND || op == OP_RECV) && (peer < 0 || peer >= c->nranks)) {
        set_error("%s: invalid peer %d (nranks %d)", api, peer, c->nranks);
        return ncclInvalidArgument;
    }
    sg_stream *s = comm_stream(c, stream);
    if (!s) {
        set_error("%s: invalid stream %p", api, stream);
        return ncclUnhandledCudaError;
    }
    qop q;
    memset(&q, 0, sizeof q);
    q.comm = c;
    q.stream = s;
    q.op = op;
    q.dtype = dtype;
    q.redop = redop;
    q.root = root;
    q.peer = peer;
    q.count = count;
    q.capture = sg_stream_capture_slot_get(s);
    if (q.capture && (op == OP_SEND || op == OP_RECV)) {
        set_error("%s: send/recv inside a CUDA graph capture is not modelled by the simulated NCCL", api);
        return ncclInternalError;
    }
    /* ncclPlannerSetCapturingGraph: a group's calls on a communicator are all uncaptured or all in one graph */
    for (int i = 0; t_group_depth > 0 && i < t_nq; i++)
        if (t_q[i].comm == c && t_q[i].capture != q.capture) {
            set_error("%s: streams given to a communicator within a NCCL group must either be all uncaptured or all "
                      "captured by the same graph", api);
            return ncclInvalidUsage;
        }
    q.seq = __atomic_fetch_add(&c->seq, 1, __ATOMIC_RELAXED);
    if (op == OP_SEND)
        q.idx = __atomic_fetch_add(&c->send_cnt[peer], 1, __ATOMIC_RELAXED);
    else if (op == OP_RECV)
        q.idx = __atomic_fetch_add(&c->recv_cnt[peer], 1, __ATOMIC_RELAXED);
    else if (!q.capture) /* a captured collective takes its index at each replay */
        q.idx = __atomic_fetch_add(&c->coll_idx, 1, __ATOMIC_RELAXED);
    sgp_task call_task = {op == OP_SEND || op == OP_RECV, 0, nccl_func_name(op), nccl_dtype_name(dtype), NULL, NULL,
                    count, op == OP_SEND || op == OP_RECV ? peer : root, 0, 0};
    q.api = sgp_api_start(&c->prof, &call_task, stream, q.capture != NULL);
    if (t_group_depth > 0) {
        int pushed = q_push(&q);
        sgp_stop(&c->prof, q.api);
        return pushed != 0 ? ncclSystemError : ncclSuccess;
    }
    flush_ops(&q, 1);
    sgp_stop(&c->prof, q.api);
    return ncclSuccess;
}

/* ------------------------------------------------------------------ NVTX, as real NCCL emits it */

#define SGN_NVTX_PAYLOAD_TYPE_EXT ((int32_t)0xDFBD0009) /* NVTX_PAYLOAD_TYPE_EXT (nvToolsExtPayload.h) */
#define SGN_NVTX_SCHEMA_STATIC_START (1ull << 24)       /* NVTX_PAYLOAD_ENTRY_TYPE_SCHEMA_ID_STATIC_START */

/* nvtxPayloadData_t (nvToolsExtPayload.h) */
typedef struct sgn_nvtx_payload_data {
    uint64_t schemaId;
    size_t size;
    const void *payload;
} sgn_nvtx_payload_data;

/* NCCL's static payload schema ids (NVTX_SID_*) */
enum {
    SID_CommInitRank = 0, SID_CommInitAll = 1, SID_CommDestroy = 2, SID_CommAbort = 3, SID_AllGather = 4,
    SID_AllReduce = 5, SID_Broadcast = 6, SID_ReduceScatter = 7, SID_Reduce = 8, SID_Send = 9, SID_Recv = 10,
    SID_CommInitRankConfig = 11, SID_CommInitRankScalable = 12, SID_CommSplit = 13, SID_CommFinalize = 14,
    SID_CommShrink = 15, SID_AlltoAll = 16, SID_CommGrow = 20, SID_PutSignal = 21, SID_Signal = 22,
    SID_WaitSignal = 23
};

/* The payload structs of NCCL's schemas (NcclNvtxParams*) */
typedef struct { uint64_t newcomm; int nranks, myrank, cudaDev; } pl_comm_init_rank;
typedef struct { uint64_t commhash; int ndev; } pl_comm_init_all;
typedef struct { uint64_t newcomm, parentcomm; int nranks, myrank, cudaDev, color, key; } pl_comm_split;
typedef struct { uint64_t newcomm; int nranks, myrank, cudaDev, num_exclude; } pl_comm_shrink;
typedef struct { uint64_t newcomm, parentcomm; int nranks, myrank, cudaDev; } pl_comm_grow;
typedef struct { uint64_t comm; } pl_comm;
typedef struct { uint64_t comm; size_t bytes; } pl_bytes;                     /* AllGather, AlltoAll */
typedef struct { uint64_t comm; size_t bytes; ncclRedOp_t op; } pl_bytes_op;  /* AllReduce, ReduceScatter */
typedef struct { uint64_t comm; size_t bytes; int rank; } pl_bytes_rank;      /* Broadcast (root), SendRecv (peer) */
typedef struct { uint64_t comm; size_t bytes; int root; ncclRedOp_t op; } pl_reduce;
typedef struct { uint64_t comm; size_t bytes; int peer, ctx; } pl_put;
typedef struct { uint64_t comm; int peer, ctx; } pl_signal; /* WaitSignal: npeers, ctx */

static pthread_once_t g_nvtx_once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t g_nvtx_domain;
static int g_nvtx_off;

static void nvtx_init_once(void)
{
    const char *v = getenv("NCCL_NVTX_DISABLE");
    g_nvtx_off = v && *v && strcmp(v, "0") != 0;
    if (!g_nvtx_off) g_nvtx_domain = nvtxDomainCreateA("NCCL");
}
/* nvtx3::domain::get<nccl_domain>(): created at first use. */
static nvtxDomainHandle_t nvtx_domain(void)
{
    pthread_once(&g_nvtx_once, nvtx_init_once);
    return g_nvtx_domain;
}

typedef struct nvtx_name {
    const char *text;
    nvtxStringHandle_t handle; /* registered in the domain at first use */
} nvtx_name;

/* Pushes the range of one API call: its registered name and, when pl is not NULL, the extended
 * payload of schema sid. Returns what nvtx_pop takes. */
static int nvtx_push(nvtx_name *name, int sid, const void *pl, size_t size)
{
    nvtxDomainHandle_t d = nvtx_domain();
    if (g_nvtx_off) return 0;
    nvtxStringHandle_t h = __atomic_load_n(&name->handle, __ATOMIC_ACQUIRE);
    if (!h) {
        h = nvtxDomainRegisterStringA(d, name->text);
        __atomic_store_n(&name->handle, h, __ATOMIC_RELEASE);
    }
    sgn_nvtx_payload_data data = {SGN_NVTX_SCHEMA_STATIC_START + (uint64_t)sid, size, pl};
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = h;
    if (pl) {
        a.payloadType = SGN_NVTX_PAYLOAD_TYPE_EXT;
        a.reserved0 = 1;
        a.payload.ullValue = (uint64_t)(uintptr_t)&data;
    }
    nvtxDomainRangePushEx(d, &a);
    return 1;
}
static void nvtx_pop(int pushed)
{
    if (pushed) nvtxDomainRangePop(nvtx_domain());
}
/* A range named after the enclosing API function, with the payload *pl of schema sid. */
#define NVTX_RANGE(fname, sid, pl) \
    static nvtx_name nvtx_name_ = {fname, NULL}; \
    int nvtx_pushed_ = nvtx_push(&nvtx_name_, (sid), (pl), sizeof *(pl))
/* A range without payload (NCCL_NVTX3_FUNC_RANGE). */
#define NVTX_RANGE_PLAIN(fname) \
    static nvtx_name nvtx_name_ = {fname, NULL}; \
    int nvtx_pushed_ = nvtx_push(&nvtx_name_, 0, NULL, 0)
#define NVTX_END() nvtx_pop(nvtx_pushed_)

/* ncclInit: what the first NCCL call of a process sets up (the core, NCCL's NVTX domain). */
static void nccl_init(void)
{
    sg_init();
    (void)nvtx_domain();
}

/* ------------------------------------------------------------------ API */

#define ALIAS(name) __attribute__((weak, alias("p" #name)))

static uint64_t comm_key(const struct ncclComm *c) { return comm_ok(c) ? c->key : 0; }

NX ncclResult_t pncclGetVersion(int *version)
{
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
NX ncclResult_t ncclGetVersion(int *version) ALIAS(ncclGetVersion);

static uint64_t fresh_key(void)
{
    uint64_t key = 0;
    if (getrandom(&key, sizeof key, 0) != (ssize_t)sizeof key) key = 0;
    key ^= sg_now_ns() * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 32);
    static uint64_t counter;
    key ^= __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0xbf58476d1ce4e5b9ull;
    return key ? key : 1;
}

/* The unique id of the segment of communicator `key`. */
static void make_id(ncclUniqueId *uid, uint64_t key)
{
    sgn_id id;
    memset(&id, 0, sizeof id);
    id.magic = SGN_ID_MAGIC;
    id.key = key;
    snprintf(id.shm_name, sizeof id.shm_name, "/simgpu-nccl-%u-%016" PRIx64, (unsigned)getuid(), key);
    id.creator_pid = (int32_t)getpid();
    memset(uid, 0, sizeof *uid);
    memcpy(uid->internal, &id, sizeof id);
}

static uint64_t id_key(const ncclUniqueId *uid)
{
    sgn_id id;
    memcpy(&id, uid->internal, sizeof id);
    return id.magic == SGN_ID_MAGIC ? id.key : 0;
}

/* FNV-1a of the keys of `n` unique ids: what every rank of one communicator must agree on. */
static uint64_t ids_digest(const ncclUniqueId *ids, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        uint64_t k = id_key(&ids[i]);
        for (int b = 0; b < 8; b++) {
            h ^= (k >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
enum { CHILD_SPLIT = 1, CHILD_SHRINK = 2, CHILD_GROW = 3 };
/* The key of a parent's child number k (NCCL's childCount), for one kind of child and a salt. */
static uint64_t child_key(uint64_t parent, uint64_t k, int kind, uint64_t salt)
{
    uint64_t v = mix64(parent ^ mix64(k * 0x9e3779b97f4a7c15ull + (uint64_t)kind) ^ mix64(salt + 0x632be59bd9b4e019ull));
    return v ? v : 1;
}

NX ncclResult_t pncclGetUniqueId(ncclUniqueId *uid)
{
    nccl_init();
    if (!uid) return ncclInvalidArgument;
    make_id(uid, fresh_key());
    return ncclSuccess;
}
NX ncclResult_t ncclGetUniqueId(ncclUniqueId *uid) ALIAS(ncclGetUniqueId);

/* Ground truth of a new communicator: how it was made, its id, this rank's place. */
static void comm_truth(const struct ncclComm *c, const char *how, const char *parent_hex, int color)
{
    char j[384];
    snprintf(j, sizeof j,
             "{\"type\":\"nccl_comm\",\"pid\":%d,\"rank\":%d,\"comm\":\"%s\",\"how\":\"%s\",\"parent\":\"%s\","
             "\"color\":%d,\"comm_rank\":%d,\"nranks\":%d,\"device\":%d}",
             (int)getpid(), sg_rank(), c->hex, how, parent_hex ? parent_hex : "", color, c->rank, c->nranks,
             c->device);
    sg_truth_line(j);
}

/* Joins the communicator of `uid` as `rank` of `nranks` and waits for the others (or, inside a
 * group, at the outermost ncclGroupEnd). digest: of the ids the ranks must agree on. */
static ncclResult_t join_comm(ncclComm_t *comm, const ncclUniqueId *uid, uint64_t digest, int nranks, int rank,
                              int device, const char *how, const char *parent_hex, int color)
{
    mm_flush();
    *comm = NULL;
    sgn_id id;
    memcpy(&id, uid->internal, sizeof id);
    struct ncclComm *c = NULL;
    ncclResult_t r = comm_join(&c, &id, digest, nranks, rank, device);
    if (r != ncclSuccess) return r;
    comm_truth(c, how, parent_hex, color);
    if (t_group_depth > 0) {
        if (t_ninit == t_capinit) {
            int cap = t_capinit ? 2 * t_capinit : 8;
            struct ncclComm **n = realloc(t_init, (size_t)cap * sizeof(*n));
            if (!n) return ncclSystemError;
            t_init = n;
            t_capinit = cap;
        }
        t_init[t_ninit++] = c;
        *comm = c;
        return ncclSuccess;
    }
    r = comm_barrier(c);
    if (r != ncclSuccess) {
        comm_leave(c);
        comm_free(c);
        return r;
    }
    *comm = c;
    return ncclSuccess;
}

static ncclResult_t init_ranks(ncclComm_t *comm, int nranks, const ncclUniqueId *ids, int nids, int rank)
{
    nccl_init();
    if (!comm) return ncclInvalidArgument;
    *comm = NULL;
    if (nids < 1 || !ids) {
        set_error("ncclCommInitRankScalable: nId %d: at least one ncclUniqueId is needed", nids);
        return ncclInvalidArgument;
    }
    for (int i = 0; i < nids; i++)
        if (!id_key(&ids[i])) {
            set_error("ncclCommInitRank: unique id %d is not from this libnccl's ncclGetUniqueId", i);
            return ncclInvalidArgument;
        }
    /* like real NCCL, the communicator is named by the first id */
    return join_comm(comm, &ids[0], ids_digest(ids, nids), nranks, rank, sg_current_device(), "init", NULL, -1);
}

NX ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    pl_comm_init_rank pl = {id_key(&commId), nranks, rank, sg_current_device()};
    NVTX_RANGE("ncclCommInitRank", SID_CommInitRank, &pl);
    ncclResult_t r = init_ranks(comm, nranks, &commId, 1, rank);
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
    ALIAS(ncclCommInitRank);

NX ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                        ncclConfig_t *config)
{
    (void)config; /* always blocking */
    pl_comm_init_rank pl = {id_key(&commId), nranks, rank, sg_current_device()};
    NVTX_RANGE("ncclCommInitRankConfig", SID_CommInitRankConfig, &pl);
    ncclResult_t r = init_ranks(comm, nranks, &commId, 1, rank);
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                       ncclConfig_t *config) ALIAS(ncclCommInitRankConfig);

NX ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                          ncclUniqueId *commIds, ncclConfig_t *config)
{
    (void)config;
    pl_comm_init_rank pl = {commIds && nId > 0 ? id_key(&commIds[0]) : 0, nranks, myrank, sg_current_device()};
    NVTX_RANGE("ncclCommInitRankScalable", SID_CommInitRankScalable, &pl);
    ncclResult_t r = init_ranks(newcomm, nranks, commIds, nId, myrank);
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                         ncclUniqueId *commIds, ncclConfig_t *config)
    ALIAS(ncclCommInitRankScalable);

static ncclResult_t init_all(ncclComm_t *comms, int ndev, const int *devlist, uint64_t key)
{
    if (!comms || ndev < 1) return ncclInvalidArgument;
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (d < 0 || d >= sg_device_count()) {
            set_error("ncclCommInitAll: invalid device %d", d);
            return ncclInvalidArgument;
        }
    }
    ncclUniqueId uid;
    make_id(&uid, key);
    sgn_id id;
    memcpy(&id, uid.internal, sizeof id);
    for (int i = 0; i < ndev; i++) {
        ncclResult_t r = comm_join(&comms[i], &id, ids_digest(&uid, 1), ndev, i, devlist ? devlist[i] : i);
        if (r != ncclSuccess) {
            for (int j = 0; j < i; j++) {
                comm_leave(comms[j]);
                comm_free(comms[j]);
                comms[j] = NULL;
            }
            return r;
        }
        comm_truth(comms[i], "init_all", NULL, -1);
    }
    return ncclSuccess; /* every rank joined: the barrier is passed */
}

NX ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    nccl_init();
    mm_flush();
    uint64_t key = fresh_key();
    pl_comm_init_all pl = {key, ndev};
    NVTX_RANGE("ncclCommInitAll", SID_CommInitAll, &pl);
    ncclResult_t r = init_all(comms, ndev, devlist, key);
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) ALIAS(ncclCommInitAll);

/* ncclCommSplit's host rendezvous in the parent's segment: publishes (color, key) of split k, waits
 * for every rank's, and computes this rank's child size and rank (ordered by key, then parent rank). */
static ncclResult_t split_rendezvous(struct ncclComm *c, uint64_t k, int color, int key, int *child_n,
                                     int *child_rank)
{
    uint64_t tag = make_tag(c->gen, k);
    sgn_split_entry *mine = shm_split(c->hdr, c->nranks, c->rank, k);
    mine->color = color;
    mine->key = key;
    __atomic_store_n(&mine->tag, tag, __ATOMIC_RELEASE);
    double tmo = env_double("SIMGPU_NCCL_INIT_TIMEOUT_S", 60.0);
    uint64_t deadline = sg_now_ns() + (uint64_t)(tmo * 1e9);
    sgn_rank_slot *slots = shm_ranks(c->hdr);
    for (;;) {
        int n = 0;
        for (int r = 0; r < c->nranks; r++) {
            if (__atomic_load_n(&shm_split(c->hdr, c->nranks, r, k)->tag, __ATOMIC_ACQUIRE) == tag) {
                n++;
            } else if (__atomic_load_n(&slots[r].state, __ATOMIC_ACQUIRE) == SGN_SLOT_GONE) {
                set_error("ncclCommSplit: rank %d left the parent communicator", r);
                return ncclRemoteError;
            }
        }
        if (n == c->nranks) break;
        if (sg_now_ns() >= deadline) {
            set_error("ncclCommSplit: %d of %d ranks arrived within SIMGPU_NCCL_INIT_TIMEOUT_S=%g s", n, c->nranks,
                      tmo);
            return ncclSystemError;
        }
        sleep_ns(200000);
    }
    int n = 0, below = 0;
    for (int r = 0; r < c->nranks; r++) {
        const sgn_split_entry *e = shm_split(c->hdr, c->nranks, r, k);
        if (e->color != color) continue;
        n++;
        if (e->key < key || (e->key == key && r < c->rank)) below++;
    }
    *child_n = n;
    *child_rank = below;
    return ncclSuccess;
}

/* Joins child `key` of parent c as `rank` of `n`. */
static ncclResult_t join_child(struct ncclComm *c, ncclComm_t *newcomm, uint64_t key, int n, int rank,
                               const char *how, int color)
{
    ncclUniqueId uid;
    make_id(&uid, key);
    return join_comm(newcomm, &uid, ids_digest(&uid, 1), n, rank, c->device, how, c->hex, color);
}

NX ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    (void)config;
    mm_flush();
    pl_comm_split pl = {0, comm_key(comm), 0, 0, comm_ok(comm) ? comm->device : -1, color, key};
    NVTX_RANGE("ncclCommSplit", SID_CommSplit, &pl);
    ncclResult_t r = ncclSuccess;
    if (!comm_ok(comm) || !newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) {
        set_error("ncclCommSplit: invalid communicator, out-pointer or color %d", color);
        r = ncclInvalidArgument;
    } else {
        *newcomm = NULL;
        uint64_t k = comm->children++;
        int n = 0, rank = 0;
        r = split_rendezvous(comm, k, color, key, &n, &rank);
        if (r == ncclSuccess && color != NCCL_SPLIT_NOCOLOR)
            r = join_child(comm, newcomm, child_key(comm->key, k, CHILD_SPLIT, (uint64_t)(uint32_t)color), n, rank,
                           "split", color);
    }
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
    ALIAS(ncclCommSplit);

NX ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                                ncclConfig_t *config, int shrinkFlags)
{
    (void)config, (void)shrinkFlags; /* nothing in flight to abort: the mock's kernels never hang on a shrink */
    mm_flush();
    pl_comm_shrink pl = {0, 0, 0, comm_ok(comm) ? comm->device : -1, excludeRanksCount};
    NVTX_RANGE("ncclCommShrink", SID_CommShrink, &pl);
    ncclResult_t r = ncclSuccess;
    char *out = NULL;
    if (!comm_ok(comm) || !newcomm || excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList)) {
        set_error("ncclCommShrink: invalid communicator, out-pointer or exclude list");
        r = ncclInvalidArgument;
    } else if (!(out = calloc((size_t)comm->nranks, 1))) {
        r = ncclSystemError;
    } else {
        *newcomm = NULL;
        for (int i = 0; i < excludeRanksCount && r == ncclSuccess; i++) {
            int x = excludeRanksList[i];
            if (x < 0 || x >= comm->nranks) {
                set_error("ncclCommShrink: excluded rank %d out of range (nranks %d)", x, comm->nranks);
                r = ncclInvalidArgument;
            } else {
                out[x] = 1;
            }
        }
        if (r == ncclSuccess && out[comm->rank]) {
            set_error("ncclCommShrink: rank %d is in its own exclude list", comm->rank);
            r = ncclInvalidArgument;
        }
        if (r == ncclSuccess) {
            int n = 0, rank = 0;
            uint64_t salt = 0xcbf29ce484222325ull;
            for (int q = 0; q < comm->nranks; q++) {
                if (out[q]) {
                    salt = (salt ^ (uint64_t)q) * 0x100000001b3ull;
                    continue;
                }
                if (q < comm->rank) rank++;
                n++;
            }
            uint64_t k = comm->children++;
            r = join_child(comm, newcomm, child_key(comm->key, k, CHILD_SHRINK, salt), n, rank, "shrink", -1);
        }
    }
    free(out);
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                               ncclConfig_t *config, int shrinkFlags) ALIAS(ncclCommShrink);

/* The grow id of the parent's next child: what the root gives the joining ranks. */
NX ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId)
{
    if (!comm_ok(comm) || !uniqueId) return ncclInvalidArgument;
    if (comm->grow_key) {
        set_error("ncclCommGetUniqueId: the previous grow id is not consumed yet");
        return ncclInvalidUsage;
    }
    comm->grow_key = child_key(comm->key, comm->children, CHILD_GROW, 0);
    make_id(uniqueId, comm->grow_key);
    return ncclSuccess;
}
NX ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId) ALIAS(ncclCommGetUniqueId);

static ncclResult_t grow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank, ncclComm_t *newcomm)
{
    if (!newcomm || nRanks <= 0) return ncclInvalidArgument;
    *newcomm = NULL;
    if (comm) {
        if (!comm_ok(comm) || rank != -1 || nRanks <= comm->nranks) {
            set_error("ncclCommGrow: existing ranks pass their communicator, rank -1 and more than %d ranks",
                      comm_ok(comm) ? comm->nranks : 0);
            return ncclInvalidArgument;
        }
        uint64_t key = child_key(comm->key, comm->children++, CHILD_GROW, 0);
        if (uniqueId && id_key(uniqueId) != key) {
            set_error("ncclCommGrow: the unique id is not this communicator's ncclCommGetUniqueId");
            return ncclInvalidArgument;
        }
        comm->grow_key = 0;
        return join_child(comm, newcomm, key, nRanks, comm->rank, "grow", -1);
    }
    nccl_init();
    if (!uniqueId || !id_key(uniqueId) || rank < 0 || rank >= nRanks) {
        set_error("ncclCommGrow: joining ranks pass the grow unique id and a rank below %d", nRanks);
        return ncclInvalidArgument;
    }
    return join_comm(newcomm, uniqueId, ids_digest(uniqueId, 1), nRanks, rank, sg_current_device(), "grow", NULL,
                     -1);
}

NX ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank, ncclComm_t *newcomm,
                              ncclConfig_t *config)
{
    (void)config;
    mm_flush();
    pl_comm_grow pl = {0, comm_key(comm), nRanks, comm_ok(comm) ? comm->rank : rank, sg_current_device()};
    NVTX_RANGE("ncclCommGrow", SID_CommGrow, &pl);
    ncclResult_t r = grow(comm, nRanks, uniqueId, rank, newcomm);
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                             ncclComm_t *newcomm, ncclConfig_t *config) ALIAS(ncclCommGrow);

NX ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    mm_flush();
    pl_comm pl = {comm_key(comm)};
    NVTX_RANGE("ncclCommFinalize", SID_CommFinalize, &pl);
    ncclResult_t r = comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommFinalize(ncclComm_t comm) ALIAS(ncclCommFinalize);

static ncclResult_t comm_end(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!comm_ok(comm)) return ncclInvalidArgument;
    sgp_comm_fini(&comm->prof);
    comm_leave(comm);
    comm_free(comm);
    return ncclSuccess;
}

NX ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    mm_flush();
    pl_comm_init_rank pl = {comm_key(comm), comm_ok(comm) ? comm->nranks : 0, comm_ok(comm) ? comm->rank : 0,
                            comm_ok(comm) ? comm->device : 0};
    NVTX_RANGE("ncclCommDestroy", SID_CommDestroy, &pl);
    ncclResult_t r = comm_end(comm);
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommDestroy(ncclComm_t comm) ALIAS(ncclCommDestroy);

NX ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    mm_flush();
    pl_comm_init_rank pl = {comm_key(comm), comm_ok(comm) ? comm->nranks : 0, comm_ok(comm) ? comm->rank : 0,
                            comm_ok(comm) ? comm->device : 0};
    NVTX_RANGE("ncclCommAbort", SID_CommAbort, &pl);
    ncclResult_t r = comm_end(comm);
    NVTX_END();
    return r;
}
NX ncclResult_t ncclCommAbort(ncclComm_t comm) ALIAS(ncclCommAbort);

NX ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    mm_flush();
    if (!comm_ok(comm) || !asyncError) return ncclInvalidArgument;
    *asyncError = ncclSuccess;
    if (comm->async_error_at >= 0 &&
        __atomic_load_n(&comm->seq, __ATOMIC_RELAXED) > (uint64_t)comm->async_error_at) {
        *asyncError = ncclRemoteError;
        set_error("remote process exited or there was a network error (SIMGPU_NCCL_ASYNC_ERROR_AT=%" PRId64 ")",
                  comm->async_error_at);
    }
    return ncclSuccess;
}
NX ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) ALIAS(ncclCommGetAsyncError);

/* ncclCommCount / CuDevice / UserRank: a range without payload, as real NCCL. */
#define COMM_QUERY(Name, field)                                             \
    NX ncclResult_t pncclComm##Name(const ncclComm_t comm, int *out)        \
    {                                                                       \
        NVTX_RANGE_PLAIN("ncclComm" #Name);                                 \
        ncclResult_t r = ncclInvalidArgument;                               \
        if (comm_ok(comm) && out) {                                         \
            *out = comm->field;                                             \
            r = ncclSuccess;                                                \
        }                                                                   \
        NVTX_END();                                                         \
        return r;                                                           \
    }                                                                       \
    NX ncclResult_t ncclComm##Name(const ncclComm_t comm, int *out) ALIAS(ncclComm##Name);
COMM_QUERY(Count, nranks)
COMM_QUERY(CuDevice, device)
COMM_QUERY(UserRank, rank)

NX const char *pncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "NCCL operation timed out";
    default: return "unknown result code";
    }
}
NX const char *ncclGetErrorString(ncclResult_t r) ALIAS(ncclGetErrorString);

NX const char *pncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return g_last_error; /* like real NCCL: one process-wide buffer */
}
NX const char *ncclGetLastError(ncclComm_t comm) ALIAS(ncclGetLastError);

/* An API call inside its NVTX range (with payload / without). */
#define COLL_RANGE(fname, sid, pl, call)        \
    NVTX_RANGE(fname, sid, pl);                 \
    ncclResult_t r = (call);                    \
    NVTX_END();                                 \
    return r
#define PLAIN_RANGE(fname, call)                \
    NVTX_RANGE_PLAIN(fname);                    \
    ncclResult_t r = (call);                    \
    NVTX_END();                                 \
    return r

static size_t nbytes(size_t count, int dt) { return count * dtype_size(dt); }

NX ncclResult_t pncclAllReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    pl_bytes_op pl = {comm_key(comm), nbytes(count, dt), op};
    COLL_RANGE("ncclAllReduce", SID_AllReduce, &pl,
               enqueue("ncclAllReduce", comm, OP_ALLREDUCE, count, dt, op, -1, -1, stream));
}
NX ncclResult_t ncclAllReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                              ncclComm_t comm, nccl_cudaStream_t stream) ALIAS(ncclAllReduce);

NX ncclResult_t pncclAllGather(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                               nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    pl_bytes pl = {comm_key(comm), nbytes(count, dt)};
    COLL_RANGE("ncclAllGather", SID_AllGather, &pl,
               enqueue("ncclAllGather", comm, OP_ALLGATHER, count, dt, 0, -1, -1, stream));
}
NX ncclResult_t ncclAllGather(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                              nccl_cudaStream_t stream) ALIAS(ncclAllGather);

NX ncclResult_t pncclReduceScatter(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                   ncclComm_t comm, nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    pl_bytes_op pl = {comm_key(comm), nbytes(count, dt), op};
    COLL_RANGE("ncclReduceScatter", SID_ReduceScatter, &pl,
               enqueue("ncclReduceScatter", comm, OP_REDUCESCATTER, count, dt, op, -1, -1, stream));
}
NX ncclResult_t ncclReduceScatter(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t comm, nccl_cudaStream_t stream) ALIAS(ncclReduceScatter);

NX ncclResult_t pncclBroadcast(const void *sb, void *rb, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                               nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    pl_bytes_rank pl = {comm_key(comm), nbytes(count, dt), root};
    COLL_RANGE("ncclBroadcast", SID_Broadcast, &pl,
               enqueue("ncclBroadcast", comm, OP_BROADCAST, count, dt, 0, root, -1, stream));
}
NX ncclResult_t ncclBroadcast(const void *sb, void *rb, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                              nccl_cudaStream_t stream) ALIAS(ncclBroadcast);

/* (deprecated) in-place broadcast: real NCCL runs ncclBroadcast, whose range it shows */
NX ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                           nccl_cudaStream_t stream)
{
    return pncclBroadcast(buff, buff, count, dt, root, comm, stream);
}
NX ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                          nccl_cudaStream_t stream) ALIAS(ncclBcast);

NX ncclResult_t pncclReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                            ncclComm_t comm, nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    pl_reduce pl = {comm_key(comm), nbytes(count, dt), root, op};
    COLL_RANGE("ncclReduce", SID_Reduce, &pl,
               enqueue("ncclReduce", comm, OP_REDUCE, count, dt, op, root, -1, stream));
}
NX ncclResult_t ncclReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                           ncclComm_t comm, nccl_cudaStream_t stream) ALIAS(ncclReduce);

NX ncclResult_t pncclAlltoAll(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                              nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    pl_bytes pl = {comm_key(comm), nbytes(count, dt)};
    COLL_RANGE("ncclAlltoAll", SID_AlltoAll, &pl,
               enqueue("ncclAlltoAll", comm, OP_ALLTOALL, count, dt, 0, -1, -1, stream));
}
NX ncclResult_t ncclAlltoAll(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                             nccl_cudaStream_t stream) ALIAS(ncclAlltoAll);

NX ncclResult_t pncclSend(const void *sb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                          nccl_cudaStream_t stream)
{
    (void)sb;
    pl_bytes_rank pl = {comm_key(comm), nbytes(count, dt), peer};
    COLL_RANGE("ncclSend", SID_Send, &pl, enqueue("ncclSend", comm, OP_SEND, count, dt, 0, -1, peer, stream));
}
NX ncclResult_t ncclSend(const void *sb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                         nccl_cudaStream_t stream) ALIAS(ncclSend);

NX ncclResult_t pncclRecv(void *rb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                          nccl_cudaStream_t stream)
{
    (void)rb;
    pl_bytes_rank pl = {comm_key(comm), nbytes(count, dt), peer};
    COLL_RANGE("ncclRecv", SID_Recv, &pl, enqueue("ncclRecv", comm, OP_RECV, count, dt, 0, -1, peer, stream));
}
NX ncclResult_t ncclRecv(void *rb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                         nccl_cudaStream_t stream) ALIAS(ncclRecv);

static ncclResult_t group_start(void)
{
    mm_flush();
    if (t_group_depth == 0) t_group_err = ncclSuccess;
    t_group_depth++;
    return ncclSuccess;
}
NX ncclResult_t pncclGroupStart(void)
{
    PLAIN_RANGE("ncclGroupStart", group_start());
}
NX ncclResult_t ncclGroupStart(void) ALIAS(ncclGroupStart);

static ncclResult_t group_end(void)
{
    mm_flush();
    if (t_group_depth <= 0) {
        set_error("ncclGroupEnd: not in a group");
        return ncclInvalidUsage;
    }
    if (--t_group_depth > 0) return ncclSuccess;
    ncclResult_t r = t_group_err;
    /* communicator inits of the group: everybody joined already, now wait for the others */
    for (int i = 0; i < t_ninit; i++) {
        ncclResult_t b = comm_barrier(t_init[i]);
        if (b != ncclSuccess && r == ncclSuccess) r = b;
    }
    t_ninit = 0;
    int n = t_nq;
    t_nq = 0;
    if (n) flush_ops(t_q, n);
    return r;
}
NX ncclResult_t pncclGroupEnd(void)
{
    PLAIN_RANGE("ncclGroupEnd", group_end());
}
NX ncclResult_t ncclGroupEnd(void) ALIAS(ncclGroupEnd);

/* ------------------------------------------------------------------ memory and registration */

#define SGN_MEM_GRANULARITY ((size_t)2 << 20) /* cuMemGetAllocationGranularity (recommended) of the GPUs */
#define REG_MAGIC 0x4745524e43434e53ull       /* "SNCCNREG" */
#define WIN_MAGIC 0x4e49574e43434e53ull       /* "SNCCNWIN" */

typedef struct sgn_reg {
    uint64_t magic;
    struct ncclComm *comm;
    void *buff;
    size_t size;
} sgn_reg;

struct ncclWindow_vidmem {
    uint64_t magic;
    struct ncclComm *comm;
    void *buff;
    size_t size;
    int flags;
};

static void mem_truth(const char *op, const void *p, size_t bytes, size_t granted)
{
    char j[256];
    snprintf(j, sizeof j,
             "{\"type\":\"nccl_mem\",\"pid\":%d,\"rank\":%d,\"device\":%d,\"op\":\"%s\",\"address\":%" PRIu64
             ",\"bytes\":%zu,\"granted_bytes\":%zu}",
             (int)getpid(), sg_rank(), sg_current_device(), op, (uint64_t)(uintptr_t)p, bytes, granted);
    sg_truth_line(j);
}

/* Device memory for NCCL's optimisations, rounded up to the allocation granularity (real NCCL
 * maps it with cuMemCreate / cuMemMap: one DRIVER-domain cuMemCreate call here). */
static ncclResult_t mem_alloc(void **ptr, size_t size)
{
    if (!ptr) return ncclInvalidArgument;
    *ptr = NULL;
    if (size == 0) return ncclSuccess;
    size_t granted = (size + SGN_MEM_GRANULARITY - 1) / SGN_MEM_GRANULARITY * SGN_MEM_GRANULARITY;
    sg_api_call call;
    sg_api_enter(&call, SG_DOMAIN_DRIVER, "cuMemCreate", NULL, NULL);
    int e = sg_dev_alloc(ptr, granted, sg_current_device(), SG_MEM_DEVICE, call.correlation, 0, 0);
    sg_api_exit(&call, e);
    if (e != 0) {
        set_error("ncclMemAlloc: cuMemCreate of %zu bytes failed (%s)", granted, e == 2 ? "out of memory" : "invalid");
        return ncclUnhandledCudaError;
    }
    mem_truth("alloc", *ptr, size, granted);
    return ncclSuccess;
}

NX ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    nccl_init();
    PLAIN_RANGE("ncclMemAlloc", mem_alloc(ptr, size));
}
NX ncclResult_t ncclMemAlloc(void **ptr, size_t size) ALIAS(ncclMemAlloc);

static ncclResult_t mem_free(void *ptr)
{
    if (!ptr) return ncclSuccess;
    sg_api_call call;
    sg_api_enter(&call, SG_DOMAIN_DRIVER, "cuMemRelease", NULL, NULL);
    int e = sg_dev_free(ptr, call.correlation, 0, 0);
    sg_api_exit(&call, e);
    if (e != 0) {
        set_error("ncclMemFree: %p is not from ncclMemAlloc", ptr);
        return ncclUnhandledCudaError;
    }
    mem_truth("free", ptr, 0, 0);
    return ncclSuccess;
}

NX ncclResult_t pncclMemFree(void *ptr)
{
    PLAIN_RANGE("ncclMemFree", mem_free(ptr));
}
NX ncclResult_t ncclMemFree(void *ptr) ALIAS(ncclMemFree);

/* A buffer NCCL can register: inside one device allocation. */
static int device_range(const void *buff, size_t size)
{
    mem_ent e;
    if (!buff || !sg_mem_find(buff, &e) || !sg_mem_kind_is_device(e.kind)) return 0; /* pools, cuMemMap too */
    return (uintptr_t)buff + size <= e.base + e.size;
}

NX ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    if (!comm_ok(comm) || !handle) return ncclInvalidArgument;
    *handle = NULL;
    if (!device_range(buff, size)) {
        set_error("ncclCommRegister: %p (+%zu) is not device memory", buff, size);
        return ncclInvalidArgument;
    }
    sgn_reg *g = calloc(1, sizeof *g);
    if (!g) return ncclSystemError;
    *g = (sgn_reg){REG_MAGIC, comm, buff, size};
    *handle = g;
    return ncclSuccess;
}
NX ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
    ALIAS(ncclCommRegister);

NX ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    sgn_reg *g = handle;
    if (!comm_ok(comm) || !g || g->magic != REG_MAGIC || g->comm != comm) return ncclInvalidArgument;
    g->magic = 0;
    free(g);
    return ncclSuccess;
}
NX ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) ALIAS(ncclCommDeregister);

/* Real NCCL registers windows collectively (symmetric memory); the mock keeps each rank's own. */
NX ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)
{
    if (!comm_ok(comm) || !win) return ncclInvalidArgument;
    *win = NULL;
    if (!device_range(buff, size)) {
        set_error("ncclCommWindowRegister: %p (+%zu) is not device memory", buff, size);
        return ncclInvalidArgument;
    }
    struct ncclWindow_vidmem *w = calloc(1, sizeof *w);
    if (!w) return ncclSystemError;
    *w = (struct ncclWindow_vidmem){WIN_MAGIC, comm, buff, size, winFlags};
    *win = w;
    return ncclSuccess;
}
NX ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)
    ALIAS(ncclCommWindowRegister);

NX ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    if (!comm_ok(comm) || !win || win->magic != WIN_MAGIC || win->comm != comm) return ncclInvalidArgument;
    win->magic = 0;
    free(win);
    return ncclSuccess;
}
NX ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) ALIAS(ncclCommWindowDeregister);

/* ------------------------------------------------------------------ one-sided: put, signal, wait */

typedef struct sig_send_arg {
    sgn_shm *hdr;
    int nranks, src, dst;
    uint64_t gen, k, dur_ns, bytes;
    sg_device_counters *ctr;
} sig_send_arg;

/* The put (or bare signal) lands dur_ns after it starts: then its signal is published. */
static int sig_send_poll(void *varg, uint64_t start_ns, uint64_t *end_ns)
{
    sig_send_arg *a = varg;
    uint64_t end = start_ns + a->dur_ns;
    sgn_signal *s = shm_sig(a->hdr, a->nranks, a->src, a->dst, a->k);
    s->arrival_ns = end;
    __atomic_store_n(&s->tag, make_tag(a->gen, a->k), __ATOMIC_RELEASE);
    if (a->ctr && a->bytes) __atomic_add_fetch(&a->ctr->nvlink_tx_bytes, a->bytes, __ATOMIC_RELAXED);
    *end_ns = end;
    free(a);
    return 1;
}

typedef struct sig_wait_arg {
    sgn_shm *hdr;
    int nranks, dst;
    uint64_t gen;
    int n;
    struct { int src; uint64_t k; } items[];
} sig_wait_arg;

/* Ends when every signal waited for has landed (at the latest landing, or at once if all did). */
static int sig_wait_poll(void *varg, uint64_t start_ns, uint64_t *end_ns)
{
    sig_wait_arg *a = varg;
    uint64_t end = start_ns;
    for (int i = 0; i < a->n; i++) {
        sgn_signal *s = shm_sig(a->hdr, a->nranks, a->items[i].src, a->dst, a->items[i].k);
        if (__atomic_load_n(&s->tag, __ATOMIC_ACQUIRE) != make_tag(a->gen, a->items[i].k)) return 0;
        if (s->arrival_ns > end) end = s->arrival_ns;
    }
    *end_ns = end;
    free(a);
    return 1;
}

/* The checks every one-sided call makes; resolves the stream. */
static ncclResult_t one_sided_check(const char *api, struct ncclComm *c, int peer, void *stream, sg_stream **s)
{
    mm_flush();
    if (!comm_ok(c)) {
        set_error("%s: invalid communicator", api);
        return ncclInvalidArgument;
    }
    if (peer < 0 || peer >= c->nranks) {
        set_error("%s: invalid peer %d (nranks %d)", api, peer, c->nranks);
        return ncclInvalidArgument;
    }
    *s = comm_stream(c, stream);
    if (!*s) {
        set_error("%s: invalid stream %p", api, stream);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

static ncclResult_t send_signal(const char *api, const char *op, const char *kname, struct ncclComm *c, int peer,
                                uint64_t bytes, sg_stream *s)
{
    sig_send_arg *a = calloc(1, sizeof *a);
    if (!a) return ncclSystemError;
    *a = (sig_send_arg){c->hdr, c->nranks, c->rank, peer, c->gen, 0, link_ns((double)bytes), bytes,
                        dev_counters(c->device)};
    a->k = __atomic_fetch_add(&c->sig_sent[peer], 1, __ATOMIC_RELAXED);
    (void)api;
    sg_collective_desc cd = {op, c->hex, __atomic_fetch_add(&c->one_sided, 1, __ATOMIC_RELAXED), bytes, c->nranks};
    launch(c, s, kname, 1, sig_send_poll, a, &cd);
    return ncclSuccess;
}

static ncclResult_t put_signal(size_t count, int dt, int peer, ncclWindow_t win, size_t off, struct ncclComm *c,
                               void *stream)
{
    sg_stream *s;
    ncclResult_t r = one_sided_check("ncclPutSignal", c, peer, stream, &s);
    if (r != ncclSuccess) return r;
    if (dtype_size(dt) == 0) {
        set_error("ncclPutSignal: invalid datatype %d", dt);
        return ncclInvalidArgument;
    }
    size_t bytes = nbytes(count, dt);
    if (!win || win->magic != WIN_MAGIC || win->comm != c || off > win->size || bytes > win->size - off) {
        set_error("ncclPutSignal: %zu bytes at offset %zu do not fit the peer window", bytes, off);
        return ncclInvalidArgument;
    }
    return send_signal("ncclPutSignal", "PutSignal", "ncclDevKernel_PutSignal", c, peer, bytes, s);
}

NX ncclResult_t pncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                               ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                               ncclComm_t comm, nccl_cudaStream_t stream)
{
    (void)localbuff, (void)sigIdx, (void)flags;
    pl_put pl = {comm_key(comm), nbytes(count, datatype), peer, ctx};
    COLL_RANGE("ncclPutSignal", SID_PutSignal, &pl,
               put_signal(count, datatype, peer, peerWin, peerWinOffset, comm, stream));
}
NX ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                              ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                              ncclComm_t comm, nccl_cudaStream_t stream) ALIAS(ncclPutSignal);

static ncclResult_t signal_only(int peer, struct ncclComm *c, void *stream)
{
    sg_stream *s;
    ncclResult_t r = one_sided_check("ncclSignal", c, peer, stream, &s);
    if (r != ncclSuccess) return r;
    return send_signal("ncclSignal", "Signal", "ncclDevKernel_Signal", c, peer, 0, s);
}

NX ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                            nccl_cudaStream_t stream)
{
    (void)sigIdx, (void)flags;
    pl_signal pl = {comm_key(comm), peer, ctx};
    COLL_RANGE("ncclSignal", SID_Signal, &pl, signal_only(peer, comm, stream));
}
NX ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           nccl_cudaStream_t stream) ALIAS(ncclSignal);

static ncclResult_t wait_signal(int nDesc, const ncclWaitSignalDesc_t *d, struct ncclComm *c, void *stream)
{
    if (nDesc < 0 || (nDesc > 0 && !d)) return ncclInvalidArgument;
    sg_stream *s;
    ncclResult_t r = one_sided_check("ncclWaitSignal", c, 0, stream, &s);
    if (r != ncclSuccess) return r;
    int total = 0;
    for (int i = 0; i < nDesc; i++) {
        if (d[i].peer < 0 || d[i].peer >= c->nranks || d[i].opCnt < 0) {
            set_error("ncclWaitSignal: descriptor %d: peer %d / opCnt %d", i, d[i].peer, d[i].opCnt);
            return ncclInvalidArgument;
        }
        total += d[i].opCnt;
    }
    sig_wait_arg *a = calloc(1, sizeof *a + (size_t)total * sizeof a->items[0]);
    if (!a) return ncclSystemError;
    a->hdr = c->hdr;
    a->nranks = c->nranks;
    a->dst = c->rank;
    a->gen = c->gen;
    a->n = total;
    int n = 0;
    for (int i = 0; i < nDesc; i++)
        for (int j = 0; j < d[i].opCnt; j++) {
            a->items[n].src = d[i].peer;
            a->items[n].k = __atomic_fetch_add(&c->sig_waited[d[i].peer], 1, __ATOMIC_RELAXED);
            n++;
        }
    sg_collective_desc cd = {"WaitSignal", c->hex, __atomic_fetch_add(&c->one_sided, 1, __ATOMIC_RELAXED), 0,
                             c->nranks};
    launch(c, s, "ncclDevKernel_WaitSignal", 1, sig_wait_poll, a, &cd);
    return ncclSuccess;
}

NX ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                                nccl_cudaStream_t stream)
{
    pl_signal pl = {comm_key(comm), nDesc, 0};
    COLL_RANGE("ncclWaitSignal", SID_WaitSignal, &pl, wait_signal(nDesc, signalDescs, comm, stream));
}
NX ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                               nccl_cudaStream_t stream) ALIAS(ncclWaitSignal);

/* ------------------------------------------------------------------ process lifecycle */

static void atfork_prepare(void)
{
    pthread_mutex_lock(&g_lock);
    pthread_mutex_lock(&g_mm_lock);
}
static void atfork_parent(void)
{
    pthread_mutex_unlock(&g_mm_lock);
    pthread_mutex_unlock(&g_lock);
}
static void atfork_child(void)
{
    pthread_mutex_init(&g_mm_lock, NULL);
    pthread_mutex_init(&g_lock, NULL);
}

__attribute__((constructor)) static void nccl_ctor(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Normal exit: every rank of this process marks itself gone (children of fork own none). */
__attribute__((destructor)) static void nccl_dtor(void)
{
    mm_flush();
    pthread_mutex_lock(&g_lock);
    struct ncclComm *list = g_comms;
    pthread_mutex_unlock(&g_lock);
    for (struct ncclComm *c = list; c; c = c->next) comm_leave(c);
}
