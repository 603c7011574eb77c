/* cudart_internal.h - shared by the files of the mock runtime (cudart*.c). None of this is exported:
 * the version scripts export only cuda* and __cuda*. */
#ifndef SIMGPU_CUDART_INTERNAL_H
#define SIMGPU_CUDART_INTERNAL_H
#include <cuda_runtime_api.h>

#include "core_internal.h"

/* CUDART_VERSION of the runtime being built (props.c, compiled per CUDA version). */
int sg_cudart_version(void);

/* ---------------------------------------------------------------- call plumbing (cudart.c) */

/* cudaGetLastError's value on this thread. */
extern __thread cudaError_t sg_rt_last_error;
/* Whether this thread's current call needs the driver (set by sg_rt_init / the light init). */
extern __thread int sg_rt_call_needs_driver;
/* One runtime API call as CUPTI sees it: API(...) opens it, RET(err) records the result and returns.
 * Without a driver (SIMGPU_NO_DRIVER=1) every call that needs it fails with
 * cudaErrorInsufficientDriver and leaves its outputs untouched, as NVIDIA's runtime does. */
#define API(name, sym)                                                                                         \
    sg_api_call _c;                                                                                            \
    sg_api_enter(&_c, SG_DOMAIN_RUNTIME, name, sym, NULL);                                                     \
    if (sg_rt_call_needs_driver && sg_no_driver()) RET(cudaErrorInsufficientDriver)
#define RET(err)                                                                                               \
    do {                                                                                                       \
        cudaError_t _e = (err);                                                                                \
        if (_e != cudaSuccess) sg_rt_last_error = _e;                                                          \
        sg_api_exit(&_c, (int)_e);                                                                             \
        return _e;                                                                                             \
    } while (0)
/* The runtime's implicit initialisation (reaches the driver's cuInit, as NVIDIA's does). */
void sg_rt_init(void);
/* Host time a launch (kernel or graph) costs: SIMGPU_LAUNCH_NS busy-wait. */
void sg_rt_launch_overhead(void);
/* Kernel name of a launch handle: host stub, cudaFunction_t or cudaKernel_t. */
const char *sg_rt_kernel_name(const void *func);
/* The SG_COPY_* kind of a copy from src to dst as cudaMemcpyKind `kind` says (cudaMemcpyDefault: by
 * where the pointers are), *pinned for the host side. */
int sg_rt_copy_kind(const void *dst, const void *src, enum cudaMemcpyKind kind, int *pinned);
/* A (2D) copy on s: checks the device ranges, moves the bytes (or adds a node to the capture s is in)
 * and queues the timing op; a synchronous one (or an async one with pageable host memory) waits for it. */
cudaError_t sg_rt_copy(uint32_t corr, void *dst, const void *src, size_t width, size_t height, size_t dpitch,
                       size_t spitch, int copy_kind, int pinned, sg_stream *s, int is_async);

/* ---------------------------------------------------------------- graphs (cudart_graph.c) */

typedef struct sg_graph sg_graph;
/* A graph allocation (memory allocation node): its address range lives as long as a node refers to
 * it; the memory is charged to the device while allocated (from the alloc node's run to its free). */
typedef struct sg_graph_alloc sg_graph_alloc;
enum { SG_NODE_KERNEL = 1, SG_NODE_COPY, SG_NODE_HOST, SG_NODE_MEM_ALLOC, SG_NODE_MEM_FREE, SG_NODE_EMPTY };
typedef struct sg_graph_node {
    int type;
    sg_kernel_desc k;      /* SG_NODE_KERNEL (name interned) */
    sg_replay_fn replay;   /* SG_NODE_KERNEL queued by another library (core_internal.h): runs it per launch */
    void *replay_ctx;
    sg_copy_desc c;        /* SG_NODE_COPY: the op (copy or memset) */
    /* SG_NODE_COPY: the operands; the bytes move when the node runs. A copy moves `height` rows of
     * `width` bytes from src (rows spitch apart) to dst (dpitch apart); a memset writes `height` rows
     * of `width` elements of c.value, each `elem_size` bytes, at dst. */
    void *dst;
    const void *src;
    size_t width, height, dpitch, spitch;
    unsigned elem_size;
    cudaHostFn_t host_fn;  /* SG_NODE_HOST */
    void *host_arg;
    sg_graph_alloc *alloc; /* SG_NODE_MEM_ALLOC / SG_NODE_MEM_FREE */
    uint64_t node_id;
} sg_graph_node;

sg_graph *sg_rt_graph_new(void);
/* The graph of a cudaGraph_t, NULL for anything else. */
sg_graph *sg_rt_graph_get(cudaGraph_t h);
void sg_rt_graph_free(sg_graph *g);
/* Appends a captured node (no dependencies recorded: captured nodes run in capture order). 0 or -1. */
int sg_rt_graph_append(sg_graph *g, const sg_graph_node *n);
/* A new graph allocation of `bytes` on `device` (address range reserved, nothing charged yet). */
cudaError_t sg_rt_graph_alloc_new(size_t bytes, int device, sg_graph_alloc **out);
void *sg_rt_graph_alloc_ptr(const sg_graph_alloc *a);
/* Drops the reference sg_rt_graph_alloc_new gave (the nodes that name it hold their own). */
void sg_rt_graph_alloc_release(sg_graph_alloc *a);
/* The allocation a pointer from a memory allocation node is the start of, NULL for anything else. */
sg_graph_alloc *sg_rt_graph_alloc_of(const void *p);
/* Frees a graph allocation outside its graph (cudaFree / cudaFreeAsync): cudaErrorInvalidValue when it
 * is not allocated or its graph frees it. */
cudaError_t sg_rt_graph_alloc_free_outside(sg_graph_alloc *a, uint32_t corr, uint32_t stream_id, int is_async);
/* Moves the bytes of a copy / memset node (skipped when an operand is device memory no longer there). */
void sg_rt_node_move_bytes(const sg_graph_node *n);

/* ---------------------------------------------------------------- capture (cudart_capture.c) */

/* Where a captured event record happened, kept in the event (zero: not recorded in a capture). */
typedef struct sg_capture_mark {
    uint64_t capture_id;
    sg_stream *stream;
    uint64_t seq; /* the stream's captured-op count at the record */
} sg_capture_mark;

/* Work about to be queued on stream s. Returns 0 when s is not capturing and the work may run now;
 * else 1 with *err = the call's result: cudaSuccess (the node was added to the capture's graph),
 * cudaErrorStreamCaptureInvalidated (the capture was invalidated earlier) or, for work on the legacy
 * stream while a blocking stream of its device captures, cudaErrorStreamCaptureImplicit (that
 * capture is invalidated). */
int sg_rt_capture_node(sg_stream *s, const sg_graph_node *n, cudaError_t *err);
/* s is part of a capture sequence (its work becomes graph nodes). */
int sg_rt_capture_would_take(sg_stream *s);
/* cudaEventRecord on s: 0 when s is not capturing (*mark cleared); else 1 with *err, *mark set. */
int sg_rt_capture_event_record(sg_stream *s, sg_capture_mark *mark, cudaError_t *err);
/* cudaStreamWaitEvent(s, event): 0 when capture is not involved (wait on the device timeline);
 * else 1 with *err: s joins the event's capture (fork), records a join into its origin, or the wait
 * breaks the capture rules (isolation, merge). recorded: the event has been recorded at all. */
int sg_rt_capture_event_wait(sg_stream *s, const sg_capture_mark *mark, int recorded, unsigned flags,
                             cudaError_t *err);
/* Query / synchronize of an event: cudaErrorCapturedEvent (and the capture invalidated) when it was
 * last recorded in a capture still in progress, else cudaSuccess. */
cudaError_t sg_rt_capture_check_event(const sg_capture_mark *mark);
/* Query / synchronize of stream s: cudaErrorStreamCaptureUnsupported (capture invalidated) while
 * s captures, else cudaSuccess. */
cudaError_t sg_rt_capture_check_stream(sg_stream *s);
/* A potentially unsafe call (cudaMalloc, cudaDeviceSynchronize...) under the calling thread's
 * capture interaction mode: cudaErrorStreamCaptureUnsupported (and the captures that forbid it
 * invalidated) or cudaSuccess. */
cudaError_t sg_rt_capture_check_unsafe(void);

/* ---------------------------------------------------------------- host functions (cudart_hostfn.c) */

/* Queues fn(arg) on s: it runs on the runtime's callback thread once everything queued on s
 * before it is done; work queued on s after it waits until it returns. */
void sg_rt_enqueue_host_fn(sg_stream *s, cudaHostFn_t fn, void *arg);

/* ---------------------------------------------------------------- memory pools (cudart_mempool.c) */

/* Frees device memory of any kind (cudaMalloc, pools, graph allocations) on stream s, NULL for a
 * synchronous free (the caller synchronised first). */
cudaError_t sg_rt_free(void *ptr, sg_stream *s, uint32_t corr);
/* At a stream, event or device synchronisation: pools above their release threshold give back the
 * memory of completed frees. */
void sg_rt_pool_sync_trim(uint32_t corr);

/* ---------------------------------------------------------------- peer access (cudart_access.c) */

/* cudaDeviceReset of dev: access between dev and its peers is revoked, both ways. */
void sg_rt_peer_reset(int dev);
#endif
