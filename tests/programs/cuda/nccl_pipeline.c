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

#define EXIT_NCCL 5
#define STAGES 4
#define MICRO 24

static void *lib;
static void *sym(const char *name)
{
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "%s: libnccl.so.2 lacks %s\n", prog_name, name);
    exit(EXIT_NCCL);
  }
  return p;
}
#define NCK(call)                                                                \
  do {                                                                           \
    ncclResult_t r_ = (call);                                                    \
    if (r_ != ncclSuccess) {                                                     \
      fprintf(stderr, "%s: %s failed: %d\n", prog_name, #call, (int)r_);         \
      exit(EXIT_NCCL);                                                           \
    }                                                                            \
  } while (0)

static int get_id(int rank, const char *path, ncclUniqueId *id)
{
  if (rank == 0) {
    NCK(((ncclGetUniqueId_fn)sym("ncclGetUniqueId"))(id));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0) return -1;
    return rename(tmp, path);
  }
  for (int i = 0; i < 20000; i++) { /* up to 20 s */
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (n == 1) return 0;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

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
  pid_t pids[STAGES];
  for (int r = 0; r < STAGES; r++) {
    pids[r] = fork();
    if (pids[r] < 0) return 6;
    if (pids[r] == 0) {
      char rk[16];
      snprintf(rk, sizeof rk, "%d", r);
      setenv("RANK", rk, 1);
      setenv("LOCAL_RANK", rk, 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
  }
  int code = 0;
  for (int r = 0; r < STAGES; r++) {
    int st = 0;
    while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR) {
    }
    int c = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (c && !code) code = c;
  }
  unlink(path);
  return code;
}
