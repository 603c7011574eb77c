/* basics: devices, streams, launches, memcpy, events, default-stream ordering, ground truth. */
#include "st_common.h"
#include <cupti.h>

static void k_gemm(void) {}
static void k_elem(void) {}

int main(void)
{
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    CHECK(n == 8, "device count %d", n);
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    CHECK(strstr(p.name, "H100") != NULL && p.major == 9 && p.minor == 0, "props %s %d.%d", p.name, p.major, p.minor);
    CHECK(cudaSetDevice(99) == cudaErrorInvalidDevice, "bad device accepted");
    CHECK(cudaGetLastError() == cudaErrorInvalidDevice, "last error");
    CHECK(cudaGetLastError() == cudaSuccess, "last error not reset");
    st_register((const void *)k_gemm, "_Z11sgemm_kernelPfS_");
    st_register((const void *)k_elem, "_Z19elementwise_kernelPf");
    cudaStream_t s1, s2;
    CK(cudaStreamCreate(&s1));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    /* duration model: gemm 128x256 threads = 32768 * 2000 ps = 65536 ns + 1500 */
    uint64_t t0 = st_now();
    CK(cudaLaunchKernel((const void *)k_gemm, (dim3){12800, 1, 1}, (dim3){256, 1, 1}, NULL, 0, s1)); /* 6.55 ms */
    CK(cudaLaunchKernel((const void *)k_elem, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, s2));
    cudaError_t q1 = cudaStreamQuery(s1);
    /* a host descheduled for the whole 6.55 ms (a loaded machine) legitimately finds it done */
    CHECK(q1 == cudaErrorNotReady || st_now() - t0 >= 6555100, "s1 should be busy");
    CK(cudaStreamSynchronize(s1));
    uint64_t t1 = st_now();
    CHECK(t1 - t0 >= 6555100, "sync returned after %llu ns", (unsigned long long)(t1 - t0));
    CHECK(cudaStreamQuery(s1) == cudaSuccess, "s1 idle");
    /* events */
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    /* a 6.55 ms kernel first, so the 10 gemms queue back to back behind it (no launch gaps, even
     * on a loaded host) unless enqueueing them took longer than that */
    uint64_t q0 = st_now();
    CK(cudaLaunchKernel((const void *)k_gemm, (dim3){12800, 1, 1}, (dim3){256, 1, 1}, NULL, 0, s1));
    CK(cudaEventRecord(a, s1));
    for (int i = 0; i < 10; i++) CK(cudaLaunchKernel((const void *)k_gemm, (dim3){128, 1, 1}, (dim3){256, 1, 1}, NULL, 0, s1));
    CK(cudaEventRecord(b, s1));
    int queued_behind = st_now() - q0 < 6000000;
    CK(cudaStreamWaitEvent(s2, b, 0));
    CK(cudaLaunchKernel((const void *)k_elem, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, s2));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    CHECK(ms > 0.6703 && (!queued_behind || ms < 0.6705), "elapsed %.4f ms, expected 10 x 67036 ns", ms);
    /* memory */
    void *d = NULL;
    CK(cudaMalloc(&d, 1 << 20));
    char host[4096];
    memset(host, 7, sizeof host);
    CK(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice));
    char back[4096] = {0};
    CK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    CHECK(memcmp(host, back, sizeof host) == 0, "bytes did not round-trip");
    CK(cudaMemset(d, 0, 1 << 20));
    CK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
    CHECK(back[0] == 0 && back[4095] == 0, "memset");
    size_t fr, tot;
    CK(cudaMemGetInfo(&fr, &tot));
    CHECK(tot == 80ull << 30 && tot - fr == 1 << 20, "meminfo %zu %zu", fr, tot);
    CK(cudaFree(d));
    CK(cudaDeviceSynchronize());
    /* legacy default stream waits for blocking s1, not for non-blocking s2 */
    CK(cudaLaunchKernel((const void *)k_gemm, (dim3){1280, 1, 1}, (dim3){256, 1, 1}, NULL, 0, s1));
    CK(cudaLaunchKernel((const void *)k_elem, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, 0));
    CK(cudaDeviceSynchronize());
    CK(cuptiActivityFlushAll(0)); /* completes finished work: truth lines are written */
    st_truth t = st_truth_load();
    int kernels = 0, memcpys = 0, memsets = 0, process = 0;
    long long gemm_end = 0, legacy_start = 0;
    for (int i = 0; i < t.n; i++) {
        if (st_is(t.lines[i], "kernel")) kernels++;
        if (st_is(t.lines[i], "memcpy")) memcpys++;
        if (st_is(t.lines[i], "memset")) memsets++;
        if (st_is(t.lines[i], "process")) process++;
        char name[256];
        st_str(t.lines[i], "name", name, sizeof name);
        if (st_is(t.lines[i], "kernel") && st_num(t.lines[i], "grid") == -999) CHECK(0, "no grid");
        if (strstr(t.lines[i], "[1280,1,1]")) gemm_end = st_num(t.lines[i], "end_ns");
        if (st_is(t.lines[i], "kernel") && st_num(t.lines[i], "stream") == 7) legacy_start = st_num(t.lines[i], "start_ns");
    }
    CHECK(process == 1, "process lines %d", process);
    CHECK(kernels == 16, "truth kernels %d", kernels);
    CHECK(memcpys == 3 && memsets == 1, "memcpy %d memset %d", memcpys, memsets);
    CHECK(legacy_start >= gemm_end && gemm_end > 0, "legacy stream start %lld before blocking stream end %lld",
          legacy_start, gemm_end);
    printf("basics: truth_lines=%d kernels=%d elapsed_10_gemm_ms=%.4f failures=%d\n", t.n, kernels, ms,
           st_failures);
    return st_failures ? 1 : 0;
}
