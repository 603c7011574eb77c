/* nccl_calls: the NCCL communicator, memory and one-sided calls beyond plain collectives, on N
 * rank processes (the launcher re-executes itself with RANK set). Each rank:
 *   ncclCommInitRankScalable from 2 unique ids (world), 2 all-reduces;
 *   ncclCommSplit by color rank % 2, 2 all-reduces on the child;
 *   ncclCommShrink without the last rank (the others), 1 all-reduce on the shrunk communicator;
 *   ncclMemAlloc 3 MiB, ncclCommRegister / ncclCommWindowRegister of it;
 *   ncclPutSignal of 1 MiB and ncclSignal to rank+1, ncclWaitSignal for both from rank-1;
 *   then frees, deregisters and destroys everything.
 * --direct looks up the pnccl* profiling entry points instead of nccl*, as a library with NCCL
 * linked in statically calls it (no interposer sees those calls).
 * Prints one line per rank: "nccl_calls rank=R allreduces=A puts=P signals=S waits=W". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl_api.h"

static const char *prog_name = "nccl_calls";
#include "check.h"
#include "rank_launcher.h"

#define EXIT_NCCL 5
#define IDS 2
#define ID_ENV "NCCL_CALLS_IDS"

static void *lib;
static int direct;

static void *sym(const char *name)
{
  char full[128];
  snprintf(full, sizeof full, "%s%s", direct ? "p" : "", name);
  void *p = dlsym(lib, full);
  if (!p) {
    fprintf(stderr, "%s: libnccl.so.2 lacks %s\n", prog_name, full);
    exit(EXIT_NCCL);
  }
  return p;
}
#define FN(type, name) ((type##_fn)sym(name))

static void nck(ncclResult_t r, const char *what, int rank)
{
  if (r == ncclSuccess) return;
  fprintf(stderr, "%s rank %d: %s failed: %d\n", prog_name, rank, what, (int)r);
  exit(EXIT_NCCL);
}

static int run_rank(int rank, int n)
{
  ncclUniqueId ids[IDS];
  const char *hex = getenv(ID_ENV);
  if (!hex || strlen(hex) != 2 * sizeof ids) return EXIT_NCCL;
  for (size_t i = 0; i < sizeof ids; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return EXIT_NCCL;
    ((unsigned char *)ids)[i] = (unsigned char)v;
  }
  CK(cudaSetDevice(rank));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  float *grad;
  const size_t count = 1 << 18; /* 1 MiB of fp32 */
  CK(cudaMalloc((void **)&grad, count * sizeof(float)));
  int allreduces = 0, puts = 0, signals = 0, waits = 0;

  ncclAllReduce_fn allreduce = FN(ncclAllReduce, "ncclAllReduce");
  ncclComm_t world, half = NULL, shrunk = NULL;
  ncclCommInitRankScalable_fn init = FN(ncclCommInitRankScalable, "ncclCommInitRankScalable");
  nck(init(&world, n, rank, IDS, ids, NULL), "ncclCommInitRankScalable", rank);
  for (int i = 0; i < 2; i++, allreduces++)
    nck(allreduce(grad, grad, count, ncclFloat32, ncclSum, world, s), "ncclAllReduce", rank);

  nck(FN(ncclCommSplit, "ncclCommSplit")(world, rank % 2, rank, &half, NULL), "ncclCommSplit", rank);
  for (int i = 0; i < 2; i++, allreduces++)
    nck(allreduce(grad, grad, count, ncclFloat32, ncclSum, half, s), "ncclAllReduce (split)", rank);

  if (rank < n - 1) {
    int last = n - 1;
    nck(FN(ncclCommShrink, "ncclCommShrink")(world, &last, 1, &shrunk, NULL, 0), "ncclCommShrink", rank);
    nck(allreduce(grad, grad, count, ncclFloat32, ncclSum, shrunk, s), "ncclAllReduce (shrunk)", rank);
    allreduces++;
  }
  CK(cudaStreamSynchronize(s));

  void *buf = NULL, *reg = NULL;
  ncclWindow_t win = NULL;
  nck(FN(ncclMemAlloc, "ncclMemAlloc")(&buf, 3u << 20), "ncclMemAlloc", rank);
  nck(FN(ncclCommRegister, "ncclCommRegister")(world, buf, 1u << 20, &reg), "ncclCommRegister", rank);
  nck(FN(ncclCommWindowRegister, "ncclCommWindowRegister")(world, buf, 3u << 20, &win, 0),
      "ncclCommWindowRegister", rank);
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  nck(FN(ncclPutSignal, "ncclPutSignal")(grad, count, ncclFloat32, next, win, 0, 0, 0, 0, world, s),
      "ncclPutSignal", rank);
  puts++;
  nck(FN(ncclSignal, "ncclSignal")(next, 0, 0, 0, world, s), "ncclSignal", rank);
  signals++;
  ncclWaitSignalDesc_t d = {2, prev, 0, 0};
  nck(FN(ncclWaitSignal, "ncclWaitSignal")(1, &d, world, s), "ncclWaitSignal", rank);
  waits++;
  CK(cudaStreamSynchronize(s));

  nck(FN(ncclCommWindowDeregister, "ncclCommWindowDeregister")(world, win), "ncclCommWindowDeregister", rank);
  nck(FN(ncclCommDeregister, "ncclCommDeregister")(world, reg), "ncclCommDeregister", rank);
  nck(FN(ncclMemFree, "ncclMemFree")(buf), "ncclMemFree", rank);
  ncclCommDestroy_fn destroy = FN(ncclCommDestroy, "ncclCommDestroy");
  if (shrunk) nck(destroy(shrunk), "ncclCommDestroy (shrunk)", rank);
  nck(destroy(half), "ncclCommDestroy (split)", rank);
  nck(destroy(world), "ncclCommDestroy", rank);
  CK(cudaFree(grad));
  CK(cudaStreamDestroy(s));
  printf("nccl_calls rank=%d allreduces=%d puts=%d signals=%d waits=%d\n", rank, allreduces, puts, signals, waits);
  return 0;
}

int main(int argc, char **argv)
{
  int n = 4;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--direct")) direct = 1;
    else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) n = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--ranks N (2..8)] [--direct]\n", prog_name);
      return 2;
    }
  }
  if (n < 2 || n > 8) return 2;
  lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s: %s\n", prog_name, dlerror());
    return EXIT_NCCL;
  }
  const char *rank_env = getenv("RANK");
  if (rank_env) return run_rank(atoi(rank_env), n);

  ncclGetUniqueId_fn get_id = FN(ncclGetUniqueId, "ncclGetUniqueId");
  ncclUniqueId ids[IDS];
  char hex[2 * sizeof ids + 1];
  for (int i = 0; i < IDS; i++) nck(get_id(&ids[i]), "ncclGetUniqueId", -1);
  for (size_t i = 0; i < sizeof ids; i++) sprintf(hex + 2 * i, "%02x", ((unsigned char *)ids)[i]);
  setenv(ID_ENV, hex, 1);
  char world[16];
  snprintf(world, sizeof world, "%d", n);
  setenv("WORLD_SIZE", world, 1);
  return launch_ranks(n, argv, 0);
}
