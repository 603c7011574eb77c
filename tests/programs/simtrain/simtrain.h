/* simtrain: a data-parallel training job written only against public APIs (CUDA runtime, NCCL
 * loaded at run time, NVTX v3). Shared declarations of its parts:
 *   main.c        options, the torchrun-like launcher (--ranks N), exit codes
 *   train.c       one rank: setup, the step loop, the pathologies
 *   model.c       kernel registration (the way nvcc-generated code does it) and the kernel
 *                 sequences of forward / backward / optimizer
 *   comm.c        NCCL through dlopen("libnccl.so.2")
 *   dataloader.c  DataLoader-style forked worker processes (--workers N)
 *   slowdown.c    --slowdown-at: one rank's GPU slows down from a step on
 */
#ifndef SIMTRAIN_H
#define SIMTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "nccl_api.h"

/* Exit codes (documented in --help). */
enum {
  EXIT_OK = 0,
  EXIT_OOM = 1,           /* torch.OutOfMemoryError, like PyTorch */
  EXIT_USAGE = 2,         /* bad command line */
  EXIT_CUDA = 3,          /* any other CUDA runtime error (e.g. no driver with NVIDIA's libcudart) */
  EXIT_NCCL = 4,          /* an NCCL call failed */
  EXIT_NO_NCCL = 5,       /* --ranks > 1 but libnccl.so.2 could not be loaded */
  EXIT_SYSTEM = 6         /* fork/exec/pipe failures */
};

/* The hex-encoded ncclUniqueId(s) (--scalable-init N: N ids, concatenated), given to a rank
 * directly in this environment variable, ... */
#define SIMTRAIN_ID_ENV "SIMTRAIN_NCCL_UNIQUE_ID"
/* ... or through the file the launcher names here: rank 0 makes the ids and writes them, the
 * others wait for it (like torchrun's store: the launcher itself never initialises NCCL). */
#define SIMTRAIN_ID_FILE_ENV "SIMTRAIN_NCCL_ID_FILE"
/* The mock's default link bandwidth (tests/simgpu: SIMGPU_LINK_GBPS, default 100 GB/s). */
#define SIMTRAIN_DEFAULT_LINK_GBPS 100.0
/* --scalable-init: at most this many unique ids. */
#define SIMTRAIN_MAX_IDS 8

enum desync_kind { DESYNC_COUNT = 0, DESYNC_DTYPE = 1 };
/* --batch-work: sleep (default), cpu (compute for --batch-ms of CPU time), io (read 1 MiB per
 * batch from a file in 16 reads, sleeping --batch-ms/16 before each: a slow filesystem). */
enum batch_work { WORK_SLEEP = 0, WORK_CPU = 1, WORK_IO = 2 };

typedef struct options {
  int ranks;
  int steps;
  int layers;
  int buckets;
  double bucket_mb;
  double batch_mb;
  double batch_ms;
  int log_every;        /* loss read-back (D2H 4 bytes + sync) every N steps; 0 = never */
  int max_inflight;     /* steps the host may run ahead of the GPU */
  /* pathologies */
  double data_stall_ms;
  int launch_bound;
  double op_overhead_us; /* host time per eager op in --launch-bound mode */
  int sync_every_step;
  int pageable;
  int no_overlap;
  int slow_link;
  int straggler_rank;    /* -1: none */
  double straggler_ms;
  int hang_at, hang_rank;     /* hang_at -1: none */
  int desync_at, desync_rank; /* desync_at -1: none */
  int desync_kind;
  int slowdown_at, slowdown_rank; /* slowdown_at -1: none */
  double slowdown_pct;
  int oom_at;            /* -1: none */
  int amp_overflow_every;/* 0: never */
  int workers;
  int batch_work;       /* enum batch_work: what producing a batch does */
  double host_mb;       /* host memory held and touched (a dataset cache in RAM), MB */
  int graphs;
  int scalable_ids;     /* > 0: ncclCommInitRankScalable with that many unique ids */
  int quiet;
} options;

/* Identity of this process in the job. */
typedef struct rank_info {
  int rank, world, local_rank, local_world;
} rank_info;

/* Exits with EXIT_CUDA after printing the CUDA error, like an uncaught torch RuntimeError. */
#define CK(call) check_cuda((call), #call, __FILE__, __LINE__)
void check_cuda(cudaError_t e, const char *what, const char *file, int line);

/* ---- main.c */
extern rank_info g_rank; /* this process (rank -1 in the launcher) */
void parse_options(int argc, char **argv, options *o);
/* Prints "simtrain rank R: <msg>" to stderr. */
void logf_rank(const rank_info *ri, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Monotonic seconds. */
double now_s(void);
void sleep_ms(double ms);
/* Busy-waits (host work that is not a syscall, e.g. Python/dispatcher overhead). */
void spin_us(double us);

/* ---- train.c */
int run_rank(const options *o, const rank_info *ri);

/* ---- model.c */
typedef enum kernel_id {
  K_LAYER_NORM_FWD,
  K_GEMM_QKV_FWD,
  K_FLASH_FWD,
  K_SOFTMAX_FWD,
  K_GEMM_PROJ_FWD,
  K_ADD_FWD,
  K_GEMM_MLP_UP_FWD,
  K_GELU_FWD,
  K_GEMM_MLP_DOWN_FWD,
  K_NLL_LOSS_FWD,
  K_ADD_BWD,
  K_GEMM_DGRAD,
  K_GEMM_WGRAD,
  K_GELU_BWD,
  K_CUTLASS_DGRAD,
  K_CUTLASS_WGRAD,
  K_LAYER_NORM_BWD,
  K_GAMMA_BETA_BWD,
  K_SOFTMAX_BWD,
  K_FLASH_BWD_DOT,
  K_FLASH_BWD,
  K_AMP_CHECK,
  K_AMP_UPDATE_SCALE,
  K_ADAMW,
  K_MUL_TINY,
  K_FILL_TINY,
  K_COUNT
} kernel_id;

/* Mangled (or extern "C") device name of a kernel, as CUPTI reports it. */
const char *kernel_name(kernel_id k);
/* Registers the fake fat binary and every kernel (called from a constructor, like nvcc does). */
void model_register(void);
/* Launches one kernel with its configured grid/block. Exits on error. */
void launch(kernel_id k, cudaStream_t s);
/* Launches one kernel with an explicit grid (x) / block (x). */
void launch_dims(kernel_id k, unsigned gx, unsigned gy, unsigned bx, cudaStream_t s);
/* Device buffer kernels get as arguments. */
void model_set_args(void *dev_buf);

/* Per-layer kernel sequences. `eager` adds the unfused tiny ops of --launch-bound mode. */
void forward_layer(cudaStream_t s, const options *o);
void forward_loss(cudaStream_t s);
void backward_layer(cudaStream_t s, const options *o);
void optimizer_fused(cudaStream_t s);
void optimizer_eager(cudaStream_t s, const options *o);
/* Modelled GPU time (ns) of one default step: printed by --help. */
double model_step_ns(const options *o);

/* ---- comm.c */
typedef struct nccl_lib {
  void *handle;
  ncclGetUniqueId_fn GetUniqueId;
  ncclCommInitRank_fn CommInitRank;
  ncclCommDestroy_fn CommDestroy;
  ncclCommAbort_fn CommAbort;
  ncclGetErrorString_fn GetErrorString;
  ncclAllReduce_fn AllReduce;
  ncclBroadcast_fn Broadcast;
  ncclGetVersion_fn GetVersion;
  ncclCommInitRankScalable_fn CommInitRankScalable; /* NULL before NCCL 2.23 */
} nccl_lib;
/* 0 on success; else fills err (dlerror text). */
int nccl_load(nccl_lib *n, char *err, size_t errlen);
void hex_encode(const unsigned char *in, size_t n, char *out);
/* The id file of SIMTRAIN_ID_FILE_ENV: written whole (rename), read once it exists (or NULL after
 * timeout_s). */
int write_id_file(const char *path, const char *text);
const char *read_id_file(const char *path, char *buf, size_t cap, double timeout_s);
int hex_decode(const char *in, unsigned char *out, size_t n);

/* ---- slowdown.c */
/* Called once per step on the compute stream: from --slowdown-at on, this rank's extra GPU work. */
void slowdown_step(const options *o, const rank_info *ri, int step, cudaStream_t s);

/* ---- dataloader.c */
typedef struct dataloader {
  int workers;
  int *fds;      /* read end per worker */
  int *pids;
  unsigned long batches;
} dataloader;
/* Forks o->workers processes that produce `steps` batches; workers never touch CUDA. */
int dataloader_start(dataloader *dl, const options *o, const rank_info *ri);
/* Receives batch `step` into dst (up to cap bytes); returns bytes received or -1. */
long dataloader_next(dataloader *dl, int step, void *dst, size_t cap);
void dataloader_stop(dataloader *dl);
/* Produces one batch's worth of host work (--batch-work) in the calling process or thread. */
void batch_work(const options *o, int step);

#endif
