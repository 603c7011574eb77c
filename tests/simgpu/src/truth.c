/* truth.c - ground truth: <dir>/truth-<pid>.jsonl, one JSON object per line (docs/DESIGN.md).
 *
 * Every line reaches the file (O_APPEND, one write(2) per batch) as soon as what it describes is
 * complete: op lines at the end of each completion pass (core.c sg_progress, run by the worker and by
 * every synchronising call before it returns), other lines when they are written. Nothing waits for
 * exit handlers, so a process that ends with _exit (or is killed) keeps what it completed. */
#define _GNU_SOURCE
#include "truth.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t g_tlock = PTHREAD_MUTEX_INITIALIZER;
static char *g_dir;
static int g_fd = -1;
static pid_t g_fd_pid;
static char *g_buf;
static size_t g_len, g_cap;
static uint64_t g_capacity;
static double g_gbps, g_lat;
static int g_rank = -1;
static struct sigaction g_old_term;

static void buf_reserve(size_t extra)
{
    if (g_len + extra <= g_cap) return;
    size_t nc = g_cap ? g_cap : 65536;
    while (nc < g_len + extra) nc *= 2;
    char *n = realloc(g_buf, nc);
    if (!n) return;
    g_buf = n;
    g_cap = nc;
}

static void buf_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void buf_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    buf_reserve((size_t)n + 1);
    if (g_len + (size_t)n + 1 > g_cap) return;
    va_start(ap, fmt);
    vsnprintf(g_buf + g_len, g_cap - g_len, fmt, ap);
    va_end(ap);
    g_len += (size_t)n;
}

static void buf_json_str(const char *s)
{
    buf_reserve(strlen(s) * 6 + 3);
    if (!g_buf) return;
    g_buf[g_len++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            g_buf[g_len++] = '\\';
            g_buf[g_len++] = (char)*p;
        } else if (*p < 0x20) {
            g_len += (size_t)snprintf(g_buf + g_len, 7, "\\u%04x", *p);
        } else {
            g_buf[g_len++] = (char)*p;
        }
    }
    g_buf[g_len++] = '"';
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void process_line_locked(void);

/* Opens the file of this pid (again after fork). Lock held. */
static int ensure_open_locked(void)
{
    if (!g_dir) return 0;
    pid_t pid = getpid();
    if (g_fd >= 0 && g_fd_pid == pid) return 1;
    if (g_fd >= 0) close(g_fd);
    char path[4096];
    snprintf(path, sizeof path, "%s/truth-%d.jsonl", g_dir, (int)pid);
    g_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    g_fd_pid = pid;
    if (g_fd < 0) return 0;
    process_line_locked();
    return 1;
}

static void common_locked(const char *type, int device, int64_t stream, uint64_t start, uint64_t end, int end_null,
                          uint32_t corr)
{
    buf_printf("{\"type\":\"%s\",\"pid\":%d,\"rank\":%d,\"device\":%d,\"stream\":%lld,\"start_ns\":%llu,", type,
               (int)getpid(), g_rank, device, (long long)stream, (unsigned long long)start);
    if (end_null)
        buf_printf("\"end_ns\":null,\"unfinished\":true,");
    else
        buf_printf("\"end_ns\":%llu,", (unsigned long long)end);
    buf_printf("\"correlation\":%u", corr);
}

static void process_line_locked(void)
{
    uint64_t t = sg_now_ns();
    common_locked("process", -1, -1, t, t, 0, 0);
    buf_printf(",\"device_capacity_bytes\":%llu,\"link_gbps\":%g,\"link_latency_us\":%g,\"argv\":[",
               (unsigned long long)g_capacity, g_gbps, g_lat);
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char cmd[8192];
        ssize_t n = read(fd, cmd, sizeof cmd - 1);
        close(fd);
        if (n > 0) {
            cmd[n] = 0;
            int first = 1;
            for (ssize_t i = 0; i < n; i += (ssize_t)strlen(cmd + i) + 1) {
                if (!first) buf_printf(",");
                first = 0;
                buf_json_str(cmd + i);
            }
        }
    }
    buf_printf("]}\n");
}

static void flush_locked(void)
{
    if (!g_len) return;
    if (ensure_open_locked() && g_fd >= 0) write_all(g_fd, g_buf, g_len);
    g_len = 0;
}

static void on_sigterm(int sig, siginfo_t *info, void *uc)
{
    sg_write_unfinished(1);
    if (pthread_mutex_trylock(&g_tlock) == 0) {
        flush_locked();
        pthread_mutex_unlock(&g_tlock);
    }
    if (g_old_term.sa_flags & SA_SIGINFO) {
        if (g_old_term.sa_sigaction) g_old_term.sa_sigaction(sig, info, uc);
        return;
    }
    if (g_old_term.sa_handler == SIG_IGN) return;
    if (g_old_term.sa_handler == SIG_DFL) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_old_term.sa_handler(sig);
}

void sg_truth_init(uint64_t capacity, double link_gbps, double link_lat_us, int rank)
{
    g_capacity = capacity;
    g_gbps = link_gbps;
    g_lat = link_lat_us;
    g_rank = rank;
    const char *d = getenv("SIMGPU_TRUTH");
    if (!d || !*d) return;
    g_dir = strdup(d);
    pthread_mutex_lock(&g_tlock);
    ensure_open_locked();
    flush_locked();
    pthread_mutex_unlock(&g_tlock);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigterm;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &g_old_term);
}

/* Work a graph launch queued: the graph's and the node's ids, as CUPTI reports them. */
static void graph_ids_locked(const sg_op *op)
{
    if (op->graph_id)
        buf_printf(",\"graph_id\":%u,\"graph_node_id\":%llu", op->graph_id, (unsigned long long)op->graph_node_id);
}

void sg_truth_op(const sg_op *op)
{
    if (!g_dir) return;
    pthread_mutex_lock(&g_tlock);
    switch (op->kind) {
    case SG_OP_KERNEL:
        common_locked("kernel", op->device, op->stream_id, op->start_ns, op->end_ns, 0, op->correlation);
        buf_printf(",\"name\":");
        buf_json_str(op->name);
        buf_printf(",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]", op->grid[0], op->grid[1], op->grid[2],
                   op->block[0], op->block[1], op->block[2]);
        graph_ids_locked(op);
        buf_printf("}\n");
        if (op->has_coll) {
            common_locked("collective", op->device, op->stream_id, op->start_ns, op->end_ns, 0, op->correlation);
            buf_printf(",\"op\":");
            buf_json_str(op->coll_op);
            buf_printf(",\"comm\":");
            buf_json_str(op->coll_comm);
            buf_printf(",\"seq\":%llu,\"bytes\":%llu,\"nranks\":%d,\"kernel\":", (unsigned long long)op->coll_seq,
                       (unsigned long long)op->coll_bytes, op->coll_nranks);
            buf_json_str(op->name);
            buf_printf("}\n");
        }
        break;
    case SG_OP_MEMCPY: {
        const char *k = op->copy_kind == SG_COPY_HTOD   ? "HtoD"
                        : op->copy_kind == SG_COPY_DTOH ? "DtoH"
                        : op->copy_kind == SG_COPY_DTOD ? "DtoD"
                        : op->copy_kind == SG_COPY_PTOP ? "PtoP"
                                                        : "HtoH";
        common_locked("memcpy", op->device, op->stream_id, op->start_ns, op->end_ns, 0, op->correlation);
        buf_printf(",\"bytes\":%llu,\"copy_kind\":\"%s\",\"host_pinned\":%s", (unsigned long long)op->bytes, k,
                   op->host_pinned ? "true" : "false");
        graph_ids_locked(op);
        buf_printf("}\n");
        break;
    }
    case SG_OP_MEMSET:
        common_locked("memset", op->device, op->stream_id, op->start_ns, op->end_ns, 0, op->correlation);
        buf_printf(",\"bytes\":%llu", (unsigned long long)op->bytes);
        graph_ids_locked(op);
        buf_printf("}\n");
        break;
    default: break;
    }
    if (g_len > (1u << 20)) flush_locked();
    pthread_mutex_unlock(&g_tlock);
}

/* Called with sg_lock held (possibly from the SIGTERM handler). */
void sg_truth_unfinished(const sg_op *op)
{
    if (!g_dir) return;
    if (pthread_mutex_trylock(&g_tlock) != 0) return;
    uint64_t start = op->state >= SG_ST_STARTED ? op->start_ns : op->enqueue_ns;
    common_locked("collective", op->device, op->stream_id, start, 0, 1, op->correlation);
    buf_printf(",\"op\":");
    buf_json_str(op->coll_op);
    buf_printf(",\"comm\":");
    buf_json_str(op->coll_comm);
    buf_printf(",\"seq\":%llu,\"bytes\":%llu,\"nranks\":%d,\"kernel\":", (unsigned long long)op->coll_seq,
               (unsigned long long)op->coll_bytes, op->coll_nranks);
    buf_json_str(op->name);
    buf_printf("}\n");
    flush_locked();
    pthread_mutex_unlock(&g_tlock);
}

void sg_truth_line(const char *json)
{
    sg_init();
    if (!g_dir || !json) return;
    pthread_mutex_lock(&g_tlock);
    size_t n = strlen(json);
    while (n && (json[n - 1] == '\n' || json[n - 1] == ' ')) n--;
    buf_reserve(n + 2);
    if (g_len + n + 2 <= g_cap) {
        memcpy(g_buf + g_len, json, n);
        g_len += n;
        g_buf[g_len++] = '\n';
    }
    flush_locked(); /* written now: a process may end with _exit right after */
    pthread_mutex_unlock(&g_tlock);
}

void sg_truth_host_line(const char *type, int device, int64_t stream, uint32_t correlation, const char *fields)
{
    sg_init();
    if (!g_dir || !type) return;
    uint64_t t = sg_now_ns();
    pthread_mutex_lock(&g_tlock);
    common_locked(type, device, stream, t, t, 0, correlation);
    if (fields && *fields) buf_printf(",%s", fields);
    buf_printf("}\n");
    flush_locked();
    pthread_mutex_unlock(&g_tlock);
}

void sg_truth_flush(void)
{
    if (!g_dir) return;
    pthread_mutex_lock(&g_tlock);
    flush_locked();
    pthread_mutex_unlock(&g_tlock);
}

void sg_truth_lock_for_fork(void) { pthread_mutex_lock(&g_tlock); }
void sg_truth_unlock_after_fork(void) { pthread_mutex_unlock(&g_tlock); }
void sg_truth_atfork_child(void)
{
    pthread_mutex_init(&g_tlock, NULL);
    g_len = 0; /* the parent writes its own buffered lines */
    if (g_fd >= 0) close(g_fd);
    g_fd = -1; /* reopened (truth-<childpid>.jsonl, with a process line) on first write */
}
