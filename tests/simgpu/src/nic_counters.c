/*
 * nic_counters.c - the simulated node's NIC as sysfs shows a real InfiniBand port's counters.
 *
 * SIMGPU_NIC_COUNTERS: the counters folder of node %n's port (e.g.
 * <fake sysfs of node %n>/sys/class/infiniband/mlx5_0/ports/1/counters; its files must exist, as
 * sysfs's do). Unset: no counters. Every rank publishes the transfers its collectives' ring edges
 * make across nodes (bytes sent and received, from start to end, possibly still ahead: the
 * simulated GPU schedules a stream's queue in advance) in its slot of a table shared by the node's
 * processes (`.simnic` in that folder): a ring of its last transfers with the bytes before each.
 * The bytes count as they go, linearly over each transfer's time, as a real NIC's counters grow.
 * A rank's transfers run one after another (one stream); more than NIC_RING of them queued ahead
 * of the clock would be counted early. The node's first rank
 * (RANK % ranks per node == 0) rewrites port_xmit_data and port_rcv_data (4-byte words, as mlx5
 * counts) and port_xmit_packets / port_rcv_packets (4 KiB MTU) every 10 ms, in place, so a reader
 * that keeps the file open sees each new value.
 *
 * SIMGPU_NIC_OTHER_GBPS_NODE<k>: traffic on node k's NIC that is not this job's (another job, a
 * checkpoint write, a network filesystem), GB/s each way, counted from the writer's start; NCCL's
 * share of that NIC loses as much (sgp_nic_gbps).
 */
#define _GNU_SOURCE
#include "nic_counters.h"
#include "nccl_profiler.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NIC_SLOTS 16
#define NIC_RING 2048

typedef struct {
    uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
    uint64_t tx_before, rx_before; /* the rank's bytes before this transfer */
    uint64_t tx, rx;
} nic_transfer;

/* One rank's transfers: `n` published, the last NIC_RING of them kept. */
typedef struct {
    uint64_t n;
    nic_transfer ring[NIC_RING];
} nic_slot;

typedef struct {
    nic_slot slot[NIC_SLOTS];
} nic_totals;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static nic_totals *g_totals; /* NULL: no counters */
static nic_slot *g_mine;
static char g_dir[512];
static int g_node;

static double env_gbps(const char *name)
{
    const char *v = getenv(name);
    double d = v && *v ? strtod(v, NULL) : 0.0;
    return d > 0 ? d : 0.0;
}

double sgn_nic_other_gbps(int node)
{
    char name[64];
    snprintf(name, sizeof name, "SIMGPU_NIC_OTHER_GBPS_NODE%d", node);
    return env_gbps(name);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Overwrites `fd` with `v` at a fixed width (leading zeros), so a concurrent reader sees a whole number. */
static void put(int fd, uint64_t v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%020" PRIu64 "\n", v);
    if (fd >= 0 && n > 0 && pwrite(fd, b, (size_t)n, 0) < 0) {
        /* the test removed the folder: nothing to show it to */
    }
}

/* Bytes (sent, received) slot `s` has carried by `now`: the newest transfer that started by then,
 * the part of it done, and everything before it. */
static void carried(const nic_slot *s, uint64_t now, double *tx, double *rx)
{
    uint64_t n = __atomic_load_n(&s->n, __ATOMIC_ACQUIRE);
    uint64_t lo = n > NIC_RING ? n - NIC_RING : 0;
    for (uint64_t i = n; i-- > lo;) {
        const nic_transfer *t = &s->ring[i % NIC_RING];
        if (t->start_ns > now && i > lo) continue;
        if (t->start_ns > now) {
            *tx += (double)t->tx_before; /* all kept ones still ahead */
            *rx += (double)t->rx_before;
            return;
        }
        double f = now >= t->end_ns || t->end_ns <= t->start_ns
                       ? 1.0
                       : (double)(now - t->start_ns) / (double)(t->end_ns - t->start_ns);
        *tx += (double)t->tx_before + f * (double)t->tx;
        *rx += (double)t->rx_before + f * (double)t->rx;
        return;
    }
}

static void *writer(void *unused)
{
    (void)unused;
    static const char *files[4] = {"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"};
    int fd[4];
    for (int i = 0; i < 4; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
        fd[i] = open(p, O_WRONLY | O_CLOEXEC);
    }
    double other = sgn_nic_other_gbps(g_node);
    uint64_t t0 = now_ns();
    for (;;) {
        uint64_t now = now_ns();
        double tx = other * (double)(now - t0), rx = tx;
        for (int i = 0; i < NIC_SLOTS; i++) carried(&g_totals->slot[i], now, &tx, &rx);
        put(fd[0], (uint64_t)tx / 4);
        put(fd[1], (uint64_t)rx / 4);
        put(fd[2], (uint64_t)tx / 4096);
        put(fd[3], (uint64_t)rx / 4096);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void setup(void)
{
    const char *pattern = getenv("SIMGPU_NIC_COUNTERS");
    if (!pattern || !*pattern) return;
    g_node = sgp_node();
    /* %n -> the node */
    size_t o = 0;
    for (const char *s = pattern; *s && o + 12 < sizeof g_dir; s++) {
        if (s[0] == '%' && s[1] == 'n') {
            o += (size_t)snprintf(g_dir + o, sizeof g_dir - o, "%d", g_node);
            s++;
        } else {
            g_dir[o++] = *s;
        }
    }
    g_dir[o] = 0;
    char p[600];
    snprintf(p, sizeof p, "%s/.simnic", g_dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (ftruncate(fd, sizeof(nic_totals)) == 0) {
        void *m = mmap(NULL, sizeof(nic_totals), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) g_totals = m;
    }
    close(fd);
    if (!g_totals) return;
    g_mine = &g_totals->slot[sgp_rank_on_node() % NIC_SLOTS];
    if (sgp_rank_on_node() != 0) return;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &attr, writer, NULL);
    pthread_attr_destroy(&attr);
}

void sgn_nic_start(void) { pthread_once(&g_once, setup); }

void sgn_nic_transfer(uint64_t start_ns, uint64_t end_ns, uint64_t tx, uint64_t rx)
{
    sgn_nic_start();
    if (!g_mine || (!tx && !rx)) return;
    nic_slot *s = g_mine;
    uint64_t n = s->n; /* only this process writes its slot */
    nic_transfer *t = &s->ring[n % NIC_RING];
    const nic_transfer *prev = n ? &s->ring[(n - 1) % NIC_RING] : NULL;
    t->start_ns = start_ns;
    t->end_ns = end_ns;
    t->tx_before = prev ? prev->tx_before + prev->tx : 0;
    t->rx_before = prev ? prev->rx_before + prev->rx : 0;
    t->tx = tx;
    t->rx = rx;
    __atomic_store_n(&s->n, n + 1, __ATOMIC_RELEASE);
}
