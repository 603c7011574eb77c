/* nccl_grouped: one process drives two GPUs (ncclCommInitAll), every NCCL call inside a group, as
 * nccl-tests with -g 2 and data-parallel launchers with one thread for several devices do. For
 * message sizes 1, 4 and 16 MiB, 3 repetitions each of:
 *   group { all-reduce on both devices }        group { all-gather on both }
 *   group { reduce-scatter on both }            group { broadcast from device 0 on both }
 *   group { send/recv both ways }               group { all-to-all as send/recv to every peer }
 * The kernels of each group are launched by its ncclGroupEnd, so they share its correlation id.
 * Prints "nccl_grouped: N grouped calls on 2 devices". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl_api.h"

static const char *prog_name = "nccl_grouped";
#include "check.h"
#include "nccl_load.h"

#define NDEV 2


int main(void)
{
  lib = dlopen("libnccl.so.2", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "%s: %s\n", prog_name, dlerror());
    return EXIT_NCCL;
  }
  ncclCommInitAll_fn init_all = (ncclCommInitAll_fn)sym("ncclCommInitAll");
  ncclGroupStart_fn group_start = (ncclGroupStart_fn)sym("ncclGroupStart");
  ncclGroupEnd_fn group_end = (ncclGroupEnd_fn)sym("ncclGroupEnd");
  ncclAllReduce_fn all_reduce = (ncclAllReduce_fn)sym("ncclAllReduce");
  ncclAllGather_fn all_gather = (ncclAllGather_fn)sym("ncclAllGather");
  ncclReduceScatter_fn reduce_scatter = (ncclReduceScatter_fn)sym("ncclReduceScatter");
  ncclBroadcast_fn broadcast = (ncclBroadcast_fn)sym("ncclBroadcast");
  ncclSend_fn send = (ncclSend_fn)sym("ncclSend");
  ncclRecv_fn recv = (ncclRecv_fn)sym("ncclRecv");
  ncclCommDestroy_fn destroy = (ncclCommDestroy_fn)sym("ncclCommDestroy");

  const size_t max_bytes = 16u << 20;
  int devs[NDEV] = {0, 1};
  ncclComm_t comms[NDEV];
  cudaStream_t streams[NDEV];
  float *sendbuf[NDEV], *recvbuf[NDEV];
  for (int d = 0; d < NDEV; d++) {
    CK(cudaSetDevice(d));
    CK(cudaStreamCreate(&streams[d]));
    CK(cudaMalloc((void **)&sendbuf[d], max_bytes));
    CK(cudaMalloc((void **)&recvbuf[d], NDEV * max_bytes));
  }
  NCK(init_all(comms, NDEV, devs));
  int calls = 0;
  const size_t sizes[] = {1u << 20, 4u << 20, 16u << 20};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t count = sizes[si] / sizeof(float);
    for (int rep = 0; rep < 3; rep++) {
      NCK(group_start());
      for (int d = 0; d < NDEV; d++) NCK(all_reduce(sendbuf[d], recvbuf[d], count, ncclFloat, ncclSum, comms[d], streams[d]));
      NCK(group_end());
      NCK(group_start());
      for (int d = 0; d < NDEV; d++) NCK(all_gather(sendbuf[d], recvbuf[d], count, ncclFloat, comms[d], streams[d]));
      NCK(group_end());
      NCK(group_start());
      for (int d = 0; d < NDEV; d++)
        NCK(reduce_scatter(sendbuf[d], recvbuf[d], count, ncclFloat, ncclSum, comms[d], streams[d]));
      NCK(group_end());
      NCK(group_start());
      for (int d = 0; d < NDEV; d++) NCK(broadcast(sendbuf[d], recvbuf[d], count, ncclFloat, 0, comms[d], streams[d]));
      NCK(group_end());
      NCK(group_start());
      for (int d = 0; d < NDEV; d++) {
        NCK(send(sendbuf[d], count, ncclFloat, 1 - d, comms[d], streams[d]));
        NCK(recv(recvbuf[d], count, ncclFloat, 1 - d, comms[d], streams[d]));
      }
      NCK(group_end());
      /* all-to-all: a send and a receive with every peer, itself included */
      NCK(group_start());
      for (int d = 0; d < NDEV; d++)
        for (int p = 0; p < NDEV; p++) {
          NCK(send(sendbuf[d], count / NDEV, ncclFloat, p, comms[d], streams[d]));
          NCK(recv(recvbuf[d] + (size_t)p * (count / NDEV), count / NDEV, ncclFloat, p, comms[d], streams[d]));
        }
      NCK(group_end());
      calls += 4 * NDEV + 2 * NDEV + 2 * NDEV * NDEV;
    }
  }
  for (int d = 0; d < NDEV; d++) {
    CK(cudaSetDevice(d));
    CK(cudaStreamSynchronize(streams[d]));
  }
  for (int d = 0; d < NDEV; d++) NCK(destroy(comms[d]));
  printf("%s: %d grouped calls on %d devices\n", prog_name, calls, NDEV);
  return 0;
}
