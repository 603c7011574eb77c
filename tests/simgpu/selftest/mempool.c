/* mempool: stream-ordered allocation through memory pools, as PyTorch's cudaMallocAsync backend uses it
 * (the default pool with an unlimited release threshold, the reserved / used counters and their high
 * watermarks, cudaMemPoolTrimTo), created pools (cudaMallocFromPoolAsync, maxSize, cudaDeviceSetMemPool,
 * destroy with an allocation outstanding), block reuse across streams, release at synchronisation, and
 * cudaMallocAsync / cudaFreeAsync in a stream capture (graph memory nodes). Checked against the device's
 * free memory, the `mempool` ground-truth lines and the CUPTI Memory records. */
#include "st_common.h"
#include <cupti.h>

#define MiB (1ull << 20)
static int g_pool_records, g_pool_config_ok;
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 20); *s = 1 << 20; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
            CUpti_ActivityMemory4 *m = (CUpti_ActivityMemory4 *)r;
            if (m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) continue;
            g_pool_records++;
            /* the two allocations of 3 MiB into an empty pool: a 4 MiB block */
            if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION && m->bytes == 3 * MiB &&
                m->memoryPoolConfig.pool.size == 4 * MiB && m->memoryPoolConfig.utilizedSize == 3 * MiB && m->isAsync)
                g_pool_config_ok++;
        }
    free(b);
}

static void k_long(void) {}
static void k_short(void) {}

static uint64_t attr64(cudaMemPool_t p, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    CK(cudaMemPoolGetAttribute(p, a, &v));
    return v;
}
static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    CK(cudaMemGetInfo(&f, &t));
    return f;
}

/* the last `mempool` truth line with op `op`: its reserved and used bytes, -1 if none */
static void last_truth(const char *op, long long *reserved, long long *used, int *count)
{
    st_truth t = st_truth_load();
    char buf[32];
    *reserved = *used = -1;
    *count = 0;
    for (int i = 0; i < t.n; i++) {
        if (!st_is(t.lines[i], "mempool")) continue;
        st_str(t.lines[i], "op", buf, sizeof buf);
        if (strcmp(buf, op)) continue;
        (*count)++;
        *reserved = st_num(t.lines[i], "reserved_bytes");
        *used = st_num(t.lines[i], "used_bytes");
    }
}

int main(void)
{
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2));
    st_register((const void *)k_long, "_Z11pool_k_longv");
    st_register((const void *)k_short, "_Z12pool_k_shortv");
    cudaStream_t s, s2;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaMemPool_t pool, cur;
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CK(cudaDeviceGetMemPool(&cur, 0));
    CHECK(pool == cur, "the current pool is the default one");
    CHECK(cudaDeviceGetDefaultMemPool(&cur, 99) == cudaErrorInvalidDevice, "bad device");
    (void)cudaGetLastError();
    /* PyTorch: keep everything (threshold UINT64_MAX) */
    uint64_t keep_all = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    CHECK(attr64(pool, cudaMemPoolAttrReleaseThreshold) == UINT64_MAX, "threshold");
    size_t free0 = free_mem();
    void *a = NULL, *b = NULL;
    CK(cudaMallocAsync(&a, 3 * MiB, s));
    CHECK(attr64(pool, cudaMemPoolAttrReservedMemCurrent) == 4 * MiB && attr64(pool, cudaMemPoolAttrUsedMemCurrent) == 3 * MiB,
          "after 3 MiB: reserved %llu used %llu", (unsigned long long)attr64(pool, cudaMemPoolAttrReservedMemCurrent),
          (unsigned long long)attr64(pool, cudaMemPoolAttrUsedMemCurrent));
    CHECK(free0 - free_mem() == 4 * MiB, "device memory charged %lld", (long long)(free0 - free_mem()));
    long long tr, tu;
    int nalloc, nfree, nrel;
    last_truth("alloc", &tr, &tu, &nalloc);
    CHECK(nalloc == 1 && tr == (long long)(4 * MiB) && tu == (long long)(3 * MiB), "truth alloc: reserved %lld used %lld", tr, tu);
    struct cudaPointerAttributes pa;
    CK(cudaPointerGetAttributes(&pa, a));
    CHECK(pa.type == cudaMemoryTypeDevice && pa.device == 0, "pool memory is device memory");
    CK(cudaMemsetAsync(a, 1, 3 * MiB, s));
    CK(cudaFreeAsync(a, s));
    CHECK(attr64(pool, cudaMemPoolAttrUsedMemCurrent) == 0 && attr64(pool, cudaMemPoolAttrReservedMemCurrent) == 4 * MiB,
          "freed: the pool keeps the block");
    CK(cudaMallocAsync(&b, 3 * MiB + MiB / 2, s)); /* same 4 MiB block, same stream */
    CHECK(b == a && attr64(pool, cudaMemPoolAttrReservedMemCurrent) == 4 * MiB, "block reused on the same stream");
    CK(cudaFreeAsync(b, s));
    CK(cudaStreamSynchronize(s));
    CHECK(attr64(pool, cudaMemPoolAttrReservedMemCurrent) == 4 * MiB, "threshold UINT64_MAX: kept at synchronize");
    CHECK(attr64(pool, cudaMemPoolAttrReservedMemHigh) == 4 * MiB && attr64(pool, cudaMemPoolAttrUsedMemHigh) == 3 * MiB + MiB / 2,
          "high watermarks");
    uint64_t zero = 0, one = 1;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
    CHECK(attr64(pool, cudaMemPoolAttrUsedMemHigh) == 0, "used high reset to current");
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &one) == cudaErrorInvalidValue, "non-zero high");
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &zero) == cudaErrorInvalidValue, "read-only");
    (void)cudaGetLastError();
    CK(cudaMemPoolTrimTo(pool, 0));
    CHECK(attr64(pool, cudaMemPoolAttrReservedMemCurrent) == 0 && free_mem() == free0, "trimmed to 0");
    last_truth("release", &tr, &tu, &nrel);
    CHECK(nrel == 1 && tr == 0, "truth release: %d, reserved %lld", nrel, tr);

    /* the default threshold (0): given back at the next synchronize */
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero));
    CK(cudaMallocAsync(&a, MiB, s));
    CK(cudaFreeAsync(a, s));
    CHECK(attr64(pool, cudaMemPoolAttrReservedMemCurrent) == 2 * MiB, "held until synchronize");
    CK(cudaStreamSynchronize(s));
    CHECK(attr64(pool, cudaMemPoolAttrReservedMemCurrent) == 0 && free_mem() == free0, "released at synchronize");

    /* reuse across streams: a block being freed behind a long kernel on s is taken by s2, which then
     * waits for that free (internal dependency); with that reuse off, s2 gets a new block */
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    CK(cudaMallocAsync(&a, MiB, s));
    CK(cudaLaunchKernel((const void *)k_long, (dim3){2560, 1, 1}, (dim3){1024, 1, 1}, NULL, 0, s)); /* ~1 ms */
    CK(cudaFreeAsync(a, s));
    int off = 0;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off));
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off));
    CK(cudaMallocAsync(&b, MiB, s2));
    CHECK(b != a && attr64(pool, cudaMemPoolAttrReservedMemCurrent) == 4 * MiB, "no reuse without dependencies");
    CK(cudaFreeAsync(b, s2));
    int on = 1;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &on));
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &on));
    void *c = NULL;
    CK(cudaLaunchKernel((const void *)k_long, (dim3){2560, 1, 1}, (dim3){1024, 1, 1}, NULL, 0, s));
    CK(cudaMallocAsync(&a, MiB, s));
    CK(cudaFreeAsync(a, s)); /* behind the second long kernel */
    CK(cudaStreamSynchronize(s2)); /* b's free is complete now */
    CK(cudaMallocAsync(&c, MiB, s2)); /* takes b's completed block, no wait */
    CHECK(c == b, "opportunistic reuse of a completed free");
    void *e = NULL;
    CK(cudaMallocAsync(&e, MiB, s2)); /* only a's block, still being freed on s: s2 waits for it */
    CHECK(e == a, "internal dependency reuse: %p vs %p", e, a);
    CK(cudaLaunchKernel((const void *)k_short, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, s2));
    CK(cudaFreeAsync(c, s2));
    CK(cudaFreeAsync(e, s2));
    CK(cudaDeviceSynchronize());
    {
        st_truth t = st_truth_load();
        long long long_end = 0, short_start = 0;
        char name[64];
        for (int i = 0; i < t.n; i++) {
            if (!st_is(t.lines[i], "kernel")) continue;
            st_str(t.lines[i], "name", name, sizeof name);
            if (!strcmp(name, "_Z11pool_k_longv")) long_end = st_num(t.lines[i], "end_ns");
            if (!strcmp(name, "_Z12pool_k_shortv")) short_start = st_num(t.lines[i], "start_ns");
        }
        CHECK(short_start && short_start >= long_end, "s2 waited for the free behind the long kernel (%lld ns early)",
              long_end - short_start);
    }
    CK(cudaMemPoolTrimTo(pool, 0));
    CHECK(free_mem() == free0, "all back after trim");

    /* a created pool on device 1 (4 MiB max), allocated from a stream of device 0 */
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 1;
    props.maxSize = 4 * MiB;
    cudaMemPool_t p1;
    CK(cudaMemPoolCreate(&p1, &props));
    CHECK(cudaDeviceSetMemPool(0, p1) == cudaErrorInvalidDevice, "a pool of device 1 for device 0");
    (void)cudaGetLastError();
    CK(cudaMallocFromPoolAsync(&a, 3 * MiB, p1, s));
    CK(cudaPointerGetAttributes(&pa, a));
    CHECK(pa.device == 1, "pool of device 1: memory on device %d", pa.device);
    CHECK(cudaMallocFromPoolAsync(&b, 3 * MiB, p1, s) == cudaErrorMemoryAllocation, "past maxSize");
    (void)cudaGetLastError();
    CHECK(cudaMemPoolDestroy(pool) == cudaErrorInvalidValue, "destroying a default pool");
    (void)cudaGetLastError();
    CK(cudaSetDevice(1));
    size_t free1 = free_mem();
    CK(cudaMemPoolDestroy(p1)); /* with `a` outstanding */
    CK(cudaFreeAsync(a, s));
    CK(cudaStreamSynchronize(s));
    CHECK(free_mem() - free1 == 4 * MiB, "destroyed pool gave its memory back on the last free");
    props.location.type = cudaMemLocationTypeHost;
    props.location.id = 0;
    CHECK(cudaMemPoolCreate(&p1, &props) == cudaErrorNotSupported, "host pools");
    (void)cudaGetLastError();
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 1;
    props.maxSize = 0;
    CK(cudaMemPoolCreate(&p1, &props));
    CK(cudaDeviceSetMemPool(1, p1));
    cudaStream_t s1;
    CK(cudaStreamCreate(&s1));
    CK(cudaMallocAsync(&a, MiB, s1)); /* device 1's current pool now */
    CHECK(attr64(p1, cudaMemPoolAttrUsedMemCurrent) == MiB, "cudaMallocAsync used the current pool");
    CK(cudaFree(a)); /* a synchronous free of pool memory */
    CHECK(attr64(p1, cudaMemPoolAttrUsedMemCurrent) == 0, "cudaFree of pool memory");
    enum cudaMemAccessFlags fl;
    struct cudaMemLocation loc0 = {cudaMemLocationTypeDevice, 0};
    CK(cudaMemPoolGetAccess(&fl, p1, &loc0));
    CHECK(fl == cudaMemAccessFlagsProtNone, "no peer access by default");
    struct cudaMemAccessDesc ad = {{cudaMemLocationTypeDevice, 0}, cudaMemAccessFlagsProtReadWrite};
    CK(cudaMemPoolSetAccess(p1, &ad, 1));
    CK(cudaMemPoolGetAccess(&fl, p1, &loc0));
    CHECK(fl == cudaMemAccessFlagsProtReadWrite, "peer access set");
    CK(cudaMemPoolDestroy(p1));
    CK(cudaDeviceGetMemPool(&cur, 1));
    CHECK(cudaMemPoolGetAttribute(p1, cudaMemPoolAttrUsedMemCurrent, &zero) == cudaErrorInvalidValue && cur != p1,
          "destroyed pool: not current, not valid");
    (void)cudaGetLastError();
    CK(cudaSetDevice(0));

    /* in a capture: allocation and free nodes, memory charged only while the graph runs */
    size_t before = free_mem();
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CK(cudaMallocAsync(&a, MiB, s));
    CK(cudaMemsetAsync(a, 0, MiB, s));
    CK(cudaFreeAsync(a, s));
    cudaGraph_t g;
    CK(cudaStreamEndCapture(s, &g));
    CHECK(free_mem() == before, "capture charged memory");
    size_t nn = 0;
    CK(cudaGraphGetNodes(g, NULL, &nn));
    cudaGraphNode_t nodes[3];
    enum cudaGraphNodeType t0 = cudaGraphNodeTypeCount, t2 = cudaGraphNodeTypeCount;
    if (nn == 3) {
        CK(cudaGraphGetNodes(g, nodes, &nn));
        CK(cudaGraphNodeGetType(nodes[0], &t0));
        CK(cudaGraphNodeGetType(nodes[2], &t2));
    }
    CHECK(nn == 3 && t0 == cudaGraphNodeTypeMemAlloc && t2 == cudaGraphNodeTypeMemFree, "captured memory nodes (%zu)", nn);
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    CHECK(free_mem() == before, "graph memory freed in the graph");
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));

    CK(cuptiActivityFlushAll(1));
    last_truth("alloc", &tr, &tu, &nalloc);
    last_truth("free", &tr, &tu, &nfree);
    /* pool allocations above: 3 MiB, 3.5 MiB, 1 MiB, 5 across streams, 3 MiB of p1, 1 MiB of p1 again */
    CHECK(nalloc == 10 && nfree == 10, "truth: %d allocations, %d frees", nalloc, nfree);
    CHECK(g_pool_records == nalloc + nfree && g_pool_config_ok == 2, "CUPTI pool records %d (3 MiB ones right: %d)",
          g_pool_records, g_pool_config_ok);
    printf("mempool: truth_allocs=%d truth_frees=%d cupti_pool_records=%d failures=%d\n", nalloc, nfree, g_pool_records,
           st_failures);
    return st_failures ? 1 : 0;
}
