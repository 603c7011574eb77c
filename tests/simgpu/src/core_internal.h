/* core_internal.h - shared between the files of libsimgpu.so only (not for mocks). */
#ifndef SIMGPU_CORE_INTERNAL_H
#define SIMGPU_CORE_INTERNAL_H
#include "simgpu_core.h"
#include <pthread.h>
#include <stdint.h>

#define SG_HIDDEN __attribute__((visibility("hidden")))

enum { SG_OP_KERNEL = 1, SG_OP_MEMCPY, SG_OP_MEMSET, SG_OP_MARKER };
enum { SG_ST_PENDING = 0, SG_ST_STARTED = 1, SG_ST_RESOLVED = 2 };

struct sg_op {
    int kind;
    int refs;
    int state;
    int device;
    uint32_t stream_id;
    uint32_t correlation;
    uint64_t enqueue_ns, dur_ns, floor_ns; /* floor: max end of deps already resolved */
    uint64_t start_ns, end_ns;
    sg_op **deps; /* unresolved predecessors (refs held) */
    int ndeps;
    /* kernel */
    const char *name; /* interned */
    unsigned grid[3], block[3];
    uint32_t dyn_smem;
    int launch_type;
    uint32_t graph_id;
    uint64_t graph_node_id;
    /* memcpy / memset */
    int copy_kind, host_pinned, is_async;
    uint32_t memset_value;
    uint64_t bytes;
    /* deferred */
    int deferred;
    int cupti_traced; /* its CUPTI activity kind was enabled when it was launched */
    sg_end_poll_fn poll;
    void *poll_arg;
    int has_push;
    uint64_t push_end;
    int has_coll, coll_written;
    char *coll_op, *coll_comm;
    uint64_t coll_seq, coll_bytes;
    int coll_nranks;
    sg_op *next; /* in-flight list */
    int in_flight;
};

/* core.c */
SG_HIDDEN extern pthread_mutex_t sg_lock;
SG_EXPORT const char *sg_intern(const char *s);
/* CUfunction / cudaFunction_t handles: the same handle for the same kernel name (interned), in
 * every mock; sg_func_name gives the name of a handle from sg_func_handle, NULL for anything else. */
SG_EXPORT void *sg_func_handle(const char *name);
SG_EXPORT const char *sg_func_name(const void *handle);
/* Function attributes of a handle by CUfunction_attribute number (the runtime's cudaFuncAttribute
 * values 8..15 are the same numbers): value = what the program set, else the simulated H100's default;
 * update checks and stores a settable one: 0, 1 (read-only attribute or value out of range:
 * CUDA_ERROR_INVALID_VALUE / cudaErrorInvalidValue) or -1 (not a function handle). */
#define SG_FUNC_ATTRS 32
SG_EXPORT int sg_func_attr_value(const void *handle, int attr);
SG_EXPORT int sg_func_attr_update(const void *handle, int attr, int value);
SG_EXPORT void sg_progress(int drain_all);
SG_EXPORT void sg_worker_kick(void);
/* enqueue helpers used by graphs (cudart) go through the public API; ops carry graph ids: */
SG_EXPORT int sg_enqueue_kernel_graph(sg_stream *s, const sg_kernel_desc *k, uint32_t graph_id,
                                      uint64_t graph_node_id);
/* Work a library outside the runtime queues (the simulated NCCL) into a stream capture: the runtime
 * (cudart_capture.c) registers the hook when a capture begins; sg_capture_external returns 0 when s
 * is not capturing (or no runtime hooked in), else 1 with *err the capture's cudaError_t. A kernel
 * node with `replay` set queues nothing itself: each graph launch calls replay(ctx, s, k, graph id,
 * node id), with k's correlation the launch's, to queue that run (a deferred kernel); a host node
 * runs host_fn(host_arg) on each launch, in stream order. */
typedef void (*sg_replay_fn)(void *ctx, sg_stream *s, const sg_kernel_desc *k, uint32_t graph_id,
                             uint64_t graph_node_id);
typedef struct sg_capture_item {
    sg_kernel_desc k;    /* a kernel node when host_fn is NULL */
    sg_replay_fn replay;
    void *replay_ctx;
    void (*host_fn)(void *);
    void *host_arg;
} sg_capture_item;
typedef int (*sg_capture_hook_fn)(sg_stream *s, const sg_capture_item *it, int *err);
SG_EXPORT void sg_set_capture_hook(sg_capture_hook_fn fn);
SG_EXPORT int sg_capture_external(sg_stream *s, const sg_capture_item *it, int *err);
/* sg_enqueue_deferred_kernel for one run of a graph's kernel node (CUPTI's graphId / graphNodeId). */
SG_EXPORT sg_op *sg_enqueue_deferred_kernel_graph(sg_stream *s, const sg_kernel_desc *k, sg_end_poll_fn poll,
                                                  void *arg, const sg_collective_desc *coll, uint32_t graph_id,
                                                  uint64_t graph_node_id);
SG_EXPORT void *sg_stream_capture_slot_get(sg_stream *s);
SG_EXPORT void sg_stream_capture_slot_set(sg_stream *s, void *g);
SG_EXPORT int sg_stream_nonblocking(const sg_stream *s);
SG_EXPORT int sg_stream_priority(const sg_stream *s);
/* events = marker ops */
SG_EXPORT sg_op *sg_stream_record_marker(sg_stream *s);
/* A marker that holds the stream until sg_op_resolve (host functions): everything queued on s after
 * it waits. Returns the caller's reference. */
SG_EXPORT sg_op *sg_enqueue_deferred_marker(sg_stream *s);
SG_EXPORT void sg_stream_wait_op(sg_stream *s, sg_op *op);
SG_EXPORT int sg_op_done(sg_op *op, uint64_t *end_ns);
SG_EXPORT void sg_op_retain(sg_op *op);
/* copies/memsets with every detail (graph nodes, async flag, memset value) */
typedef struct sg_copy_desc {
    int is_memset;     /* else memcpy */
    int copy_kind;     /* SG_COPY_* */
    uint64_t bytes;
    int host_pinned;
    int is_async;
    uint32_t value;    /* memset */
    uint32_t correlation;
    uint32_t graph_id;
    uint64_t graph_node_id;
} sg_copy_desc;
SG_EXPORT sg_op *sg_enqueue_copy(sg_stream *s, const sg_copy_desc *c, int want_ref);
/* allocation registry (mem.c) */
typedef struct mem_ent {
    uintptr_t base;
    size_t size;
    int device;
    int kind;
    void *owner;  /* the allocator's record of the range (pool block, graph allocation, module variable) */
    void *pool;   /* SG_MEM_POOL: the cudaMemPool_t / CUmemoryPool handle it came from */
    uint64_t id;  /* process-wide unique, never reused (CU_POINTER_ATTRIBUTE_BUFFER_ID) */
    unsigned flags; /* host memory: the cudaHostAlloc / cudaHostRegister flags */
} mem_ent;
/* SG_MEM_MAPPED: device memory mapped with the driver's cuMemMap (freed only through cuMemUnmap);
 * SG_MEM_POOL: a block of a stream-ordered memory pool (cudart_mempool.c); SG_MEM_GRAPH: the address
 * range of a graph allocation node (cudart_graph.c); SG_MEM_MODULE: the device copy of a module
 * variable (__device__ / __constant__, cudart_symbol.c). All but PINNED / REGISTERED are device memory. */
enum { SG_MEM_DEVICE = 1, SG_MEM_MANAGED, SG_MEM_PINNED, SG_MEM_REGISTERED, SG_MEM_MAPPED, SG_MEM_POOL, SG_MEM_GRAPH,
       SG_MEM_MODULE };
static inline int sg_mem_kind_is_device(int kind) { return kind != SG_MEM_PINNED && kind != SG_MEM_REGISTERED; }
SG_EXPORT int sg_mem_add(uintptr_t base, size_t size, int device, int kind);
/* sg_mem_add with the allocator's owner record, pool handle and host flags. */
SG_EXPORT int sg_mem_add_ext(uintptr_t base, size_t size, int device, int kind, void *owner, void *pool,
                             unsigned flags);
SG_EXPORT int sg_mem_find(const void *p, mem_ent *out);
SG_EXPORT int sg_mem_remove(const void *p, mem_ent *out);
SG_EXPORT size_t sg_page_round(size_t n);
/* device/managed allocation (MAP_NORESERVE), capacity-checked, Memory4 record.
 * Returns 0, 1 (invalid value) or 2 (out of memory): same numbers in cudaError_t and CUresult. */
SG_EXPORT int sg_dev_alloc(void **p, size_t size, int device, int kind, uint32_t corr, uint32_t stream_id,
                           int is_async);
SG_EXPORT int sg_dev_free(void *p, uint32_t corr, uint32_t stream_id, int is_async);
/* memory bookkeeping */
SG_EXPORT int sg_mem_reserve(int device, uint64_t bytes);   /* 0 ok, -1 over capacity */
SG_EXPORT void sg_mem_unreserve(int device, uint64_t bytes);

/* cupti_core.c (emission side) */
SG_HIDDEN void sgc_emit_op(const sg_op *op);
SG_HIDDEN int sgc_op_traced(int op_kind);
SG_HIDDEN void sgc_deliver(int flush_partial, int forced);
SG_HIDDEN int sgc_worker_has_period(uint64_t *period_ns);
SG_HIDDEN void sgc_atfork_child(void);
SG_HIDDEN void sgc_write_truth(void);
/* host-side records, exported for the mocks */
SG_EXPORT int sgc_kind_enabled(int kind);
SG_EXPORT void sgc_emit_sync(int type, uint64_t start, uint64_t end, uint32_t corr, int device,
                             uint32_t stream_id, uint32_t event_id, int ret);
SG_EXPORT void sgc_emit_memory(int op_type, int mem_kind, uint32_t corr, uint64_t addr,
                               uint64_t bytes, int device, uint32_t stream_id, int is_async);
/* A stream-ordered allocation or free of a memory pool (Memory4 with its memoryPoolConfig: a local
 * pool, its release threshold, reserved (size) and used (utilizedSize) bytes after the operation). */
SG_EXPORT void sgc_emit_memory_pool(int op_type, uint32_t corr, uint64_t addr, uint64_t bytes, int device,
                                    uint32_t stream_id, uint64_t release_threshold, uint64_t pool_size,
                                    uint64_t pool_used);
SG_EXPORT uint32_t sgc_thread_id(void);
#endif
