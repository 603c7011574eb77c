/* props.c - cudaGetDeviceProperties in the cudaDeviceProp layout of the CUDA version it is
 * compiled against (CUDA 12.9 headers for libcudart.so.12, CUDA 13 headers for .so.13). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <string.h>
#include <stdio.h>
#include "simgpu_core.h"
#include "cudart_internal.h"

int sg_cudart_version(void) { return CUDART_VERSION; }

static cudaError_t fill(struct cudaDeviceProp *p, int dev)
{
    if (!p) return cudaErrorInvalidValue;
    if (dev < 0 || dev >= sg_device_count()) return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (simulated)");
    for (int i = 0; i < 16; i++) p->uuid.bytes[i] = (char)(0x50 + i + dev * 16);
    p->totalGlobalMem = (size_t)sg_device_capacity(dev);
    p->sharedMemPerBlock = 49152;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->multiProcessorCount = 132;
    p->integrated = 0;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 1;
    p->pciBusID = 0x18 + dev;
    p->asyncEngineCount = 3;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 52428800;
    p->maxThreadsPerMultiProcessor = 2048;
    p->sharedMemPerMultiprocessor = 233472;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->concurrentManagedAccess = 1;
    p->cooperativeLaunch = 1;
    p->sharedMemPerBlockOptin = 232448;
    p->maxBlocksPerMultiProcessor = 32;
    p->memoryPoolsSupported = 1;
    return cudaSuccess;
}

#ifdef SG_CUDA13
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev)
{
    sg_api_call c;
    sg_api_enter(&c, SG_DOMAIN_RUNTIME, "cudaGetDeviceProperties_v2", NULL, NULL);
    cudaError_t e = fill(p, dev);
    sg_api_exit(&c, e);
    return e;
}
#else
cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *p, int dev)
{
    sg_api_call c;
    sg_api_enter(&c, SG_DOMAIN_RUNTIME, "cudaGetDeviceProperties_v2", NULL, NULL);
    cudaError_t e = fill(p, dev);
    sg_api_exit(&c, e);
    return e;
}
#endif
