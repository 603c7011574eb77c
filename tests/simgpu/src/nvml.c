/*
 * nvml.c - mock libnvidia-ml.so.1 on the simulated GPU core.
 *
 * Every figure comes from the core's shared-memory device counters (simgpu_core.h), which every
 * process of the session (SIMGPU_SESSION) updates as its ops complete, so another process's
 * kernels count, as on a real GPU. Declarations are written from the public NVML API (nvml.h);
 * GPM structs as in CUDA_FACTS.md section 7.
 *
 * Derivations (the counters have busy/kernel/tensor time and byte counts, no per-SM data):
 *   utilization.gpu   = device busy time (kernels, copies, memsets) / wall time since the previous
 *                       call on that device in this process (first call: since nvmlInit)
 *   utilization.memory= DRAM_BW_UTIL below
 *   SM_UTIL (2)       = union of kernel intervals / interval (older counters without it: kernel
 *                       time capped by busy time);  GRAPHICS_UTIL (1) = busy / interval
 *   SM_OCCUPANCY (3)  = per-kind resident-warp fractions x kernel time / interval, capped by SM_UTIL:
 *                       tensor 0.35 (register/smem-heavy tiles), memory-bound 0.85 (softmax, norms,
 *                       elementwise: many small blocks), NCCL 0.10 (one block per channel on a few
 *                       SMs), other kernels 0.50
 *   ANY_TENSOR_UTIL (5), HMMA (7) = gemm/matmul/cutlass/xmma/flash/attention/fmha kernel time / interval
 *   FP32_UTIL (12)    = non-tensor kernel time (NCCL reductions included) / interval
 *   DRAM_BW_UTIL (10) = (DtoD/memset bytes / peak 3350 GB/s + 0.9 x memory-bound kernel time
 *                       + 0.4 x other kernel time + 0.3 x NCCL kernel time + 0.15 x tensor kernel
 *                       time) / interval
 *   PCIE_TX/RX (20/21)= DtoH / HtoD bytes per second, MiB/s
 *   NVLINK_TOTAL_RX/TX (60/61) = peer copies + collective bus bytes (added by the NCCL mock), MiB/s
 * Percentages are capped at 100. SIMGPU_GPM=0: GPM unsupported (the basic queries still work).
 */
#define _GNU_SOURCE
#include "simgpu_core.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#define NX __attribute__((visibility("default")))

typedef enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 } nvmlClockType_t;
typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

/* GPM */
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct {
        char *shortName;
        char *longName;
        char *unit;
    } metricInfo;
} nvmlGpmMetric_t;
typedef struct {
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[333]; /* NVML_GPM_METRIC_MAX of recent headers; only numMetrics are touched */
} nvmlGpmMetricsGet_t;
typedef struct { unsigned int version; unsigned int isSupportedDevice; } nvmlGpmSupport_t;
#define NVML_GPM_METRICS_GET_VERSION 1
#define NVML_GPM_SUPPORT_VERSION 1
#define NVML_GPM_METRIC_MAX 333

/* ------------------------------------------------------------------ state */

struct nvmlDevice_st {
    unsigned index;
};
static struct nvmlDevice_st g_devs[SG_MAX_DEVICES];
static int g_init_count;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* utilization: the previous reading per device */
static uint64_t g_util_t[SG_MAX_DEVICES];
static sg_device_counters g_util_c[SG_MAX_DEVICES];
static unsigned g_last_gpu_pct[SG_MAX_DEVICES];

static int inited(void) { return __atomic_load_n(&g_init_count, __ATOMIC_ACQUIRE) > 0; }

static int dev_index(nvmlDevice_t d)
{
    if (!d || d < g_devs || d >= g_devs + sg_device_count()) return -1;
    return (int)(d - g_devs);
}

#define NEED_INIT()                                                                                            \
    do {                                                                                                       \
        if (!inited()) return NVML_ERROR_UNINITIALIZED;                                                        \
    } while (0)
#define NEED_DEV(d, idx)                                                                                       \
    NEED_INIT();                                                                                               \
    int idx = dev_index(d);                                                                                    \
    if (idx < 0) return NVML_ERROR_INVALID_ARGUMENT

static sg_device_counters *ctr(int idx)
{
    sg_counters_shm *s = sg_counters();
    return s ? &s->dev[idx] : NULL;
}
static uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

/* The counters this mock reads, as one snapshot. */
static void snapshot(const sg_device_counters *c, sg_device_counters *out)
{
    memset(out, 0, sizeof *out);
    if (!c) return;
    out->busy_ns = ld(&c->busy_ns);
    out->kernel_ns = ld(&c->kernel_ns);
    out->tensor_ns = ld(&c->tensor_ns);
    out->kernels = ld(&c->kernels);
    out->pcie_tx_bytes = ld(&c->pcie_tx_bytes);
    out->pcie_rx_bytes = ld(&c->pcie_rx_bytes);
    out->nvlink_tx_bytes = ld(&c->nvlink_tx_bytes);
    out->nvlink_rx_bytes = ld(&c->nvlink_rx_bytes);
    out->dram_bytes = ld(&c->dram_bytes);
    out->kernel_busy_ns = ld(&c->kernel_busy_ns);
    out->membound_ns = ld(&c->membound_ns);
    out->nccl_ns = ld(&c->nccl_ns);
    out->copy_ns = ld(&c->copy_ns);
}

static void util_baseline_locked(int i)
{
    g_util_t[i] = sg_now_ns();
    snapshot(ctr(i), &g_util_c[i]);
}

static double pct(double x)
{
    if (x < 0) return 0;
    return x > 100.0 ? 100.0 : x;
}

/* What happened between two snapshots, in ns (bytes for dram). */
typedef struct {
    double busy, kern, kbusy, tensor, membound, nccl, other, dram_bytes;
} deltas;
static deltas delta(const sg_device_counters *a, const sg_device_counters *b)
{
#define DD(f) ((double)(b->f >= a->f ? b->f - a->f : 0))
    deltas d = {DD(busy_ns), DD(kernel_ns), DD(kernel_busy_ns), DD(tensor_ns), DD(membound_ns), DD(nccl_ns), 0,
                DD(dram_bytes)};
#undef DD
    d.other = d.kern - d.tensor - d.membound - d.nccl;
    if (d.other < 0) d.other = 0;
    return d;
}

#define DRAM_PEAK_BYTES_PER_NS 3350.0 /* H100 SXM HBM3 3.35 TB/s */
static double dram_pct(const deltas *d, double interval)
{
    if (interval <= 0) return 0;
    double ns = d->dram_bytes / DRAM_PEAK_BYTES_PER_NS + 0.9 * d->membound + 0.4 * d->other + 0.3 * d->nccl +
                0.15 * d->tensor;
    return pct(100.0 * ns / interval);
}
static double sm_pct(const deltas *d, double interval)
{
    if (interval <= 0) return 0;
    double k = d->kbusy > 0 ? d->kbusy : (d->kern < d->busy ? d->kern : d->busy);
    return pct(100.0 * k / interval);
}
static double occupancy_pct(const deltas *d, double interval)
{
    if (interval <= 0) return 0;
    double o = pct(100.0 * (0.35 * d->tensor + 0.85 * d->membound + 0.10 * d->nccl + 0.5 * d->other) / interval);
    double sm = sm_pct(d, interval);
    return o < sm ? o : sm;
}

/* ------------------------------------------------------------------ init */

NX nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    sg_init();
    pthread_mutex_lock(&g_lock);
    if (g_init_count++ == 0) {
        /* SIMGPU_NVML_INIT_MS: the first init takes this long (real NVML's first init on a node
         * with many GPUs takes hundreds of ms) */
        const char *ms = getenv("SIMGPU_NVML_INIT_MS");
        if (ms && atoi(ms) > 0) {
            struct timespec ts = {atoi(ms) / 1000, (long)(atoi(ms) % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0) {
            }
        }
        int n = sg_device_count();
        for (int i = 0; i < n; i++) {
            g_devs[i].index = (unsigned)i;
            util_baseline_locked(i);
        }
    }
    pthread_mutex_unlock(&g_lock);
    return NVML_SUCCESS;
}
NX nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
NX nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

NX nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&g_lock);
    nvmlReturn_t r = NVML_SUCCESS;
    if (g_init_count > 0)
        g_init_count--;
    else
        r = NVML_ERROR_UNINITIALIZED;
    pthread_mutex_unlock(&g_lock);
    return r;
}

NX const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t copy_str(char *dst, unsigned len, const char *src)
{
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    NEED_INIT();
    return copy_str(version, length, "580.65.06");
}
NX nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    NEED_INIT();
    return copy_str(version, length, "13.580.65.06");
}
NX nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    NEED_INIT();
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    *v = 13000;
    return NVML_SUCCESS;
}
NX nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

/* ------------------------------------------------------------------ devices */

NX nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    NEED_INIT();
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)sg_device_count();
    return NVML_SUCCESS;
}
NX nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

NX nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    NEED_INIT();
    if (!device || index >= (unsigned)sg_device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_devs[index];
    return NVML_SUCCESS;
}
NX nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

NX nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    NEED_DEV(device, i);
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)i;
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    NEED_DEV(device, i);
    (void)i;
    return copy_str(name, length, "NVIDIA H100 80GB HBM3 (simgpu)");
}

NX nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    NEED_DEV(device, i);
    char buf[96];
    snprintf(buf, sizeof buf, "GPU-5e1a6b00-0000-4000-8000-%012x", (unsigned)i);
    return copy_str(uuid, length, buf);
}

NX nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *m)
{
    NEED_DEV(device, i);
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    sg_device_counters *c = ctr(i);
    uint64_t total = sg_device_capacity(i);
    int64_t used = c ? __atomic_load_n(&c->mem_used_bytes, __ATOMIC_RELAXED) : (int64_t)sg_device_used(i);
    if (used < 0) used = 0;
    if ((uint64_t)used > total) used = (int64_t)total;
    m->total = total;
    m->used = (unsigned long long)used;
    m->free = total - (uint64_t)used;
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *m)
{
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlMemory_t v1;
    nvmlReturn_t r = nvmlDeviceGetMemoryInfo(device, &v1);
    if (r != NVML_SUCCESS) return r;
    m->total = v1.total;
    m->reserved = 0;
    m->used = v1.used;
    m->free = v1.free;
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u)
{
    NEED_DEV(device, i);
    if (!u) return NVML_ERROR_INVALID_ARGUMENT;
    sg_device_counters *c = ctr(i);
    if (!c) return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&g_lock);
    uint64_t now = sg_now_ns();
    sg_device_counters cur;
    snapshot(c, &cur);
    uint64_t dt = now - g_util_t[i];
    deltas d = delta(&g_util_c[i], &cur);
    double gpu = dt ? 100.0 * d.busy / (double)dt : 0;
    double mem = dram_pct(&d, (double)dt);
    util_baseline_locked(i);
    u->gpu = (unsigned)(pct(gpu) + 0.5);
    u->memory = (unsigned)(mem + 0.5);
    g_last_gpu_pct[i] = u->gpu;
    pthread_mutex_unlock(&g_lock);
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    NEED_DEV(device, i);
    (void)i;
    if (!clock) return NVML_ERROR_INVALID_ARGUMENT;
    switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM: *clock = 1980; break;
    case NVML_CLOCK_MEM: *clock = 2619; break;
    case NVML_CLOCK_VIDEO: *clock = 1545; break;
    default: return NVML_ERROR_INVALID_ARGUMENT;
    }
    return NVML_SUCCESS;
}

/* Power and temperature follow the last utilization reading of the device. */
NX nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *mw)
{
    NEED_DEV(device, i);
    if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
    *mw = 70000 + 6300 * __atomic_load_n(&g_last_gpu_pct[i], __ATOMIC_RELAXED);
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int *temp)
{
    NEED_DEV(device, i);
    if (!temp || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = 33 + __atomic_load_n(&g_last_gpu_pct[i], __ATOMIC_RELAXED) * 4 / 10;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ GPM */

#define SAMPLE_MAGIC 0x47504d53414d504cull
struct nvmlGpmSample_st {
    uint64_t magic;
    int device, valid;
    uint64_t t_ns;
    sg_device_counters c;
};

static int gpm_enabled(void)
{
    const char *v = getenv("SIMGPU_GPM");
    return !(v && !strcmp(v, "0"));
}

NX nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *s)
{
    NEED_DEV(device, i);
    (void)i;
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    if (s->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    s->isSupportedDevice = gpm_enabled() && sg_counters() != NULL;
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlGpmQueryIfStreamingEnabled(nvmlDevice_t device, unsigned int *state)
{
    NEED_DEV(device, i);
    (void)i;
    if (!state) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpm_enabled()) return NVML_ERROR_NOT_SUPPORTED;
    *state = 0;
    return NVML_SUCCESS;
}
NX nvmlReturn_t nvmlGpmSetStreamingEnabled(nvmlDevice_t device, unsigned int state)
{
    NEED_DEV(device, i);
    (void)i;
    (void)state;
    return gpm_enabled() ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

NX nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample)
{
    NEED_INIT();
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    struct nvmlGpmSample_st *s = calloc(1, sizeof(*s));
    if (!s) return NVML_ERROR_MEMORY;
    s->magic = SAMPLE_MAGIC;
    s->device = -1;
    *sample = s;
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample)
{
    NEED_INIT();
    if (!sample || sample->magic != SAMPLE_MAGIC) return NVML_ERROR_INVALID_ARGUMENT;
    sample->magic = 0;
    free(sample);
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample)
{
    NEED_DEV(device, i);
    if (!sample || sample->magic != SAMPLE_MAGIC) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpm_enabled()) return NVML_ERROR_NOT_SUPPORTED;
    sg_device_counters *c = ctr(i);
    if (!c) return NVML_ERROR_NOT_SUPPORTED;
    sample->device = i;
    sample->t_ns = sg_now_ns();
    snapshot(c, &sample->c);
    sample->valid = 1;
    return NVML_SUCCESS;
}

NX nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t sample)
{
    (void)gpuInstanceId; /* no MIG: the instance is the whole device */
    return nvmlGpmSampleGet(device, sample);
}

static const struct {
    unsigned id;
    const char *sname, *lname, *unit;
} g_metric_info[] = {
    {1, "GR_UTIL", "Graphics engine utilization", "%"},
    {2, "SM_UTIL", "SM utilization", "%"},
    {3, "SM_OCCUP", "SM occupancy", "%"},
    {5, "TENSOR_UTIL", "Any tensor utilization", "%"},
    {7, "HMMA_UTIL", "HMMA tensor utilization", "%"},
    {10, "DRAM_BW_UTIL", "DRAM bandwidth utilization", "%"},
    {12, "FP32_UTIL", "FP32 utilization", "%"},
    {20, "PCIE_TX", "PCIe transmit bandwidth", "MiB/sec"},
    {21, "PCIE_RX", "PCIe receive bandwidth", "MiB/sec"},
    {60, "NVLINK_TOTAL_RX", "NVLink total receive bandwidth", "MiB/sec"},
    {61, "NVLINK_TOTAL_TX", "NVLink total transmit bandwidth", "MiB/sec"},
};

NX nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m)
{
    NEED_INIT();
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!gpm_enabled()) return NVML_ERROR_NOT_SUPPORTED;
    const struct nvmlGpmSample_st *a = m->sample1, *b = m->sample2;
    if (!a || !b || a->magic != SAMPLE_MAGIC || b->magic != SAMPLE_MAGIC || !a->valid || !b->valid ||
        a->device != b->device || m->numMetrics > NVML_GPM_METRIC_MAX)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (b->t_ns <= a->t_ns) return NVML_ERROR_INVALID_ARGUMENT;
    double dt = (double)(b->t_ns - a->t_ns);
#define D(f) ((double)(b->c.f >= a->c.f ? b->c.f - a->c.f : 0))
    deltas d = delta(&a->c, &b->c);
    double busy = d.busy, kern = d.kern, tens = d.tensor;
    double sm = sm_pct(&d, dt);
    double mib_s = 1e9 / dt / 1048576.0;
    for (unsigned k = 0; k < m->numMetrics; k++) {
        nvmlGpmMetric_t *x = &m->metrics[k];
        x->nvmlReturn = NVML_SUCCESS;
        x->value = 0;
        x->metricInfo.shortName = x->metricInfo.longName = x->metricInfo.unit = NULL;
        for (size_t j = 0; j < sizeof g_metric_info / sizeof g_metric_info[0]; j++)
            if (g_metric_info[j].id == x->metricId) {
                x->metricInfo.shortName = (char *)g_metric_info[j].sname;
                x->metricInfo.longName = (char *)g_metric_info[j].lname;
                x->metricInfo.unit = (char *)g_metric_info[j].unit;
            }
        switch (x->metricId) {
        case 1: x->value = pct(100.0 * busy / dt); break;
        case 2: x->value = sm; break;
        case 3: x->value = occupancy_pct(&d, dt); break;
        case 5: case 7: x->value = pct(100.0 * tens / dt); break;
        case 10:
            x->value = dram_pct(&d, dt);
            break;
        case 12: x->value = pct(100.0 * (kern > tens ? kern - tens : 0) / dt); break;
        case 20: x->value = D(pcie_tx_bytes) * mib_s; break;
        case 21: x->value = D(pcie_rx_bytes) * mib_s; break;
        case 60: x->value = D(nvlink_rx_bytes) * mib_s; break;
        case 61: x->value = D(nvlink_tx_bytes) * mib_s; break;
        default:
            if (x->metricId >= 1 && x->metricId <= 13)
                x->value = 0; /* integer / FP64 / DMMA / IMMA / FP16 pipes: idle in the model */
            else
                x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            break;
        }
    }
#undef D
    return NVML_SUCCESS;
}

/* The index of a handle, for nvml_topology.c (-1: not ours or NVML not initialised). */
int sg_nvml_index(nvmlDevice_t d) { return inited() ? dev_index(d) : -1; }
