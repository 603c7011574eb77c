/*
 * nccl_tuning.c - the simulated NCCL's choices and the rates they reach (see nccl_tuning.h).
 */
#define _GNU_SOURCE
#include "nccl_tuning.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { PROTO_LL = 1, PROTO_LL128 = 2, PROTO_SIMPLE = 4, ALGO_TREE = 1, ALGO_RING = 2 };

static struct {
    int protos, algos;     /* enabled sets (bit masks) */
    int min_ch, max_ch;    /* NCCL_MIN/MAX_NCHANNELS (0: unset) */
    int p2p, shm;          /* transports enabled */
} g;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static double env_gbps(const char *name, double def)
{
    const char *v = getenv(name);
    char *end;
    double d = v ? strtod(v, &end) : 0;
    return v && end != v && d > 0 ? d : def;
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* NCCL's list syntax: "LL,LL128" enables those, "^LL" all but those; names case-insensitive. */
static int parse_set(const char *v, const char *const *names, const int *bits, int n, int all)
{
    if (!v || !*v) return all;
    int exclude = v[0] == '^', set = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v + exclude);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        for (int i = 0; i < n; i++)
            if (!strcasecmp(tok, names[i])) set |= bits[i];
    set = exclude ? all & ~set : set;
    return set ? set : all; /* nothing valid: NCCL warns and keeps its defaults */
}

static void read_settings(void)
{
    static const char *const pn[] = {"LL", "LL128", "Simple"};
    static const int pb[] = {PROTO_LL, PROTO_LL128, PROTO_SIMPLE};
    static const char *const an[] = {"Tree", "Ring"};
    static const int ab[] = {ALGO_TREE, ALGO_RING};
    g.protos = parse_set(getenv("NCCL_PROTO"), pn, pb, 3, PROTO_LL | PROTO_LL128 | PROTO_SIMPLE);
    g.algos = parse_set(getenv("NCCL_ALGO"), an, ab, 2, ALGO_TREE | ALGO_RING);
    g.min_ch = env_int("NCCL_MIN_NCHANNELS", 0);
    g.max_ch = env_int("NCCL_MAX_NCHANNELS", 0);
    const char *lvl = getenv("NCCL_P2P_LEVEL");
    int level_off = lvl && (!strcasecmp(lvl, "LOC") || !strcmp(lvl, "0"));
    g.p2p = env_int("NCCL_P2P_DISABLE", 0) == 0 && !level_off;
    g.shm = env_int("NCCL_SHM_DISABLE", 0) == 0;
}

static int comm_channels(void)
{
    pthread_once(&g_once, read_settings);
    int n = env_int("SIMGPU_NCCL_CHANNELS", 8);
    if (n < 1) n = 8;
    if (g.min_ch > n) n = g.min_ch;
    if (g.max_ch > 0 && g.max_ch < n) n = g.max_ch;
    return n < 1 ? 1 : n > 32 ? 32 : n;
}

static int proto_bit(const char *p)
{
    return !strcmp(p, "LL") ? PROTO_LL : !strcmp(p, "LL128") ? PROTO_LL128 : PROTO_SIMPLE;
}
static const char *proto_name(int bit) { return bit == PROTO_LL ? "LL" : bit == PROTO_LL128 ? "LL128" : "SIMPLE"; }

/* The tuner's own protocol and algorithm for this size (what the link rates are measured with). */
static int default_proto(double bytes) { return bytes <= 65536 ? PROTO_LL : bytes <= 524288 ? PROTO_LL128 : PROTO_SIMPLE; }
static int default_algo(int nnodes, int allreduce, double bytes)
{
    return nnodes > 1 && allreduce && bytes <= 262144 ? ALGO_TREE : ALGO_RING;
}

/* The enabled choice nearest the tuner's: `want` when enabled, else the first enabled of `order`. */
static int pick(int want, int enabled, const int *order, int n)
{
    if (enabled & want) return want;
    for (int i = 0; i < n; i++)
        if (enabled & order[i]) return order[i];
    return want;
}

void sgt_choose(int nnodes, int kind, double bytes, sgp_task *t)
{
    int nch = comm_channels();
    static const int porder[] = {PROTO_SIMPLE, PROTO_LL128, PROTO_LL};
    static const int aorder[] = {ALGO_RING, ALGO_TREE};
    int proto = pick(default_proto(bytes), g.protos, porder, 3);
    int allreduce = kind == SGT_ALLREDUCE;
    int algo = allreduce ? pick(default_algo(nnodes, allreduce, bytes), g.algos, aorder, 2) : ALGO_RING;
    t->proto = proto_name(proto);
    t->algo = algo == ALGO_TREE ? "TREE" : "RING";
    t->nchannels = bytes < 262144 ? (nch < 2 ? nch : 2) : nch;
    t->nwarps = bytes <= 524288 ? 8 : 16;
}

/* NCCL's bandwidth factor of a protocol and algorithm (tuning.cc's model refinements). */
static double efficiency(int proto, int tree, int nnodes, int ppn, int reduce)
{
    double e = proto == PROTO_LL ? (nnodes > 1 || reduce ? 0.25 : 1.0 / 3.0)
             : proto == PROTO_LL128 ? (ppn < 2 ? 0.7 : 0.92)
                                    : 1.0;
    return tree ? e * 0.92 : e;
}

double sgt_intra_gbps(double link, double nic)
{
    pthread_once(&g_once, read_settings);
    if (g.p2p) return link;
    return g.shm ? env_gbps("SIMGPU_SHM_GBPS", 12.0) : nic;
}

double sgt_nic_path_gbps(int node, double nic)
{
    char name[64];
    snprintf(name, sizeof name, "SIMGPU_NIC_NUMA_NODE%d", node);
    if (env_int(name, 0) == 0) return nic;
    double x = env_gbps("SIMGPU_XSOCKET_GBPS", 10.0);
    return x < nic ? x : nic;
}

double sgt_rate(int nnodes, int ppn, int node, int kind, double bytes, const sgp_task *t, double link, double nic)
{
    pthread_once(&g_once, read_settings);
    double rate = ppn > 1 ? sgt_intra_gbps(link, nic) : link;
    if (nnodes > 1) {
        double n = sgt_nic_path_gbps(node, nic);
        if (n < rate) rate = n;
    }
    double ch = (double)comm_channels() * env_gbps("SIMGPU_NCCL_CHANNEL_GBPS", 20.0);
    if (ch < rate) rate = ch;
    int reduce = kind != SGT_OTHER;
    int tree = !strcmp(t->algo, "TREE"), tree0 = default_algo(nnodes, kind == SGT_ALLREDUCE, bytes) == ALGO_TREE;
    double want = efficiency(default_proto(bytes), tree0, nnodes, ppn, reduce);
    return rate * efficiency(proto_bit(t->proto), tree, nnodes, ppn, reduce) / want;
}
