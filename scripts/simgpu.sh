#!/usr/bin/env bash
# scripts/simgpu.sh CMD [ARGS...]: run any command on the simulated GPU stack (tests/simgpu).
# Puts the mock libraries (libcudart.so.12/.13, libcuda.so.1, libcupti.so.12, libnccl.so.2,
# libnvidia-ml.so.1) first in LD_LIBRARY_PATH, building them with make if needed, then execs
# CMD, so its exit code passes through. `scripts/simgpu.sh -h` says how to configure the stack.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC="$ROOT/tests/simgpu"
LIB="${SIMGPU_LIB_DIR:-$SRC/build}"

usage() {
  cat <<EOF
usage: scripts/simgpu.sh CMD [ARGS...]
       scripts/simgpu.sh -h | --help

Runs CMD with the simulated GPU stack first in LD_LIBRARY_PATH:
  $LIB
Unmodified CUDA programs (dynamically linked libcudart, or anything that dlopens libcuda.so.1,
libcupti.so.12, libnccl.so.2, libnvidia-ml.so.1) then run on simulated devices in real time.
The libraries are built first with 'make -C tests/simgpu libs' unless SIMGPU_LIB_DIR points elsewhere
or SIMGPU_NO_BUILD=1. The exit code is CMD's.

Examples:
  scripts/simgpu.sh tests/programs/build/simtrain --ranks 4 --steps 50
  SIMGPU_TRUTH=/tmp/truth scripts/simgpu.sh tests/programs/build/simtrain --ranks 2 --no-overlap
  SIMGPU_KERNEL_NS='gemm=50000' scripts/simgpu.sh tests/programs/build/cu13_vector_add

Configuration (environment variables the mocks read):
  SIMGPU_DEVICES=N            simulated devices per process (default 8)
  SIMGPU_MEM_GB=N             device memory capacity in GiB (default 80); cudaMalloc beyond it
                              fails with cudaErrorMemoryAllocation
  SIMGPU_LAUNCH_NS=N          host busy-wait per kernel or graph launch (default 2500)
  SIMGPU_KERNEL_NS=sub=ns,..  kernel duration overrides: a kernel whose mangled name contains
                              'sub' (case-insensitive, first match wins) takes 'ns'. Otherwise
                              ns = 1500 + threads * ps_per_thread / 1000, threads = grid x block,
                              ps_per_thread by name: gemm|matmul|cutlass|xmma 2000,
                              flash|attention|fmha 3000, softmax 500,
                              layer_norm|layernorm|rms_norm 500, elementwise|vectorized 200,
                              else 400
  SIMGPU_LINK_GBPS=X          collective link bandwidth per rank in GB/s (1e9 B/s, default 100)
  SIMGPU_LINK_LATENCY_US=X    collective latency in microseconds (default 5)
  SIMGPU_NODES=N              ranks live on N nodes of SIMGPU_RANKS_PER_NODE ranks (default
                              WORLD_SIZE / N, rounded up; node = RANK / ranks per node); a
                              communicator spanning nodes runs at min(link, NIC) bandwidth
  SIMGPU_RANKS_PER_NODE=N     see SIMGPU_NODES
  SIMGPU_NIC_GBPS=X           NIC bandwidth per rank in GB/s (default 25)
  SIMGPU_NIC_GBPS_NODE<k>=X   NIC bandwidth of node k (a slow or degraded link)
  SIMGPU_NIC_LATENCY_US=X     added once to a collective that crosses nodes (default 10)
  SIMGPU_NIC_OTHER_GBPS_NODE<k>=X  other traffic on node k's NIC, GB/s each way (NCCL gets the rest)
  SIMGPU_NIC_COUNTERS=DIR     node %n's InfiniBand port counters folder in a fake sysfs, advanced
                              with the bytes crossing nodes (its port_*_data/_packets files must exist)
  SIMGPU_NCCL_CHANNELS=N      channels NCCL uses for messages of 256 KiB and more (default 8;
                              NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS bound it as in NCCL)
  SIMGPU_NCCL_CHANNEL_GBPS=X  most a channel carries in GB/s (default 20)
  SIMGPU_SHM_GBPS=X           SHM transport inside a node when NCCL_P2P_DISABLE=1 or
                              NCCL_P2P_LEVEL=LOC (default 12; NCCL_SHM_DISABLE=1: the NIC)
  SIMGPU_NIC_NUMA_NODE<k>=1   node k's NIC is on the other socket (path SYS from its GPUs): no
                              GPU Direct RDMA, at most SIMGPU_XSOCKET_GBPS (default 10)
  NCCL_PROTO / NCCL_ALGO      as in NCCL (lists, ^ excludes); a forced protocol or algorithm scales
                              the bandwidth by NCCL's model (LL 1/4, LL128 0.92, Tree 0.92)
  SIMGPU_NVML_INIT_MS=N       the first nvmlInit takes N ms (real NVML on a many-GPU node: hundreds)
  SIMGPU_NCCL_PROFILER_MAX_VERSION=N  NCCL looks up ncclProfiler_vN and older only (default 6)
  NCCL_PROFILER_PLUGIN=LIB    as with NCCL >= 2.23: the profiler plugin (none: no plugin)
  SIMGPU_TRUTH=DIR            write the ground truth: DIR/truth-<pid>.jsonl, one JSON object per
                              kernel, memcpy, memset, collective and process (docs/DESIGN.md)
  SIMGPU_SESSION=NAME         name of the shared-memory segment /simgpu-NAME holding the device
                              counters NVML reports (default: per user); give concurrent,
                              independent jobs different names
  SIMGPU_CUPTI=0              CUPTI activity calls return CUPTI_ERROR_NOT_INITIALIZED, as
                              NVIDIA's libcupti does without a driver
  SIMGPU_CUPTI_BUSY=1         cuptiSubscribe returns CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                              (another tool holds CUPTI)
  SIMGPU_CUPTI_DROP_EVERY=N   the CUPTI mock drops every Nth activity record (counted as dropped)
  SIMGPU_CUPTI_VERSION=N      value of cuptiGetVersion (default 28, CUDA 12.9)
  SIMGPU_CUPTI_REFUSE_KIND=K[:R],...  cuptiActivityEnable(K) returns R (default 14,
                              CUPTI_ERROR_NOT_COMPATIBLE): a CUPTI that cannot record kind K
  SIMGPU_NO_DRIVER=1          no driver: the runtimes return cudaErrorInsufficientDriver (35) and
                              CUPTI answers as NVIDIA's of SIMGPU_CUPTI_VERSION does without one
                              (docs/conformance.md)
  CUDA_INJECTION64_PATH=LIB   as with NVIDIA's driver: the first cuInit (the runtime's implicit
                              initialisation too) dlopens LIB and calls its InitializeInjection
EOF
  # Variables the mock sources read that the list above does not describe yet.
  if [ -d "$SRC" ]; then
    local known=" SIMGPU_LAUNCH_NS SIMGPU_CUPTI_VERSION SIMGPU_DEVICES SIMGPU_MEM_GB SIMGPU_KERNEL_NS SIMGPU_LINK_GBPS SIMGPU_LINK_LATENCY_US SIMGPU_TRUTH SIMGPU_SESSION SIMGPU_CUPTI SIMGPU_CUPTI_BUSY SIMGPU_CUPTI_DROP_EVERY SIMGPU_CUPTI_REFUSE_KIND SIMGPU_NO_DRIVER SIMGPU_LIB_DIR SIMGPU_NO_BUILD SIMGPU_NODES SIMGPU_RANKS_PER_NODE SIMGPU_NIC_GBPS SIMGPU_NIC_LATENCY_US SIMGPU_NIC_COUNTERS SIMGPU_NCCL_CHANNELS SIMGPU_NCCL_CHANNEL_GBPS SIMGPU_SHM_GBPS SIMGPU_XSOCKET_GBPS SIMGPU_NCCL_PROFILER_MAX_VERSION SIMGPU_NVML_INIT_MS "
    local extra=""
    local v
    for v in $(grep -rhoE 'getenv\("SIMGPU_[A-Z0-9_]+"\)|env_[a-z0-9]+\("SIMGPU_[A-Z0-9_]+"' "$SRC" 2>/dev/null \
               | grep -oE 'SIMGPU_[A-Z0-9_]+' | sort -u); do
      case "$known" in *" $v "*) ;; *) extra="$extra $v" ;; esac
    done
    if [ -n "$extra" ]; then
      echo "  also read by the mocks (see tests/simgpu/README.md):$extra"
    fi
  fi
  cat <<EOF

This script itself reads:
  SIMGPU_LIB_DIR=DIR          use the libraries in DIR (no build), default tests/simgpu/build
  SIMGPU_NO_BUILD=1           do not run make even if the libraries are out of date
EOF
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
esac

if [ -z "${SIMGPU_LIB_DIR:-}" ] && [ "${SIMGPU_NO_BUILD:-0}" != 1 ]; then
  if ! make -s -C "$SRC" libs >&2; then
    if [ -e "$LIB/libcudart.so.12" ]; then
      echo "simgpu.sh: warning: 'make -C tests/simgpu' failed; using the libraries already in $LIB" >&2
    else
      echo "simgpu.sh: building the simulated GPU stack failed (make -C tests/simgpu)" >&2
      exit 125
    fi
  fi
fi
if [ ! -e "$LIB/libcudart.so.12" ]; then
  echo "simgpu.sh: $LIB/libcudart.so.12 not found: build it with 'make -C tests/simgpu'" >&2
  exit 125
fi

export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
