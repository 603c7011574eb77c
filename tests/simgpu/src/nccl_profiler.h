/*
 * nccl_profiler.h - the simulated NCCL's profiler-plugin driver (nccl_profiler.c) and its node model.
 *
 * Plugin: at the first communicator, the library named by NCCL_PROFILER_PLUGIN ("none" or unset: no
 * plugin) is dlopened and ncclProfiler_v6 .. v1 looked up, newest first, as NCCL does
 * (SIMGPU_NCCL_PROFILER_MAX_VERSION=N skips the newer ones). Versions 1-3 as NCCL 2.23-2.24 drove
 * them: init without communicator details, the communicator hash in each task, v1's numeric
 * function / datatype / algorithm / protocol, no API events (the group parents the task), the
 * transfer size cumulative on the proxy operation's own states (steps' states carry no arguments),
 * no kernel-channel timers (v3: kernel channels without them).
 * Per communicator: init after the ranks met, finalize at destroy. Per call: the API event (v5+),
 * then at launch the group and task events, stopped once enqueued (a call captured into a CUDA graph:
 * on each replay, from the graph's host node, as nccl.c says); after the kernel, on a proxy
 * thread in real time: proxy operations and steps (communicators spanning nodes: the ring's
 * cross-node neighbours, per channel) and the kernel channels with GPU timer values.
 *
 * Nodes: SIMGPU_NODES (default 1) nodes of SIMGPU_RANKS_PER_NODE ranks (default WORLD_SIZE / nodes,
 * rounded up); a process's node is RANK / ranks per node. NIC: SIMGPU_NIC_GBPS GB/s per rank
 * (default 25), SIMGPU_NIC_GBPS_NODE<k> for node k (a degraded link), SIMGPU_NIC_LATENCY_US (default
 * 10) once per collective that crosses nodes; SIMGPU_NIC_OTHER_GBPS_NODE<k> of other traffic on node
 * k's NIC leaves NCCL the rest; SIMGPU_NIC_COUNTERS: the NIC's counters in a fake sysfs (nic_counters.c). A proxy step is on the wire for this rank's own share
 * of the transfer (its node's NIC); after the last step the operation waits for the slowest rank.
 * Transports, channels, protocols and a NIC across sockets: nccl_tuning.h.
 */
#ifndef SIMGPU_NCCL_PROFILER_H
#define SIMGPU_NCCL_PROFILER_H

#include <stddef.h>
#include <stdint.h>

typedef struct sgp_comm {
    void *ctx;        /* the plugin's context (NULL: no plugin for this communicator) */
    int mask;         /* its activation mask */
    uint64_t hash;    /* the communicator's hash (versions 1-3 carry it in each task) */
    const char *name; /* its name (NULL: none) */
} sgp_comm;

/* What NCCL says about a task when it starts it. */
typedef struct sgp_task {
    int p2p;
    uint64_t seq;
    const char *func, *datatype, *algo, *proto;
    size_t count;
    int root_or_peer;
    int nchannels, nwarps;
} sgp_task;

/* One finished kernel, for the proxy thread: its kernel channels and network operations. */
typedef struct sgp_job {
    void *ctx, *task;
    int mask, nchannels;
    uint64_t start_ns, xfer_ns, end_ns; /* this rank's kernel start, all ranks there, kernel end */
    int send_peer, recv_peer;           /* cross-node ring neighbours (-1: none) */
    uint64_t bytes_per_op;              /* bytes each proxy operation moves */
    struct sgp_job *next;
    uint64_t own_ns; /* this rank's own transfer time (its NIC); 0: on the wire until end_ns */
} sgp_job;

int sgp_node(void);
/* This process's index among its node's ranks (RANK % ranks per node). */
int sgp_rank_on_node(void);
double sgp_nic_gbps(int node);
double sgp_nic_latency_ns(void);

void sgp_comm_init(sgp_comm *pc, uint64_t hash, const char *name, int nnodes, int nranks, int rank);
void sgp_comm_fini(sgp_comm *pc);
/* Event starts; each returns the plugin's handle (NULL when not started). */
/* captured: the call's stream is capturing a CUDA graph (the API event's graphCaptured, v5+). */
void *sgp_api_start(const sgp_comm *pc, const sgp_task *t, void *stream, int captured);
void *sgp_group_start(const sgp_comm *pc);
void *sgp_task_start(const sgp_comm *pc, void *api, void *group, int rank, const sgp_task *t);
void sgp_stop(const sgp_comm *pc, void *handle);
/* Queues a finished kernel for the proxy thread (copies *j; callable with the core lock held). */
void sgp_complete(const sgp_job *j);

#endif
