/* launch_loop_nvcc.cu: N `<<<>>>` launches as CUDA 13's nvcc compiles them (__cudaPushCallConfiguration,
 * __cudaPopCallConfiguration, __cudaLaunchKernel on the cudaKernel_t from __cudaGetKernel), timed.
 * usage: launch_loop_nvcc N batches|b2b
 *   batches  batches of 250 launches, a cudaDeviceSynchronize after each (as launch_loop.c)
 *   b2b      N launches back to back, one synchronisation at the end (the writer thread drains
 *            concurrently)
 * Prints "ns_per_call X" and "best_batch_ns_per_call X". Built and run by shim/benches/intercept.rs. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>

__global__ void bench_kernel() {}

static double now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  bool b2b = argc > 2 && !strcmp(argv[2], "b2b");
  if (cudaSetDevice(0) != cudaSuccess) { fprintf(stderr, "cudaSetDevice failed\n"); return 3; }
  for (int i = 0; i < 2000; i++) bench_kernel<<<1, 32>>>();
  cudaDeviceSynchronize();
  double loop = 0, best = 1e18;
  long batch_len = b2b ? 1000 : 250;
  for (long done = 0; done < n;) {
    long batch = n - done < batch_len ? n - done : batch_len;
    double t0 = now_ns();
    for (long i = 0; i < batch; i++) bench_kernel<<<1, 32>>>();
    double dt = now_ns() - t0;
    loop += dt;
    if (batch == batch_len && dt / batch < best) best = dt / batch;
    if (!b2b) cudaDeviceSynchronize();
    done += batch;
  }
  if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess) { fprintf(stderr, "launch failed\n"); return 3; }
  printf("ns_per_call %.2f\nbest_batch_ns_per_call %.2f\n", loop / n, best);
  return 0;
}
