/* oom: run with SIMGPU_MEM_GB=4; over-capacity allocations fail and allocate nothing. */
#include "st_common.h"

int main(void)
{
    void *a = NULL, *b = NULL, *c = NULL;
    size_t fr, tot;
    CK(cudaMemGetInfo(&fr, &tot));
    CHECK(tot == 4ull << 30, "total %zu", tot);
    CK(cudaMalloc(&a, 3ull << 30));
    CHECK(cudaMalloc(&b, 2ull << 30) == cudaErrorMemoryAllocation, "expected OOM");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "last error");
    size_t fr2;
    CK(cudaMemGetInfo(&fr2, &tot));
    CHECK(fr2 == (1ull << 30), "free after OOM %zu", fr2);
    CHECK(cudaMallocAsync(&c, 2ull << 30, 0) == cudaErrorMemoryAllocation, "expected async OOM");
    CK(cudaFree(a));
    CK(cudaMalloc(&b, 2ull << 30));
    CK(cudaMemGetInfo(&fr2, &tot));
    CHECK(fr2 == (2ull << 30), "free %zu", fr2);
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&c, 3ull << 30)); /* per-device capacity */
    CHECK(cudaFree((char *)c + 8) == cudaErrorInvalidValue, "free of interior pointer");
    printf("oom: capacity=%zu free_after_oom=%d failures=%d\n", tot, 1 << 30, st_failures);
    return st_failures ? 1 : 0;
}
