/* nccl_nodes: all-reduce loops on communicators laid out over nodes, for the NCCL profiler plugin
 * and topology tests (the simulated NCCL models nodes: SIMGPU_NODES, SIMGPU_NIC_GBPS...).
 *
 *   nccl_nodes [--ranks N] [--iters K] [--bytes B] [--group G [--interleaved]] [--graph R]
 *
 * The launcher re-executes itself as N ranks (RANK, LOCAL_RANK, WORLD_SIZE set; LOCAL_RANK is RANK
 * unless NCCL_NODES_LOCAL_RANKS gives the ranks per node; the GPU is LOCAL_RANK; rank 0 leaves the
 * unique id in $NCCL_NODES_ID_FILE). Each rank joins the world communicator; with --group G the
 * ranks split into groups of G, contiguous (ranks 0..G-1, ...) or --interleaved (ranks r, r+N/G,
 * ...), and the loop runs on the group's communicator, else on the world's: K all-reduces of B bytes
 * of fp32 (default 8 MiB), then a stream synchronisation. With --graph R the K all-reduces are
 * captured into a CUDA graph (cudaStreamBeginCapture .. cudaStreamEndCapture, cudaGraphInstantiate),
 * which is launched R times, then one more all-reduce runs outside the graph (eager), then the
 * synchronisation. Prints "nccl_nodes rank=R comm_ranks=C". */
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

static const char *prog_name = "nccl_nodes";
#include "check.h"
#include "nccl_load.h"
#include "rank_launcher.h"



struct opts {
  int ranks, iters, group, interleaved, graph;
  size_t bytes;
};

static int run_rank(int rank, const struct opts *o, const char *id_path)
{
  ncclUniqueId id;
  if (get_id(rank, id_path, &id) != 0) {
    fprintf(stderr, "%s rank %d: no unique id in %s\n", prog_name, rank, id_path);
    return EXIT_NCCL;
  }
  const char *local = getenv("LOCAL_RANK");
  CK(cudaSetDevice((local ? atoi(local) : rank) % 8));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  size_t count = o->bytes / sizeof(float);
  float *buf;
  CK(cudaMalloc((void **)&buf, count * sizeof(float) + 4));
  ncclComm_t world, comm;
  NCK(((ncclCommInitRank_fn)sym("ncclCommInitRank"))(&world, o->ranks, id, rank));
  comm = world;
  if (o->group > 0) {
    int groups = o->ranks / o->group;
    int color = o->interleaved ? rank % groups : rank / o->group;
    NCK(((ncclCommSplit_fn)sym("ncclCommSplit"))(world, color, rank, &comm, NULL));
  }
  ncclAllReduce_fn all_reduce = (ncclAllReduce_fn)sym("ncclAllReduce");
  if (o->graph > 0) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < o->iters; i++) NCK(all_reduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < o->graph; r++) CK(cudaGraphLaunch(ge, s));
    NCK(all_reduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  } else {
    for (int i = 0; i < o->iters; i++) NCK(all_reduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
  }
  CK(cudaStreamSynchronize(s));
  if (comm != world) NCK(((ncclCommDestroy_fn)sym("ncclCommDestroy"))(comm));
  NCK(((ncclCommDestroy_fn)sym("ncclCommDestroy"))(world));
  printf("%s rank=%d comm_ranks=%d\n", prog_name, rank, o->group > 0 ? o->group : o->ranks);
  return 0;
}

int main(int argc, char **argv)
{
  struct opts o = {8, 20, 0, 0, 0, 8u << 20};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--ranks") && v) o.ranks = atoi(argv[++i]);
    else if (!strcmp(a, "--iters") && v) o.iters = atoi(argv[++i]);
    else if (!strcmp(a, "--bytes") && v) o.bytes = (size_t)strtoull(argv[++i], NULL, 0);
    else if (!strcmp(a, "--group") && v) o.group = atoi(argv[++i]);
    else if (!strcmp(a, "--interleaved")) o.interleaved = 1;
    else if (!strcmp(a, "--graph") && v) o.graph = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--ranks N] [--iters K] [--bytes B] [--group G [--interleaved]] [--graph R]\n", prog_name);
      return 2;
    }
  }
  if (o.ranks < 1 || o.ranks > 64 || o.iters < 0 || o.graph < 0 || o.bytes < 4 || (o.group && o.ranks % o.group)) {
    fprintf(stderr, "%s: bad options\n", prog_name);
    return 2;
  }
  lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s: %s\n", prog_name, dlerror());
    return EXIT_NCCL;
  }
  const char *rank_env = getenv("RANK");
  const char *id_path = getenv("NCCL_NODES_ID_FILE");
  if (rank_env && id_path) return run_rank(atoi(rank_env), &o, id_path);
  char path[] = "/tmp/nccl_nodes_id_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 6;
  close(fd);
  unlink(path);
  setenv("NCCL_NODES_ID_FILE", path, 1);
  char world[16];
  snprintf(world, sizeof world, "%d", o.ranks);
  setenv("WORLD_SIZE", world, 1);
  /* NCCL_NODES_LOCAL_RANKS=P: P ranks per simulated node, LOCAL_RANK (and the GPU) is the rank's
   * place on its node, as torchrun sets it on each node; unset: the rank */
  const char *per = getenv("NCCL_NODES_LOCAL_RANKS");
  int code = launch_ranks(o.ranks, argv, per ? atoi(per) : 0);
  unlink(path);
  return code;
}
