/* cudart_access.c - mock CUDA runtime: which memory a device may address directly. Peer access between
 * devices (cudaDeviceCanAccessPeer, cudaDeviceEnablePeerAccess / DisablePeerAccess) and mapped pinned
 * host memory (cudaHostGetDevicePointer).
 *
 * Every pair of distinct simulated devices can access each other (NVLink-connected H100s). Access is
 * granted per (current device, peer), one direction, process-wide, as CUDA's: enabling it twice is
 * cudaErrorPeerAccessAlreadyEnabled, disabling it when not enabled cudaErrorPeerAccessNotEnabled, the
 * current device itself or a device out of range cudaErrorInvalidDevice; cudaDeviceReset of either
 * device revokes it. Copies between devices are peer-to-peer copies (PtoP) with or without it.
 * All devices support unified addressing and can use host pointers for registered memory, so every
 * pinned allocation (cudaMallocHost, cudaHostAlloc, cudaHostRegister) is mapped and its device pointer
 * is the host pointer itself, interior pointers included. */
#include <string.h>

#include "cudart_internal.h"

static unsigned char g_peer[SG_MAX_DEVICES][SG_MAX_DEVICES]; /* [device][peer]: access enabled */
static pthread_mutex_t g_peer_lock = PTHREAD_MUTEX_INITIALIZER;

static int valid_device(int d) { return d >= 0 && d < sg_device_count(); }

cudaError_t cudaDeviceCanAccessPeer(int *can, int dev, int peer)
{
    sg_rt_init();
    API("cudaDeviceCanAccessPeer", NULL);
    if (!can) RET(cudaErrorInvalidValue);
    if (!valid_device(dev) || !valid_device(peer)) RET(cudaErrorInvalidDevice);
    *can = dev != peer;
    RET(cudaSuccess);
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    sg_rt_init();
    API("cudaDeviceEnablePeerAccess", NULL);
    int dev = sg_current_device();
    if (!valid_device(peer) || peer == dev) RET(cudaErrorInvalidDevice);
    if (flags) RET(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_peer_lock);
    int was = g_peer[dev][peer];
    g_peer[dev][peer] = 1;
    pthread_mutex_unlock(&g_peer_lock);
    RET(was ? cudaErrorPeerAccessAlreadyEnabled : cudaSuccess);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
    sg_rt_init();
    API("cudaDeviceDisablePeerAccess", NULL);
    int dev = sg_current_device();
    if (!valid_device(peer)) RET(cudaErrorInvalidDevice);
    pthread_mutex_lock(&g_peer_lock);
    int was = g_peer[dev][peer];
    g_peer[dev][peer] = 0;
    pthread_mutex_unlock(&g_peer_lock);
    RET(was ? cudaSuccess : cudaErrorPeerAccessNotEnabled);
}

void sg_rt_peer_reset(int dev)
{
    if (!valid_device(dev)) return;
    pthread_mutex_lock(&g_peer_lock);
    for (int i = 0; i < SG_MAX_DEVICES; i++) g_peer[dev][i] = g_peer[i][dev] = 0;
    pthread_mutex_unlock(&g_peer_lock);
}

cudaError_t cudaHostGetDevicePointer(void **pdev, void *host, unsigned flags)
{
    sg_rt_init();
    API("cudaHostGetDevicePointer", NULL);
    if (!pdev || flags) RET(cudaErrorInvalidValue);
    mem_ent e;
    if (!host || !sg_mem_find(host, &e) || sg_mem_kind_is_device(e.kind)) RET(cudaErrorInvalidValue);
    *pdev = host;
    RET(cudaSuccess);
}
