/* hang: deferred kernels (the NCCL hook). Everything behind one waits until it resolves; a forked
 * child that exits with one unresolved writes it as an unfinished collective. */
#include "st_common.h"
#include "simgpu_core.h"
#include <cupti.h>
#include <pthread.h>
#include <sys/wait.h>

static volatile int g_release;
static int poll_fn(void *arg, uint64_t start, uint64_t *end)
{
    (void)arg;
    if (!g_release) return 0;
    *end = start + 50000;
    return 1;
}
static void k(void) {}

int main(int argc, char **argv)
{
    (void)argc;
    st_register((const void *)k, "_Z6after_kv");
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    sg_stream *ss = sg_stream_resolve(s, 0);
    CHECK(ss && sg_stream_id(ss) == 13, "stream id");
    sg_api_call c;
    sg_api_enter(&c, SG_DOMAIN_DRIVER, "cuLaunchKernelEx", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", NULL);
    sg_kernel_desc kd = {.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL", .grid = {1, 1, 1}, .block = {512, 1, 1},
                         .correlation = c.correlation};
    sg_collective_desc cd = {.op = "AllReduce", .comm = "0xabc", .seq = 1, .bytes = 1 << 20, .nranks = 2};
    sg_op *op = sg_enqueue_deferred_kernel(ss, &kd, poll_fn, NULL, &cd);
    sg_api_exit(&c, 0);
    CK(cudaLaunchKernel((const void *)k, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, s));
    usleep(20000);
    CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "stream must wait on the collective");
    uint64_t st0, en0;
    CHECK(sg_op_state(op, &st0, &en0) == 1, "started, unresolved");
    g_release = 1;
    CK(cudaStreamSynchronize(s));
    CHECK(sg_op_state(op, &st0, &en0) == 2 && en0 == st0 + 50000, "resolved");
    sg_op_release(op);
    /* push-style resolution from another thread */
    sg_op *op2 = sg_enqueue_deferred_kernel(ss, &kd, NULL, NULL, &cd);
    uint64_t t0 = st_now();
    sg_op_resolve(op2, t0 + 3000000);
    CK(cudaStreamSynchronize(s));
    CHECK(st_now() >= t0 + 3000000, "waited for the pushed end");
    sg_op_release(op2);
    CK(cuptiActivityFlushAll(0));
    st_truth t = st_truth_load();
    int coll = 0, nccl_k = 0;
    long long coll_end = 0, after_start = 0;
    for (int i = 0; i < t.n; i++) {
        if (st_is(t.lines[i], "collective")) {
            coll++;
            if (!coll_end) coll_end = st_num(t.lines[i], "end_ns");
        }
        if (st_is(t.lines[i], "kernel") && strstr(t.lines[i], "ncclDevKernel")) nccl_k++;
        if (st_is(t.lines[i], "kernel") && strstr(t.lines[i], "after_k")) after_start = st_num(t.lines[i], "start_ns");
    }
    CHECK(coll == 2 && nccl_k == 2, "collective lines %d, nccl kernels %d", coll, nccl_k);
    CHECK(after_start >= coll_end && coll_end > 0, "kernel behind the collective started at %lld < %lld", after_start, coll_end);
    /* a child that exits with an unresolved collective */
    pid_t pid = fork();
    if (pid == 0) {
        sg_stream *cs = sg_stream_resolve(s, 0);
        sg_op *h = sg_enqueue_deferred_kernel(cs, &kd, NULL, NULL, &cd);
        (void)h;
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/truth-%d.jsonl", argv[1] ? argv[1] : ".", (int)pid);
    FILE *f = fopen(path, "r");
    int unfinished = 0, child_process = 0;
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (st_is(line, "collective") && strstr(line, "\"end_ns\":null,\"unfinished\":true")) unfinished++;
        if (st_is(line, "process")) child_process++;
    }
    if (f) fclose(f);
    CHECK(unfinished == 1 && child_process == 1, "child truth: unfinished %d, process %d (%s)", unfinished, child_process, path);
    printf("hang: collectives=%d unfinished_in_child=%d blocked_until_resolved=1 failures=%d\n", coll, unfinished,
           st_failures);
    return st_failures ? 1 : 0;
}
