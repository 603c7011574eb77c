// streams: several non-blocking streams, pinned and pageable copies in both directions,
// memsets, events (record / stream wait / elapsed time), <<<>>> launches on streams.
#include <cstring>
#include <vector>

static const char *prog_name = "streams";
#include "check.h"

__global__ void stage_compute(float *x, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    for (int k = 0; k < iters; k++) x[i] = x[i] * 0.5f + 1.0f;
}

__global__ void stage_reduce(const float *x, float *out, int n) {
  __shared__ float s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = 0;
    for (int k = 0; k < blockDim.x; k++) acc += s[k];
    atomicAdd(out, acc);
  }
}

int main() {
  const int nstreams = 3, n = 1 << 20;
  const size_t bytes = n * sizeof(float);
  cudaStream_t st[nstreams];
  cudaEvent_t produced[nstreams], t0, t1;
  float *dbuf[nstreams], *hpinned, *dsum;
  std::vector<float> pageable(n, 1.0f), back(n);
  CK(cudaMallocHost(&hpinned, bytes));
  for (int i = 0; i < n; i++) hpinned[i] = float(i % 97);
  CK(cudaMalloc(&dsum, sizeof(float)));
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  for (int s = 0; s < nstreams; s++) {
    CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&produced[s], cudaEventDisableTiming));
    CK(cudaMalloc(&dbuf[s], bytes));
  }
  CK(cudaEventRecord(t0, st[0]));
  CK(cudaMemsetAsync(dsum, 0, sizeof(float), st[0]));
  for (int s = 0; s < nstreams; s++) {
    // stream s: copy in (pinned for 0 and 2, pageable for 1), compute, then signal
    const float *src = s == 1 ? pageable.data() : hpinned;
    CK(cudaMemcpyAsync(dbuf[s], src, bytes, cudaMemcpyHostToDevice, st[s]));
    stage_compute<<<n / 256, 256, 0, st[s]>>>(dbuf[s], n, 8 * (s + 1));
    CK(cudaEventRecord(produced[s], st[s]));
  }
  // stream 0 reduces everybody's result once they are produced
  for (int s = 1; s < nstreams; s++) CK(cudaStreamWaitEvent(st[0], produced[s], 0));
  for (int s = 0; s < nstreams; s++) stage_reduce<<<n / 256, 256, 0, st[0]>>>(dbuf[s], dsum, n);
  CK(cudaMemsetAsync(dbuf[2], 0, bytes / 2, st[2]));
  CK(cudaMemcpyAsync(hpinned, dbuf[0], bytes, cudaMemcpyDeviceToHost, st[0]));
  CK(cudaMemcpyAsync(dbuf[1], dbuf[0], bytes, cudaMemcpyDeviceToDevice, st[1]));
  CK(cudaEventRecord(t1, st[0]));
  CK(cudaGetLastError());
  CK(cudaEventSynchronize(t1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, t0, t1));
  for (int s = 0; s < nstreams; s++) CK(cudaStreamSynchronize(st[s]));
  // a synchronous pageable round trip checks that copies move the bytes
  CK(cudaMemcpy(dbuf[1], pageable.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(back.data(), dbuf[1], bytes, cudaMemcpyDeviceToHost));
  if (std::memcmp(back.data(), pageable.data(), bytes) != 0) {
    std::fprintf(stderr, "streams: pageable round trip changed the data\n");
    return EXIT_WRONG_DATA;
  }
  for (int s = 0; s < nstreams; s++) {
    CK(cudaFree(dbuf[s]));
    CK(cudaEventDestroy(produced[s]));
    CK(cudaStreamDestroy(st[s]));
  }
  CK(cudaFree(dsum));
  CK(cudaFreeHost(hpinned));
  std::printf("streams: %d streams, %.3f ms between events: ok\n", nstreams, ms);
  return 0;
}
