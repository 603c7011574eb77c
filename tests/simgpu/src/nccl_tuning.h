/*
 * nccl_tuning.h - what the simulated NCCL chooses for a collective (algorithm, protocol, channels,
 * transport) and the bandwidth that choice reaches, from the NCCL_* settings as real NCCL reads them
 * (once per process) and NCCL's own tuning model (src/graph/tuning.cc):
 *
 * - Transport inside a node: P2P over NVLink (SIMGPU_LINK_GBPS) unless NCCL_P2P_DISABLE=1 or
 *   NCCL_P2P_LEVEL=LOC (or 0; every other level allows NVLink-connected GPUs); then SHM through host
 *   memory (SIMGPU_SHM_GBPS, default 12), or with NCCL_SHM_DISABLE=1 as well the network (the NIC).
 * - Across nodes: the node's NIC (SIMGPU_NIC_GBPS[_NODE<k>]); a NIC on another NUMA node than the
 *   GPU (SIMGPU_NIC_NUMA_NODE<k>=1; GPUs sit on NUMA node 0) is a SYS path, beyond NCCL's default
 *   NCCL_NET_GDR_LEVEL (PXB): no GPU Direct RDMA, the data crosses the CPU sockets through host
 *   memory at SIMGPU_XSOCKET_GBPS (default 10).
 * - Channels: the communicator's (SIMGPU_NCCL_CHANNELS, default 8, raised to NCCL_MIN_NCHANNELS and
 *   capped at NCCL_MAX_NCHANNELS, 1..32) for 256 KiB and more, at most 2 below; each channel carries
 *   at most SIMGPU_NCCL_CHANNEL_GBPS (default 20, NCCL's per-channel figure for Volta/Ampere rings).
 * - Protocol by size (LL <= 64 KiB, LL128 <= 512 KiB, else Simple), algorithm Tree for all-reduces
 *   <= 256 KiB across nodes, else Ring; NCCL_PROTO / NCCL_ALGO (lists, "^" excludes) override it.
 *   The link rates are what the tuner's own choice reaches; a forced protocol or algorithm scales
 *   the bandwidth by NCCL's model factors against that choice: LL 1/4 (all-reduce, reduce or
 *   across nodes; else 1/3), LL128 0.92 (0.7 with one rank per node), Simple 1; Tree 0.92 of Ring.
 */
#ifndef SIMGPU_NCCL_TUNING_H
#define SIMGPU_NCCL_TUNING_H

#include "nccl_profiler.h"

enum { SGT_OTHER = 0, SGT_ALLREDUCE = 1, SGT_REDUCE = 2 };

/* Fills t->algo, proto, nchannels, nwarps for a collective of kind `kind` (SGT_*) and `bytes`
 * (message bytes); Tree is NCCL's choice for small all-reduces across nodes. */
void sgt_choose(int nnodes, int kind, double bytes, sgp_task *t);

/* GB/s the bus bytes of collective `t` (as sgt_choose chose it for `kind` and `bytes`) move at:
 * inside one node (nnodes == 1) or across nodes from node `node`; `ppn`: the communicator's ranks
 * per node; link: SIMGPU_LINK_GBPS; nic: the node's NIC line rate. */
double sgt_rate(int nnodes, int ppn, int node, int kind, double bytes, const sgp_task *t, double link, double nic);

/* GB/s point-to-point data between two GPUs of one node moves at (P2P, SHM or the NIC). */
double sgt_intra_gbps(double link, double nic);

/* GB/s a node's NIC carries for a GPU of that node (capped when the NIC is across sockets). */
double sgt_nic_path_gbps(int node, double nic);

#endif
