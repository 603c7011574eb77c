/* plugin_loop LIB N [PROXY]: drives the NCCL profiler plugin in LIB through its ncclProfiler_v6
 * table as NCCL does for N all-reduces with 8 channels (API event, group, task, 8 kernel channels
 * with GPU timers; with PROXY=1 also 2 proxy operations per channel of 4 steps each, the pid read
 * once as NCCL reads it) and prints the
 * ns of this thread's CPU time per collective (CPU time, not wall time: the figure holds on a loaded
 * machine), then the wall-clock ns. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../../tests/simgpu/src/nccl_profiler_abi.h"

static double now_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    void *lib = dlopen(argv[1], RTLD_NOW);
    sgp_profiler_v6 *p = lib ? dlsym(lib, "ncclProfiler_v6") : NULL;
    if (!p) {
        fprintf(stderr, "plugin_loop: no ncclProfiler_v6 in %s\n", argv[1]);
        return 1;
    }
    long n = atol(argv[2]);
    int proxy = argc > 3 && atoi(argv[3]);
    void *ctx = NULL;
    int mask = 0;
    p->init(&ctx, 0x1234, &mask, "bench", 2, 8, 0, NULL);
    pid_t pid = getpid(); /* NCCL reads it once, when it loads the plugin */
    double t0 = now_ns(CLOCK_THREAD_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);
    for (long i = 0; i < n; i++) {
        sgp_descr_v6 d = {0};
        void *api = NULL, *group = NULL, *task = NULL;
        d.type = SGP_COLL_API;
        d.collApi.func = "AllReduce";
        d.collApi.count = 262144;
        d.collApi.datatype = "ncclFloat32";
        if (mask & SGP_COLL_API) p->startEvent(ctx, &api, &d);
        d = (sgp_descr_v6){0};
        d.type = SGP_GROUP;
        p->startEvent(ctx, &group, &d);
        d = (sgp_descr_v6){0};
        d.type = SGP_COLL;
        d.parentObj = api;
        d.coll.seqNumber = (uint64_t)i;
        d.coll.func = "AllReduce";
        d.coll.count = 262144;
        d.coll.datatype = "ncclFloat32";
        d.coll.nChannels = 8;
        d.coll.nWarps = 16;
        d.coll.algo = "RING";
        d.coll.proto = "SIMPLE";
        d.coll.parentGroup = group;
        p->startEvent(ctx, &task, &d);
        p->stopEvent(task);
        if (group) p->stopEvent(group);
        if (api) p->stopEvent(api);
        for (int ch = 0; ch < 8 && proxy && (mask & SGP_PROXY_OP); ch++)
            for (int s = 0; s < 2; s++) {
                void *op = NULL;
                d = (sgp_descr_v6){0};
                d.type = SGP_PROXY_OP;
                d.parentObj = task;
                d.proxyOp.pid = pid;
                d.proxyOp.channelId = (uint8_t)ch;
                d.proxyOp.peer = 1;
                d.proxyOp.nSteps = 4;
                d.proxyOp.isSend = s;
                p->startEvent(ctx, &op, &d);
                for (int k = 0; k < 4; k++) {
                    void *st = NULL;
                    d = (sgp_descr_v6){0};
                    d.type = SGP_PROXY_STEP;
                    d.parentObj = op;
                    d.proxyStep.step = k;
                    p->startEvent(ctx, &st, &d);
                    sgp_args_v6 a = {.proxyStep = {32768}};
                    p->recordEventState(st, s ? SGP_STEP_SEND_WAIT : SGP_STEP_RECV_WAIT, &a);
                    p->stopEvent(st);
                }
                p->stopEvent(op);
            }
        for (int ch = 0; ch < 8 && (mask & SGP_KERNEL_CH); ch++) {
            void *h = NULL;
            d = (sgp_descr_v6){0};
            d.type = SGP_KERNEL_CH;
            d.parentObj = task;
            d.kernelCh.channelId = (uint8_t)ch;
            d.kernelCh.pTimer = 1000 + (uint64_t)i;
            p->startEvent(ctx, &h, &d);
            sgp_args_v6 a = {.kernelCh = {2000 + (uint64_t)i}};
            p->recordEventState(h, SGP_KERNEL_CH_STOP, &a);
            p->stopEvent(h);
        }
    }
    double ns = (now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)n;
    double wall = (now_ns(CLOCK_MONOTONIC) - w0) / (double)n;
    p->finalize(ctx);
    printf("%.1f %.1f\n", ns, wall);
    return 0;
}
