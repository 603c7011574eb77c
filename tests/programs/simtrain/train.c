/* One rank of the job: setup, the training step loop, and the pathology switches. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include "simtrain.h"

#define MAX_INFLIGHT 8

typedef struct job {
  const options *o;
  const rank_info *ri;
  cudaStream_t compute; /* the legacy default stream, as PyTorch's current stream */
  cudaStream_t comm;    /* NCCL stream: non-blocking, like c10d's */
  cudaStream_t capture; /* side stream for --graphs capture */
  cudaEvent_t *bucket_ready;
  cudaEvent_t comm_done;
  cudaEvent_t step_done[MAX_INFLIGHT];
  void *act;            /* activations/weights: the argument of every kernel */
  void **grad;          /* one gradient bucket each */
  size_t bucket_count;  /* floats per bucket */
  void *batch_dev;
  void *batch_host;     /* pinned (cudaHostAlloc) or pageable (malloc) */
  size_t batch_bytes;
  float *found_inf;     /* device: AMP non-finite flag */
  float *loss;          /* device: loss scalar */
  float *host_scalars;  /* pinned: read-backs */
  nccl_lib nccl;
  ncclComm_t nccl_comm;
  int have_nccl;
  nvtxDomainHandle_t domain;
  cudaGraphExec_t fwd_graph;
  size_t oom_growth;
  int oom_device;
  dataloader dl;
  int optimizer_skipped;
  int hang_now;
} job;

static void nccl_check(job *j, ncclResult_t r, const char *what) {
  if (r == ncclSuccess) return;
  logf_rank(j->ri, "NCCL error %d (%s) in %s", (int)r,
            j->nccl.GetErrorString ? j->nccl.GetErrorString(r) : "?", what);
  exit(EXIT_NCCL);
}

static void range_push(job *j, const char *name, uint32_t argb) {
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = argb;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  nvtxDomainRangePushEx(j->domain, &a);
}

static void range_pop(job *j) { nvtxDomainRangePop(j->domain); }

/* ---------------------------------------------------------------- setup */

static void setup_nccl(job *j) {
  const options *o = j->o;
  char err[512];
  if (nccl_load(&j->nccl, err, sizeof err) != 0) {
    if (j->ri->world > 1) {
      logf_rank(j->ri, "cannot load libnccl.so.2: %s", err);
      exit(EXIT_NO_NCCL);
    }
    if (!o->quiet) logf_rank(j->ri, "libnccl.so.2 not loaded (%s): single rank, no all-reduce", err);
    return;
  }
  int nids = o->scalable_ids > 0 ? o->scalable_ids : 1;
  ncclUniqueId ids[SIMTRAIN_MAX_IDS];
  const char *hex = getenv(SIMTRAIN_ID_ENV);
  const char *file = getenv(SIMTRAIN_ID_FILE_ENV);
  char text[SIMTRAIN_MAX_IDS * 2 * NCCL_UNIQUE_ID_BYTES + 1];
  if (!hex && file && j->ri->rank != 0) {
    hex = read_id_file(file, text, sizeof text, 60.0);
    if (!hex) {
      logf_rank(j->ri, "no unique ids from rank 0 in %s within 60 s", file);
      exit(EXIT_NCCL);
    }
  }
  if (hex) {
    if (hex_decode(hex, (unsigned char *)ids, (size_t)nids * sizeof ids[0]) != 0) {
      logf_rank(j->ri, "malformed %s (expected %d unique ids)", SIMTRAIN_ID_ENV, nids);
      exit(EXIT_USAGE);
    }
  } else {
    for (int i = 0; i < nids; i++) nccl_check(j, j->nccl.GetUniqueId(&ids[i]), "ncclGetUniqueId");
    if (file) {
      hex_encode((const unsigned char *)ids, (size_t)nids * sizeof ids[0], text);
      if (write_id_file(file, text) != 0) {
        logf_rank(j->ri, "cannot write %s: %s", file, strerror(errno));
        exit(EXIT_SYSTEM);
      }
    }
  }
  if (o->scalable_ids > 0) {
    if (!j->nccl.CommInitRankScalable) {
      logf_rank(j->ri, "--scalable-init: libnccl.so.2 lacks ncclCommInitRankScalable");
      exit(EXIT_NCCL);
    }
    nccl_check(j, j->nccl.CommInitRankScalable(&j->nccl_comm, j->ri->world, j->ri->rank, nids, ids, NULL),
               "ncclCommInitRankScalable");
  } else {
    nccl_check(j, j->nccl.CommInitRank(&j->nccl_comm, j->ri->world, ids[0], j->ri->rank),
               "ncclCommInitRank");
  }
  j->have_nccl = 1;
}

static void setup(job *j) {
  const options *o = j->o;
  CK(cudaSetDevice(j->ri->local_rank));
  CK(cudaFree(0)); /* context creation, as frameworks force it early */
  j->compute = NULL;
  CK(cudaStreamCreateWithFlags(&j->comm, cudaStreamNonBlocking));
  nvtxNameCudaStreamA(j->comm, "nccl");
  if (o->graphs) CK(cudaStreamCreateWithFlags(&j->capture, cudaStreamNonBlocking));
  j->bucket_ready = calloc((size_t)o->buckets, sizeof(cudaEvent_t));
  j->grad = calloc((size_t)o->buckets, sizeof(void *));
  if (!j->bucket_ready || !j->grad) exit(EXIT_SYSTEM);
  for (int b = 0; b < o->buckets; b++)
    CK(cudaEventCreateWithFlags(&j->bucket_ready[b], cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&j->comm_done, cudaEventDisableTiming));
  for (int i = 0; i < o->max_inflight; i++)
    CK(cudaEventCreateWithFlags(&j->step_done[i], cudaEventDisableTiming));

  CK(cudaMalloc(&j->act, 256u << 20));
  model_set_args(j->act);
  j->bucket_count = (size_t)(o->bucket_mb * 1048576.0 / 4.0);
  if (j->bucket_count < 1) j->bucket_count = 1;
  for (int b = 0; b < o->buckets; b++) CK(cudaMalloc(&j->grad[b], j->bucket_count * 4));
  j->batch_bytes = (size_t)(o->batch_mb * 1048576.0);
  if (j->batch_bytes < 64) j->batch_bytes = 64;
  CK(cudaMalloc(&j->batch_dev, j->batch_bytes));
  if (o->pageable) {
    j->batch_host = malloc(j->batch_bytes);
    if (!j->batch_host) exit(EXIT_SYSTEM);
  } else {
    CK(cudaHostAlloc(&j->batch_host, j->batch_bytes, cudaHostAllocDefault));
  }
  memset(j->batch_host, 1, j->batch_bytes);
  CK(cudaMalloc((void **)&j->found_inf, 256));
  CK(cudaMalloc((void **)&j->loss, 256));
  CK(cudaHostAlloc((void **)&j->host_scalars, 64, cudaHostAllocDefault));
  CK(cudaMemsetAsync(j->loss, 0, 4, j->compute));

  j->domain = nvtxDomainCreateA("simtrain");
  setup_nccl(j);

  if (o->oom_at >= 0) {
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    double g = (double)free_b / (o->oom_at + 0.5);
    size_t unit = 2u << 20;
    j->oom_growth = ((size_t)g + unit - 1) / unit * unit;
    if (!o->quiet)
      logf_rank(j->ri, "--oom-at %d: %zu MiB free of %zu MiB, growing %zu MiB per step", o->oom_at,
                free_b >> 20, total_b >> 20, j->oom_growth >> 20);
  }
  if (o->workers > 0 && dataloader_start(&j->dl, o, j->ri) != 0) {
    logf_rank(j->ri, "cannot start dataloader workers");
    exit(EXIT_SYSTEM);
  }
}

/* ---------------------------------------------------------------- step phases */

static void oom_grow(job *j, int step) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, j->oom_growth);
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  if (e != cudaErrorMemoryAllocation) CK(e);
  size_t free_b = 0, total_b = 0;
  (void)cudaMemGetInfo(&free_b, &total_b);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  logf_rank(j->ri,
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU %d has a "
            "total capacity of %.2f GiB of which %.2f GiB is free. (step %d, cudaMalloc returned "
            "%s)",
            (double)j->oom_growth / gib, j->ri->local_rank, (double)total_b / gib,
            (double)free_b / gib, step, cudaGetErrorName(e));
  fflush(NULL);
  exit(EXIT_OOM);
}

static void load_batch(job *j, int step) {
  const options *o = j->o;
  range_push(j, "data", 0xff8c8c8c);
  if (o->workers > 0) {
    if (dataloader_next(&j->dl, step, j->batch_host, j->batch_bytes) < 0) {
      logf_rank(j->ri, "dataloader worker for step %d died", step);
      exit(EXIT_SYSTEM);
    }
  } else {
    batch_work(o, step);
  }
  if (o->data_stall_ms > 0) sleep_ms(o->data_stall_ms);
  if (o->straggler_rank == j->ri->rank) sleep_ms(o->straggler_ms);
  range_pop(j);
  CK(cudaMemcpyAsync(j->batch_dev, j->batch_host, j->batch_bytes, cudaMemcpyHostToDevice,
                     j->compute));
}

static void item_sync(job *j) { /* tensor.item(): D2H of 4 bytes then a stream sync */
  CK(cudaMemcpyAsync(j->host_scalars, j->loss, 4, cudaMemcpyDeviceToHost, j->compute));
  CK(cudaStreamSynchronize(j->compute));
  /* ... then the host acts on the value (logging, a Python branch) while nothing is queued on the
   * GPU: the cost of a sync in eager frameworks is this drained queue. */
  sleep_ms(2);
}

static void forward(job *j) {
  const options *o = j->o;
  range_push(j, "forward", 0xff4c9be8);
  if (o->graphs) {
    if (!j->fwd_graph) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(j->capture, cudaStreamCaptureModeThreadLocal));
      for (int l = 0; l < o->layers; l++) forward_layer(j->capture, o);
      forward_loss(j->capture);
      CK(cudaStreamEndCapture(j->capture, &g));
      CK(cudaGraphInstantiate(&j->fwd_graph, g, 0));
      CK(cudaGraphDestroy(g));
    }
    CK(cudaGraphLaunch(j->fwd_graph, j->compute));
    if (o->sync_every_step) item_sync(j);
  } else {
    for (int l = 0; l < o->layers; l++) {
      forward_layer(j->compute, o);
      if (o->sync_every_step && l == o->layers / 2) item_sync(j);
    }
    forward_loss(j->compute);
  }
  range_pop(j);
}

static void allreduce_bucket(job *j, int b, int step, cudaStream_t s) {
  const options *o = j->o;
  if (!j->have_nccl) return;
  if (o->hang_at == step && o->hang_rank == j->ri->rank) {
    if (!j->hang_now) logf_rank(j->ri, "--hang-at %d: skipping the gradient all-reduce", step);
    j->hang_now = 1;
    return;
  }
  size_t count = j->bucket_count;
  ncclDataType_t dt = ncclFloat32;
  if (o->desync_at == step && o->desync_rank == j->ri->rank && b == 0) {
    if (o->desync_kind == DESYNC_DTYPE)
      dt = ncclBfloat16;
    else
      count = count / 2;
    logf_rank(j->ri, "--desync-at %d: all-reduce of bucket 0 with %s", step,
              o->desync_kind == DESYNC_DTYPE ? "bf16 instead of fp32" : "half the count");
  }
  nccl_check(j, j->nccl.AllReduce(j->grad[b], j->grad[b], count, dt, ncclSum, j->nccl_comm, s),
             "ncclAllReduce");
}

static void backward(job *j, int step) {
  const options *o = j->o;
  const int L = o->layers, B = o->buckets;
  const int overlap = !o->no_overlap && j->have_nccl;
  range_push(j, "backward", 0xffe8a04c);
  int next = 0; /* next bucket to reduce */
  for (int done = 1; done <= L; done++) {
    backward_layer(j->compute, o);
    if (!overlap) continue;
    /* bucket b holds the gradients of the layers done by ceil((b+1)*L/B) */
    while (next < B && done >= ((next + 1) * L + B - 1) / B) {
      CK(cudaEventRecord(j->bucket_ready[next], j->compute));
      CK(cudaStreamWaitEvent(j->comm, j->bucket_ready[next], 0));
      allreduce_bucket(j, next, step, j->comm);
      next++;
    }
  }
  if (overlap) {
    CK(cudaEventRecord(j->comm_done, j->comm));
    CK(cudaStreamWaitEvent(j->compute, j->comm_done, 0));
  } else if (j->have_nccl) {
    for (int b = 0; b < B; b++) allreduce_bucket(j, b, step, j->compute);
  }
  range_pop(j);
  if (j->hang_now) {
    logf_rank(j->ri, "rank %d hangs at step %d (its peers wait in the all-reduce)", j->ri->rank,
              step);
    fflush(NULL);
    for (;;) pause();
  }
}

static void optimizer(job *j, int step) {
  const options *o = j->o;
  range_push(j, "optimizer", 0xff5cb85c);
  int overflow = 0;
  if (o->amp_overflow_every > 0) {
    overflow = (step + 1) % o->amp_overflow_every == 0;
    /* found_inf = torch.full((), 0.0); the check kernel sets it on inf/nan (modelled: we know) */
    CK(cudaMemsetAsync(j->found_inf, overflow ? 0x7f : 0, 4, j->compute));
  }
  launch(K_AMP_CHECK, j->compute);
  if (o->amp_overflow_every > 0) { /* GradScaler.step: found_inf.item() */
    CK(cudaMemcpyAsync(j->host_scalars, j->found_inf, 4, cudaMemcpyDeviceToHost, j->compute));
    CK(cudaStreamSynchronize(j->compute));
  }
  if (overflow) {
    j->optimizer_skipped++;
    if (!o->quiet) logf_rank(j->ri, "step %d: gradients overflowed, optimizer step skipped", step);
  } else if (o->launch_bound) {
    optimizer_eager(j->compute, o);
  } else {
    optimizer_fused(j->compute);
  }
  launch(K_AMP_UPDATE_SCALE, j->compute);
  range_pop(j);
}

int run_rank(const options *o, const rank_info *ri) {
  static job j;
  memset(&j, 0, sizeof j);
  j.o = o;
  j.ri = ri;
  setup(&j);
  CK(cudaDeviceSynchronize());

  /* --host-mb: a dataset cache in host RAM (every page written now, an eighth again each step). */
  size_t cache_bytes = (size_t)(o->host_mb * 1048576.0);
  volatile unsigned char *cache = cache_bytes ? malloc(cache_bytes) : NULL;
  if (cache_bytes && !cache) {
    fprintf(stderr, "simtrain: cannot allocate --host-mb %.0f\n", o->host_mb);
    return EXIT_SYSTEM;
  }
  for (size_t i = 0; i < cache_bytes; i += 4096) cache[i] = (unsigned char)i;

  double t0 = now_s();
  for (int step = 0; step < o->steps; step++) {
    nvtxRangePushA("step");
    for (size_t i = (size_t)(step % 8) * 4096; i < cache_bytes; i += 8 * 4096) cache[i]++;
    if (step >= o->max_inflight) CK(cudaEventSynchronize(j.step_done[step % o->max_inflight]));
    if (o->oom_at >= 0) oom_grow(&j, step);
    load_batch(&j, step);
    forward(&j);
    slowdown_step(o, ri, step, j.compute);
    backward(&j, step);
    optimizer(&j, step);
    if (o->log_every > 0 && (step + 1) % o->log_every == 0) {
      CK(cudaMemcpyAsync(j.host_scalars + 1, j.loss, 4, cudaMemcpyDeviceToHost, j.compute));
      CK(cudaStreamSynchronize(j.compute));
      if (!o->quiet) logf_rank(ri, "step %d loss %.4f", step + 1, 2.0 + 8.0 * exp(-step / 20.0));
    }
    CK(cudaEventRecord(j.step_done[step % o->max_inflight], j.compute));
    nvtxRangePop();
  }
  CK(cudaDeviceSynchronize());
  double wall = now_s() - t0;

  if (o->workers > 0) dataloader_stop(&j.dl);
  free((void *)cache);
  if (j.have_nccl) nccl_check(&j, j.nccl.CommDestroy(j.nccl_comm), "ncclCommDestroy");
  if (j.fwd_graph) CK(cudaGraphExecDestroy(j.fwd_graph));
  printf("simtrain rank=%d world=%d device=%d steps=%d wall_s=%.3f steps_per_s=%.2f "
         "optimizer_skipped=%d worker_batches=%lu\n",
         ri->rank, ri->world, ri->local_rank, o->steps, wall, wall > 0 ? o->steps / wall : 0.0,
         j.optimizer_skipped, j.dl.batches);
  fflush(stdout);
  return EXIT_OK;
}
