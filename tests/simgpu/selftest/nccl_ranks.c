/* nccl_ranks.c - multi-process NCCL workload on the mock libnccl.so.2 (a launcher and its ranks).
 *
 * nccl_ranks [--ranks N] [--op allreduce|allgather|reducescatter|broadcast|reduce|alltoall|sendrecv|mixed]
 *            [--bytes B] [--iters K] [--stagger-us U] [--group] [--hang-rank R --hang-at I]
 *            [--desync-rank R --desync-at I] [--async-check] [--check]
 * The launcher takes an id from ncclGetUniqueId and re-executes itself N times with RANK,
 * LOCAL_RANK, WORLD_SIZE and SGN_TEST_ID (hex of the id) set, like torchrun; SIGTERM is forwarded
 * to the ranks. Each rank: cudaSetDevice(rank % devices), a stream, ncclCommInitRank, K iterations
 * of the op (rank r sleeps r * U us before each call, so arrivals differ), a stream sync after each.
 * Hang: rank R skips iteration I and sleeps (stderr "rank R hangs at iteration I"); desync: rank
 * R passes half the count at iteration I. --check (needs SIMGPU_TRUTH): verifies the ground truth
 * (every seq on every rank, equal ends, busbw of the last arriver = SIMGPU_LINK_GBPS within 2%).
 * Prints one "nccl_ranks ..." summary line per figure.
 */
#include "st_common.h"
#include "nccl_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

typedef struct {
    int ranks, iters, group, hang_rank, hang_at, desync_rank, desync_at, async_check, check;
    long stagger_us;
    size_t bytes;
    const char *op;
} opts;

static void usage(void)
{
    fprintf(stderr, "usage: nccl_ranks [--ranks N] [--op OP] [--bytes B] [--iters K] [--stagger-us U] [--group]\n"
                    "                  [--hang-rank R --hang-at I] [--desync-rank R --desync-at I] [--async-check] [--check]\n");
    exit(2);
}

static opts parse(int argc, char **argv)
{
    opts o = {4, 3, 0, -1, -1, -1, -1, 0, 0, 0, 64u << 20, "allreduce"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (i++, 1))
        if (ARG("--ranks")) o.ranks = atoi(v);
        else if (ARG("--iters")) o.iters = atoi(v);
        else if (ARG("--bytes")) o.bytes = strtoull(v, NULL, 0);
        else if (ARG("--op")) o.op = v;
        else if (ARG("--stagger-us")) o.stagger_us = atol(v);
        else if (ARG("--hang-rank")) o.hang_rank = atoi(v);
        else if (ARG("--hang-at")) o.hang_at = atoi(v);
        else if (ARG("--desync-rank")) o.desync_rank = atoi(v);
        else if (ARG("--desync-at")) o.desync_at = atoi(v);
        else if (!strcmp(a, "--group")) o.group = 1;
        else if (!strcmp(a, "--async-check")) o.async_check = 1;
        else if (!strcmp(a, "--check")) o.check = 1;
        else if (a[0] == '/' ) continue; /* run.sh-style truth dir argument */
        else usage();
#undef ARG
    }
    if (o.ranks < 1 || o.iters < 1) usage();
    return o;
}

#define NCK(call)                                                                                              \
    do {                                                                                                       \
        ncclResult_t r_ = (call);                                                                              \
        if (r_ != ncclSuccess) {                                                                               \
            fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(r_),              \
                    ncclGetLastError(NULL));                                                                   \
            exit(4);                                                                                           \
        }                                                                                                      \
    } while (0)

static void one_op(const char *op, int it, int rank, int n, size_t count, ncclComm_t comm, cudaStream_t s)
{
    if (!strcmp(op, "mixed")) {
        static const char *cycle[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "sendrecv"};
        op = cycle[it % 6];
    }
    if (!strcmp(op, "allreduce")) NCK(ncclAllReduce(NULL, NULL, count, ncclFloat32, ncclSum, comm, s));
    else if (!strcmp(op, "allgather")) NCK(ncclAllGather(NULL, NULL, count, ncclFloat32, comm, s));
    else if (!strcmp(op, "reducescatter")) NCK(ncclReduceScatter(NULL, NULL, count, ncclFloat32, ncclSum, comm, s));
    else if (!strcmp(op, "broadcast")) NCK(ncclBroadcast(NULL, NULL, count, ncclFloat32, 0, comm, s));
    else if (!strcmp(op, "reduce")) NCK(ncclReduce(NULL, NULL, count, ncclFloat32, ncclSum, 0, comm, s));
    else if (!strcmp(op, "alltoall")) NCK(ncclAlltoAll(NULL, NULL, count, ncclFloat32, comm, s));
    else if (!strcmp(op, "sendrecv")) { /* ring exchange: a group, or it deadlocks as in real NCCL */
        NCK(ncclGroupStart());
        NCK(ncclSend(NULL, count, ncclFloat32, (rank + 1) % n, comm, s));
        NCK(ncclRecv(NULL, count, ncclFloat32, (rank + n - 1) % n, comm, s));
        NCK(ncclGroupEnd());
    } else {
        fprintf(stderr, "unknown op %s\n", op);
        exit(2);
    }
}

static int rank_main(const opts *o, const char *idhex)
{
    int rank = atoi(getenv("RANK"));
    int n = atoi(getenv("WORLD_SIZE"));
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES && idhex[2 * i] && idhex[2 * i + 1]; i++) {
        unsigned b;
        sscanf(idhex + 2 * i, "%2x", &b);
        id.internal[i] = (char)b;
    }
    int ndev = 1;
    cudaGetDeviceCount(&ndev);
    cudaSetDevice(rank % (ndev > 0 ? ndev : 1));
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) return 3;
    ncclComm_t comm;
    NCK(ncclCommInitRank(&comm, n, id, rank));
    int cr = -1, cn = -1;
    ncclCommUserRank(comm, &cr);
    ncclCommCount(comm, &cn);
    if (cr != rank || cn != n) {
        fprintf(stderr, "rank %d: comm says rank %d of %d\n", rank, cr, cn);
        return 1;
    }
    size_t count = o->bytes / 4;
    for (int it = 0; it < o->iters; it++) {
        if (o->stagger_us) usleep((useconds_t)(o->stagger_us * rank));
        if (rank == o->hang_rank && it == o->hang_at) {
            fprintf(stderr, "rank %d hangs at iteration %d\n", rank, it);
            for (;;) pause();
        }
        size_t c = (rank == o->desync_rank && it == o->desync_at) ? count / 2 : count;
        if (o->group) NCK(ncclGroupStart());
        one_op(o->op, it, rank, n, c, comm, s);
        if (o->group) NCK(ncclGroupEnd());
        cudaStreamSynchronize(s);
    }
    if (o->async_check) {
        ncclResult_t ae = ncclSuccess;
        NCK(ncclCommGetAsyncError(comm, &ae));
        printf("nccl_ranks rank=%d async_error=%d\n", rank, (int)ae);
    }
    NCK(ncclCommDestroy(comm));
    fflush(stdout);
    return 0;
}

/* ------------------------------------------------------------------ launcher */

static pid_t g_children[256];
static int g_nchildren;
static void forward(int sig)
{
    for (int i = 0; i < g_nchildren; i++)
        if (g_children[i] > 0) kill(g_children[i], sig);
}

typedef struct {
    int rank, unfinished;
    long long seq, start, end, bytes;
    char comm[40], op[32];
} coll;

static int load_colls(const char *dir, coll **out)
{
    int n = 0, cap = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "truth-", 6)) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char *line = NULL;
        size_t lc = 0;
        while (getline(&line, &lc, f) > 0) {
            if (!st_is(line, "collective")) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                *out = realloc(*out, (size_t)cap * sizeof(coll));
            }
            coll *c = &(*out)[n++];
            c->rank = (int)st_num(line, "rank");
            c->seq = st_num(line, "seq");
            c->start = st_num(line, "start_ns");
            c->end = st_num(line, "end_ns");
            c->bytes = st_num(line, "bytes");
            c->unfinished = strstr(line, "\"unfinished\":true") != NULL;
            st_str(line, "comm", c->comm, sizeof c->comm);
            st_str(line, "op", c->op, sizeof c->op);
        }
        free(line);
        fclose(f);
    }
    closedir(d);
    return n;
}

static double bus_factor(const char *op, int n, double bytes)
{
    if (!strcmp(op, "AllReduce")) return 2.0 * (n - 1) / n * bytes;
    if (!strcmp(op, "AllGather") || !strcmp(op, "ReduceScatter") || !strcmp(op, "AllToAll")) return (n - 1) * bytes;
    return bytes;
}

static int check_truth(const opts *o)
{
    const char *dir = getenv("SIMGPU_TRUTH");
    if (!dir) {
        fprintf(stderr, "--check needs SIMGPU_TRUTH\n");
        return 1;
    }
    coll *cs = NULL;
    int n = load_colls(dir, &cs);
    double gbps = getenv("SIMGPU_LINK_GBPS") ? atof(getenv("SIMGPU_LINK_GBPS")) : 100.0;
    double lat = getenv("SIMGPU_LINK_LATENCY_US") ? atof(getenv("SIMGPU_LINK_LATENCY_US")) : 5.0;
    long long maxseq = -1;
    for (int i = 0; i < n; i++)
        if (cs[i].seq > maxseq) maxseq = cs[i].seq;
    int expect_seqs = o->iters * (!strcmp(o->op, "sendrecv") ? 2 : 1);
    CHECK(n == o->ranks * (int)(maxseq + 1) || !strcmp(o->op, "sendrecv") || !strcmp(o->op, "mixed"),
          "%d collective lines for %d ranks x %lld seqs", n, o->ranks, maxseq + 1);
    CHECK(maxseq + 1 >= o->iters && maxseq + 1 <= expect_seqs + o->iters, "max seq %lld", maxseq);
    double worst = 0;
    for (long long sq = 0; sq <= maxseq; sq++) {
        int k = 0;
        long long end0 = -1, last_start = -1, last_end = -1, bytes0 = -1;
        const char *op = "";
        for (int i = 0; i < n; i++) {
            if (cs[i].seq != sq) continue;
            k++;
            CHECK(!cs[i].unfinished, "seq %lld rank %d unfinished", sq, cs[i].rank);
            CHECK(!strcmp(cs[i].comm, cs[0].comm), "comm %s vs %s", cs[i].comm, cs[0].comm);
            if (!strcmp(cs[i].op, "Send") || !strcmp(cs[i].op, "Recv") || !strcmp(cs[i].op, "SendRecv")) continue;
            if (end0 < 0) end0 = cs[i].end, bytes0 = cs[i].bytes, op = cs[i].op;
            CHECK(cs[i].end == end0, "seq %lld: rank %d ends at %lld, another at %lld", sq, cs[i].rank, cs[i].end, end0);
            CHECK(cs[i].bytes == bytes0, "seq %lld: bytes %lld vs %lld", sq, cs[i].bytes, bytes0);
            if (cs[i].start > last_start) last_start = cs[i].start, last_end = cs[i].end;
        }
        if (!strcmp(o->op, "sendrecv")) continue;
        CHECK(k == o->ranks, "seq %lld on %d ranks", sq, k);
        if (last_start < 0) continue;
        double dur = (double)(last_end - last_start);
        double bus = bus_factor(op, o->ranks, (double)bytes0);
        double want = lat * 1000.0 + bus / gbps;
        double busbw = bus / dur;
        double err = (dur - want) / want;
        if (err < 0) err = -err;
        if (err > worst) worst = err;
        printf("nccl_ranks seq=%lld op=%s bytes=%lld last_arriver_ns=%.0f busbw_GBps=%.2f configured=%.2f\n", sq, op,
               bytes0, dur, busbw, gbps);
        CHECK(err < 0.001 + 50000.0 / want, "seq %lld: duration %.0f ns, model %.0f ns", sq, dur, want);
    }
    printf("nccl_ranks ranks=%d colls=%d worst_model_error=%.5f\n", o->ranks, n, worst);
    free(cs);
    return st_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    opts o = parse(argc, argv);
    const char *idhex = getenv("SGN_TEST_ID");
    if (idhex && getenv("RANK") && getenv("WORLD_SIZE")) return rank_main(&o, idhex);

    ncclUniqueId id;
    int rank = -1;
    NCK(ncclGetUniqueId(&id));
    char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
    setenv("SGN_TEST_ID", hex, 1);
    char ws[16];
    snprintf(ws, sizeof ws, "%d", o.ranks);
    setenv("WORLD_SIZE", ws, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    uint64_t t0 = st_now();
    for (int r = 0; r < o.ranks && r < 256; r++) {
        pid_t p = fork();
        if (p == 0) {
            char rs[16];
            snprintf(rs, sizeof rs, "%d", r);
            setenv("RANK", rs, 1);
            setenv("LOCAL_RANK", rs, 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        g_children[g_nchildren++] = p;
    }
    int fail = 0, left = g_nchildren;
    while (left > 0) {
        int st;
        pid_t p = wait(&st);
        if (p < 0) {
            if (errno == EINTR) continue;
            break;
        }
        left--;
        for (int i = 0; i < g_nchildren; i++)
            if (g_children[i] == p) g_children[i] = 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "nccl_ranks: a rank (pid %d) failed: %s %d\n", (int)p,
                    WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            fail = 1;
        }
    }
    printf("nccl_ranks ranks=%d op=%s bytes=%zu iters=%d wall_ms=%.1f\n", o.ranks, o.op, o.bytes, o.iters,
           (double)(st_now() - t0) / 1e6);
    fflush(stdout);
    if (fail) return 1;
    if (o.check) return check_truth(&o);
    return 0;
}
