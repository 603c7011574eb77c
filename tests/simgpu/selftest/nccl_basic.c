/* nccl_basic.c - single-process checks of the mock libnccl.so.2: version, errors, ncclCommInitAll
 * over several devices, init inside a group, pnccl aliases, async error switch, and a stale
 * segment (a "crashed" previous run with the same unique id) that must not confuse a new run. */
#include "st_common.h"
#include "nccl_internal.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <fcntl.h>

int main(void)
{
    int v = 0;
    CK(ncclGetVersion(&v));
    CHECK(v == NCCL_VERSION_CODE, "version %d", v);
    CHECK(strstr(ncclGetErrorString(ncclRemoteError), "remote") != NULL, "error string");

    /* PROFAPI aliases: pncclX is the same function as ncclX */
    void *self = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    CHECK(self && dlsym(self, "pncclAllReduce") == dlsym(self, "ncclAllReduce"), "pnccl aliases");

    /* ncclCommInitAll: 3 communicators on devices 0..2, one process */
    ncclComm_t comms[3];
    CK(ncclCommInitAll(comms, 3, NULL));
    cudaStream_t s[3];
    for (int i = 0; i < 3; i++) {
        int d = -1, r = -1, n = -1;
        CK(ncclCommCuDevice(comms[i], &d));
        CK(ncclCommUserRank(comms[i], &r));
        CK(ncclCommCount(comms[i], &n));
        CHECK(d == i && r == i && n == 3, "comm %d: device %d rank %d count %d", i, d, r, n);
        cudaSetDevice(i);
        CK(cudaStreamCreate(&s[i]));
    }
    CK(ncclGroupStart());
    for (int i = 0; i < 3; i++) CK(ncclAllReduce(NULL, NULL, 1 << 20, ncclFloat32, ncclSum, comms[i], s[i]));
    CK(ncclGroupEnd());
    uint64_t t0 = st_now();
    for (int i = 0; i < 3; i++) {
        cudaSetDevice(i);
        CK(cudaStreamSynchronize(s[i]));
    }
    CHECK(st_now() - t0 < 2000000000ull, "InitAll all-reduce finished");
    CHECK(ncclAllReduce(NULL, NULL, 4, (ncclDataType_t)99, ncclSum, comms[0], s[0]) == ncclInvalidArgument,
          "bad datatype");
    CHECK(ncclSend(NULL, 4, ncclFloat32, 7, comms[0], s[0]) == ncclInvalidArgument, "bad peer");
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "GroupEnd outside a group");

    /* CUDA graphs: one all-reduce per communicator captured (a group, each stream its own capture),
     * each graph launched twice: 6 kernels run, with graph ids; a group mixing a captured and an
     * uncaptured stream on one communicator is refused (ncclInvalidUsage), as NCCL does */
    cudaStream_t plain;
    cudaSetDevice(0);
    CK(cudaStreamCreate(&plain));
    for (int i = 0; i < 3; i++) CK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeRelaxed));
    CK(ncclGroupStart());
    for (int i = 0; i < 3; i++) CK(ncclAllReduce(NULL, NULL, 1 << 20, ncclFloat32, ncclSum, comms[i], s[i]));
    CHECK(ncclAllReduce(NULL, NULL, 1 << 20, ncclFloat32, ncclSum, comms[0], plain) == ncclInvalidUsage,
          "captured and uncaptured streams in one group");
    CK(ncclGroupEnd());
    cudaGraphExec_t ge[3];
    for (int i = 0; i < 3; i++) {
        cudaGraph_t g;
        CK(cudaStreamEndCapture(s[i], &g));
        CK(cudaGraphInstantiate(&ge[i], g, 0));
        CK(cudaGraphDestroy(g));
    }
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(ge[i], s[i]));
    for (int i = 0; i < 3; i++) {
        cudaSetDevice(i);
        CK(cudaStreamSynchronize(s[i]));
        CK(cudaGraphExecDestroy(ge[i]));
    }
    for (int i = 0; i < 3; i++) CK(ncclCommDestroy(comms[i]));

    /* async error switch (this process has SIMGPU_NCCL_ASYNC_ERROR_AT=1 set by run script) */
    setenv("SIMGPU_NCCL_ASYNC_ERROR_AT", "1", 1);
    ncclUniqueId id;
    CK(ncclGetUniqueId(&id));
    ncclComm_t c1;
    CK(ncclCommInitRank(&c1, 1, id, 0));
    ncclResult_t ae = ncclInternalError;
    CK(ncclCommGetAsyncError(c1, &ae));
    CHECK(ae == ncclSuccess, "no async error before seq 1: %d", ae);
    cudaSetDevice(0);
    CK(ncclAllReduce(NULL, NULL, 256, ncclFloat32, ncclSum, c1, NULL));
    CK(ncclAllReduce(NULL, NULL, 256, ncclFloat32, ncclSum, c1, NULL));
    CK(ncclCommGetAsyncError(c1, &ae));
    CHECK(ae == ncclRemoteError, "async error after seq 1: %d", ae);
    CHECK(strlen(ncclGetLastError(c1)) > 0, "last error set");
    CK(cudaDeviceSynchronize());
    CK(ncclCommDestroy(c1));
    unsetenv("SIMGPU_NCCL_ASYNC_ERROR_AT");

    /* stale segment: a previous run with the same id crashed after joining (rank 0 of 2) */
    CK(ncclGetUniqueId(&id));
    pid_t p = fork();
    if (p == 0) {
        ncclComm_t c;
        /* joins inside a group (no barrier), then dies without leaving */
        ncclGroupStart();
        ncclCommInitRank(&c, 2, id, 0);
        _exit(0);
    }
    int st;
    waitpid(p, &st, 0);
    /* the new run: ranks 0 and 1 from this process, initialised in a group on two devices */
    ncclComm_t n2[2];
    CK(ncclGroupStart());
    for (int r = 0; r < 2; r++) {
        cudaSetDevice(r);
        CK(ncclCommInitRank(&n2[r], 2, id, r));
    }
    setenv("SIMGPU_NCCL_INIT_TIMEOUT_S", "5", 1);
    CK(ncclGroupEnd());
    for (int r = 0; r < 2; r++) {
        cudaSetDevice(r);
        CK(ncclBroadcast(NULL, NULL, 1000, ncclInt8, 0, n2[r], NULL));
    }
    for (int r = 0; r < 2; r++) {
        cudaSetDevice(r);
        CK(cudaDeviceSynchronize());
    }
    sgn_id sid;
    memcpy(&sid, id.internal, sizeof sid);
    for (int r = 0; r < 2; r++) CK(ncclCommDestroy(n2[r]));
    int fd = shm_open(sid.shm_name, O_RDONLY, 0);
    CHECK(fd < 0, "the last rank out removes %s", sid.shm_name);
    if (fd >= 0) close(fd);

    /* init timeout: 2 ranks, only one comes */
    setenv("SIMGPU_NCCL_INIT_TIMEOUT_S", "0.3", 1);
    CK(ncclGetUniqueId(&id));
    ncclComm_t lone = NULL;
    CHECK(ncclCommInitRank(&lone, 2, id, 1) == ncclSystemError, "init timeout -> ncclSystemError");
    CHECK(strstr(ncclGetLastError(NULL), "SIMGPU_NCCL_INIT_TIMEOUT_S") != NULL, "%s", ncclGetLastError(NULL));

    /* ground truth: 3 + 3 x 2 (graph replays) + 2 + 2 collectives, one kernel each, same comm on the
     * ranks of a communicator */
    st_truth t = st_truth_load();
    int colls = 0, kernels = 0, graphed = 0;
    for (int i = 0; i < t.n; i++) {
        if (st_is(t.lines[i], "collective")) colls++;
        if (st_is(t.lines[i], "kernel") && strstr(t.lines[i], "ncclDevKernel_")) {
            kernels++;
            graphed += strstr(t.lines[i], "\"graph_id\"") != NULL;
        }
    }
    if (getenv("SIMGPU_TRUTH")) {
        CHECK(colls == 13, "%d collective lines", colls);
        CHECK(kernels == 13 && graphed == 6, "%d NCCL kernels, %d from graphs", kernels, graphed);
    }
    if (st_failures) return 1;
    printf("nccl_basic ok: %d collectives\n", colls);
    return 0;
}
