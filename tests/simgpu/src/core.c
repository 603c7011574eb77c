/* core.c - device model of libsimgpu.so: devices, streams, ops, the worker thread. */
#define _GNU_SOURCE
#include "core_internal.h"
#include "truth.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

pthread_mutex_t sg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wait_cond;   /* broadcast when something resolves/completes */
static pthread_cond_t g_worker_cond; /* wakes the worker */
static pthread_mutex_t g_progress_lock = PTHREAD_MUTEX_INITIALIZER;

#define STREAM_MAGIC 0x5347535452454d31ull

struct sg_stream {
    uint64_t magic;
    int device;
    uint32_t id;
    unsigned flags;
    int priority;
    int legacy;
    int alive;
    sg_op *tail;
    void *capture;
    sg_stream *next;
};

typedef struct sg_device {
    sg_stream *legacy;
    sg_stream *streams; /* all streams incl. legacy and per-thread ones */
    uint32_t next_stream_id;
    uint64_t used;
} sg_device;

static int g_inited;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ndev = 8;
static uint64_t g_capacity;
static double g_link_gbps = 100.0, g_link_lat_us = 5.0;
static int g_rank = -1;
static sg_device g_dev[SG_MAX_DEVICES];
static char g_ctx_handles[SG_MAX_DEVICES]; /* &g_ctx_handles[d] is the CUcontext of device d */
static __thread int t_device;
static __thread sg_stream *t_per_thread[SG_MAX_DEVICES];
static uint32_t g_corr; /* atomic */

static sg_op *g_inflight_head, *g_inflight_tail;
static uint64_t g_worker_wake = UINT64_MAX;
static int g_worker_started;
static pthread_t g_worker;

/* kernel model overrides */
typedef struct { char *sub; uint64_t ns; } kns_override;
static kns_override *g_kns;
static int g_nkns;

static sg_counters_shm *g_counters;

uint64_t sg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (sg_now_ns() < t) {
        if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != EINTR && sg_now_ns() >= t)
            break;
    }
}

static void abs_deadline(struct timespec *ts, uint64_t t)
{
    ts->tv_sec = (time_t)(t / 1000000000ull);
    ts->tv_nsec = (long)(t % 1000000000ull);
}

/* ---------------------------------------------------------------- strings */

#define INTERN_BUCKETS 4096
typedef struct intern_ent { struct intern_ent *next; char s[]; } intern_ent;
static intern_ent *g_intern[INTERN_BUCKETS];
static pthread_mutex_t g_intern_lock = PTHREAD_MUTEX_INITIALIZER;

const char *sg_intern(const char *s)
{
    if (!s) s = "";
    uint64_t h = 1469598103934665603ull;
    for (const char *p = s; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    unsigned b = (unsigned)(h % INTERN_BUCKETS);
    pthread_mutex_lock(&g_intern_lock);
    for (intern_ent *e = g_intern[b]; e; e = e->next)
        if (strcmp(e->s, s) == 0) {
            pthread_mutex_unlock(&g_intern_lock);
            return e->s;
        }
    size_t n = strlen(s);
    intern_ent *e = malloc(sizeof(*e) + n + 1);
    if (!e) {
        pthread_mutex_unlock(&g_intern_lock);
        return "";
    }
    memcpy(e->s, s, n + 1);
    e->next = g_intern[b];
    g_intern[b] = e;
    pthread_mutex_unlock(&g_intern_lock);
    return e->s;
}

/* ---------------------------------------------------------------- function handles */

/* CUfunction / cudaFunction_t values: one handle per kernel name, shared by the mock runtime
 * (cudaGetFuncBySymbol) and driver (cuModuleGetFunction, cuLaunchKernel), never freed. A value
 * is recognised by looking it up (never by dereferencing what the program passes). */
#define FUNC_BUCKETS 1024
typedef struct func_ent {
    uint64_t tag; /* makes the handle point at something recognisable in a debugger */
    const char *name;
    int attr[SG_FUNC_ATTRS]; /* values set by cuFuncSetAttribute / cudaFuncSetAttribute */
    uint32_t attr_set;       /* bit per attribute set */
    struct func_ent *next_by_name, *next_by_addr;
} func_ent;
static func_ent *g_func_by_name[FUNC_BUCKETS], *g_func_by_addr[FUNC_BUCKETS];
static pthread_mutex_t g_func_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned addr_bucket(const void *p) { return (unsigned)(((uintptr_t)p >> 4) * 2654435761u) % FUNC_BUCKETS; }

void *sg_func_handle(const char *name)
{
    const char *in = sg_intern(name);
    unsigned b = addr_bucket(in);
    pthread_mutex_lock(&g_func_lock);
    for (func_ent *e = g_func_by_name[b]; e; e = e->next_by_name)
        if (e->name == in) {
            pthread_mutex_unlock(&g_func_lock);
            return e;
        }
    func_ent *e = calloc(1, sizeof *e);
    if (e) {
        e->tag = 0x434e554647534eull; /* "SGFUNC" */
        e->name = in;
        e->next_by_name = g_func_by_name[b];
        g_func_by_name[b] = e;
        unsigned a = addr_bucket(e);
        e->next_by_addr = g_func_by_addr[a];
        g_func_by_addr[a] = e;
    }
    pthread_mutex_unlock(&g_func_lock);
    return e;
}

const char *sg_func_name(const void *handle)
{
    if (!handle) return NULL;
    const char *name = NULL;
    pthread_mutex_lock(&g_func_lock);
    for (func_ent *e = g_func_by_addr[addr_bucket(handle)]; e; e = e->next_by_addr)
        if ((const void *)e == handle) {
            name = e->name;
            break;
        }
    pthread_mutex_unlock(&g_func_lock);
    return name;
}

static func_ent *func_find_locked(const void *handle)
{
    for (func_ent *e = g_func_by_addr[addr_bucket(handle)]; e; e = e->next_by_addr)
        if ((const void *)e == handle) return e;
    return NULL;
}

/* CU_FUNC_ATTRIBUTE_* of a kernel on the simulated H100 (no static shared, constant or local memory,
 * 32 registers, sm_90): MAX_THREADS_PER_BLOCK 1024, NUM_REGS 32, PTX/BINARY_VERSION 90,
 * MAX_DYNAMIC_SHARED_SIZE_BYTES 48 KiB, PREFERRED_SHARED_MEMORY_CARVEOUT -1 (no preference). */
static int func_attr_default(int attr)
{
    switch (attr) {
    case 0: return 1024;
    case 4: return 32;
    case 5: case 6: return 90;
    case 8: return 49152;
    case 9: return -1;
    default: return 0;
    }
}

int sg_func_attr_value(const void *handle, int attr)
{
    int v = func_attr_default(attr);
    if (attr < 0 || attr >= SG_FUNC_ATTRS) return v;
    pthread_mutex_lock(&g_func_lock);
    func_ent *e = func_find_locked(handle);
    if (e && (e->attr_set >> attr & 1)) v = e->attr[attr];
    pthread_mutex_unlock(&g_func_lock);
    return v;
}

int sg_func_attr_update(const void *handle, int attr, int value)
{
    int ok;
    switch (attr) {
    case 8: ok = value >= 0 && value <= 232448; break;  /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, no static */
    case 9: ok = value >= -1 && value <= 100; break;     /* percent, -1: no preference */
    case 11: case 12: case 13: ok = value >= 0; break;   /* cluster dims: checked at launch */
    case 14: ok = value == 0 || value == 1; break;
    case 15: ok = value >= 0 && value <= 2; break;       /* CUclusterSchedulingPolicy */
    default: ok = 0; break;                              /* read-only or unknown */
    }
    if (!ok) return 1;
    pthread_mutex_lock(&g_func_lock);
    func_ent *e = func_find_locked(handle);
    if (e) {
        e->attr[attr] = value;
        e->attr_set |= 1u << attr;
    }
    pthread_mutex_unlock(&g_func_lock);
    return e ? 0 : -1;
}

/* ---------------------------------------------------------------- init */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    return end == v ? dflt : (uint64_t)x;
}

static double env_double(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    double x = strtod(v, &end);
    return end == v ? dflt : x;
}

int sg_no_driver(void)
{
    static int no_driver = -1;
    int v = __atomic_load_n(&no_driver, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("SIMGPU_NO_DRIVER");
        v = e && strcmp(e, "1") == 0;
        __atomic_store_n(&no_driver, v, __ATOMIC_RELAXED);
    }
    return v;
}

static void parse_kernel_ns(void)
{
    const char *v = getenv("SIMGPU_KERNEL_NS");
    if (!v || !*v) return;
    char *copy = strdup(v);
    if (!copy) return;
    int cap = 8;
    g_kns = calloc((size_t)cap, sizeof(*g_kns));
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && g_kns; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strrchr(tok, '=');
        if (!eq || eq == tok) continue;
        *eq = 0;
        if (g_nkns == cap) {
            cap *= 2;
            kns_override *n = realloc(g_kns, (size_t)cap * sizeof(*g_kns));
            if (!n) break;
            g_kns = n;
        }
        g_kns[g_nkns].sub = strdup(tok);
        g_kns[g_nkns].ns = strtoull(eq + 1, NULL, 10);
        g_nkns++;
    }
    free(copy);
}

static void counters_open(void)
{
    char name[128];
    const char *sess = getenv("SIMGPU_SESSION");
    if (sess && *sess)
        snprintf(name, sizeof name, "/simgpu-%s", sess);
    else
        snprintf(name, sizeof name, "/simgpu-%u", (unsigned)getuid());
    for (char *p = name + 1; *p; p++)
        if (*p == '/') *p = '_';
    int fd = shm_open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size < sizeof(sg_counters_shm)) {
        if (ftruncate(fd, (off_t)sizeof(sg_counters_shm)) != 0) {
            close(fd);
            return;
        }
    }
    void *p = mmap(NULL, sizeof(sg_counters_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return;
    g_counters = p;
    uint64_t zero = 0;
    if (__atomic_compare_exchange_n(&g_counters->magic, &zero, SG_COUNTERS_MAGIC, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST)) {
        g_counters->version = 1;
        __atomic_store_n(&g_counters->ndevices, (uint32_t)g_ndev, __ATOMIC_SEQ_CST);
    }
}

static sg_stream *stream_new(int device, unsigned flags, int priority, int legacy)
{
    sg_stream *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->magic = STREAM_MAGIC;
    s->device = device;
    s->flags = flags;
    s->priority = priority;
    s->legacy = legacy;
    s->alive = 1;
    s->id = legacy ? 7 : g_dev[device].next_stream_id++;
    s->next = g_dev[device].streams;
    g_dev[device].streams = s;
    return s;
}

static void atfork_prepare(void)
{
    pthread_mutex_lock(&g_progress_lock);
    pthread_mutex_lock(&sg_lock);
    pthread_mutex_lock(&g_intern_lock);
    sg_truth_lock_for_fork();
}
static void atfork_parent(void)
{
    sg_truth_unlock_after_fork();
    pthread_mutex_unlock(&g_intern_lock);
    pthread_mutex_unlock(&sg_lock);
    pthread_mutex_unlock(&g_progress_lock);
}
static void atfork_child(void)
{
    pthread_mutex_init(&g_intern_lock, NULL);
    pthread_mutex_init(&sg_lock, NULL);
    pthread_mutex_init(&g_progress_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_wait_cond, &ca);
    pthread_cond_init(&g_worker_cond, &ca);
    /* The parent's queued work belongs to the parent: forget it (leaked, never freed). */
    g_inflight_head = g_inflight_tail = NULL;
    g_worker_started = 0;
    g_worker_wake = UINT64_MAX;
    sg_truth_atfork_child();
    sgc_atfork_child();
}

static void do_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_wait_cond, &ca);
    pthread_cond_init(&g_worker_cond, &ca);
    g_ndev = (int)env_u64("SIMGPU_DEVICES", 8);
    if (g_ndev < 1) g_ndev = 1;
    if (g_ndev > SG_MAX_DEVICES) g_ndev = SG_MAX_DEVICES;
    g_capacity = env_u64("SIMGPU_MEM_GB", 80) << 30;
    g_link_gbps = env_double("SIMGPU_LINK_GBPS", 100.0);
    g_link_lat_us = env_double("SIMGPU_LINK_LATENCY_US", 5.0);
    const char *r = getenv("RANK");
    g_rank = (r && *r) ? atoi(r) : -1;
    parse_kernel_ns();
    for (int d = 0; d < g_ndev; d++) {
        g_dev[d].next_stream_id = 13;
        g_dev[d].legacy = stream_new(d, 0, 0, 1);
    }
    counters_open();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    sg_truth_init(g_capacity, g_link_gbps, g_link_lat_us, g_rank);
    __atomic_store_n(&g_inited, 1, __ATOMIC_RELEASE);
}

void sg_init(void)
{
    if (__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE)) return;
    pthread_once(&g_once, do_init);
}

__attribute__((constructor)) static void sg_ctor(void) { sg_init(); }

int sg_device_count(void) { sg_init(); return g_ndev; }
int sg_current_device(void) { return t_device; }
int sg_set_current_device(int dev)
{
    sg_init();
    if (dev < 0 || dev >= g_ndev) return -1;
    t_device = dev;
    return 0;
}
uint32_t sg_context_id(int device) { return (uint32_t)device + 1; }
void *sg_context_handle(int device)
{
    if (device < 0 || device >= SG_MAX_DEVICES) return NULL;
    return &g_ctx_handles[device];
}
int sg_context_device(const void *ctx)
{
    const char *c = ctx;
    if (c < g_ctx_handles || c >= g_ctx_handles + g_ndev) return -1;
    return (int)(c - g_ctx_handles);
}
uint64_t sg_device_capacity(int device) { (void)device; sg_init(); return g_capacity; }
uint64_t sg_device_used(int device)
{
    if (device < 0 || device >= g_ndev) return 0;
    pthread_mutex_lock(&sg_lock);
    uint64_t u = g_dev[device].used;
    pthread_mutex_unlock(&sg_lock);
    return u;
}
double sg_link_gbps(void) { sg_init(); return g_link_gbps; }
double sg_link_latency_us(void) { sg_init(); return g_link_lat_us; }
int sg_rank(void) { sg_init(); return g_rank; }
sg_counters_shm *sg_counters(void) { sg_init(); return g_counters; }

int sg_mem_reserve(int device, uint64_t bytes)
{
    sg_init();
    if (device < 0 || device >= g_ndev) return -1;
    pthread_mutex_lock(&sg_lock);
    int ok = g_dev[device].used + bytes <= g_capacity && bytes <= g_capacity;
    if (ok) g_dev[device].used += bytes;
    pthread_mutex_unlock(&sg_lock);
    if (ok && g_counters) __atomic_add_fetch(&g_counters->dev[device].mem_used_bytes, (int64_t)bytes, __ATOMIC_RELAXED);
    return ok ? 0 : -1;
}

void sg_mem_unreserve(int device, uint64_t bytes)
{
    if (device < 0 || device >= g_ndev) return;
    pthread_mutex_lock(&sg_lock);
    g_dev[device].used = g_dev[device].used >= bytes ? g_dev[device].used - bytes : 0;
    pthread_mutex_unlock(&sg_lock);
    if (g_counters) __atomic_sub_fetch(&g_counters->dev[device].mem_used_bytes, (int64_t)bytes, __ATOMIC_RELAXED);
}

uint32_t sg_next_correlation(void) { return __atomic_add_fetch(&g_corr, 1, __ATOMIC_RELAXED); }

/* ---------------------------------------------------------------- streams */

sg_stream *sg_stream_resolve(void *h, int per_thread)
{
    sg_init();
    int d = t_device;
    if (h == NULL) h = per_thread ? SG_STREAM_PER_THREAD : SG_STREAM_LEGACY;
    if (h == SG_STREAM_LEGACY) return g_dev[d].legacy;
    if (h == SG_STREAM_PER_THREAD) {
        if (!t_per_thread[d]) {
            pthread_mutex_lock(&sg_lock);
            t_per_thread[d] = stream_new(d, 0, 0, 0);
            pthread_mutex_unlock(&sg_lock);
        }
        return t_per_thread[d];
    }
    sg_stream *s = h;
    if (s->magic != STREAM_MAGIC || !s->alive) return NULL;
    return s;
}

sg_stream *sg_stream_create(int device, unsigned flags, int priority)
{
    sg_init();
    if (device < 0 || device >= g_ndev) return NULL;
    pthread_mutex_lock(&sg_lock);
    sg_stream *s = stream_new(device, flags, priority, 0);
    pthread_mutex_unlock(&sg_lock);
    return s;
}

void sg_stream_destroy(sg_stream *s)
{
    if (!s || s->legacy) return;
    pthread_mutex_lock(&sg_lock);
    s->alive = 0; /* its queued work still completes; the handle stops resolving */
    pthread_mutex_unlock(&sg_lock);
}

uint32_t sg_stream_id(const sg_stream *s) { return s ? s->id : 0; }
int sg_stream_device(const sg_stream *s) { return s ? s->device : 0; }
int sg_stream_nonblocking(const sg_stream *s) { return s && (s->flags & 1); }
int sg_stream_priority(const sg_stream *s) { return s ? s->priority : 0; }
void *sg_stream_capture_slot_get(sg_stream *s) { return s ? s->capture : NULL; }
void sg_stream_capture_slot_set(sg_stream *s, void *g) { if (s) s->capture = g; }

/* ---------------------------------------------------------------- ops */

void sg_op_retain(sg_op *op)
{
    pthread_mutex_lock(&sg_lock);
    op->refs++;
    pthread_mutex_unlock(&sg_lock);
}

static void op_unref_locked(sg_op *op)
{
    while (op && --op->refs == 0) {
        for (int i = 0; i < op->ndeps; i++) op_unref_locked(op->deps[i]);
        free(op->deps);
        free(op->coll_op);
        free(op->coll_comm);
        free(op);
        op = NULL;
    }
}

void sg_op_release(sg_op *op)
{
    if (!op) return;
    pthread_mutex_lock(&sg_lock);
    op_unref_locked(op);
    pthread_mutex_unlock(&sg_lock);
}

static void add_dep_locked(sg_op *op, sg_op *dep)
{
    if (!dep) return;
    if (dep->state == SG_ST_RESOLVED) {
        if (dep->end_ns > op->floor_ns) op->floor_ns = dep->end_ns;
        return;
    }
    sg_op **n = realloc(op->deps, (size_t)(op->ndeps + 1) * sizeof(*n));
    if (!n) return;
    op->deps = n;
    op->deps[op->ndeps++] = dep;
    dep->refs++;
}

/* Try to advance op (deps must have been tried first). Returns 1 if it changed state. */
static int try_resolve_locked(sg_op *op)
{
    if (op->state == SG_ST_RESOLVED) return 0;
    int changed = 0;
    if (op->state == SG_ST_PENDING) {
        for (int i = 0; i < op->ndeps; i++)
            if (op->deps[i]->state != SG_ST_RESOLVED) return 0;
        for (int i = 0; i < op->ndeps; i++) {
            if (op->deps[i]->end_ns > op->floor_ns) op->floor_ns = op->deps[i]->end_ns;
            op_unref_locked(op->deps[i]);
        }
        free(op->deps);
        op->deps = NULL;
        op->ndeps = 0;
        op->start_ns = op->enqueue_ns > op->floor_ns ? op->enqueue_ns : op->floor_ns;
        op->state = SG_ST_STARTED;
        changed = 1;
    }
    if (!op->deferred) {
        op->end_ns = op->start_ns + op->dur_ns;
        op->state = SG_ST_RESOLVED;
        return 1;
    }
    uint64_t end = 0;
    if (op->has_push) {
        end = op->push_end;
    } else if (op->poll && op->poll(op->poll_arg, op->start_ns, &end)) {
        /* resolved by poll */
    } else {
        return changed;
    }
    op->end_ns = end > op->start_ns ? end : op->start_ns;
    op->state = SG_ST_RESOLVED;
    return 1;
}

static void resolve_pass_locked(void)
{
    int changed = 0;
    for (sg_op *op = g_inflight_head; op; op = op->next)
        if (op->state != SG_ST_RESOLVED) changed |= try_resolve_locked(op);
    if (changed) pthread_cond_broadcast(&g_wait_cond);
}

static uint64_t kernel_family_ps(const char *name)
{
    static const struct { const char *sub; uint64_t ps; } fam[] = {
        {"gemm", 2000},        {"matmul", 2000},     {"cutlass", 2000},  {"xmma", 2000},
        {"flash", 3000},       {"attention", 3000},  {"fmha", 3000},     {"softmax", 500},
        {"layer_norm", 500},   {"layernorm", 500},   {"rms_norm", 500},  {"elementwise", 200},
        {"vectorized", 200},
    };
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++)
        if (strcasestr(name, fam[i].sub)) return fam[i].ps;
    return 400;
}

static int is_tensor_kernel(const char *name)
{
    static const char *subs[] = {"gemm", "matmul", "cutlass", "xmma", "flash", "attention", "fmha"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strcasestr(name, subs[i])) return 1;
    return 0;
}

uint64_t sg_kernel_model_ns(const char *name, const unsigned grid[3], const unsigned block[3])
{
    sg_init();
    if (!name) name = "";
    for (int i = 0; i < g_nkns; i++)
        if (strcasestr(name, g_kns[i].sub)) return g_kns[i].ns;
    uint64_t threads = 1;
    for (int i = 0; i < 3; i++) threads *= (uint64_t)(grid[i] ? grid[i] : 1) * (block[i] ? block[i] : 1);
    return 1500 + threads * kernel_family_ps(name) / 1000;
}

static sg_op *op_new(int kind, sg_stream *s, uint32_t corr)
{
    sg_op *op = calloc(1, sizeof(*op));
    if (!op) abort();
    op->kind = kind;
    op->refs = 1; /* the in-flight list's */
    op->device = s->device;
    op->stream_id = s->id;
    op->correlation = corr;
    return op;
}

static void start_worker_locked(void);

/* Links op behind the stream's tail (and the legacy default stream rules), makes it the
 * new tail, appends it to the in-flight list and resolves it if possible. */
static void enqueue_locked(sg_stream *s, sg_op *op)
{
    op->enqueue_ns = sg_now_ns();
    /* As real CUPTI: work is traced when its activity kind is enabled at launch, whatever the state
     * when it completes or when buffers are delivered. */
    op->cupti_traced = sgc_op_traced(op->kind);
    add_dep_locked(op, s->tail);
    sg_device *dev = &g_dev[s->device];
    if (s->legacy) {
        /* legacy default stream: waits for all blocking streams of the device */
        for (sg_stream *t = dev->streams; t; t = t->next)
            if (t != s && !(t->flags & 1)) add_dep_locked(op, t->tail);
    } else if (!(s->flags & 1)) {
        add_dep_locked(op, dev->legacy->tail);
    }
    if (s->tail) op_unref_locked(s->tail);
    s->tail = op;
    op->refs++;
    op->in_flight = 1;
    if (g_inflight_tail)
        g_inflight_tail->next = op;
    else
        g_inflight_head = op;
    g_inflight_tail = op;
    try_resolve_locked(op);
    if (op->kind != SG_OP_MARKER || op->state == SG_ST_RESOLVED) {
        uint64_t wake = op->state == SG_ST_RESOLVED ? op->end_ns : sg_now_ns() + 1000000;
        if (!g_worker_started) start_worker_locked();
        if (wake < g_worker_wake) {
            g_worker_wake = wake;
            pthread_cond_signal(&g_worker_cond);
        }
    }
}

static void fill_kernel(sg_op *op, const sg_kernel_desc *k)
{
    op->name = sg_intern(k->name);
    for (int i = 0; i < 3; i++) {
        op->grid[i] = k->grid[i] ? k->grid[i] : 1;
        op->block[i] = k->block[i] ? k->block[i] : 1;
    }
    op->dyn_smem = (uint32_t)k->dynamic_smem;
    op->launch_type = k->launch_type;
    op->dur_ns = k->duration_ns ? k->duration_ns : sg_kernel_model_ns(op->name, op->grid, op->block);
}

int sg_enqueue_kernel_graph(sg_stream *s, const sg_kernel_desc *k, uint32_t graph_id, uint64_t node_id)
{
    if (!s) return -1;
    sg_op *op = op_new(SG_OP_KERNEL, s, k->correlation);
    fill_kernel(op, k);
    op->graph_id = graph_id;
    op->graph_node_id = node_id;
    pthread_mutex_lock(&sg_lock);
    enqueue_locked(s, op);
    pthread_mutex_unlock(&sg_lock);
    return 0;
}

int sg_enqueue_kernel(sg_stream *s, const sg_kernel_desc *k) { return sg_enqueue_kernel_graph(s, k, 0, 0); }

sg_op *sg_enqueue_deferred_kernel(sg_stream *s, const sg_kernel_desc *k, sg_end_poll_fn poll, void *arg,
                                  const sg_collective_desc *coll)
{
    return sg_enqueue_deferred_kernel_graph(s, k, poll, arg, coll, 0, 0);
}

static sg_capture_hook_fn g_capture_hook;
void sg_set_capture_hook(sg_capture_hook_fn fn) { __atomic_store_n(&g_capture_hook, fn, __ATOMIC_RELEASE); }
int sg_capture_external(sg_stream *s, const sg_capture_item *it, int *err)
{
    sg_capture_hook_fn fn = __atomic_load_n(&g_capture_hook, __ATOMIC_ACQUIRE);
    *err = 0;
    return fn && s ? fn(s, it, err) : 0;
}

sg_op *sg_enqueue_deferred_kernel_graph(sg_stream *s, const sg_kernel_desc *k, sg_end_poll_fn poll, void *arg,
                                        const sg_collective_desc *coll, uint32_t graph_id, uint64_t graph_node_id)
{
    if (!s) return NULL;
    sg_op *op = op_new(SG_OP_KERNEL, s, k->correlation);
    fill_kernel(op, k);
    op->graph_id = graph_id;
    op->graph_node_id = graph_node_id;
    op->deferred = 1;
    op->poll = poll;
    op->poll_arg = arg;
    if (coll) {
        op->has_coll = 1;
        op->coll_op = strdup(coll->op ? coll->op : "");
        op->coll_comm = strdup(coll->comm ? coll->comm : "");
        op->coll_seq = coll->seq;
        op->coll_bytes = coll->bytes;
        op->coll_nranks = coll->nranks;
    }
    pthread_mutex_lock(&sg_lock);
    op->refs++; /* the caller's */
    enqueue_locked(s, op);
    pthread_mutex_unlock(&sg_lock);
    return op;
}

void sg_op_resolve(sg_op *op, uint64_t end_ns)
{
    if (!op) return;
    pthread_mutex_lock(&sg_lock);
    if (op->state != SG_ST_RESOLVED) {
        op->has_push = 1;
        op->push_end = end_ns;
        resolve_pass_locked();
        if (end_ns < g_worker_wake) g_worker_wake = end_ns;
        pthread_cond_signal(&g_worker_cond);
    }
    pthread_mutex_unlock(&sg_lock);
}

int sg_op_state(sg_op *op, uint64_t *start, uint64_t *end)
{
    pthread_mutex_lock(&sg_lock);
    int st = op->state;
    if (start) *start = op->state >= SG_ST_STARTED ? op->start_ns : 0;
    if (end) *end = op->state == SG_ST_RESOLVED ? op->end_ns : 0;
    pthread_mutex_unlock(&sg_lock);
    return st;
}

/* Memcpy duration model. */
static uint64_t memcpy_ns(int kind, uint64_t bytes, int pinned)
{
    double gbps;
    switch (kind) {
    case SG_COPY_HTOD:
    case SG_COPY_DTOH: gbps = pinned ? 25.0 : 10.0; break;
    case SG_COPY_DTOD: gbps = 1500.0; break;
    case SG_COPY_PTOP: gbps = 300.0; break;
    default: gbps = 10.0; break; /* HtoH */
    }
    return 1500 + (uint64_t)((double)bytes / gbps);
}

sg_op *sg_enqueue_copy(sg_stream *s, const sg_copy_desc *c, int want_ref)
{
    if (!s) return NULL;
    sg_op *op = op_new(c->is_memset ? SG_OP_MEMSET : SG_OP_MEMCPY, s, c->correlation);
    op->bytes = c->bytes;
    op->is_async = c->is_async;
    op->graph_id = c->graph_id;
    op->graph_node_id = c->graph_node_id;
    if (c->is_memset) {
        op->memset_value = c->value;
        op->dur_ns = 1000 + c->bytes / 2000;
    } else {
        int k = c->copy_kind;
        op->copy_kind = k;
        op->host_pinned = (k == SG_COPY_HTOD || k == SG_COPY_DTOH || k == SG_COPY_HTOH) ? !!c->host_pinned : 0;
        op->dur_ns = memcpy_ns(k, c->bytes, op->host_pinned);
    }
    pthread_mutex_lock(&sg_lock);
    if (want_ref) op->refs++;
    enqueue_locked(s, op);
    pthread_mutex_unlock(&sg_lock);
    return want_ref ? op : NULL;
}

sg_op *sg_enqueue_memcpy(sg_stream *s, int kind, uint64_t bytes, int pinned, uint32_t corr, int want_ref)
{
    sg_copy_desc c = {0};
    c.copy_kind = kind;
    c.bytes = bytes;
    c.host_pinned = pinned;
    c.is_async = 1;
    c.correlation = corr;
    return sg_enqueue_copy(s, &c, want_ref);
}

sg_op *sg_enqueue_memset(sg_stream *s, uint64_t bytes, uint32_t corr, int want_ref)
{
    sg_copy_desc c = {0};
    c.is_memset = 1;
    c.bytes = bytes;
    c.is_async = 1;
    c.correlation = corr;
    return sg_enqueue_copy(s, &c, want_ref);
}

sg_op *sg_stream_record_marker(sg_stream *s)
{
    if (!s) return NULL;
    sg_op *op = op_new(SG_OP_MARKER, s, 0);
    pthread_mutex_lock(&sg_lock);
    op->refs++; /* caller's */
    enqueue_locked(s, op);
    pthread_mutex_unlock(&sg_lock);
    return op;
}

sg_op *sg_enqueue_deferred_marker(sg_stream *s)
{
    if (!s) return NULL;
    sg_op *op = op_new(SG_OP_MARKER, s, 0);
    op->deferred = 1;
    pthread_mutex_lock(&sg_lock);
    op->refs++; /* caller's */
    enqueue_locked(s, op);
    pthread_mutex_unlock(&sg_lock);
    return op;
}

void sg_stream_wait_op(sg_stream *s, sg_op *dep)
{
    if (!s || !dep) return;
    sg_op *op = op_new(SG_OP_MARKER, s, 0);
    pthread_mutex_lock(&sg_lock);
    add_dep_locked(op, dep);
    enqueue_locked(s, op);
    pthread_mutex_unlock(&sg_lock);
}

int sg_op_done(sg_op *op, uint64_t *end_ns)
{
    pthread_mutex_lock(&sg_lock);
    if (op->state != SG_ST_RESOLVED) resolve_pass_locked();
    int done = op->state == SG_ST_RESOLVED && op->end_ns <= sg_now_ns();
    if (end_ns) *end_ns = op->state == SG_ST_RESOLVED ? op->end_ns : 0;
    pthread_mutex_unlock(&sg_lock);
    return done;
}

void sg_op_wait(sg_op *op)
{
    if (!op) return;
    pthread_mutex_lock(&sg_lock);
    while (op->state != SG_ST_RESOLVED) {
        resolve_pass_locked();
        if (op->state == SG_ST_RESOLVED) break;
        struct timespec ts;
        abs_deadline(&ts, sg_now_ns() + 500000);
        pthread_cond_timedwait(&g_wait_cond, &sg_lock, &ts);
    }
    uint64_t end = op->end_ns;
    pthread_mutex_unlock(&sg_lock);
    sleep_until(end);
    /* what the caller now knows is done is in the ground truth before the call returns (the worker
     * may not have woken yet, and the process may _exit next) */
    sg_progress(0);
}

int sg_stream_synchronize(sg_stream *s)
{
    if (!s) return 0;
    pthread_mutex_lock(&sg_lock);
    sg_op *t = s->tail;
    if (t) t->refs++;
    pthread_mutex_unlock(&sg_lock);
    if (t) {
        sg_op_wait(t);
        sg_op_release(t);
    }
    return 0;
}

int sg_stream_idle(sg_stream *s)
{
    if (!s) return 1;
    pthread_mutex_lock(&sg_lock);
    sg_op *t = s->tail;
    if (t && t->state != SG_ST_RESOLVED) resolve_pass_locked();
    int idle = !t || (t->state == SG_ST_RESOLVED && t->end_ns <= sg_now_ns());
    pthread_mutex_unlock(&sg_lock);
    return idle;
}

void sg_device_synchronize(int device)
{
    if (device < 0 || device >= g_ndev) return;
    pthread_mutex_lock(&sg_lock);
    int n = 0;
    for (sg_stream *s = g_dev[device].streams; s; s = s->next) n += s->tail != NULL;
    sg_op **tails = calloc((size_t)n + 1, sizeof(*tails));
    int k = 0;
    for (sg_stream *s = g_dev[device].streams; s && tails; s = s->next)
        if (s->tail) {
            tails[k++] = s->tail;
            s->tail->refs++;
        }
    pthread_mutex_unlock(&sg_lock);
    for (int i = 0; i < k; i++) {
        sg_op_wait(tails[i]);
        sg_op_release(tails[i]);
    }
    free(tails);
}

/* ---------------------------------------------------------------- completion */

static int cmp_end(const void *a, const void *b)
{
    const sg_op *x = *(sg_op *const *)a, *y = *(sg_op *const *)b;
    if (x->end_ns != y->end_ns) return x->end_ns < y->end_ns ? -1 : 1;
    if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
    return 0;
}

/* Adds the part of [start, end) after *last_end to *acc (ops complete in end order, so this is
 * the union of the intervals). */
static void add_union(uint64_t *acc, uint64_t *last_end, uint64_t start, uint64_t end)
{
    uint64_t last = __atomic_load_n(last_end, __ATOMIC_RELAXED);
    for (;;) {
        uint64_t from = start > last ? start : last;
        if (end <= last) break;
        if (__atomic_compare_exchange_n(last_end, &last, end, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            __atomic_add_fetch(acc, end - from, __ATOMIC_RELAXED);
            break;
        }
    }
}

/* The memory-bound families of the duration model (softmax, norms, elementwise). */
static int is_membound_kernel(const char *name)
{
    static const char *subs[] = {"softmax", "layer_norm", "layernorm", "rms_norm", "elementwise", "vectorized"};
    if (is_tensor_kernel(name)) return 0; /* the model checks the tensor families first */
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strcasestr(name, subs[i])) return 1;
    return 0;
}

static void count_busy(const sg_op *op)
{
    if (!g_counters || op->device >= SG_MAX_DEVICES) return;
    sg_device_counters *c = &g_counters->dev[op->device];
    add_union(&c->busy_ns, &c->busy_last_end_ns, op->start_ns, op->end_ns);
    uint64_t d = op->end_ns - op->start_ns;
    switch (op->kind) {
    case SG_OP_KERNEL:
        __atomic_add_fetch(&c->kernel_ns, d, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->kernels, 1, __ATOMIC_RELAXED);
        add_union(&c->kernel_busy_ns, &c->kernel_busy_last_end_ns, op->start_ns, op->end_ns);
        if (strcasestr(op->name, "nccl")) __atomic_add_fetch(&c->nccl_ns, d, __ATOMIC_RELAXED);
        else if (is_tensor_kernel(op->name)) __atomic_add_fetch(&c->tensor_ns, d, __ATOMIC_RELAXED);
        else if (is_membound_kernel(op->name)) __atomic_add_fetch(&c->membound_ns, d, __ATOMIC_RELAXED);
        break;
    case SG_OP_MEMCPY:
        if (op->copy_kind == SG_COPY_HTOD) __atomic_add_fetch(&c->pcie_rx_bytes, op->bytes, __ATOMIC_RELAXED);
        if (op->copy_kind == SG_COPY_DTOH) __atomic_add_fetch(&c->pcie_tx_bytes, op->bytes, __ATOMIC_RELAXED);
        if (op->copy_kind == SG_COPY_PTOP) __atomic_add_fetch(&c->nvlink_tx_bytes, op->bytes, __ATOMIC_RELAXED);
        if (op->copy_kind == SG_COPY_DTOD) __atomic_add_fetch(&c->dram_bytes, 2 * op->bytes, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->copy_ns, d, __ATOMIC_RELAXED);
        break;
    case SG_OP_MEMSET:
        __atomic_add_fetch(&c->dram_bytes, op->bytes, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->copy_ns, d, __ATOMIC_RELAXED);
        break;
    default: break;
    }
}

/* Completes every op that is done (end <= now; every resolved op when drain_all), in end
 * order: ground truth, CUPTI records, counters. Serialised by g_progress_lock. */
void sg_progress(int drain_all)
{
    sg_init();
    pthread_mutex_lock(&g_progress_lock);
    pthread_mutex_lock(&sg_lock);
    resolve_pass_locked();
    uint64_t now = sg_now_ns();
    size_t n = 0, cap = 64;
    sg_op **done = malloc(cap * sizeof(*done));
    sg_op *prev = NULL;
    uint64_t next_wake = UINT64_MAX;
    for (sg_op *op = g_inflight_head; op;) {
        sg_op *nx = op->next;
        int complete = op->state == SG_ST_RESOLVED && (op->end_ns <= now || drain_all);
        if (complete && done) {
            if (n == cap) {
                sg_op **nd = realloc(done, 2 * cap * sizeof(*done));
                if (!nd) { prev = op; op = nx; continue; }
                done = nd;
                cap *= 2;
            }
            done[n++] = op;
            if (prev) prev->next = nx; else g_inflight_head = nx;
            if (g_inflight_tail == op) g_inflight_tail = prev;
            op->next = NULL;
            op->in_flight = 0;
        } else {
            if (op->state == SG_ST_RESOLVED) {
                if (op->end_ns < next_wake) next_wake = op->end_ns;
            } else if (op->state == SG_ST_STARTED) {
                if (now + 1000000 < next_wake) next_wake = now + 1000000; /* poll deferred ops */
            }
            prev = op;
        }
        op = nx;
    }
    g_worker_wake = next_wake;
    if (n) pthread_cond_broadcast(&g_wait_cond);
    pthread_mutex_unlock(&sg_lock);
    if (n) {
        qsort(done, n, sizeof(*done), cmp_end);
        for (size_t i = 0; i < n; i++) {
            sg_op *op = done[i];
            if (op->kind == SG_OP_MARKER) continue;
            sg_truth_op(op);
            sgc_emit_op(op);
            count_busy(op);
        }
        sg_truth_flush(); /* one write for the pass, before anyone can see it complete */
        pthread_mutex_lock(&sg_lock);
        for (size_t i = 0; i < n; i++) op_unref_locked(done[i]);
        pthread_mutex_unlock(&sg_lock);
    }
    free(done);
    pthread_mutex_unlock(&g_progress_lock);
}

/* Writes unfinished collectives (never resolved) to the truth; `trylock` for the signal path. */
void sg_write_unfinished(int trylock)
{
    if (trylock) {
        if (pthread_mutex_trylock(&sg_lock) != 0) return;
    } else {
        pthread_mutex_lock(&sg_lock);
    }
    for (sg_op *op = g_inflight_head; op; op = op->next)
        if (op->has_coll && op->state != SG_ST_RESOLVED && !op->coll_written) {
            op->coll_written = 1;
            sg_truth_unfinished(op);
        }
    pthread_mutex_unlock(&sg_lock);
}

static void *worker_main(void *arg)
{
    (void)arg;
    for (;;) {
        sg_progress(0);
        sgc_deliver(0, 0);
        sg_truth_flush();
        pthread_mutex_lock(&sg_lock);
        uint64_t wake = g_worker_wake;
        uint64_t period;
        uint64_t now = sg_now_ns();
        if (sgc_worker_has_period(&period)) {
            if (now + period < wake) wake = now + period;
        }
        if (now + 50000000 < wake) wake = now + 50000000; /* at least 20 Hz: host records */
        if (wake > now) {
            struct timespec ts;
            abs_deadline(&ts, wake);
            pthread_cond_timedwait(&g_worker_cond, &sg_lock, &ts);
        }
        pthread_mutex_unlock(&sg_lock);
    }
    return NULL;
}

static void start_worker_locked(void)
{
    g_worker_started = 1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&g_worker, NULL, worker_main, NULL) == 0)
        pthread_detach(g_worker);
    else
        g_worker_started = 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void sg_worker_kick(void)
{
    pthread_mutex_lock(&sg_lock);
    if (!g_worker_started) start_worker_locked();
    g_worker_wake = 0;
    pthread_cond_signal(&g_worker_cond);
    pthread_mutex_unlock(&sg_lock);
}

__attribute__((destructor)) static void sg_dtor(void)
{
    if (!g_inited) return;
    sg_progress(1);
    sg_write_unfinished(0);
    sgc_write_truth();
    sg_truth_flush();
}
