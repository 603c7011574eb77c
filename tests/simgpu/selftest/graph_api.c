/* graph_api: graphs built node by node (cudaGraphAdd{Kernel,Memcpy,Memcpy1D,Memset,Host,MemAlloc,MemFree}Node),
 * cloned, updated (cudaGraphExecKernelNodeSetParams, cudaGraphExecUpdate) and uploaded. Checked against the
 * ground truth and CUPTI: nothing runs before cudaGraphLaunch; each launch runs every node once with the
 * launch's correlation, the graph's id and the node's id (truth and CUPTI agree); copies and memsets move
 * their bytes when the graph runs; launches of one executable are ordered; the documented errors. */
#include "st_common.h"
#include <cupti.h>

#define MAXK 256
static CUpti_ActivityKernel9 g_k[MAXK];
static int g_nk, g_ncopy_graph, g_nset_graph, g_mem_alloc, g_mem_free;
static uint32_t g_launch_corr[64];
static int g_nl;
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 20); *s = 1 << 20; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g_nk < MAXK) g_k[g_nk++] = *(CUpti_ActivityKernel9 *)r;
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY && ((CUpti_ActivityMemcpy6 *)r)->graphId) g_ncopy_graph++;
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET && ((CUpti_ActivityMemset4 *)r)->graphId) g_nset_graph++;
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
            CUpti_ActivityMemory4 *m = (CUpti_ActivityMemory4 *)r;
            if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION && m->bytes == (1 << 20)) g_mem_alloc++;
            if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE && m->bytes == (1 << 20)) g_mem_free++;
        }
        if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME && ((CUpti_ActivityAPI *)r)->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 &&
            g_nl < 64)
            g_launch_corr[g_nl++] = ((CUpti_ActivityAPI *)r)->correlationId;
    }
    free(b);
}

static void k_gemm(void) {}
static void k_elem(void) {}
static int g_host_calls;
static void host_node(void *arg) { __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST); }

static int count_truth(const char *type, const char *name)
{
    st_truth t = st_truth_load();
    int n = 0;
    char buf[256];
    for (int i = 0; i < t.n; i++) {
        if (!st_is(t.lines[i], type)) continue;
        st_str(t.lines[i], "name", buf, sizeof buf);
        if (!name || !strcmp(buf, name)) n++;
    }
    return n;
}

/* the kernel truth line with this correlation and name: its graph ids and grid.x (-1: none) */
static int truth_kernel(uint32_t corr, const char *name, long long *gid, long long *nid, long long *gridx)
{
    st_truth t = st_truth_load();
    char buf[256];
    for (int i = 0; i < t.n; i++) {
        if (!st_is(t.lines[i], "kernel") || st_num(t.lines[i], "correlation") != corr) continue;
        st_str(t.lines[i], "name", buf, sizeof buf);
        if (strcmp(buf, name)) continue;
        *gid = st_num(t.lines[i], "graph_id");
        *nid = st_num(t.lines[i], "graph_node_id");
        const char *g = strstr(t.lines[i], "\"grid\":[");
        *gridx = g ? atoll(g + 8) : -1;
        return 1;
    }
    return 0;
}

int main(void)
{
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
    st_register((const void *)k_gemm, "_Z11graph_sgemmv");
    st_register((const void *)k_elem, "_Z16graph_elementwisev");
    cudaStream_t s, s2;
    CK(cudaStreamCreate(&s));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    const size_t N = 1 << 16;
    void *d = NULL, *d2 = NULL, *h = NULL, *hsrc = NULL;
    CK(cudaMalloc(&d, N));
    CK(cudaMalloc(&d2, N));
    CK(cudaMallocHost(&h, N));
    CK(cudaMallocHost(&hsrc, N));
    memset(h, 0, N);
    memset(hsrc, 0x5a, N);

    /* A (kernel) -> B (memset d, 32-bit pattern) -> C (d -> h) -> D (host); A -> E (kernel); F (hsrc -> d2) */
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t A, B, C, D, E, F, bad;
    struct cudaKernelNodeParams kp = {0};
    kp.func = (void *)k_gemm;
    kp.gridDim = (dim3){64, 1, 1};
    kp.blockDim = (dim3){128, 1, 1};
    CK(cudaGraphAddKernelNode(&A, g, NULL, 0, &kp));
    struct cudaMemsetParams mp = {0};
    mp.dst = d;
    mp.value = 0x01020304u;
    mp.elementSize = 4;
    mp.width = N / 4;
    mp.height = 1;
    CK(cudaGraphAddMemsetNode(&B, g, &A, 1, &mp));
    CK(cudaGraphAddMemcpyNode1D(&C, g, &B, 1, h, d, N, cudaMemcpyDeviceToHost));
    struct cudaHostNodeParams hp = {host_node, &g_host_calls};
    CK(cudaGraphAddHostNode(&D, g, &C, 1, &hp));
    struct cudaKernelNodeParams kp2 = kp;
    kp2.func = (void *)k_elem;
    kp2.gridDim = (dim3){4, 1, 1};
    CK(cudaGraphAddKernelNode(&E, g, &A, 1, &kp2));
    struct cudaMemcpy3DParms cp = {0};
    cp.srcPtr = (struct cudaPitchedPtr){hsrc, N, N, 1};
    cp.dstPtr = (struct cudaPitchedPtr){d2, N, N, 1};
    cp.extent = (struct cudaExtent){N, 1, 1};
    cp.kind = cudaMemcpyHostToDevice;
    CK(cudaGraphAddMemcpyNode(&F, g, NULL, 0, &cp));
    /* errors: a duplicated dependency, a node of another graph, no function */
    cudaGraphNode_t dup[2] = {A, A};
    CHECK(cudaGraphAddKernelNode(&bad, g, dup, 2, &kp) == cudaErrorInvalidValue, "duplicate dependency");
    cudaGraph_t other;
    CK(cudaGraphCreate(&other, 0));
    CHECK(cudaGraphAddKernelNode(&bad, other, &A, 1, &kp) == cudaErrorInvalidValue, "foreign dependency");
    struct cudaKernelNodeParams nofunc = kp;
    nofunc.func = NULL;
    CHECK(cudaGraphAddKernelNode(&bad, g, NULL, 0, &nofunc) == cudaErrorInvalidDeviceFunction, "no function");
    (void)cudaGetLastError();
    size_t nn = 0;
    CK(cudaGraphGetNodes(g, NULL, &nn));
    CHECK(nn == 6, "nodes %zu", nn);
    enum cudaGraphNodeType ty;
    CK(cudaGraphNodeGetType(B, &ty));
    CHECK(ty == cudaGraphNodeTypeMemset, "memset node type %d", (int)ty);
    CK(cudaGraphNodeGetType(C, &ty));
    CHECK(ty == cudaGraphNodeTypeMemcpy, "memcpy node type %d", (int)ty);

    /* nothing runs before a launch */
    CK(cudaDeviceSynchronize());
    CHECK(count_truth("kernel", NULL) == 0 && count_truth("memset", NULL) == 0, "work ran before the launch");
    CHECK(((unsigned char *)h)[0] == 0, "bytes moved before the launch");
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaGraphUpload(e, s));
    CK(cudaStreamSynchronize(s));
    CHECK(count_truth("kernel", NULL) == 0, "upload ran work");
    for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    CHECK(g_host_calls == 3, "host node calls %d", g_host_calls);
    uint32_t w0;
    memcpy(&w0, h, 4);
    CHECK(w0 == 0x01020304u && ((unsigned char *)h)[N - 1] == 0x01, "memset pattern copied back: %08x", w0);
    unsigned char d2b[4];
    CK(cudaMemcpy(d2b, d2, 4, cudaMemcpyDeviceToHost));
    CHECK(d2b[0] == 0x5a && d2b[3] == 0x5a, "3D memcpy node moved the bytes");
    CHECK(count_truth("kernel", "_Z11graph_sgemmv") == 3 && count_truth("kernel", "_Z16graph_elementwisev") == 3,
          "kernels in the truth");
    CHECK(count_truth("memset", NULL) == 3, "memsets in the truth %d", count_truth("memset", NULL));

    /* kernel node parameters of the executable: grid 128 from now on, same node */
    struct cudaKernelNodeParams kp3 = kp;
    kp3.gridDim = (dim3){128, 1, 1};
    CK(cudaGraphExecKernelNodeSetParams(e, A, &kp3));
    CHECK(cudaGraphExecKernelNodeSetParams(e, B, &kp3) == cudaErrorInvalidValue, "set kernel params on a memset node");
    (void)cudaGetLastError();
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));

    /* a clone is a new graph with new nodes */
    cudaGraph_t gc;
    CK(cudaGraphClone(&gc, g));
    cudaGraphExec_t ec;
    CK(cudaGraphInstantiate(&ec, gc, 0));
    CK(cudaGraphLaunch(ec, s));
    CK(cudaStreamSynchronize(s));
    /* update e from the clone (same topology): kernels keep e's ids, get the clone's parameters */
    cudaGraphExecUpdateResultInfo info;
    CK(cudaGraphExecUpdate(e, gc, &info));
    CHECK(info.result == cudaGraphExecUpdateSuccess, "update result %d", (int)info.result);
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    /* a graph with a node less, and one with a node of another type */
    cudaGraph_t g3, g4;
    cudaGraphNode_t x, y;
    CK(cudaGraphCreate(&g3, 0));
    CK(cudaGraphAddKernelNode(&x, g3, NULL, 0, &kp));
    CHECK(cudaGraphExecUpdate(e, g3, &info) == cudaErrorGraphExecUpdateFailure &&
              info.result == cudaGraphExecUpdateErrorTopologyChanged && info.errorNode == NULL,
          "topology change: result %d", (int)info.result);
    CK(cudaGraphCreate(&g4, 0));
    CK(cudaGraphAddKernelNode(&x, g4, NULL, 0, &kp));
    CK(cudaGraphAddHostNode(&y, g4, &x, 1, &hp)); /* a host node where g has a memset */
    CK(cudaGraphAddMemcpyNode1D(&bad, g4, &y, 1, h, d, N, cudaMemcpyDeviceToHost));
    CK(cudaGraphAddHostNode(&bad, g4, &bad, 1, &hp));
    CK(cudaGraphAddKernelNode(&bad, g4, &x, 1, &kp2));
    CK(cudaGraphAddMemcpyNode(&bad, g4, NULL, 0, &cp));
    CHECK(cudaGraphExecUpdate(e, g4, &info) == cudaErrorGraphExecUpdateFailure &&
              info.result == cudaGraphExecUpdateErrorNodeTypeChanged && info.errorNode == y,
          "type change: result %d", (int)info.result);
    (void)cudaGetLastError();

    /* launches of one executable are ordered: the second (another stream) starts after the first */
    CK(cudaGraphLaunch(e, s));
    CK(cudaGraphLaunch(e, s2));
    CK(cudaDeviceSynchronize());
    CK(cuptiActivityFlushAll(1));

    /* every graph kernel: CUPTI and the truth agree on correlation, graph id, node id */
    int agree = 0, with_launch_corr = 0, grid128 = 0;
    uint32_t gid_e = 0, gid_c = 0;
    uint64_t nid_a = 0, nid_e = 0, nid_ca = 0;
    for (int i = 0; i < g_nk; i++) {
        long long gid, nid, gx;
        const char *name = g_k[i].name;
        if (truth_kernel(g_k[i].correlationId, name, &gid, &nid, &gx) && gid == g_k[i].graphId && nid == (long long)g_k[i].graphNodeId)
            agree++;
        for (int j = 0; j < g_nl; j++) with_launch_corr += g_k[i].correlationId == g_launch_corr[j];
        int is_a = !strcmp(name, "_Z11graph_sgemmv");
        if (g_k[i].correlationId == g_launch_corr[0]) {
            gid_e = g_k[i].graphId;
            if (is_a) nid_a = g_k[i].graphNodeId; else nid_e = g_k[i].graphNodeId;
        }
        if (g_nl > 4 && g_k[i].correlationId == g_launch_corr[4]) {
            gid_c = g_k[i].graphId;
            if (is_a) nid_ca = g_k[i].graphNodeId;
        }
        if (is_a && g_k[i].gridX == 128) grid128++;
    }
    /* launches: 3 + 1 (new params) + 1 clone + 1 updated + 2 ordered = 8, two kernels each */
    CHECK(g_nl == 8 && g_nk == 16, "launches %d kernels %d", g_nl, g_nk);
    CHECK(agree == g_nk && with_launch_corr == g_nk, "truth agrees %d/%d, launch correlation %d", agree, g_nk, with_launch_corr);
    CHECK(gid_e && gid_c && gid_e != gid_c, "graph ids: executable %u, clone %u", gid_e, gid_c);
    CHECK(nid_a && nid_e && nid_a != nid_e && nid_ca && nid_ca != nid_a, "node ids %llu %llu clone %llu",
          (unsigned long long)nid_a, (unsigned long long)nid_e, (unsigned long long)nid_ca);
    /* grid 128 after SetParams: launch 4 only (the clone and the update carry g's grid 64 again) */
    CHECK(grid128 == 1, "kernel node params applied to %d launches", grid128);
    int same_ids_after_update = 0;
    for (int i = 0; i < g_nk; i++)
        if (g_k[i].correlationId == g_launch_corr[5] && g_k[i].graphId == gid_e &&
            (g_k[i].graphNodeId == nid_a || g_k[i].graphNodeId == nid_e))
            same_ids_after_update++;
    CHECK(same_ids_after_update == 2, "updated executable keeps its ids (%d)", same_ids_after_update);
    uint64_t end_first = 0, start_second = UINT64_MAX;
    for (int i = 0; i < g_nk; i++) {
        if (g_k[i].correlationId == g_launch_corr[6] && g_k[i].end > end_first) end_first = g_k[i].end;
        if (g_k[i].correlationId == g_launch_corr[7] && g_k[i].start < start_second) start_second = g_k[i].start;
    }
    CHECK(start_second >= end_first, "second launch starts %lld ns before the first ends",
          (long long)(end_first - start_second));
    CHECK(g_ncopy_graph == 16 && g_nset_graph == 8, "graph copies %d memsets %d", g_ncopy_graph, g_nset_graph);

    /* memory nodes: alloc -> memset -> copy out -> free, charged only while the graph runs */
    size_t free0, free1, total;
    cudaGraph_t gm;
    CK(cudaGraphCreate(&gm, 0));
    struct cudaMemAllocNodeParams ap = {0};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = 1 << 20;
    cudaGraphNode_t ma, ms, mc, mf;
    CK(cudaMemGetInfo(&free0, &total));
    CK(cudaGraphAddMemAllocNode(&ma, gm, NULL, 0, &ap));
    CHECK(ap.dptr != NULL, "allocation address");
    CK(cudaMemGetInfo(&free1, &total));
    CHECK(free1 == free0, "an alloc node charges nothing before it runs");
    struct cudaMemsetParams msp = {ap.dptr, 0, 0x33, 1, 1 << 20, 1};
    CK(cudaGraphAddMemsetNode(&ms, gm, &ma, 1, &msp));
    CK(cudaGraphAddMemcpyNode1D(&mc, gm, &ms, 1, h, ap.dptr, 16, cudaMemcpyDeviceToHost));
    CK(cudaGraphAddMemFreeNode(&mf, gm, &mc, 1, ap.dptr));
    CHECK(cudaGraphAddMemFreeNode(&bad, gm, &mf, 1, ap.dptr) == cudaErrorInvalidValue, "second free node");
    CHECK(cudaGraphAddMemFreeNode(&bad, gm, NULL, 0, d) == cudaErrorInvalidValue, "free node for cudaMalloc memory");
    cudaGraph_t gmc;
    CHECK(cudaGraphClone(&gmc, gm) == cudaErrorNotSupported, "clone of a graph with memory nodes");
    cudaGraphExec_t em, em2;
    CK(cudaGraphInstantiate(&em, gm, 0));
    CHECK(cudaGraphInstantiate(&em2, gm, 0) == cudaErrorInvalidValue, "second executable of a graph with memory nodes");
    (void)cudaGetLastError();
    CK(cudaGraphLaunch(em, s));
    CK(cudaGraphLaunch(em, s));
    CK(cudaStreamSynchronize(s));
    CHECK(((unsigned char *)h)[0] == 0x33, "graph allocation written and read back");
    CK(cudaMemGetInfo(&free1, &total));
    CHECK(free1 == free0, "freed in the graph: %lld bytes still charged", (long long)(free0 - free1));
    /* an allocation the graph does not free: charged after the launch, relaunch refused until cudaFree */
    cudaGraph_t gk;
    CK(cudaGraphCreate(&gk, 0));
    struct cudaMemAllocNodeParams ap2 = ap;
    ap2.dptr = NULL;
    CK(cudaGraphAddMemAllocNode(&ma, gk, NULL, 0, &ap2));
    cudaGraphExec_t ek, eauto;
    CK(cudaGraphInstantiate(&ek, gk, 0));
    CK(cudaGraphLaunch(ek, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemGetInfo(&free1, &total));
    CHECK(free0 - free1 == (1 << 20), "unfreed graph allocation charged: %lld", (long long)(free0 - free1));
    CHECK(cudaGraphLaunch(ek, s) == cudaErrorInvalidValue, "relaunch with the allocation unfreed");
    (void)cudaGetLastError();
    CK(cudaFree(ap2.dptr));
    CHECK(cudaFree(ap2.dptr) == cudaErrorInvalidValue, "double free of a graph allocation");
    (void)cudaGetLastError();
    CK(cudaGraphLaunch(ek, s));
    CK(cudaFreeAsync(ap2.dptr, s));
    CK(cudaGraphExecDestroy(ek));
    CK(cudaGraphInstantiateWithFlags(&eauto, gk, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    CK(cudaGraphLaunch(eauto, s));
    CK(cudaGraphLaunch(eauto, s)); /* frees the first launch's allocation itself */
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(ap2.dptr));
    CK(cudaMemGetInfo(&free1, &total));
    CHECK(free1 == free0, "all graph memory back: %lld", (long long)(free0 - free1));
    CK(cuptiActivityFlushAll(1));
    /* alloc + free records of 1 MiB: 2 launches of gm, 2 of ek (cudaFree, cudaFreeAsync), 2 of eauto */
    CHECK(g_mem_alloc == 6 && g_mem_free == 6, "graph memory records alloc %d free %d", g_mem_alloc, g_mem_free);

    CK(cudaGraphExecDestroy(eauto));
    CK(cudaGraphExecDestroy(em));
    CK(cudaGraphExecDestroy(ec));
    CK(cudaGraphExecDestroy(e));
    CK(cudaGraphDestroy(gk));
    CK(cudaGraphDestroy(gm));
    CK(cudaGraphDestroy(g4));
    CK(cudaGraphDestroy(g3));
    CK(cudaGraphDestroy(gc));
    CK(cudaGraphDestroy(other));
    CK(cudaGraphDestroy(g));
    printf("graph_api: launches=%d kernels=%d truth_agree=%d graph_copies=%d graph_memsets=%d host_calls=%d "
           "mem_records=%d/%d failures=%d\n",
           g_nl, g_nk, agree, g_ncopy_graph, g_nset_graph, g_host_calls, g_mem_alloc, g_mem_free, st_failures);
    return st_failures ? 1 : 0;
}
