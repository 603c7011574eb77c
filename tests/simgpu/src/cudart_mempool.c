/* cudart_mempool.c - mock CUDA runtime: stream-ordered allocation and memory pools, as PyTorch's
 * cudaMallocAsync backend uses them. cudaMallocAsync / cudaMallocFromPoolAsync / cudaFreeAsync (+ _ptsz),
 * cudaDeviceGetDefaultMemPool, cudaDeviceGetMemPool / SetMemPool, cudaMemPoolCreate / Destroy,
 * cudaMemPoolSetAttribute / GetAttribute, cudaMemPoolTrimTo, cudaMemPoolSetAccess / GetAccess; the
 * release of unused memory at synchronisation; cudaFree of any device pointer.
 *
 * Model. A pool holds blocks of device memory, each a whole number of 2 MiB granules serving one
 * allocation at a time (no sub-allocation): ReservedMemCurrent = the blocks' bytes (charged to the
 * device: cudaMemGetInfo sees them), UsedMemCurrent = the bytes asked for by the allocations not freed
 * yet; both updated at the call (the operations are stream-ordered, their bookkeeping is not), with
 * high watermarks (reset by setting 0). An allocation takes a free block of exactly its rounded size:
 * first one freed on the same stream (stream order), else one whose free has completed
 * (ReuseAllowOpportunistic), else one still being freed on another stream, the allocating stream then
 * waiting for that free (ReuseAllowInternalDependencies); else the pool grows by a new block (up to its
 * maxSize and the device's capacity; when the device is full, free completed blocks of the pool are
 * released first). ReuseFollowEventDependencies is stored but not modelled (the two above cover it).
 * At every cudaStreamSynchronize / cudaEventSynchronize / cudaDeviceSynchronize each pool holding more
 * than its release threshold (default 0) releases free blocks whose free has completed until it holds no
 * more; cudaMemPoolTrimTo(pool, keep) does the same down to `keep`. Pools are device pools only (host
 * locations: cudaErrorNotSupported). Destroying a device's default pool is cudaErrorInvalidValue; a
 * destroyed pool's memory goes as its allocations are freed. During stream capture cudaMallocAsync adds
 * a memory allocation node (the graph owns the memory) and cudaFreeAsync of such memory a free node;
 * freeing other memory in a capture is cudaErrorInvalidValue (a free node frees only graph memory).
 *
 * CUPTI: a Memory record (MEMORY2, isAsync, memoryPoolConfig: local pool, release threshold, reserved and
 * used bytes) per allocation and free. Ground truth: a `mempool` line per allocation, free and release:
 * `op` ("alloc" | "free" | "release"), `pool` (its id: default pools 1..devices, created ones after),
 * `address`, `bytes` (asked for; the block's bytes for a release), `reserved_bytes`, `used_bytes` (the
 * pool's after the operation), on the call's stream (-1 for a release) with its correlation id. */
#define _GNU_SOURCE
#include <cupti_activity.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cudart_internal.h"

#define POOL_GRANULE (2ull << 20)
#define POOL_MAGIC 0x504f4f4cu

typedef struct sg_mempool sg_mempool;
typedef struct pool_block {
    uintptr_t base;
    uint64_t size;  /* whole granules */
    uint64_t asked; /* bytes of the allocation it serves, 0 when free */
    int allocated;
    sg_stream *free_stream;
    sg_op *freed; /* marker at the free's place in its stream */
    sg_mempool *pool;
    struct pool_block *next;
} pool_block;

struct sg_mempool {
    uint32_t magic;
    uint32_t id;
    int device;
    int is_default;
    int destroyed;
    uint64_t release_threshold, max_size;
    int reuse_follow_events, reuse_opportunistic, reuse_internal;
    uint64_t reserved, reserved_high, used, used_high;
    unsigned char access[SG_MAX_DEVICES]; /* cudaMemAccessFlags of other devices */
    pool_block *blocks;
    sg_mempool *next;
};

static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_mempool *g_pools;
static sg_mempool *g_default[SG_MAX_DEVICES], *g_current[SG_MAX_DEVICES];
static uint32_t g_next_pool_id;

/* Lock held. */
static sg_mempool *pool_new_locked(int device, int is_default, uint64_t max_size)
{
    sg_mempool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (!g_next_pool_id) g_next_pool_id = (uint32_t)sg_device_count() + 1; /* ids 1..n: the default pools */
    p->magic = POOL_MAGIC;
    p->id = is_default ? (uint32_t)device + 1 : g_next_pool_id++;
    p->device = device;
    p->is_default = is_default;
    p->max_size = max_size;
    p->reuse_follow_events = p->reuse_opportunistic = p->reuse_internal = 1;
    p->next = g_pools;
    g_pools = p;
    return p;
}

/* The default pool of a device (made on first use). Lock held. */
static sg_mempool *default_pool_locked(int device)
{
    if (!g_default[device]) g_default[device] = pool_new_locked(device, 1, 0);
    return g_default[device];
}

static sg_mempool *current_pool_locked(int device)
{
    return g_current[device] ? g_current[device] : default_pool_locked(device);
}

/* A live pool handle, NULL for anything else. Lock held. */
static sg_mempool *pool_get_locked(cudaMemPool_t h)
{
    for (sg_mempool *p = g_pools; p; p = p->next)
        if ((cudaMemPool_t)p == h) return p->destroyed ? NULL : p;
    return NULL;
}

static int valid_device(int d) { return d >= 0 && d < sg_device_count(); }

static void pool_truth(const char *op, const sg_mempool *p, uintptr_t address, uint64_t bytes, int64_t stream,
                       uint32_t corr)
{
    char f[256];
    snprintf(f, sizeof f, "\"op\":\"%s\",\"pool\":%u,\"address\":%llu,\"bytes\":%llu,\"reserved_bytes\":%llu,\"used_bytes\":%llu",
             op, p->id, (unsigned long long)address, (unsigned long long)bytes, (unsigned long long)p->reserved,
             (unsigned long long)p->used);
    sg_truth_host_line("mempool", p->device, stream, corr, f);
}

/* Gives a free block back to the device. Lock held. */
static void block_release_locked(sg_mempool *p, pool_block **link, uint32_t corr)
{
    pool_block *b = *link;
    *link = b->next;
    p->reserved -= b->size;
    sg_mem_remove((void *)b->base, NULL);
    munmap((void *)b->base, b->size);
    sg_mem_unreserve(p->device, b->size);
    pool_truth("release", p, b->base, b->size, -1, corr);
    if (b->freed) sg_op_release(b->freed);
    free(b);
}

/* Releases free blocks whose free has completed while the pool holds more than `keep`. Lock held. */
static void pool_trim_locked(sg_mempool *p, uint64_t keep, uint32_t corr)
{
    for (pool_block **l = &p->blocks; *l && p->reserved > keep;) {
        pool_block *b = *l;
        if (!b->allocated && (!b->freed || sg_op_done(b->freed, NULL)))
            block_release_locked(p, l, corr);
        else
            l = &b->next;
    }
}

/* A destroyed pool goes once it holds nothing. Lock held. */
static void pool_reap_locked(sg_mempool *p)
{
    if (!p->destroyed || p->blocks) return;
    for (sg_mempool **l = &g_pools; *l; l = &(*l)->next)
        if (*l == p) {
            *l = p->next;
            break;
        }
    p->magic = 0;
    free(p);
}

void sg_rt_pool_sync_trim(uint32_t corr)
{
    if (!__atomic_load_n(&g_pools, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_pool_lock);
    for (sg_mempool *p = g_pools, *next; p; p = next) {
        next = p->next;
        if (p->reserved > p->release_threshold) pool_trim_locked(p, p->release_threshold, corr);
        pool_reap_locked(p);
    }
    pthread_mutex_unlock(&g_pool_lock);
}

/* ---------------------------------------------------------------- allocation and free */

static cudaError_t pool_alloc(sg_mempool *p, void **out, size_t size, sg_stream *s, uint32_t corr)
{
    uint64_t need = (size + POOL_GRANULE - 1) / POOL_GRANULE * POOL_GRANULE;
    pool_block *pick = NULL, *same = NULL, *done = NULL, *pending = NULL;
    for (pool_block *b = p->blocks; b; b = b->next) {
        if (b->allocated || b->size != need) continue;
        if (!same && b->free_stream == s) same = b;
        else if (!done && p->reuse_opportunistic && (!b->freed || sg_op_done(b->freed, NULL))) done = b;
        else if (!pending && p->reuse_internal) pending = b;
    }
    pick = same ? same : done ? done : pending;
    if (pick && pick == pending) sg_stream_wait_op(s, pick->freed); /* an internal dependency on the free */
    if (!pick) {
        if (p->max_size && p->reserved + need > p->max_size) return cudaErrorMemoryAllocation;
        if (sg_mem_reserve(p->device, need) != 0) {
            pool_trim_locked(p, 0, corr);
            if (sg_mem_reserve(p->device, need) != 0) return cudaErrorMemoryAllocation;
        }
        void *m = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        pick = m == MAP_FAILED ? NULL : calloc(1, sizeof *pick);
        if (!pick) {
            if (m != MAP_FAILED) munmap(m, need);
            sg_mem_unreserve(p->device, need);
            return cudaErrorMemoryAllocation;
        }
        pick->base = (uintptr_t)m;
        pick->size = need;
        pick->pool = p;
        pick->next = p->blocks;
        p->blocks = pick;
        p->reserved += need;
        if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
        sg_mem_add_ext(pick->base, need, p->device, SG_MEM_POOL, pick, p, 0);
    }
    pick->allocated = 1;
    pick->asked = size;
    pick->free_stream = NULL;
    if (pick->freed) sg_op_release(pick->freed);
    pick->freed = NULL;
    p->used += size;
    if (p->used > p->used_high) p->used_high = p->used;
    *out = (void *)pick->base;
    sgc_emit_memory_pool(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, corr, pick->base, size, p->device,
                         sg_stream_id(s), p->release_threshold, p->reserved, p->used);
    pool_truth("alloc", p, pick->base, size, sg_stream_id(s), corr);
    return cudaSuccess;
}

/* The free of a pool block on stream s (NULL: a synchronous cudaFree, after the device synchronised). */
static void pool_free_locked(pool_block *b, sg_stream *s, uint32_t corr)
{
    sg_mempool *p = b->pool;
    b->allocated = 0;
    p->used -= b->asked;
    b->free_stream = s;
    b->freed = s ? sg_stream_record_marker(s) : NULL;
    sgc_emit_memory_pool(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, corr, b->base, b->asked, p->device,
                         s ? sg_stream_id(s) : 0, p->release_threshold, p->reserved, p->used);
    pool_truth("free", p, b->base, b->asked, s ? (int64_t)sg_stream_id(s) : -1, corr);
    b->asked = 0;
    if (p->destroyed) {
        pool_trim_locked(p, 0, corr);
        pool_reap_locked(p);
    }
}

cudaError_t sg_rt_free(void *ptr, sg_stream *s, uint32_t corr)
{
    if (!ptr) return cudaSuccess;
    mem_ent e;
    if (!sg_mem_find(ptr, &e) || e.base != (uintptr_t)ptr) return cudaErrorInvalidValue;
    uint32_t sid = s ? sg_stream_id(s) : 0;
    if (e.kind == SG_MEM_POOL) {
        pthread_mutex_lock(&g_pool_lock);
        pool_block *b = e.owner;
        cudaError_t r = b->allocated ? cudaSuccess : cudaErrorInvalidValue;
        if (r == cudaSuccess) pool_free_locked(b, s, corr);
        pthread_mutex_unlock(&g_pool_lock);
        return r;
    }
    if (e.kind == SG_MEM_GRAPH) return sg_rt_graph_alloc_free_outside(e.owner, corr, sid, s != NULL);
    return (cudaError_t)sg_dev_free(ptr, corr, sid, s != NULL);
}

/* In a capture: an allocation node. Returns 1 when s captures (*err the result). */
static int capture_alloc(sg_stream *s, void **out, size_t size, int device, cudaError_t *err)
{
    if (!sg_rt_capture_would_take(s)) return 0;
    sg_graph_node n;
    memset(&n, 0, sizeof n);
    n.type = SG_NODE_MEM_ALLOC;
    *err = sg_rt_graph_alloc_new(size ? size : 1, device, &n.alloc);
    if (*err != cudaSuccess) return 1;
    if (sg_rt_capture_node(s, &n, err) && *err == cudaSuccess) *out = sg_rt_graph_alloc_ptr(n.alloc);
    sg_rt_graph_alloc_release(n.alloc); /* the graph holds it now (or nobody) */
    return 1;
}

static cudaError_t malloc_async(const char *api, void **ptr, size_t size, cudaMemPool_t pool, int from_pool,
                                cudaStream_t st, int pt)
{
    sg_rt_init();
    API(api, NULL);
    if (!ptr) RET(cudaErrorInvalidValue);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = from_pool ? pool_get_locked(pool) : current_pool_locked(sg_stream_device(s));
    int device = p ? p->device : 0;
    pthread_mutex_unlock(&g_pool_lock);
    if (!p) RET(cudaErrorInvalidValue);
    cudaError_t err;
    if (capture_alloc(s, ptr, size, device, &err)) RET(err);
    if (!size) {
        *ptr = NULL;
        RET(cudaSuccess);
    }
    pthread_mutex_lock(&g_pool_lock);
    p = from_pool ? pool_get_locked(pool) : current_pool_locked(sg_stream_device(s));
    err = p ? pool_alloc(p, ptr, size, s, _c.correlation) : cudaErrorInvalidValue;
    pthread_mutex_unlock(&g_pool_lock);
    RET(err);
}
cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t st)
{
    return malloc_async("cudaMallocAsync", p, size, NULL, 0, st, 0);
}
cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t st);
cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t st)
{
    return malloc_async("cudaMallocAsync_ptsz", p, size, NULL, 0, st, 1);
}
cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool, cudaStream_t st)
{
    return malloc_async("cudaMallocFromPoolAsync", p, size, pool, 1, st, 0);
}
cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, cudaMemPool_t pool, cudaStream_t st);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, cudaMemPool_t pool, cudaStream_t st)
{
    return malloc_async("cudaMallocFromPoolAsync_ptsz", p, size, pool, 1, st, 1);
}

static cudaError_t free_async(const char *api, void *ptr, cudaStream_t st, int pt)
{
    sg_rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    if (sg_rt_capture_would_take(s)) {
        sg_graph_alloc *a = sg_rt_graph_alloc_of(ptr);
        if (!a) RET(cudaErrorInvalidValue);
        sg_graph_node n;
        memset(&n, 0, sizeof n);
        n.type = SG_NODE_MEM_FREE;
        n.alloc = a;
        cudaError_t err = cudaSuccess;
        sg_rt_capture_node(s, &n, &err);
        RET(err);
    }
    RET(sg_rt_free(ptr, s, _c.correlation));
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t st) { return free_async("cudaFreeAsync", p, st, 0); }
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t st);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t st) { return free_async("cudaFreeAsync_ptsz", p, st, 1); }

/* ---------------------------------------------------------------- pools */

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    sg_rt_init();
    API("cudaDeviceGetDefaultMemPool", NULL);
    if (!pool) RET(cudaErrorInvalidValue);
    if (!valid_device(device)) RET(cudaErrorInvalidDevice);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = default_pool_locked(device);
    pthread_mutex_unlock(&g_pool_lock);
    if (!p) RET(cudaErrorMemoryAllocation);
    *pool = (cudaMemPool_t)p;
    RET(cudaSuccess);
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device)
{
    sg_rt_init();
    API("cudaDeviceGetMemPool", NULL);
    if (!pool) RET(cudaErrorInvalidValue);
    if (!valid_device(device)) RET(cudaErrorInvalidDevice);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = current_pool_locked(device);
    pthread_mutex_unlock(&g_pool_lock);
    if (!p) RET(cudaErrorMemoryAllocation);
    *pool = (cudaMemPool_t)p;
    RET(cudaSuccess);
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool)
{
    sg_rt_init();
    API("cudaDeviceSetMemPool", NULL);
    if (!valid_device(device)) RET(cudaErrorInvalidDevice);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = pool_get_locked(pool);
    cudaError_t e = !p ? cudaErrorInvalidValue : p->device != device ? cudaErrorInvalidDevice : cudaSuccess;
    if (e == cudaSuccess) g_current[device] = p;
    pthread_mutex_unlock(&g_pool_lock);
    RET(e);
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
    sg_rt_init();
    API("cudaMemPoolCreate", NULL);
    if (!pool || !props || props->allocType != cudaMemAllocationTypePinned) RET(cudaErrorInvalidValue);
    if (props->location.type != cudaMemLocationTypeDevice) {
        if (props->location.type == cudaMemLocationTypeInvalid) RET(cudaErrorInvalidValue);
        RET(cudaErrorNotSupported);
    }
    if (!valid_device(props->location.id)) RET(cudaErrorInvalidDevice);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = pool_new_locked(props->location.id, 0, props->maxSize);
    pthread_mutex_unlock(&g_pool_lock);
    if (!p) RET(cudaErrorMemoryAllocation);
    *pool = (cudaMemPool_t)p;
    RET(cudaSuccess);
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
    sg_rt_init();
    API("cudaMemPoolDestroy", NULL);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = pool_get_locked(pool);
    cudaError_t e = !p || p->is_default ? cudaErrorInvalidValue : cudaSuccess;
    if (e == cudaSuccess) {
        if (g_current[p->device] == p) g_current[p->device] = NULL;
        p->destroyed = 1;
        pool_trim_locked(p, 0, _c.correlation);
        pool_reap_locked(p);
    }
    pthread_mutex_unlock(&g_pool_lock);
    RET(e);
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
    sg_rt_init();
    API("cudaMemPoolTrimTo", NULL);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = pool_get_locked(pool);
    if (p) pool_trim_locked(p, keep, _c.correlation);
    pthread_mutex_unlock(&g_pool_lock);
    RET(p ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    sg_rt_init();
    API("cudaMemPoolSetAttribute", NULL);
    if (!value) RET(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = pool_get_locked(pool);
    cudaError_t e = p ? cudaSuccess : cudaErrorInvalidValue;
    uint64_t v64 = 0;
    int vi = 0;
    memcpy(&vi, value, sizeof vi);
    if (p && (attr == cudaMemPoolAttrReleaseThreshold || attr == cudaMemPoolAttrReservedMemHigh ||
              attr == cudaMemPoolAttrUsedMemHigh))
        memcpy(&v64, value, sizeof v64);
    if (p) switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies: p->reuse_follow_events = vi != 0; break;
    case cudaMemPoolReuseAllowOpportunistic: p->reuse_opportunistic = vi != 0; break;
    case cudaMemPoolReuseAllowInternalDependencies: p->reuse_internal = vi != 0; break;
    case cudaMemPoolAttrReleaseThreshold: p->release_threshold = v64; break;
    case cudaMemPoolAttrReservedMemHigh:
        if (v64) e = cudaErrorInvalidValue; else p->reserved_high = p->reserved;
        break;
    case cudaMemPoolAttrUsedMemHigh:
        if (v64) e = cudaErrorInvalidValue; else p->used_high = p->used;
        break;
    default: e = cudaErrorInvalidValue; break; /* read-only or unknown */
    }
    pthread_mutex_unlock(&g_pool_lock);
    RET(e);
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    sg_rt_init();
    API("cudaMemPoolGetAttribute", NULL);
    if (!value) RET(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = pool_get_locked(pool);
    cudaError_t e = p ? cudaSuccess : cudaErrorInvalidValue;
    int vi = -1;
    uint64_t v64 = 0;
    int wide = 1;
    if (p) switch ((int)attr) {
    case cudaMemPoolReuseFollowEventDependencies: vi = p->reuse_follow_events, wide = 0; break;
    case cudaMemPoolReuseAllowOpportunistic: vi = p->reuse_opportunistic, wide = 0; break;
    case cudaMemPoolReuseAllowInternalDependencies: vi = p->reuse_internal, wide = 0; break;
    case cudaMemPoolAttrReleaseThreshold: v64 = p->release_threshold; break;
    case cudaMemPoolAttrReservedMemCurrent: v64 = p->reserved; break;
    case cudaMemPoolAttrReservedMemHigh: v64 = p->reserved_high; break;
    case cudaMemPoolAttrUsedMemCurrent: v64 = p->used; break;
    case cudaMemPoolAttrUsedMemHigh: v64 = p->used_high; break;
    case 0x9: vi = cudaMemAllocationTypePinned, wide = 0; break;  /* CUDA 13: AllocationType */
    case 0xA: vi = cudaMemHandleTypeNone, wide = 0; break;        /* ExportHandleTypes */
    case 0xB: vi = p->device, wide = 0; break;                    /* LocationId */
    case 0xC: vi = cudaMemLocationTypeDevice, wide = 0; break;    /* LocationType */
    case 0xD: v64 = p->max_size; break;                           /* MaxPoolSize */
    default: e = cudaErrorInvalidValue; break;
    }
    pthread_mutex_unlock(&g_pool_lock);
    if (e == cudaSuccess) {
        if (wide)
            memcpy(value, &v64, sizeof v64);
        else
            memcpy(value, &vi, sizeof vi);
    }
    RET(e);
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc *descs, size_t count)
{
    sg_rt_init();
    API("cudaMemPoolSetAccess", NULL);
    if (count && !descs) RET(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = pool_get_locked(pool);
    cudaError_t e = p ? cudaSuccess : cudaErrorInvalidValue;
    for (size_t i = 0; i < count && e == cudaSuccess; i++) {
        const struct cudaMemAccessDesc *d = &descs[i];
        if (d->location.type != cudaMemLocationTypeDevice || !valid_device(d->location.id) ||
            (d->flags != cudaMemAccessFlagsProtNone && d->flags != cudaMemAccessFlagsProtRead &&
             d->flags != cudaMemAccessFlagsProtReadWrite))
            e = cudaErrorInvalidValue;
        else if (d->location.id == p->device && d->flags != cudaMemAccessFlagsProtReadWrite)
            e = cudaErrorInvalidDevice; /* the pool's own device always has read-write access */
    }
    for (size_t i = 0; i < count && e == cudaSuccess; i++)
        if (descs[i].location.id != p->device) p->access[descs[i].location.id] = (unsigned char)descs[i].flags;
    pthread_mutex_unlock(&g_pool_lock);
    RET(e);
}

cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t pool, struct cudaMemLocation *loc)
{
    sg_rt_init();
    API("cudaMemPoolGetAccess", NULL);
    if (!flags || !loc || loc->type != cudaMemLocationTypeDevice || !valid_device(loc->id)) RET(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_pool_lock);
    sg_mempool *p = pool_get_locked(pool);
    if (p)
        *flags = loc->id == p->device ? cudaMemAccessFlagsProtReadWrite : (enum cudaMemAccessFlags)p->access[loc->id];
    pthread_mutex_unlock(&g_pool_lock);
    RET(p ? cudaSuccess : cudaErrorInvalidValue);
}
