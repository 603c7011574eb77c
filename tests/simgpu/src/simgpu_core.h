/*
 * simgpu_core.h - internal API of libsimgpu.so, the core every simulated NVIDIA library links
 * against (libcudart/libcuda/libcupti here; libnccl/libnvidia-ml are built on it later).
 *
 * Plain C11, no CUDA headers needed. Every function is thread-safe unless it says otherwise.
 * Link a mock with `-L$(BUILD) -lsimgpu -Wl,-rpath,'$ORIGIN'`.
 *
 * Model in one paragraph: each device has streams; each stream runs its ops in order. An op's
 * start = max(enqueue time, end of its predecessors: previous op on the stream, events it waits
 * on, the legacy default stream where CUDA's implicit synchronisation applies); end = start +
 * duration. Times are CLOCK_MONOTONIC ns (sg_now_ns). Nothing runs: an op "is done" when
 * now >= end. An op whose end is not known yet (a collective waiting for other ranks) is
 * "deferred": everything behind it waits until its end is resolved, forever if never.
 * A background thread (the "CUPTI worker") completes ops in end order: writes ground truth,
 * CUPTI activity records, busy-time counters in shared memory.
 */
#ifndef SIMGPU_CORE_H
#define SIMGPU_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SG_EXPORT __attribute__((visibility("default")))

/* ---------------------------------------------------------------- process, devices, time */

/* Idempotent; every mock entry point may call it (cheap after the first call). */
SG_EXPORT void sg_init(void);
/* CLOCK_MONOTONIC in ns. */
SG_EXPORT uint64_t sg_now_ns(void);
/* SIMGPU_DEVICES (default 8). */
SG_EXPORT int sg_device_count(void);
/* The calling thread's current device (cudaSetDevice / cuCtxSetCurrent), default 0. */
SG_EXPORT int sg_current_device(void);
/* Returns 0, or -1 if dev is out of range. */
SG_EXPORT int sg_set_current_device(int dev);
/* CUPTI context id of a device (= device + 1) and the opaque CUcontext handle used for it. */
SG_EXPORT uint32_t sg_context_id(int device);
SG_EXPORT void *sg_context_handle(int device);
/* Device of a CUcontext handle from sg_context_handle, -1 if not one. */
SG_EXPORT int sg_context_device(const void *ctx);
/* Device memory capacity (SIMGPU_MEM_GB GiB, default 80) and bytes in use by this process. */
SG_EXPORT uint64_t sg_device_capacity(int device);
SG_EXPORT uint64_t sg_device_used(int device);
/* Link model for collectives: SIMGPU_LINK_GBPS (GB/s = 1e9 bytes/s per rank, default 100),
 * SIMGPU_LINK_LATENCY_US (default 5). Written to the ground truth `process` line. */
SG_EXPORT double sg_link_gbps(void);
SG_EXPORT double sg_link_latency_us(void);
/* RANK from the environment, -1 if unset. */
SG_EXPORT int sg_rank(void);
/* SIMGPU_NO_DRIVER=1: no driver is installed. The runtime and CUPTI mocks then answer as NVIDIA's do
 * on a machine without libcuda.so.1 (docs/conformance.md); the driver mock is not loaded. */
SG_EXPORT int sg_no_driver(void);

/* ---------------------------------------------------------------- streams */

typedef struct sg_stream sg_stream;

/* The stream handle values CUDA reserves (driver_types.h). */
#define SG_STREAM_LEGACY ((void *)0x1)     /* cudaStreamLegacy / CU_STREAM_LEGACY */
#define SG_STREAM_PER_THREAD ((void *)0x2) /* cudaStreamPerThread / CU_STREAM_PER_THREAD */

/* Resolve a cudaStream_t / CUstream to a sim stream of the current device.
 * NULL means the legacy default stream, or the per-thread default stream when per_thread != 0
 * (the _ptsz entry points, or a program built with --default-stream per-thread).
 * Returns NULL for an unknown/destroyed handle. Streams are never freed (a destroyed stream
 * only stops resolving), so the pointer stays valid. */
SG_EXPORT sg_stream *sg_stream_resolve(void *cuda_stream, int per_thread);
/* Create a stream on `device`: flags 1 = cudaStreamNonBlocking. Returns the handle to give to
 * the program (the sim stream itself; pass it back through sg_stream_resolve). */
SG_EXPORT sg_stream *sg_stream_create(int device, unsigned flags, int priority);
SG_EXPORT void sg_stream_destroy(sg_stream *s);
/* CUPTI stream id: legacy default stream = 7 on every context, created (and per-thread
 * default) streams 13, 14, ... counted per context. */
SG_EXPORT uint32_t sg_stream_id(const sg_stream *s);
SG_EXPORT int sg_stream_device(const sg_stream *s);
/* Block the host until every op queued on s so far is done (forever behind an unresolved
 * deferred op). Returns 0. */
SG_EXPORT int sg_stream_synchronize(sg_stream *s);
/* 1 when everything queued on s is done. */
SG_EXPORT int sg_stream_idle(sg_stream *s);
/* Wait for every stream of a device. */
SG_EXPORT void sg_device_synchronize(int device);

/* ---------------------------------------------------------------- correlation and API hooks */

/* Next CUPTI correlation id (one per-process counter, starts at 1). sg_api_enter takes one
 * itself; use this only for ids not tied to an API call. */
SG_EXPORT uint32_t sg_next_correlation(void);

#define SG_DOMAIN_DRIVER 1  /* CUPTI_CB_DOMAIN_DRIVER_API */
#define SG_DOMAIN_RUNTIME 2 /* CUPTI_CB_DOMAIN_RUNTIME_API */

/* One API call as CUPTI sees it. Stack-allocate, sg_api_enter, do the work with
 * call.correlation, sg_api_exit. Produces: the ENTER/EXIT callbacks of the subscriber (if
 * the domain/cbid is enabled), the RUNTIME/DRIVER activity record (if that kind is enabled),
 * ExternalCorrelation records for the calling thread's pushed external ids.
 * func: the API function name exactly as in cupti_runtime_cbid.h / cupti_driver_cbid.h
 * without the `_vNNNN` suffix (e.g. "cudaLaunchKernel", "cuLaunchKernelEx"); unknown names
 * get cbid 0 (INVALID) and produce no callback. symbol: kernel name on launches, else NULL.
 * A mock NCCL should wrap each kernel launch in a DRIVER-domain "cuLaunchKernelEx" call, as
 * real NCCL does, and give the kernel that correlation id. */
typedef struct sg_api_call {
    uint32_t correlation; /* out of sg_api_enter */
    int domain;
    int cbid;
    uint64_t start_ns;
    const char *func;
    const char *symbol;
    const void *params;
    uint64_t correlation_data; /* CUpti_CallbackData.correlationData points here */
    int device;
    int callbacks; /* internal */
} sg_api_call;
SG_EXPORT void sg_api_enter(sg_api_call *call, int domain, const char *func, const char *symbol,
                            const void *params);
/* ret: the call's return value (cudaError_t / CUresult) for the EXIT callback and record. */
SG_EXPORT void sg_api_exit(sg_api_call *call, int ret);

/* ---------------------------------------------------------------- work */

typedef struct sg_op sg_op;

typedef struct sg_kernel_desc {
    const char *name;   /* mangled name as CUPTI reports it; interned (copied) by the core */
    unsigned grid[3];   /* 0 counts as 1 */
    unsigned block[3];
    size_t dynamic_smem;
    uint32_t correlation; /* of the launching API call */
    uint64_t duration_ns; /* 0: use the duration model (README) */
    int launch_type;      /* CUPTI launchType: 0 regular, 1 cooperative */
} sg_kernel_desc;

/* The duration model: SIMGPU_KERNEL_NS overrides, else 1500 + threads * ps_per_thread / 1000. */
SG_EXPORT uint64_t sg_kernel_model_ns(const char *name, const unsigned grid[3],
                                      const unsigned block[3]);

/* Queue a kernel with a known (or modelled) duration. Returns 0. */
SG_EXPORT int sg_enqueue_kernel(sg_stream *s, const sg_kernel_desc *k);

/* A deferred kernel: its end is decided later.
 * poll(arg, start_ns, &end_ns) is called by the core, WITH THE CORE LOCK HELD (so it must not
 * call any sg_* function except sg_now_ns), repeatedly (about every millisecond while
 * something waits on it or the worker runs) once the op's start is known; start_ns is the
 * op's device start (max of enqueue time and predecessors), i.e. this rank's arrival time.
 * Return 1 and set *end_ns (>= start_ns) when resolved, else 0. poll may be NULL: then only
 * sg_op_resolve resolves it. arg must stay valid until the op is resolved or the process
 * exits. Until resolved, everything that waits on the stream waits (sync calls, events,
 * later ops, CUPTI delivery of this op).
 * coll: if not NULL, a `collective` ground-truth line is written when the op completes (or
 * `"end_ns":null,"unfinished":true` at exit/SIGTERM if it never resolved); the kernel itself
 * is also written as a `kernel` line and a CUPTI kernel record like any other kernel.
 * Returns a reference the caller owns: release it with sg_op_release (may be right away). */
typedef int (*sg_end_poll_fn)(void *arg, uint64_t start_ns, uint64_t *end_ns);
typedef struct sg_collective_desc {
    const char *op;   /* "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
                         "Send", "Recv", ... (copied) */
    const char *comm; /* hex id identical on every rank (copied) */
    uint64_t seq;
    uint64_t bytes;
    int nranks;
} sg_collective_desc;
SG_EXPORT sg_op *sg_enqueue_deferred_kernel(sg_stream *s, const sg_kernel_desc *k,
                                            sg_end_poll_fn poll, void *arg,
                                            const sg_collective_desc *coll);
/* Push-style resolution (takes the lock; any thread): end = max(end_ns, start). If the start
 * is not known yet, the value is kept and applied when it is. */
SG_EXPORT void sg_op_resolve(sg_op *op, uint64_t end_ns);
/* 0: waiting for predecessors; 1: started (start known), end unknown; 2: end known.
 * start/end may be NULL. */
SG_EXPORT int sg_op_state(sg_op *op, uint64_t *start_ns, uint64_t *end_ns);
SG_EXPORT void sg_op_release(sg_op *op);

/* Memory copy / set on a stream (timing only; the caller copies the bytes).
 * copy_kind: SG_COPY_* ; host_pinned: the host side is pinned (ignored for DtoD/PtoP). */
enum { SG_COPY_HTOD = 1, SG_COPY_DTOH = 2, SG_COPY_DTOD = 8, SG_COPY_HTOH = 9, SG_COPY_PTOP = 10 };
SG_EXPORT sg_op *sg_enqueue_memcpy(sg_stream *s, int copy_kind, uint64_t bytes, int host_pinned,
                                   uint32_t correlation, int want_ref);
SG_EXPORT sg_op *sg_enqueue_memset(sg_stream *s, uint64_t bytes, uint32_t correlation,
                                   int want_ref);
/* Block until op is done (forever if it never resolves). */
SG_EXPORT void sg_op_wait(sg_op *op);

/* ---------------------------------------------------------------- ground truth */

/* Append one raw JSON object line (no trailing newline needed) to truth-<pid>.jsonl when
 * SIMGPU_TRUTH is set; no-op otherwise. Use for anything the core does not write itself. */
SG_EXPORT void sg_truth_line(const char *json);
/* A host-side event line: the common keys (`type`, pid, rank, `device`, `stream` (CUPTI stream id, -1
 * for none), start_ns = end_ns = now, `correlation`) followed by `fields` (more `"key":value` pairs
 * without the leading comma, may be NULL). Written at once, like sg_truth_line. */
SG_EXPORT void sg_truth_host_line(const char *type, int device, int64_t stream, uint32_t correlation,
                                  const char *fields);
/* Flush buffered truth lines now (also done by the worker, at exit and on SIGTERM). */
SG_EXPORT void sg_truth_flush(void);

/* ---------------------------------------------------------------- device counters (NVML) */

/* Shared memory segment "/simgpu-<SIMGPU_SESSION or uid>", created 0600 by the first process
 * of the session, updated by every process as ops complete (atomics). An NVML mock opens it
 * with sg_counters() (in-process) or shm_open + mmap of sizeof(sg_counters_shm). */
#define SG_MAX_DEVICES 64
#define SG_COUNTERS_MAGIC 0x53494d4750553031ull /* "SIMGPU01" */
typedef struct sg_device_counters {
    uint64_t busy_ns;          /* union of intervals any kernel/copy/memset ran */
    uint64_t busy_last_end_ns; /* internal: end of the last interval counted */
    uint64_t kernel_ns;        /* sum of kernel durations (overlapping streams add up) */
    uint64_t tensor_ns;        /* sum of durations of gemm/matmul/cutlass/xmma/flash/attention/fmha */
    uint64_t kernels;          /* kernels completed */
    uint64_t pcie_tx_bytes;    /* DtoH bytes */
    uint64_t pcie_rx_bytes;    /* HtoD bytes */
    uint64_t nvlink_tx_bytes;  /* PtoP bytes sent + collectives (the NCCL mock adds) */
    uint64_t nvlink_rx_bytes;
    uint64_t dram_bytes;       /* DtoD bytes * 2 + memset bytes */
    int64_t mem_used_bytes;    /* device allocations of all processes */
    /* per-kind busy time (added in place of reserved words: older readers see zeros) */
    uint64_t kernel_busy_ns;   /* union of kernel intervals (SM busy, overlapping streams once) */
    uint64_t kernel_busy_last_end_ns; /* internal */
    uint64_t membound_ns;      /* sum of durations of memory-bound kernels: softmax, layer_norm/
                                  layernorm/rms_norm, elementwise/vectorized families (not NCCL) */
    uint64_t nccl_ns;          /* sum of durations of NCCL kernels (name contains "nccl") */
    uint64_t copy_ns;          /* sum of memcpy and memset durations (copy engines) */
    uint64_t reserved[16];
} sg_device_counters;
typedef struct sg_counters_shm {
    uint64_t magic;
    uint32_t version; /* 1 */
    uint32_t ndevices;
    sg_device_counters dev[SG_MAX_DEVICES];
} sg_counters_shm;
/* Mapped segment, or NULL if shared memory is unavailable. Update with __atomic builtins. */
SG_EXPORT sg_counters_shm *sg_counters(void);

#ifdef __cplusplus
}
#endif
#endif
