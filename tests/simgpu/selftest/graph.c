/* graph: capture kernels + memset, instantiate, launch 3 times; records carry graphId/graphNodeId. */
#include "st_common.h"
#include <cupti.h>

static CUpti_ActivityKernel9 g_k[256];
static int g_nk, g_nset_graph;
static uint32_t g_launch_corr[8];
static int g_nl;
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 16); *s = 1 << 16; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g_nk < 256) g_k[g_nk++] = *(CUpti_ActivityKernel9 *)r;
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET && ((CUpti_ActivityMemset4 *)r)->graphId) g_nset_graph++;
        if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME && ((CUpti_ActivityAPI *)r)->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 && g_nl < 8)
            g_launch_corr[g_nl++] = ((CUpti_ActivityAPI *)r)->correlationId;
    }
    free(b);
}
static void k1(void) {}
static void k2(void) {}

int main(void)
{
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
    st_register((const void *)k1, "_Z10graph_gemmv");
    st_register((const void *)k2, "_Z13graph_softmaxv");
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *d;
    CK(cudaMalloc(&d, 1 << 20));
    enum cudaStreamCaptureStatus cs;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CK(cudaStreamIsCapturing(s, &cs));
    CHECK(cs == cudaStreamCaptureStatusActive, "capturing");
    for (int i = 0; i < 4; i++)
        CK(cudaLaunchKernel((const void *)(i % 2 ? k2 : k1), (dim3){8, 1, 1}, (dim3){128, 1, 1}, NULL, 0, s));
    CK(cudaMemsetAsync(d, 0, 1 << 20, s));
    cudaGraph_t g;
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaStreamIsCapturing(s, &cs));
    CHECK(cs == cudaStreamCaptureStatusNone, "not capturing");
    CK(cudaStreamSynchronize(s));
    CK(cuptiActivityFlushAll(0));
    CHECK(g_nk == 0, "captured kernels must not run (%d)", g_nk);
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    CK(cuptiActivityFlushAll(0));
    int with_graph = 0, corr_ok = 0;
    uint64_t node_ids[4] = {0};
    for (int i = 0; i < g_nk; i++) {
        if (g_k[i].graphId) with_graph++;
        for (int j = 0; j < g_nl; j++) corr_ok += g_k[i].correlationId == g_launch_corr[j];
        if (i < 4) node_ids[i] = g_k[i].graphNodeId;
    }
    CHECK(g_nk == 12 && with_graph == 12, "graph kernels %d/%d", with_graph, g_nk);
    CHECK(g_nl == 3 && corr_ok == 12, "kernels with a cudaGraphLaunch correlation %d (launches %d)", corr_ok, g_nl);
    CHECK(g_nset_graph == 3, "graph memsets %d", g_nset_graph);
    CHECK(node_ids[0] && node_ids[0] != node_ids[1] && g_k[4].graphNodeId == node_ids[0], "node ids");
    CK(cudaGraphExecDestroy(e));
    CK(cudaGraphDestroy(g));
    printf("graph: launches=%d kernels=%d with_graph_id=%d memsets=%d failures=%d\n", g_nl, g_nk, with_graph,
           g_nset_graph, st_failures);
    return st_failures ? 1 : 0;
}
