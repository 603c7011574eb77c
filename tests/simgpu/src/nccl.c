/*
 * nccl.c - mock libnccl.so.2 on the simulated GPU core.
 *
 * Ranks are separate processes (or several communicators of one process, ncclCommInitAll) that
 * meet in a POSIX shared-memory segment named in the ncclUniqueId. Every data-moving call enqueues
 * a deferred kernel on the caller's stream (inside a DRIVER-domain cuLaunchKernelEx API call, as
 * real NCCL launches); the kernel's start is this rank's arrival, published in the segment when
 * the core first polls it; it ends, on every rank, at max(arrivals) + latency + bus bytes / link
 * bandwidth (nccl-tests bus factors). Layout of the segment: nccl_internal.h.
 *
 * Groups: collectives queued between ncclGroupStart/End are launched one kernel each, in call
 * order, at the outermost ncclGroupEnd; the send/recv of a group are fused into one
 * ncclDevKernel_SendRecv kernel per (communicator, stream), as real NCCL does (so a ring exchange
 * does not deadlock). Outside a group every call launches at once.
 */
#define _GNU_SOURCE
#include "nccl_internal.h"
#include "simgpu_core.h"

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
    int gone;
    int64_t async_error_at;
    struct ncclComm *next;
};
static struct ncclComm *g_comms;

static size_t shm_size(int nranks)
{
    size_t n = (size_t)nranks;
    return sizeof(sgn_shm) + n * sizeof(sgn_rank_slot) + (size_t)SGN_COLL_SLOTS * n * sizeof(sgn_entry) +
           n * n * SGN_P2P_SLOTS * 2 * sizeof(sgn_entry);
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
static ncclResult_t comm_join(struct ncclComm **out, const sgn_id *id, int nranks, int rank, int device)
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
        __atomic_store_n(&h->magic, SGN_SHM_MAGIC, __ATOMIC_RELEASE);
    }
    slots[rank].pid = (int32_t)getpid();
    slots[rank].device = device;
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
        if (n == c->nranks) return ncclSuccess;
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

static uint64_t link_ns(double bus_bytes)
{
    double gbps = sg_link_gbps();
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
} qop;

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
    a->dur_ns = link_ns(bus);
    a->sig = (uint64_t)q->op | ((uint64_t)(q->dtype & 0xff) << 8) | ((uint64_t)(q->redop & 0xff) << 16) |
             ((uint64_t)((q->root + 1) & 0xffff) << 24);
    a->count = q->count;
    a->bus_bytes = (uint64_t)bus;
    a->ctr = dev_counters(c->device);
    a->pid = getpid();
    a->env_rank = sg_rank();
    memcpy(a->hex, c->hex, sizeof a->hex);
    sg_collective_desc cd = {op_truth_name(q->op), c->hex, q->seq, (uint64_t)bytes, n};
    launch(c, q->stream, kname, 16, coll_poll, a, &cd);
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
        a->items[i].dur_ns = link_ns((double)b);
        total += b;
        sends += q[i].op == OP_SEND;
    }
    const char *opn = sends == n ? "Send" : sends == 0 ? "Recv" : "SendRecv";
    sg_collective_desc cd = {opn, c->hex, q[0].seq, total, c->nranks};
    launch(c, q[0].stream, "ncclDevKernel_SendRecv", 8, p2p_poll, a, &cd);
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
    q.seq = __atomic_fetch_add(&c->seq, 1, __ATOMIC_RELAXED);
    if (op == OP_SEND)
        q.idx = __atomic_fetch_add(&c->send_cnt[peer], 1, __ATOMIC_RELAXED);
    else if (op == OP_RECV)
        q.idx = __atomic_fetch_add(&c->recv_cnt[peer], 1, __ATOMIC_RELAXED);
    else
        q.idx = __atomic_fetch_add(&c->coll_idx, 1, __ATOMIC_RELAXED);
    if (t_group_depth > 0) {
        if (q_push(&q) != 0) return ncclSystemError;
        return ncclSuccess;
    }
    flush_ops(&q, 1);
    return ncclSuccess;
}

/* ------------------------------------------------------------------ API */

#define ALIAS(name) __attribute__((weak, alias("p" #name)))

NX ncclResult_t pncclGetVersion(int *version)
{
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
NX ncclResult_t ncclGetVersion(int *version) ALIAS(ncclGetVersion);

NX ncclResult_t pncclGetUniqueId(ncclUniqueId *uid)
{
    if (!uid) return ncclInvalidArgument;
    sg_init();
    sgn_id id;
    memset(&id, 0, sizeof id);
    id.magic = SGN_ID_MAGIC;
    uint64_t key = 0;
    if (getrandom(&key, sizeof key, 0) != (ssize_t)sizeof key) key = 0;
    key ^= sg_now_ns() * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 32);
    static uint64_t counter;
    key ^= __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0xbf58476d1ce4e5b9ull;
    if (key == 0) key = 1;
    id.key = key;
    snprintf(id.shm_name, sizeof id.shm_name, "/simgpu-nccl-%u-%016" PRIx64, (unsigned)getuid(), key);
    id.creator_pid = (int32_t)getpid();
    memset(uid, 0, sizeof *uid);
    memcpy(uid->internal, &id, sizeof id);
    return ncclSuccess;
}
NX ncclResult_t ncclGetUniqueId(ncclUniqueId *uid) ALIAS(ncclGetUniqueId);

static ncclResult_t init_rank(ncclComm_t *comm, int nranks, const ncclUniqueId *uid, int rank)
{
    sg_init();
    mm_flush();
    if (!comm) return ncclInvalidArgument;
    *comm = NULL;
    sgn_id id;
    memcpy(&id, uid->internal, sizeof id);
    struct ncclComm *c = NULL;
    ncclResult_t r = comm_join(&c, &id, nranks, rank, sg_current_device());
    if (r != ncclSuccess) return r;
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

NX ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, &commId, rank);
}
NX ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
    ALIAS(ncclCommInitRank);

NX ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                        ncclConfig_t *config)
{
    (void)config; /* always blocking */
    return init_rank(comm, nranks, &commId, rank);
}
NX ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                       ncclConfig_t *config) ALIAS(ncclCommInitRankConfig);

NX ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    sg_init();
    mm_flush();
    if (!comms || ndev < 1) return ncclInvalidArgument;
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (d < 0 || d >= sg_device_count()) {
            set_error("ncclCommInitAll: invalid device %d", d);
            return ncclInvalidArgument;
        }
    }
    ncclUniqueId uid;
    pncclGetUniqueId(&uid);
    sgn_id id;
    memcpy(&id, uid.internal, sizeof id);
    for (int i = 0; i < ndev; i++) {
        ncclResult_t r = comm_join(&comms[i], &id, ndev, i, devlist ? devlist[i] : i);
        if (r != ncclSuccess) {
            for (int j = 0; j < i; j++) {
                comm_leave(comms[j]);
                comm_free(comms[j]);
                comms[j] = NULL;
            }
            return r;
        }
    }
    return ncclSuccess; /* every rank joined: the barrier is passed */
}
NX ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) ALIAS(ncclCommInitAll);

NX ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    mm_flush();
    return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
}
NX ncclResult_t ncclCommFinalize(ncclComm_t comm) ALIAS(ncclCommFinalize);

NX ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    mm_flush();
    if (!comm) return ncclSuccess;
    if (!comm_ok(comm)) return ncclInvalidArgument;
    comm_leave(comm);
    comm_free(comm);
    return ncclSuccess;
}
NX ncclResult_t ncclCommDestroy(ncclComm_t comm) ALIAS(ncclCommDestroy);

NX ncclResult_t pncclCommAbort(ncclComm_t comm) { return pncclCommDestroy(comm); }
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

NX ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm_ok(comm) || !count) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}
NX ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) ALIAS(ncclCommCount);

NX ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm_ok(comm) || !device) return ncclInvalidArgument;
    *device = comm->device;
    return ncclSuccess;
}
NX ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) ALIAS(ncclCommCuDevice);

NX ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm_ok(comm) || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}
NX ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) ALIAS(ncclCommUserRank);

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

NX ncclResult_t pncclAllReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    return enqueue("ncclAllReduce", comm, OP_ALLREDUCE, count, dt, op, -1, -1, stream);
}
NX ncclResult_t ncclAllReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                              ncclComm_t comm, nccl_cudaStream_t stream) ALIAS(ncclAllReduce);

NX ncclResult_t pncclAllGather(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                               nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    return enqueue("ncclAllGather", comm, OP_ALLGATHER, count, dt, 0, -1, -1, stream);
}
NX ncclResult_t ncclAllGather(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                              nccl_cudaStream_t stream) ALIAS(ncclAllGather);

NX ncclResult_t pncclReduceScatter(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                   ncclComm_t comm, nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    return enqueue("ncclReduceScatter", comm, OP_REDUCESCATTER, count, dt, op, -1, -1, stream);
}
NX ncclResult_t ncclReduceScatter(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t comm, nccl_cudaStream_t stream) ALIAS(ncclReduceScatter);

NX ncclResult_t pncclBroadcast(const void *sb, void *rb, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                               nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    return enqueue("ncclBroadcast", comm, OP_BROADCAST, count, dt, 0, root, -1, stream);
}
NX ncclResult_t ncclBroadcast(const void *sb, void *rb, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                              nccl_cudaStream_t stream) ALIAS(ncclBroadcast);

NX ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                           nccl_cudaStream_t stream)
{
    (void)buff;
    return enqueue("ncclBcast", comm, OP_BROADCAST, count, dt, 0, root, -1, stream);
}
NX ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                          nccl_cudaStream_t stream) ALIAS(ncclBcast);

NX ncclResult_t pncclReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                            ncclComm_t comm, nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    return enqueue("ncclReduce", comm, OP_REDUCE, count, dt, op, root, -1, stream);
}
NX ncclResult_t ncclReduce(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                           ncclComm_t comm, nccl_cudaStream_t stream) ALIAS(ncclReduce);

NX ncclResult_t pncclAlltoAll(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                              nccl_cudaStream_t stream)
{
    (void)sb, (void)rb;
    return enqueue("ncclAlltoAll", comm, OP_ALLTOALL, count, dt, 0, -1, -1, stream);
}
NX ncclResult_t ncclAlltoAll(const void *sb, void *rb, size_t count, ncclDataType_t dt, ncclComm_t comm,
                             nccl_cudaStream_t stream) ALIAS(ncclAlltoAll);

NX ncclResult_t pncclSend(const void *sb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                          nccl_cudaStream_t stream)
{
    (void)sb;
    return enqueue("ncclSend", comm, OP_SEND, count, dt, 0, -1, peer, stream);
}
NX ncclResult_t ncclSend(const void *sb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                         nccl_cudaStream_t stream) ALIAS(ncclSend);

NX ncclResult_t pncclRecv(void *rb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                          nccl_cudaStream_t stream)
{
    (void)rb;
    return enqueue("ncclRecv", comm, OP_RECV, count, dt, 0, -1, peer, stream);
}
NX ncclResult_t ncclRecv(void *rb, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                         nccl_cudaStream_t stream) ALIAS(ncclRecv);

NX ncclResult_t pncclGroupStart(void)
{
    mm_flush();
    if (t_group_depth == 0) t_group_err = ncclSuccess;
    t_group_depth++;
    return ncclSuccess;
}
NX ncclResult_t ncclGroupStart(void) ALIAS(ncclGroupStart);

NX ncclResult_t pncclGroupEnd(void)
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
NX ncclResult_t ncclGroupEnd(void) ALIAS(ncclGroupEnd);

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
