/* pinned: pageable vs pinned copy durations and host blocking. */
#include "st_common.h"
#include <cupti.h>

int main(void)
{
    const size_t n = 8 << 20;
    void *d, *pin;
    CK(cudaMalloc(&d, n));
    CK(cudaMallocHost(&pin, n));
    char *pg = malloc(n), *reg = malloc(n);
    memset(pg, 3, n);
    CK(cudaHostRegister(reg, n, 0));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    uint64_t t0 = st_now();
    CK(cudaMemcpyAsync(d, pin, n, cudaMemcpyHostToDevice, s)); /* returns at once */
    uint64_t t1 = st_now();
    CK(cudaStreamSynchronize(s));
    uint64_t t2 = st_now();
    CK(cudaMemcpyAsync(d, pg, n, cudaMemcpyHostToDevice, s)); /* pageable: blocks */
    uint64_t t3 = st_now();
    CK(cudaMemcpyAsync(reg, d, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    CHECK(((char *)reg)[n - 1] == 3, "bytes copied");
    CHECK(t3 - t2 >= 840360, "pageable async returned after %llu ns", (unsigned long long)(t3 - t2));
    CK(cuptiActivityFlushAll(0));
    st_truth t = st_truth_load();
    long long dur[3] = {0};
    int pinned[3] = {0}, k = 0;
    for (int i = 0; i < t.n && k < 3; i++)
        if (st_is(t.lines[i], "memcpy")) {
            dur[k] = st_num(t.lines[i], "end_ns") - st_num(t.lines[i], "start_ns");
            pinned[k++] = (int)st_num(t.lines[i], "host_pinned");
        }
    CHECK(k == 3, "memcpy lines %d", k);
    CHECK(dur[0] == 1500 + (long long)n / 25 && pinned[0] == 1, "pinned HtoD %lld", dur[0]);
    CHECK(dur[1] == 1500 + (long long)n / 10 && pinned[1] == 0, "pageable HtoD %lld", dur[1]);
    CHECK(dur[2] == 1500 + (long long)n / 25 && pinned[2] == 1, "registered DtoH %lld", dur[2]);
    printf("pinned: pinned_ns=%lld pageable_ns=%lld registered_ns=%lld pinned_return_ns=%llu pageable_return_ns=%llu failures=%d\n",
           dur[0], dur[1], dur[2], (unsigned long long)(t1 - t0), (unsigned long long)(t3 - t2), st_failures);
    (void)t2;
    return st_failures ? 1 : 0;
}
