/* cudart_profiler.c - mock CUDA runtime: cudaProfilerStart / cudaProfilerStop (cuda_profiler_api.h).
 *
 * They mark the range a profiler should collect (Nsight Systems' cudaProfilerApi capture range); the
 * runtime itself keeps running everything, and CUPTI keeps recording (activity collection does not
 * depend on them): each call is an API call like any other, always cudaSuccess (calling start twice is
 * no error since CUDA 5.0). Ground truth: a `profiler` line with `op` "start" / "stop", the calling
 * thread's device and the call's correlation id, at the call's time. */
#include <stdio.h>

#include "cudart_internal.h"

static cudaError_t profiler_mark(const char *api, const char *op)
{
    sg_rt_init();
    API(api, NULL);
    char fields[32];
    snprintf(fields, sizeof fields, "\"op\":\"%s\"", op);
    sg_truth_host_line("profiler", sg_current_device(), -1, _c.correlation, fields);
    RET(cudaSuccess);
}

cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStart(void) { return profiler_mark("cudaProfilerStart", "start"); }
cudaError_t cudaProfilerStop(void);
cudaError_t cudaProfilerStop(void) { return profiler_mark("cudaProfilerStop", "stop"); }
