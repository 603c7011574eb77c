/* cudart_graph.c - mock CUDA runtime: graphs and executable graphs.
 *
 * A graph is a list of nodes in the order they were added (captured, cudart_capture.c, or added with
 * cudaGraphAdd*Node, each with its dependencies, which must be nodes already in the graph: so that order
 * is a topological order). cudaGraphInstantiate copies the nodes into an executable graph; nothing runs
 * before cudaGraphLaunch, which queues them in that order on the launch stream (branches serialised)
 * behind the previous launch of the same executable, each with the launch's correlation id, graphId =
 * the id of the graph it was instantiated from and graphNodeId = the node's id (both as CUPTI reports:
 * unique per process, from 1). Copies and memsets move their bytes when they run.
 * Memory nodes: cudaGraphAddMemAllocNode reserves the address at once (fixed for the graph's life);
 * the memory is charged to the device, with a CUPTI Memory record, when the alloc node runs and given
 * back when its free node runs (or cudaFree / cudaFreeAsync frees it outside the graph, or an
 * executable instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch is launched again). A launch
 * while an allocation of the executable is still allocated fails with cudaErrorInvalidValue, a graph
 * with memory nodes has at most one executable at a time and cannot be cloned (cudaErrorNotSupported).
 * cudaGraphExecUpdate pairs the nodes of the executable and the graph by position and accepts the
 * update when the count, the types and every node's dependencies match (else
 * cudaErrorGraphExecUpdateFailure with the reason in the result info); updated nodes keep the node ids
 * and graph id of the executable. cudaGraphUpload validates and returns (no work is visible). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cupti_activity.h>

#include "cudart_internal.h"

/* ---------------------------------------------------------------- graph allocations */

struct sg_graph_alloc {
    uintptr_t base;
    size_t bytes, mapped;
    int device;
    int allocated;         /* charged to the device: its alloc node ran, not freed since */
    const void *freed_by;  /* the graph with a free node for it, NULL: none */
    const void *exec;      /* the executable of its graph, NULL: none */
    int refs;              /* nodes (of graphs and executables) that name it */
};

static pthread_mutex_t g_alloc_lock = PTHREAD_MUTEX_INITIALIZER;

#define GRAPH_ALLOC_GRANULE (2u << 20)

cudaError_t sg_rt_graph_alloc_new(size_t bytes, int device, sg_graph_alloc **out)
{
    if (!bytes || device < 0 || device >= sg_device_count()) return cudaErrorInvalidValue;
    sg_graph_alloc *a = calloc(1, sizeof *a);
    if (!a) return cudaErrorMemoryAllocation;
    a->mapped = (bytes + GRAPH_ALLOC_GRANULE - 1) / GRAPH_ALLOC_GRANULE * GRAPH_ALLOC_GRANULE;
    void *m = mmap(NULL, a->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        free(a);
        return cudaErrorMemoryAllocation;
    }
    a->base = (uintptr_t)m;
    a->bytes = bytes;
    a->device = device;
    a->refs = 1;
    sg_mem_add_ext(a->base, bytes, device, SG_MEM_GRAPH, a, NULL, 0);
    *out = a;
    return cudaSuccess;
}

void *sg_rt_graph_alloc_ptr(const sg_graph_alloc *a) { return (void *)a->base; }

sg_graph_alloc *sg_rt_graph_alloc_of(const void *p)
{
    mem_ent e;
    if (!p || !sg_mem_find(p, &e) || e.kind != SG_MEM_GRAPH || e.base != (uintptr_t)p) return NULL;
    return e.owner;
}

static void alloc_retain(sg_graph_alloc *a)
{
    pthread_mutex_lock(&g_alloc_lock);
    a->refs++;
    pthread_mutex_unlock(&g_alloc_lock);
}

/* Last reference gone: the address range goes once the memory is not allocated any more. Lock held. */
static void alloc_drop_locked(sg_graph_alloc *a)
{
    if (a->refs > 0 || a->allocated) return;
    sg_mem_remove((void *)a->base, NULL);
    munmap((void *)a->base, a->mapped);
    free(a);
}

static void alloc_release(sg_graph_alloc *a)
{
    pthread_mutex_lock(&g_alloc_lock);
    a->refs--;
    alloc_drop_locked(a);
    pthread_mutex_unlock(&g_alloc_lock);
}
void sg_rt_graph_alloc_release(sg_graph_alloc *a) { alloc_release(a); }

/* Lock held. Gives the memory back (CUPTI release record). */
static void alloc_unmap_locked(sg_graph_alloc *a, uint32_t corr, uint32_t stream_id, int is_async)
{
    a->allocated = 0;
    sg_mem_unreserve(a->device, a->bytes);
    sgc_emit_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, corr, a->base,
                    a->bytes, a->device, stream_id, is_async);
}

cudaError_t sg_rt_graph_alloc_free_outside(sg_graph_alloc *a, uint32_t corr, uint32_t stream_id, int is_async)
{
    pthread_mutex_lock(&g_alloc_lock);
    cudaError_t e = cudaErrorInvalidValue;
    if (a->allocated && !a->freed_by) {
        alloc_unmap_locked(a, corr, stream_id, is_async);
        alloc_drop_locked(a); /* a may be gone */
        e = cudaSuccess;
    }
    pthread_mutex_unlock(&g_alloc_lock);
    return e;
}

/* ---------------------------------------------------------------- graphs */

#define NODE_MAGIC 0x474e4f44u
typedef struct graph_node {
    uint32_t magic;
    sg_graph *owner;
    sg_graph_node n;
    int index;   /* position in the graph */
    int *deps;   /* positions of its dependencies, in the order given */
    int ndeps;
} graph_node;

struct sg_graph {
    uint32_t magic;
    uint32_t id;
    graph_node **nodes;
    int n, cap;
    int mem_nodes; /* memory allocation / free nodes */
};
#define GRAPH_MAGIC 0x47524148u
static uint32_t g_graph_ids;
static uint64_t g_node_ids;

sg_graph *sg_rt_graph_get(cudaGraph_t h)
{
    sg_graph *g = (sg_graph *)h;
    return g && g->magic == GRAPH_MAGIC ? g : NULL;
}

sg_graph *sg_rt_graph_new(void)
{
    sg_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->magic = GRAPH_MAGIC;
    g->id = __atomic_add_fetch(&g_graph_ids, 1, __ATOMIC_RELAXED);
    return g;
}

void sg_rt_graph_free(sg_graph *g)
{
    g->magic = 0;
    for (int i = 0; i < g->n; i++) {
        graph_node *gn = g->nodes[i];
        if (gn->n.alloc) alloc_release(gn->n.alloc);
        gn->magic = 0;
        free(gn->deps);
        free(gn);
    }
    free(g->nodes);
    free(g);
}

/* Appends n (a new node id) with dependencies at positions deps[0..ndeps). Returns the node or NULL. */
static graph_node *graph_add(sg_graph *g, const sg_graph_node *n, const int *deps, int ndeps)
{
    if (g->n == g->cap) {
        int nc = g->cap ? g->cap * 2 : 16;
        graph_node **nn = realloc(g->nodes, (size_t)nc * sizeof *nn);
        if (!nn) return NULL;
        g->nodes = nn;
        g->cap = nc;
    }
    graph_node *gn = calloc(1, sizeof *gn);
    if (!gn) return NULL;
    if (ndeps) {
        gn->deps = malloc((size_t)ndeps * sizeof *gn->deps);
        if (!gn->deps) {
            free(gn);
            return NULL;
        }
        memcpy(gn->deps, deps, (size_t)ndeps * sizeof *deps);
    }
    gn->magic = NODE_MAGIC;
    gn->owner = g;
    gn->n = *n;
    gn->n.node_id = __atomic_add_fetch(&g_node_ids, 1, __ATOMIC_RELAXED);
    gn->index = g->n;
    gn->ndeps = ndeps;
    if (n->alloc) alloc_retain(n->alloc); /* the node's reference */
    if (n->type == SG_NODE_MEM_ALLOC || n->type == SG_NODE_MEM_FREE) g->mem_nodes++;
    g->nodes[g->n++] = gn;
    return gn;
}

int sg_rt_graph_append(sg_graph *g, const sg_graph_node *n) { return graph_add(g, n, NULL, 0) ? 0 : -1; }

static graph_node *node_get(cudaGraphNode_t h)
{
    graph_node *gn = (graph_node *)h;
    return gn && gn->magic == NODE_MAGIC ? gn : NULL;
}

/* Positions of the dependencies (nodes of g, no duplicates) into *out (malloc'ed, NULL for none). */
static cudaError_t dep_positions(sg_graph *g, const cudaGraphNode_t *deps, size_t ndeps, int **out)
{
    *out = NULL;
    if (!ndeps) return cudaSuccess;
    if (!deps) return cudaErrorInvalidValue;
    int *pos = malloc(ndeps * sizeof *pos);
    if (!pos) return cudaErrorMemoryAllocation;
    for (size_t i = 0; i < ndeps; i++) {
        graph_node *d = node_get(deps[i]);
        int dup = 0;
        for (size_t j = 0; d && j < i; j++) dup |= pos[j] == d->index;
        if (!d || d->owner != g || dup) {
            free(pos);
            return cudaErrorInvalidValue;
        }
        pos[i] = d->index;
    }
    *out = pos;
    return cudaSuccess;
}

/* The common part of cudaGraphAdd*Node: checks, adds, returns the handle. */
static cudaError_t add_node(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
                            const sg_graph_node *n)
{
    sg_graph *g = sg_rt_graph_get(graph);
    if (!out || !g) return cudaErrorInvalidValue;
    int *pos;
    cudaError_t e = dep_positions(g, deps, ndeps, &pos);
    if (e != cudaSuccess) return e;
    graph_node *gn = graph_add(g, n, pos, (int)ndeps);
    free(pos);
    if (!gn) return cudaErrorMemoryAllocation;
    *out = (cudaGraphNode_t)gn;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- graph API */

cudaError_t cudaGraphCreate(cudaGraph_t *pg, unsigned flags)
{
    sg_rt_init();
    API("cudaGraphCreate", NULL);
    if (!pg || flags) RET(cudaErrorInvalidValue);
    sg_graph *g = sg_rt_graph_new();
    if (!g) RET(cudaErrorMemoryAllocation);
    *pg = (cudaGraph_t)g;
    RET(cudaSuccess);
}

static int bad_dims(dim3 g, dim3 b)
{
    return !g.x || !g.y || !g.z || !b.x || !b.y || !b.z || (uint64_t)b.x * b.y * b.z > 1024;
}

/* A kernel node from cudaKernelNodeParams (the launch arguments are not used: nothing executes). */
static cudaError_t kernel_node(const struct cudaKernelNodeParams *p, sg_graph_node *n)
{
    if (!p) return cudaErrorInvalidValue;
    if (!p->func) return cudaErrorInvalidDeviceFunction;
    if (bad_dims(p->gridDim, p->blockDim)) return cudaErrorInvalidValue;
    memset(n, 0, sizeof *n);
    n->type = SG_NODE_KERNEL;
    n->k.name = sg_intern(sg_rt_kernel_name(p->func));
    n->k.grid[0] = p->gridDim.x, n->k.grid[1] = p->gridDim.y, n->k.grid[2] = p->gridDim.z;
    n->k.block[0] = p->blockDim.x, n->k.block[1] = p->blockDim.y, n->k.block[2] = p->blockDim.z;
    n->k.dynamic_smem = p->sharedMemBytes;
    return cudaSuccess;
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
                                   const struct cudaKernelNodeParams *p)
{
    sg_rt_init();
    API("cudaGraphAddKernelNode", NULL);
    sg_graph_node n;
    cudaError_t e = kernel_node(p, &n);
    if (e != cudaSuccess) RET(e);
    RET(add_node(out, graph, deps, ndeps, &n));
}

static int device_range_ok(const void *p, size_t n)
{
    mem_ent e;
    return sg_mem_find(p, &e) && sg_mem_kind_is_device(e.kind) && (uintptr_t)p + n <= e.base + e.size;
}

/* A copy node of `height` rows of `width` bytes; checks the device sides as the copy functions do. */
static cudaError_t copy_node(void *dst, const void *src, size_t width, size_t height, size_t dpitch, size_t spitch,
                             enum cudaMemcpyKind kind, sg_graph_node *n)
{
    if (!dst || !src || !width || !height || width > dpitch || width > spitch) return cudaErrorInvalidValue;
    if ((int)kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
    int pinned;
    int k = sg_rt_copy_kind(dst, src, kind, &pinned);
    int dst_dev = k == SG_COPY_HTOD || k == SG_COPY_DTOD || k == SG_COPY_PTOP;
    int src_dev = k == SG_COPY_DTOH || k == SG_COPY_DTOD || k == SG_COPY_PTOP;
    if (dst_dev && !device_range_ok(dst, dpitch * (height - 1) + width)) return cudaErrorInvalidValue;
    if (src_dev && !device_range_ok(src, spitch * (height - 1) + width)) return cudaErrorInvalidValue;
    memset(n, 0, sizeof *n);
    n->type = SG_NODE_COPY;
    n->c.copy_kind = k;
    n->c.bytes = (uint64_t)width * height;
    n->c.host_pinned = pinned;
    n->c.is_async = 1;
    n->dst = dst, n->src = src, n->width = width, n->height = height, n->dpitch = dpitch, n->spitch = spitch;
    return cudaSuccess;
}

/* cudaMemcpy3DParms over linear memory (no CUDA arrays here): depth slices of height rows, contiguous
 * when the pitched pointers' ysize is the extent's height. */
static cudaError_t copy3d_node(const struct cudaMemcpy3DParms *p, sg_graph_node *n)
{
    if (!p || p->srcArray || p->dstArray || !p->srcPtr.ptr || !p->dstPtr.ptr) return cudaErrorInvalidValue;
    size_t w = p->extent.width, h = p->extent.height ? p->extent.height : 1, d = p->extent.depth ? p->extent.depth : 1;
    size_t sp = p->srcPtr.pitch ? p->srcPtr.pitch : w, dp = p->dstPtr.pitch ? p->dstPtr.pitch : w;
    if (d > 1 && (p->srcPtr.ysize != h || p->dstPtr.ysize != h)) return cudaErrorInvalidValue;
    const char *src = (const char *)p->srcPtr.ptr + (p->srcPos.z * (p->srcPtr.ysize ? p->srcPtr.ysize : h) + p->srcPos.y) * sp + p->srcPos.x;
    char *dst = (char *)p->dstPtr.ptr + (p->dstPos.z * (p->dstPtr.ysize ? p->dstPtr.ysize : h) + p->dstPos.y) * dp + p->dstPos.x;
    return copy_node(dst, src, w, h * d, dp, sp, p->kind, n);
}

cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
                                   const struct cudaMemcpy3DParms *p)
{
    sg_rt_init();
    API("cudaGraphAddMemcpyNode", NULL);
    sg_graph_node n;
    cudaError_t e = copy3d_node(p, &n);
    if (e != cudaSuccess) RET(e);
    RET(add_node(out, graph, deps, ndeps, &n));
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                     size_t ndeps, void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    sg_rt_init();
    API("cudaGraphAddMemcpyNode1D", NULL);
    sg_graph_node n;
    cudaError_t e = copy_node(dst, src, count, 1, count, count, kind, &n);
    if (e != cudaSuccess) RET(e);
    RET(add_node(out, graph, deps, ndeps, &n));
}

static cudaError_t memset_node(const struct cudaMemsetParams *p, sg_graph_node *n)
{
    if (!p || !p->width || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) return cudaErrorInvalidValue;
    size_t h = p->height ? p->height : 1, row = p->width * p->elementSize;
    size_t pitch = h > 1 ? p->pitch : row;
    if (pitch < row || !device_range_ok(p->dst, pitch * (h - 1) + row)) return cudaErrorInvalidValue;
    memset(n, 0, sizeof *n);
    n->type = SG_NODE_COPY;
    n->c.is_memset = 1;
    n->c.bytes = (uint64_t)row * h;
    n->c.value = p->value;
    n->c.is_async = 1;
    n->dst = p->dst, n->width = p->width, n->height = h, n->dpitch = pitch, n->elem_size = p->elementSize;
    return cudaSuccess;
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
                                   const struct cudaMemsetParams *p)
{
    sg_rt_init();
    API("cudaGraphAddMemsetNode", NULL);
    sg_graph_node n;
    cudaError_t e = memset_node(p, &n);
    if (e != cudaSuccess) RET(e);
    RET(add_node(out, graph, deps, ndeps, &n));
}

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
                                 const struct cudaHostNodeParams *p)
{
    sg_rt_init();
    API("cudaGraphAddHostNode", NULL);
    if (!p || !p->fn) RET(cudaErrorInvalidValue);
    sg_graph_node n;
    memset(&n, 0, sizeof n);
    n.type = SG_NODE_HOST;
    n.host_fn = p->fn;
    n.host_arg = p->userData;
    RET(add_node(out, graph, deps, ndeps, &n));
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps)
{
    sg_rt_init();
    API("cudaGraphAddEmptyNode", NULL);
    sg_graph_node n;
    memset(&n, 0, sizeof n);
    n.type = SG_NODE_EMPTY;
    RET(add_node(out, graph, deps, ndeps, &n));
}

static int valid_device(int d) { return d >= 0 && d < sg_device_count(); }

cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                     size_t ndeps, struct cudaMemAllocNodeParams *p)
{
    sg_rt_init();
    API("cudaGraphAddMemAllocNode", NULL);
    if (!p || !p->bytesize || p->poolProps.allocType != cudaMemAllocationTypePinned ||
        p->poolProps.handleTypes != cudaMemHandleTypeNone || p->poolProps.location.type != cudaMemLocationTypeDevice ||
        !valid_device(p->poolProps.location.id) || (p->accessDescCount && !p->accessDescs))
        RET(cudaErrorInvalidValue);
    for (size_t i = 0; i < p->accessDescCount; i++)
        if (p->accessDescs[i].location.type != cudaMemLocationTypeDevice || !valid_device(p->accessDescs[i].location.id))
            RET(cudaErrorInvalidValue);
    if (!out || !sg_rt_graph_get(graph)) RET(cudaErrorInvalidValue);
    sg_graph_node n;
    memset(&n, 0, sizeof n);
    n.type = SG_NODE_MEM_ALLOC;
    cudaError_t e = sg_rt_graph_alloc_new(p->bytesize, p->poolProps.location.id, &n.alloc);
    if (e != cudaSuccess) RET(e);
    e = add_node(out, graph, deps, ndeps, &n);
    if (e == cudaSuccess) p->dptr = (void *)n.alloc->base;
    alloc_release(n.alloc); /* the node holds it now (or nobody) */
    RET(e);
}

cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
                                    void *dptr)
{
    sg_rt_init();
    API("cudaGraphAddMemFreeNode", NULL);
    sg_graph *g = sg_rt_graph_get(graph);
    sg_graph_alloc *a = sg_rt_graph_alloc_of(dptr);
    if (!out || !g || !a) RET(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_alloc_lock);
    int taken = a->freed_by != NULL;
    if (!taken) a->freed_by = g;
    pthread_mutex_unlock(&g_alloc_lock);
    if (taken) RET(cudaErrorInvalidValue);
    sg_graph_node n;
    memset(&n, 0, sizeof n);
    n.type = SG_NODE_MEM_FREE;
    n.alloc = a;
    cudaError_t e = add_node(out, graph, deps, ndeps, &n);
    if (e != cudaSuccess) {
        pthread_mutex_lock(&g_alloc_lock);
        a->freed_by = NULL;
        pthread_mutex_unlock(&g_alloc_lock);
    }
    RET(e);
}

cudaError_t cudaGraphClone(cudaGraph_t *pclone, cudaGraph_t original)
{
    sg_rt_init();
    API("cudaGraphClone", NULL);
    sg_graph *g = sg_rt_graph_get(original);
    if (!pclone || !g) RET(cudaErrorInvalidValue);
    if (g->mem_nodes) RET(cudaErrorNotSupported);
    sg_graph *c = sg_rt_graph_new();
    if (!c) RET(cudaErrorMemoryAllocation);
    for (int i = 0; i < g->n; i++)
        if (!graph_add(c, &g->nodes[i]->n, g->nodes[i]->deps, g->nodes[i]->ndeps)) {
            sg_rt_graph_free(c);
            RET(cudaErrorMemoryAllocation);
        }
    *pclone = (cudaGraph_t)c;
    RET(cudaSuccess);
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *num)
{
    sg_rt_init();
    API("cudaGraphGetNodes", NULL);
    sg_graph *g = sg_rt_graph_get(graph);
    if (!g || !num) RET(cudaErrorInvalidValue);
    if (nodes)
        for (size_t i = 0; i < *num && i < (size_t)g->n; i++) nodes[i] = (cudaGraphNode_t)g->nodes[i];
    *num = (size_t)g->n;
    RET(cudaSuccess);
}

static const enum cudaGraphNodeType g_node_types[] = {
    [SG_NODE_KERNEL] = cudaGraphNodeTypeKernel,   [SG_NODE_COPY] = cudaGraphNodeTypeMemcpy,
    [SG_NODE_HOST] = cudaGraphNodeTypeHost,       [SG_NODE_MEM_ALLOC] = cudaGraphNodeTypeMemAlloc,
    [SG_NODE_MEM_FREE] = cudaGraphNodeTypeMemFree, [SG_NODE_EMPTY] = cudaGraphNodeTypeEmpty,
};
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type)
{
    sg_rt_init();
    API("cudaGraphNodeGetType", NULL);
    graph_node *gn = node_get(node);
    if (!gn || !type) RET(cudaErrorInvalidValue);
    *type = gn->n.type == SG_NODE_COPY && gn->n.c.is_memset ? cudaGraphNodeTypeMemset : g_node_types[gn->n.type];
    RET(cudaSuccess);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    sg_rt_init();
    API("cudaGraphDestroy", NULL);
    sg_graph *g = sg_rt_graph_get(graph);
    if (!g) RET(cudaErrorInvalidValue);
    sg_rt_graph_free(g);
    RET(cudaSuccess);
}

/* ---------------------------------------------------------------- executable graphs */

typedef struct exec_node {
    sg_graph_node n;
    const void *origin; /* the graph node it was made from (compared, never dereferenced) */
    int *deps;
    int ndeps;
} exec_node;

typedef struct sg_graph_exec {
    uint32_t magic;
    uint32_t graph_id;
    exec_node *nodes;
    int n;
    int auto_free; /* cudaGraphInstantiateFlagAutoFreeOnLaunch */
    sg_op *last;   /* the end of its previous launch */
} sg_graph_exec;
#define EXEC_MAGIC 0x47455845u

static sg_graph_exec *exec_get(cudaGraphExec_t h)
{
    sg_graph_exec *e = (sg_graph_exec *)h;
    return e && e->magic == EXEC_MAGIC ? e : NULL;
}

static void exec_free(sg_graph_exec *e)
{
    e->magic = 0;
    for (int i = 0; i < e->n; i++) {
        sg_graph_alloc *a = e->nodes[i].n.alloc;
        if (a) {
            pthread_mutex_lock(&g_alloc_lock);
            if (a->exec == e) a->exec = NULL;
            pthread_mutex_unlock(&g_alloc_lock);
            alloc_release(a);
        }
        free(e->nodes[i].deps);
    }
    if (e->last) sg_op_release(e->last);
    free(e->nodes);
    free(e);
}

static cudaError_t instantiate(const char *api, cudaGraphExec_t *pe, cudaGraph_t graph, unsigned long long flags)
{
    sg_rt_init();
    API(api, NULL);
    sg_graph *g = sg_rt_graph_get(graph);
    if (!pe || !g) RET(cudaErrorInvalidValue);
    sg_graph_exec *e = calloc(1, sizeof *e);
    if (!e) RET(cudaErrorMemoryAllocation);
    e->magic = EXEC_MAGIC;
    e->graph_id = g->id;
    e->auto_free = (flags & cudaGraphInstantiateFlagAutoFreeOnLaunch) != 0;
    e->nodes = calloc((size_t)g->n + 1, sizeof *e->nodes);
    if (!e->nodes) {
        free(e);
        RET(cudaErrorMemoryAllocation);
    }
    /* a graph with memory nodes: one executable at a time */
    pthread_mutex_lock(&g_alloc_lock);
    int busy = 0;
    for (int i = 0; i < g->n; i++) {
        sg_graph_alloc *a = g->nodes[i]->n.alloc;
        if (a && g->nodes[i]->n.type == SG_NODE_MEM_ALLOC && a->exec) busy = 1;
    }
    for (int i = 0; i < g->n && !busy; i++) {
        sg_graph_alloc *a = g->nodes[i]->n.alloc;
        if (a && g->nodes[i]->n.type == SG_NODE_MEM_ALLOC) a->exec = e;
    }
    pthread_mutex_unlock(&g_alloc_lock);
    if (busy) {
        free(e->nodes);
        free(e);
        RET(cudaErrorInvalidValue);
    }
    for (int i = 0; i < g->n; i++) {
        graph_node *gn = g->nodes[i];
        exec_node *x = &e->nodes[e->n];
        x->n = gn->n;
        x->origin = gn;
        if (gn->ndeps) {
            x->deps = malloc((size_t)gn->ndeps * sizeof *x->deps);
            if (!x->deps) {
                exec_free(e);
                RET(cudaErrorMemoryAllocation);
            }
            memcpy(x->deps, gn->deps, (size_t)gn->ndeps * sizeof *x->deps);
            x->ndeps = gn->ndeps;
        }
        if (x->n.alloc) alloc_retain(x->n.alloc);
        e->n++;
    }
    *pe = (cudaGraphExec_t)e;
    RET(cudaSuccess);
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pe, cudaGraph_t g, unsigned long long flags)
{
    return instantiate("cudaGraphInstantiate", pe, g, flags);
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pe, cudaGraph_t g, unsigned long long flags)
{
    return instantiate("cudaGraphInstantiateWithFlags", pe, g, flags);
}
static cudaError_t instantiate_with_params(const char *api, cudaGraphExec_t *pe, cudaGraph_t g,
                                           cudaGraphInstantiateParams *p)
{
    if (!p) return cudaErrorInvalidValue;
    cudaError_t e = instantiate(api, pe, g, p->flags);
    p->errNode_out = NULL;
    p->result_out = e == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
    return e;
}
cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pe, cudaGraph_t g, cudaGraphInstantiateParams *p)
{
    return instantiate_with_params("cudaGraphInstantiateWithParams", pe, g, p);
}
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pe, cudaGraph_t g, cudaGraphInstantiateParams *p);
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pe, cudaGraph_t g, cudaGraphInstantiateParams *p)
{
    return instantiate_with_params("cudaGraphInstantiateWithParams_ptsz", pe, g, p);
}

/* Memory nodes of a launch, before anything is queued: the executable's allocations must all be free
 * (auto-free: freed now), and the device must hold what its alloc nodes allocate. */
static cudaError_t launch_memory_check(sg_graph_exec *e, uint32_t corr, uint32_t stream_id)
{
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&g_alloc_lock);
    for (int i = 0; i < e->n && err == cudaSuccess; i++) {
        sg_graph_alloc *a = e->nodes[i].n.alloc;
        if (e->nodes[i].n.type != SG_NODE_MEM_ALLOC || !a->allocated) continue;
        if (e->auto_free)
            alloc_unmap_locked(a, corr, stream_id, 1);
        else
            err = cudaErrorInvalidValue;
    }
    int reserved = 0; /* nodes before this one have been charged */
    for (; reserved < e->n && err == cudaSuccess; reserved++) {
        sg_graph_alloc *a = e->nodes[reserved].n.alloc;
        if (e->nodes[reserved].n.type != SG_NODE_MEM_ALLOC) continue;
        if (sg_mem_reserve(a->device, a->bytes) != 0) {
            err = cudaErrorMemoryAllocation;
            break;
        }
    }
    if (err == cudaErrorMemoryAllocation)
        for (int i = 0; i < reserved; i++)
            if (e->nodes[i].n.type == SG_NODE_MEM_ALLOC)
                sg_mem_unreserve(e->nodes[i].n.alloc->device, e->nodes[i].n.alloc->bytes);
    pthread_mutex_unlock(&g_alloc_lock);
    return err;
}

/* Queues the nodes of e on s with the graph launch's correlation, or adds them to the capture s
 * belongs to (a graph launched into a capture is a child graph: it runs when the outer one does). */
static cudaError_t graph_launch(const char *api, cudaGraphExec_t ge, cudaStream_t st, int pt)
{
    sg_rt_init();
    API(api, NULL);
    sg_graph_exec *e = exec_get(ge);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!e) RET(cudaErrorInvalidValue);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    sg_rt_launch_overhead();
    int queued = 0;
    for (int i = 0; i < e->n; i++) {
        sg_graph_node n = e->nodes[i].n;
        cudaError_t err;
        if (n.type == SG_NODE_EMPTY) continue;
        if (sg_rt_capture_node(s, &n, &err)) {
            if (err != cudaSuccess) RET(err);
            continue;
        }
        if (!queued) {
            /* before the first node queued: the launch's memory checks, then behind the previous launch */
            cudaError_t m = launch_memory_check(e, _c.correlation, sg_stream_id(s));
            if (m != cudaSuccess) RET(m);
            if (e->last) sg_stream_wait_op(s, e->last);
            queued = 1;
        }
        if (n.type == SG_NODE_KERNEL && n.replay) {
            n.k.correlation = _c.correlation;
            n.replay(n.replay_ctx, s, &n.k, e->graph_id, n.node_id);
        } else if (n.type == SG_NODE_KERNEL) {
            n.k.correlation = _c.correlation;
            sg_enqueue_kernel_graph(s, &n.k, e->graph_id, n.node_id);
        } else if (n.type == SG_NODE_COPY) {
            sg_rt_node_move_bytes(&n);
            n.c.correlation = _c.correlation;
            n.c.graph_id = e->graph_id;
            n.c.graph_node_id = n.node_id;
            n.c.is_async = 1;
            sg_enqueue_copy(s, &n.c, 0);
        } else if (n.type == SG_NODE_HOST) {
            sg_rt_enqueue_host_fn(s, n.host_fn, n.host_arg);
        } else if (n.type == SG_NODE_MEM_ALLOC) {
            pthread_mutex_lock(&g_alloc_lock);
            n.alloc->allocated = 1;
            pthread_mutex_unlock(&g_alloc_lock);
            sgc_emit_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                            _c.correlation, n.alloc->base, n.alloc->bytes, n.alloc->device, sg_stream_id(s), 1);
        } else if (n.type == SG_NODE_MEM_FREE) {
            pthread_mutex_lock(&g_alloc_lock);
            if (n.alloc->allocated) alloc_unmap_locked(n.alloc, _c.correlation, sg_stream_id(s), 1);
            pthread_mutex_unlock(&g_alloc_lock);
        }
    }
    if (queued) {
        sg_op *end = sg_stream_record_marker(s);
        if (e->last) sg_op_release(e->last);
        e->last = end;
    }
    RET(cudaSuccess);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t st) { return graph_launch("cudaGraphLaunch", e, st, 0); }
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t st);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t e, cudaStream_t st) { return graph_launch("cudaGraphLaunch_ptsz", e, st, 1); }

static cudaError_t graph_upload(const char *api, cudaGraphExec_t ge, cudaStream_t st, int pt)
{
    sg_rt_init();
    API(api, NULL);
    if (!exec_get(ge)) RET(cudaErrorInvalidValue);
    if (!sg_stream_resolve(st, pt)) RET(cudaErrorInvalidResourceHandle);
    RET(cudaSuccess);
}
cudaError_t cudaGraphUpload(cudaGraphExec_t e, cudaStream_t st) { return graph_upload("cudaGraphUpload", e, st, 0); }
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t e, cudaStream_t st);
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t e, cudaStream_t st) { return graph_upload("cudaGraphUpload_ptsz", e, st, 1); }

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t ge, cudaGraphNode_t node,
                                             const struct cudaKernelNodeParams *p)
{
    sg_rt_init();
    API("cudaGraphExecKernelNodeSetParams", NULL);
    sg_graph_exec *e = exec_get(ge);
    if (!e || !node) RET(cudaErrorInvalidValue);
    exec_node *x = NULL;
    for (int i = 0; i < e->n && !x; i++)
        if (e->nodes[i].origin == (const void *)node) x = &e->nodes[i];
    if (!x || x->n.type != SG_NODE_KERNEL) RET(cudaErrorInvalidValue);
    sg_graph_node n;
    cudaError_t err = kernel_node(p, &n);
    if (err != cudaSuccess) RET(err);
    n.k.launch_type = x->n.k.launch_type;
    n.node_id = x->n.node_id;
    x->n = n;
    RET(cudaSuccess);
}

/* Why node x of the executable cannot take the parameters of graph node gn (cudaGraphExecUpdateResult). */
static enum cudaGraphExecUpdateResult update_check(const exec_node *x, const graph_node *gn)
{
    const sg_graph_node *a = &x->n, *b = &gn->n;
    if (x->ndeps != gn->ndeps) return cudaGraphExecUpdateErrorTopologyChanged;
    for (int d = 0; d < x->ndeps; d++)
        if (x->deps[d] != gn->deps[d]) return cudaGraphExecUpdateErrorTopologyChanged;
    if (a->type != b->type || a->c.is_memset != b->c.is_memset) return cudaGraphExecUpdateErrorNodeTypeChanged;
    if (a->type == SG_NODE_KERNEL && a->k.launch_type != b->k.launch_type)
        return cudaGraphExecUpdateErrorUnsupportedFunctionChange;
    if (a->type == SG_NODE_COPY && !a->c.is_memset && a->c.copy_kind != b->c.copy_kind)
        return cudaGraphExecUpdateErrorParametersChanged; /* a memory type changed */
    if (a->type == SG_NODE_COPY && a->c.is_memset && a->height > 1 &&
        (a->width != b->width || a->height != b->height || a->elem_size != b->elem_size))
        return cudaGraphExecUpdateErrorParametersChanged; /* 2D memsets: only address and value */
    if ((a->type == SG_NODE_MEM_ALLOC || a->type == SG_NODE_MEM_FREE) && a->alloc != b->alloc)
        return cudaGraphExecUpdateErrorParametersChanged;
    return cudaGraphExecUpdateSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t ge, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *info)
{
    sg_rt_init();
    API("cudaGraphExecUpdate", NULL);
    sg_graph_exec *e = exec_get(ge);
    sg_graph *g = sg_rt_graph_get(graph);
    if (!info) RET(cudaErrorInvalidValue);
    memset(info, 0, sizeof *info);
    if (!e || !g) {
        info->result = cudaGraphExecUpdateError;
        RET(cudaErrorInvalidValue);
    }
    enum cudaGraphExecUpdateResult r = e->n == g->n ? cudaGraphExecUpdateSuccess : cudaGraphExecUpdateErrorTopologyChanged;
    for (int i = 0; i < g->n && r == cudaGraphExecUpdateSuccess; i++) {
        r = update_check(&e->nodes[i], g->nodes[i]);
        if (r != cudaGraphExecUpdateSuccess) {
            info->errorNode = (cudaGraphNode_t)g->nodes[i];
            if (r == cudaGraphExecUpdateErrorTopologyChanged && g->nodes[i]->ndeps == e->nodes[i].ndeps)
                for (int d = 0; d < g->nodes[i]->ndeps; d++)
                    if (g->nodes[i]->deps[d] != e->nodes[i].deps[d]) {
                        info->errorFromNode = (cudaGraphNode_t)g->nodes[g->nodes[i]->deps[d]];
                        break;
                    }
        }
    }
    info->result = r;
    if (r != cudaGraphExecUpdateSuccess) RET(cudaErrorGraphExecUpdateFailure);
    for (int i = 0; i < g->n; i++) {
        exec_node *x = &e->nodes[i];
        uint64_t id = x->n.node_id;
        sg_graph_alloc *keep = x->n.alloc; /* equal by the check */
        x->n = g->nodes[i]->n;
        x->n.node_id = id;
        x->n.alloc = keep;
        x->origin = g->nodes[i];
    }
    RET(cudaSuccess);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ge)
{
    sg_rt_init();
    API("cudaGraphExecDestroy", NULL);
    sg_graph_exec *e = exec_get(ge);
    if (!e) RET(cudaErrorInvalidValue);
    exec_free(e);
    RET(cudaSuccess);
}
