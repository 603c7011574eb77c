/* inject_probe.c - a CUDA injection library for the `inject` selftest (libinject_probe.so):
 * counts InitializeInjection calls and, from inside it, calls back into the driver and the
 * runtime (what tools such as tprof do there), which must neither deadlock nor inject again. */
#include <cuda.h>
#include <cuda_runtime_api.h>

int probe_calls;         /* InitializeInjection calls */
int probe_devices = -1;  /* cudaGetDeviceCount from inside InitializeInjection */
int probe_reinit = -1;   /* cuInit from inside InitializeInjection */

int InitializeInjection(void);
int InitializeInjection(void)
{
    probe_calls++;
    probe_reinit = (int)cuInit(0);
    int n = -1;
    if (cudaGetDeviceCount(&n) == cudaSuccess) probe_devices = n;
    return 1;
}
