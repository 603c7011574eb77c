/* nccl_pipeline: a 4-stage pipeline-parallel job (one process per stage, RANK set by the launcher,
 * which re-executes itself), as GPipe / 1F1B schedules move activations: for each of 24
 * micro-batches, stage r receives the activation from r-1 and sends its own to r+1 (forward), then
 * the gradients flow back the other way (backward); each exchange is one ncclGroupStart/End holding
 * that stage's recv and send. Stage 0 only sends forward, the last stage only receives, and every
 * send has its matching receive on the peer, so nothing is left unfinished.
 * Rank 0 creates the unique id and leaves it in $NCCL_PIPELINE_ID_FILE (as torchrun's store does);
 * the launcher never touches NCCL. Prints one line per stage: "nccl_pipeline stage=R sends=S recvs=V". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl_api.h"

static const char *prog_name = "nccl_pipeline";
#include "check.h"
#include "nccl_load.h"
#include "rank_launcher.h"

#define STAGES 4
#define MICRO 24


static int run_stage(int rank, const char *id_path)
{
  ncclUniqueId id;
  if (get_id(rank, id_path, &id) != 0) {
    fprintf(stderr, "%s stage %d: no unique id in %s\n", prog_name, rank, id_path);
    return EXIT_NCCL;
  }
  CK(cudaSetDevice(rank));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const size_t count = 1 << 19; /* 2 MiB activations of fp32 */
  float *act_in, *act_out;
  CK(cudaMalloc((void **)&act_in, count * sizeof(float)));
  CK(cudaMalloc((void **)&act_out, count * sizeof(float)));
  ncclComm_t comm;
  NCK(((ncclCommInitRank_fn)sym("ncclCommInitRank"))(&comm, STAGES, id, rank));
  ncclGroupStart_fn group_start = (ncclGroupStart_fn)sym("ncclGroupStart");
  ncclGroupEnd_fn group_end = (ncclGroupEnd_fn)sym("ncclGroupEnd");
  ncclSend_fn send = (ncclSend_fn)sym("ncclSend");
  ncclRecv_fn recv = (ncclRecv_fn)sym("ncclRecv");
  int sends = 0, recvs = 0;
  for (int pass = 0; pass < 2; pass++) { /* 0: forward (r-1 -> r -> r+1), 1: backward */
    int from = pass == 0 ? rank - 1 : rank + 1, to = pass == 0 ? rank + 1 : rank - 1;
    for (int m = 0; m < MICRO; m++) {
      NCK(group_start());
      if (from >= 0 && from < STAGES) {
        NCK(recv(act_in, count, ncclFloat32, from, comm, s));
        recvs++;
      }
      if (to >= 0 && to < STAGES) {
        NCK(send(act_out, count, ncclFloat32, to, comm, s));
        sends++;
      }
      NCK(group_end());
      CK(cudaMemsetAsync(act_out, 0, count * sizeof(float), s)); /* the stage's own work */
    }
  }
  CK(cudaStreamSynchronize(s));
  NCK(((ncclCommDestroy_fn)sym("ncclCommDestroy"))(comm));
  printf("%s stage=%d sends=%d recvs=%d\n", prog_name, rank, sends, recvs);
  return 0;
}

int main(int argc, char **argv)
{
  (void)argc;
  lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s: %s\n", prog_name, dlerror());
    return EXIT_NCCL;
  }
  const char *rank_env = getenv("RANK");
  const char *id_path = getenv("NCCL_PIPELINE_ID_FILE");
  if (rank_env && id_path) return run_stage(atoi(rank_env), id_path);
  char path[] = "/tmp/nccl_pipeline_id_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 6;
  close(fd);
  unlink(path);
  setenv("NCCL_PIPELINE_ID_FILE", path, 1);
  char world[16];
  snprintf(world, sizeof world, "%d", STAGES);
  setenv("WORLD_SIZE", world, 1);
  int code = launch_ranks(STAGES, argv, 0);
  unlink(path);
  return code;
}
