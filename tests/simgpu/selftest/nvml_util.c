/* nvml_util.c - the mock libnvidia-ml.so.1 sees another process's work.
 *
 * nvml_util                 fork a burner, probe from this process, check (make check)
 * nvml_util --burn MS       run gemm kernels, elementwise kernels, HtoD/DtoH copies and a 1-rank
 *                           NCCL broadcast on device 0 for MS milliseconds
 * nvml_util --probe MS      nvmlInit, GPM sample, sleep MS, utilization + GPM metrics; prints
 *                           "nvml_util key=value ..." and checks the ranges
 * With SIMGPU_GPM=0 the probe checks that GPM is unsupported and the basic queries still work.
 * Declarations written from the public NVML API (nvml.h is not installed).
 */
#include "st_common.h"
#include "nccl_internal.h"
#include "simgpu_core.h"

#include <sys/wait.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct { char *shortName, *longName, *unit; } metricInfo;
} nvmlGpmMetric_t;
typedef struct {
    unsigned int version, numMetrics;
    nvmlGpmSample_t sample1, sample2;
    nvmlGpmMetric_t metrics[98]; /* an old header's NVML_GPM_METRIC_MAX: the mock must stay within numMetrics */
} nvmlGpmMetricsGet_t;
typedef struct { unsigned int version, isSupportedDevice; } nvmlGpmSupport_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t);
nvmlReturn_t nvmlSystemGetDriverVersion(char *, unsigned);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned, nvmlDevice_t *);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t, unsigned *);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char *, unsigned);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t, char *, unsigned);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t *);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t, nvmlUtilization_t *);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t, int, unsigned *);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t, unsigned *);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t, int, unsigned *);
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t, nvmlGpmSupport_t *);
nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *);
nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t);
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t, nvmlGpmSample_t);
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *);

static void gemm_stub(void) {}
static void elementwise_stub(void) {}

static int burn(int ms)
{
    st_register((const void *)gemm_stub, "ampere_sgemm_128x64_nn");
    st_register((const void *)elementwise_stub, "vectorized_elementwise_kernel");
    cudaSetDevice(0);
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) return 3;
    void *d = NULL, *h = malloc(8 << 20);
    if (cudaMalloc(&d, 8 << 20) != cudaSuccess || !h) return 3;
    memset(h, 1, 8 << 20);
    ncclUniqueId id;
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 4;
    uint64_t end = st_now() + (uint64_t)ms * 1000000ull;
    while (st_now() < end) {
        for (int i = 0; i < 8; i++) {
            /* 1000 x 512 threads: about 1 ms (gemm) / 0.1 ms (elementwise) in the duration model */
            dim3 g = {1000, 1, 1}, b = {512, 1, 1};
            cudaLaunchKernel((const void *)gemm_stub, g, b, NULL, 0, s);
            cudaLaunchKernel((const void *)elementwise_stub, g, b, NULL, 0, s);
        }
        cudaMemcpyAsync(d, h, 8 << 20, cudaMemcpyHostToDevice, s);
        cudaMemcpyAsync(h, d, 4 << 20, cudaMemcpyDeviceToHost, s);
        ncclBroadcast(d, d, 1 << 20, ncclFloat32, 0, comm, s);
        cudaStreamSynchronize(s);
    }
    ncclCommDestroy(comm);
    return 0;
}

#define NV(call) CHECK((call) == 0, "%s: %s", #call, nvmlErrorString(call))

static int probe(int ms)
{
    int gpm_off = getenv("SIMGPU_GPM") && !strcmp(getenv("SIMGPU_GPM"), "0");
    CHECK(nvmlDeviceGetCount_v2(&(unsigned){0}) == 1, "calls before nvmlInit are uninitialized");
    NV(nvmlInit_v2());
    char drv[80], name[96], uuid[96];
    NV(nvmlSystemGetDriverVersion(drv, sizeof drv));
    unsigned n = 0;
    NV(nvmlDeviceGetCount_v2(&n));
    CHECK(n >= 1, "device count %u", n);
    nvmlDevice_t dev;
    NV(nvmlDeviceGetHandleByIndex_v2(0, &dev));
    unsigned idx = 99;
    NV(nvmlDeviceGetIndex(dev, &idx));
    CHECK(idx == 0, "index %u", idx);
    NV(nvmlDeviceGetName(dev, name, sizeof name));
    NV(nvmlDeviceGetUUID(dev, uuid, sizeof uuid));
    CHECK(!strncmp(uuid, "GPU-", 4), "uuid %s", uuid);
    CHECK(nvmlDeviceGetName(dev, name, 4) == 7, "short buffer -> NVML_ERROR_INSUFFICIENT_SIZE");
    nvmlGpmSupport_t sup = {1, 7};
    NV(nvmlGpmQueryDeviceSupport(dev, &sup));
    CHECK((int)sup.isSupportedDevice == !gpm_off, "GPM supported=%u with SIMGPU_GPM=%s", sup.isSupportedDevice,
          gpm_off ? "0" : "unset");
    nvmlGpmSample_t s1 = NULL, s2 = NULL;
    NV(nvmlGpmSampleAlloc(&s1));
    NV(nvmlGpmSampleAlloc(&s2));
    nvmlReturn_t g1 = nvmlGpmSampleGet(dev, s1);
    CHECK(gpm_off ? g1 == 3 : g1 == 0, "nvmlGpmSampleGet: %s", nvmlErrorString(g1));
    nvmlUtilization_t u;
    NV(nvmlDeviceGetUtilizationRates(dev, &u)); /* starts the interval */
    /* the core's per-kind busy counters over the same interval (the burner's work) */
    sg_counters_shm *shm = sg_counters();
    sg_device_counters c0, c1;
    if (shm) c0 = shm->dev[0];
    usleep((useconds_t)ms * 1000);
    if (shm) c1 = shm->dev[0];
    NV(nvmlDeviceGetUtilizationRates(dev, &u));
    nvmlMemory_t mem;
    NV(nvmlDeviceGetMemoryInfo(dev, &mem));
    unsigned clk = 0, pw = 0, temp = 0;
    NV(nvmlDeviceGetClockInfo(dev, 1, &clk));
    NV(nvmlDeviceGetPowerUsage(dev, &pw));
    NV(nvmlDeviceGetTemperature(dev, 0, &temp));
    CHECK(u.gpu > 0 && u.gpu <= 100, "gpu utilization %u%% while another process runs kernels", u.gpu);
    CHECK(u.memory <= 100, "memory utilization %u", u.memory);
    CHECK(mem.total > 0 && mem.used + mem.free == mem.total, "memory %llu/%llu", mem.used, mem.total);
    CHECK(mem.used >= (8u << 20), "the burner's 8 MiB allocation shows: used %llu", mem.used);
    printf("nvml_util gpu_util=%u mem_util=%u mem_used=%llu sm_clock=%u power_mw=%u temp_c=%u gpm=%u", u.gpu, u.memory,
           mem.used, clk, pw, temp, sup.isSupportedDevice);
    CHECK(shm != NULL, "shared device counters");
    if (shm) {
#define DMS(f) ((double)(c1.f - c0.f) / 1e6)
        double busy = DMS(busy_ns), kern = DMS(kernel_ns), kbusy = DMS(kernel_busy_ns), tens = DMS(tensor_ns),
               memb = DMS(membound_ns), nccl = DMS(nccl_ns), copy = DMS(copy_ns);
#undef DMS
        /* one burner stream: kernels never overlap, so their union is their sum */
        CHECK(kbusy > 0 && kbusy <= busy + 0.01 && kbusy <= kern + 0.01 && kbusy >= 0.9 * kern,
              "kernel union %.3f ms, kernel sum %.3f, busy %.3f", kbusy, kern, busy);
        CHECK(memb > 0 && tens > 0 && nccl > 0 && copy > 0, "per-kind time: membound %.3f tensor %.3f nccl %.3f "
              "copy %.3f ms", memb, tens, nccl, copy);
        CHECK(tens + memb + nccl <= kern + 0.01, "kinds %.3f exceed kernel time %.3f", tens + memb + nccl, kern);
        /* the burner's gemm (1000 x 512 threads: 1.0255 ms) vs elementwise (0.1039 ms), 8 each per round */
        CHECK(tens > 5 * memb && tens < 15 * memb, "tensor/membound %.3f/%.3f", tens, memb);
        printf(" busy_ms=%.3f kernel_busy_ms=%.3f membound_ms=%.3f nccl_ms=%.3f copy_ms=%.3f", busy, kbusy, memb,
               nccl, copy);
    }
    if (!gpm_off) {
        NV(nvmlGpmSampleGet(dev, s2));
        static nvmlGpmMetricsGet_t mg;
        memset(&mg, 0, sizeof mg);
        mg.version = 1;
        mg.sample1 = s1;
        mg.sample2 = s2;
        unsigned ids[] = {2, 3, 5, 10, 20, 21, 60, 61};
        mg.numMetrics = sizeof ids / sizeof ids[0];
        for (unsigned i = 0; i < mg.numMetrics; i++) mg.metrics[i].metricId = ids[i];
        NV(nvmlGpmMetricsGet(&mg));
        for (unsigned i = 0; i < mg.numMetrics; i++) {
            nvmlGpmMetric_t *m = &mg.metrics[i];
            CHECK(m->nvmlReturn == 0, "metric %u: %d", m->metricId, m->nvmlReturn);
            CHECK(m->metricInfo.shortName != NULL, "metric %u has a name", m->metricId);
            if (m->metricId < 20) CHECK(m->value > 0 && m->value <= 100, "metric %u = %g%%", m->metricId, m->value);
            else CHECK(m->value > 0, "metric %u = %g MiB/s", m->metricId, m->value);
            printf(" %s=%.2f", m->metricInfo.shortName ? m->metricInfo.shortName : "?", m->value);
        }
    } else {
        CHECK(nvmlGpmSampleGet(dev, s2) == 3, "SampleGet unsupported with SIMGPU_GPM=0");
    }
    printf("\n");
    NV(nvmlGpmSampleFree(s1));
    NV(nvmlGpmSampleFree(s2));
    NV(nvmlShutdown());
    return st_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--burn")) return burn(atoi(argv[2]));
    if (argc >= 3 && !strcmp(argv[1], "--probe")) return probe(atoi(argv[2]));
    pid_t p = fork();
    if (p == 0) _exit(burn(1200));
    usleep(150000);
    int r = probe(500);
    int st;
    waitpid(p, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "burner failed");
    setenv("SIMGPU_GPM", "0", 1);
    p = fork();
    if (p == 0) _exit(burn(700));
    usleep(100000);
    st_failures = 0;
    r |= probe(300);
    waitpid(p, &st, 0);
    return r || st_failures;
}
