/*
 * nvml_topology.c - the simulated NVML's topology queries (signatures as in NVIDIA's nvml.h):
 * nvmlDeviceGetPciInfo_v3, nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkVersion,
 * nvmlDeviceGetTopologyCommonAncestor, nvmlDeviceGetP2PStatus.
 *
 * Model: device i has PCI bus id 00000000:<0x10+i>:00.0. The devices form groups of
 * SIMGPU_RANKS_PER_NODE (default devices / SIMGPU_NODES), one group per simulated node: within a
 * group the GPUs are NVLinked (P2P NVLink OK, common ancestor NODE), across groups SYS and no
 * NVLink. Each GPU has SIMGPU_NVLINKS active links (default SIMGPU_LINK_GBPS / 25 GB/s, 1-18) of
 * version SIMGPU_NVLINK_VERSION (nvmlNvlinkVersion_t, default 6 = NVLink 4.0, 25 GB/s a link).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simgpu_core.h"

#define NX __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3 };
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;
typedef enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;
typedef enum { NVML_P2P_CAPS_INDEX_NVLINK = 2 } nvmlGpuP2PCapsIndex_t;
typedef enum { NVML_P2P_STATUS_OK = 0, NVML_P2P_STATUS_NOT_SUPPORTED = 5 } nvmlGpuP2PStatus_t;

/* nvml.c: the index of a handle (-1: not ours or not initialised). */
int sg_nvml_index(nvmlDevice_t d);

static double env_num(const char *name, double def)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end;
    double d = strtod(v, &end);
    return end != v ? d : def;
}

static int group_of(int idx)
{
    int n = sg_device_count();
    int nodes = (int)env_num("SIMGPU_NODES", 1);
    if (nodes < 1) nodes = 1;
    int per = (int)env_num("SIMGPU_RANKS_PER_NODE", (n + nodes - 1) / nodes);
    return per > 0 ? idx / per : 0;
}

static unsigned active_links(void)
{
    double def = sg_link_gbps() / 25.0 + 0.5;
    int n = (int)env_num("SIMGPU_NVLINKS", def);
    return n < 1 ? 1 : n > 18 ? 18 : (unsigned)n;
}

NX nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    int i = sg_nvml_index(device);
    if (i < 0 || !pci) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->bus = 0x10u + ((unsigned)i & 0xefu);
    pci->pciDeviceId = 0x233010deu;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus & 0xffu);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus & 0xffu);
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
    if (sg_nvml_index(device) < 0 || !isActive || link >= 18) return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = link < active_links() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link, unsigned int *version)
{
    if (sg_nvml_index(device) < 0 || !version || link >= 18) return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= active_links()) return NVML_ERROR_NOT_SUPPORTED;
    *version = (unsigned)env_num("SIMGPU_NVLINK_VERSION", 6);
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                    nvmlGpuTopologyLevel_t *pathInfo)
{
    int a = sg_nvml_index(device1), b = sg_nvml_index(device2);
    if (a < 0 || b < 0 || !pathInfo) return NVML_ERROR_INVALID_ARGUMENT;
    *pathInfo = a == b ? NVML_TOPOLOGY_INTERNAL : group_of(a) == group_of(b) ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM;
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
                                       nvmlGpuP2PStatus_t *p2pStatus)
{
    int a = sg_nvml_index(device1), b = sg_nvml_index(device2);
    if (a < 0 || b < 0 || !p2pStatus) return NVML_ERROR_INVALID_ARGUMENT;
    if (p2pIndex != NVML_P2P_CAPS_INDEX_NVLINK) {
        *p2pStatus = a != b ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
        return NVML_SUCCESS;
    }
    *p2pStatus = a != b && group_of(a) == group_of(b) ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    return NVML_SUCCESS;
}
