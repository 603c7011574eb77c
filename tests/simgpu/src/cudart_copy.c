/* cudart_copy.c - mock CUDA runtime: copies and memsets (cudaMemcpy*, cudaMemcpy2D*, cudaMemcpyPeer*,
 * cudaMemset*). The kind of a copy comes from the pointers (where cudaMemcpyDefault asks for it, and for
 * device memory of two devices: PtoP); the bytes move at the call (or when the graph node a capture made
 * of it runs), then the timing op is queued; synchronous copies and async ones with pageable host
 * memory wait for it. Memsets of 0 over whole pages of private memory are MADV_DONTNEED. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "cudart_internal.h"

/* pointer classification: 1 device/managed, 0 host; *pinned for host memory */
static int ptr_is_device(const void *p, int *pinned, int *device)
{
    mem_ent e;
    if (sg_mem_find(p, &e)) {
        if (sg_mem_kind_is_device(e.kind)) {
            if (device) *device = e.device;
            if (pinned) *pinned = 0;
            return 1;
        }
        if (pinned) *pinned = 1;
        return 0;
    }
    if (pinned) *pinned = 0;
    return 0;
}

/* copies: classify, copy the bytes now, queue the timing op */
int sg_rt_copy_kind(const void *dst, const void *src, enum cudaMemcpyKind kind, int *pinned)
{
    int sp = 0, dp = 0, sd = -1, dd = -1;
    int sdev = ptr_is_device(src, &sp, &sd), ddev = ptr_is_device(dst, &dp, &dd);
    /* device memory of two devices: a peer-to-peer copy, as CUPTI reports it */
    int peer = sdev && ddev && sd != dd;
    switch (kind) {
    case cudaMemcpyHostToDevice: *pinned = sp; return SG_COPY_HTOD;
    case cudaMemcpyDeviceToHost: *pinned = dp; return SG_COPY_DTOH;
    case cudaMemcpyDeviceToDevice: *pinned = 0; return peer ? SG_COPY_PTOP : SG_COPY_DTOD;
    case cudaMemcpyHostToHost: *pinned = sp && dp; return SG_COPY_HTOH;
    default:
        if (sdev && ddev) { *pinned = 0; return peer ? SG_COPY_PTOP : SG_COPY_DTOD; }
        if (sdev) { *pinned = dp; return SG_COPY_DTOH; }
        if (ddev) { *pinned = sp; return SG_COPY_HTOD; }
        *pinned = sp && dp;
        return SG_COPY_HTOH;
    }
}

static cudaError_t check_dev_range(const void *p, size_t n)
{
    mem_ent e;
    if (!sg_mem_find(p, &e) || !sg_mem_kind_is_device(e.kind)) return cudaErrorInvalidValue;
    if ((uintptr_t)p + n > e.base + e.size) return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* memset: value 0 over whole pages of private memory is done with MADV_DONTNEED (no memory touched);
 * memory of the driver's cuMemMap is shared (a memfd), where that would not zero it */
static void fill_bytes(void *p, int value, size_t n, int shared)
{
    uintptr_t a = (uintptr_t)p, e = a + n;
    uintptr_t pa = (a + 4095) & ~(uintptr_t)4095, pe = e & ~(uintptr_t)4095;
    if ((value & 0xff) == 0 && !shared && pe > pa + 65536) {
        memset(p, 0, pa - a);
        madvise((void *)pa, pe - pa, MADV_DONTNEED);
        memset((void *)pe, 0, e - pe);
    } else {
        memset(p, value, n);
    }
}

/* `count` elements of `size` bytes (1, 2 or 4) set to value */
static void fill(void *p, unsigned value, unsigned size, size_t count, int shared)
{
    if (size == 1 || (size == 2 && (value & 0xffff) == (value & 0xff) * 0x101u) ||
        (size == 4 && value == (value & 0xff) * 0x01010101u)) {
        fill_bytes(p, (int)(value & 0xff), count * size, shared);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        if (size == 2) {
            uint16_t v = (uint16_t)value;
            memcpy((char *)p + 2 * i, &v, 2);
        } else {
            memcpy((char *)p + 4 * i, &value, 4);
        }
    }
}

void sg_rt_node_move_bytes(const sg_graph_node *n)
{
    if (n->type != SG_NODE_COPY || !n->width || !n->height) return;
    if (n->c.is_memset) {
        size_t row = n->width * n->elem_size;
        if (check_dev_range(n->dst, n->dpitch * (n->height - 1) + row) != cudaSuccess) return;
        mem_ent e;
        int shared = sg_mem_find(n->dst, &e) && e.kind == SG_MEM_MAPPED;
        for (size_t r = 0; r < n->height; r++)
            fill((char *)n->dst + r * n->dpitch, n->c.value, n->elem_size, n->width, shared);
        return;
    }
    int k = n->c.copy_kind;
    if ((k == SG_COPY_HTOD || k == SG_COPY_DTOD || k == SG_COPY_PTOP) &&
        check_dev_range(n->dst, n->dpitch * (n->height - 1) + n->width) != cudaSuccess)
        return;
    if ((k == SG_COPY_DTOH || k == SG_COPY_DTOD || k == SG_COPY_PTOP) &&
        check_dev_range(n->src, n->spitch * (n->height - 1) + n->width) != cudaSuccess)
        return;
    for (size_t r = 0; r < n->height; r++)
        memmove((char *)n->dst + r * n->dpitch, (const char *)n->src + r * n->spitch, n->width);
}

cudaError_t sg_rt_copy(uint32_t corr, void *dst, const void *src, size_t width, size_t height, size_t dpitch,
                       size_t spitch, int copy_kind, int pinned, sg_stream *s, int is_async)
{
    size_t bytes = width * height;
    if (bytes && (!dst || !src)) return cudaErrorInvalidValue;
    if (copy_kind == SG_COPY_HTOD || copy_kind == SG_COPY_DTOD || copy_kind == SG_COPY_PTOP)
        if (bytes && check_dev_range(dst, dpitch * (height - 1) + width) != cudaSuccess) return cudaErrorInvalidValue;
    if (copy_kind == SG_COPY_DTOH || copy_kind == SG_COPY_DTOD || copy_kind == SG_COPY_PTOP)
        if (bytes && check_dev_range(src, spitch * (height - 1) + width) != cudaSuccess) return cudaErrorInvalidValue;
    sg_graph_node n;
    memset(&n, 0, sizeof n);
    n.type = SG_NODE_COPY;
    n.c.copy_kind = copy_kind;
    n.c.bytes = bytes;
    n.c.host_pinned = pinned;
    n.c.is_async = is_async;
    n.c.correlation = corr;
    n.dst = dst, n.src = src, n.width = width, n.height = height, n.dpitch = dpitch, n.spitch = spitch;
    cudaError_t err;
    if (sg_rt_capture_node(s, &n, &err)) return err; /* captured: the bytes move when the graph runs */
    sg_rt_node_move_bytes(&n);
    int host_side = copy_kind == SG_COPY_HTOD || copy_kind == SG_COPY_DTOH || copy_kind == SG_COPY_HTOH;
    int wait = !is_async || (host_side && !pinned); /* pageable async copies are synchronous */
    sg_op *op = sg_enqueue_copy(s, &n.c, wait);
    if (wait) {
        sg_op_wait(op);
        sg_op_release(op);
    }
    return cudaSuccess;
}

#define MEMCPY_FN(fname, api, pt, async)                                                                      \
    cudaError_t fname(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t st)         \
    {                                                                                                          \
        sg_rt_init();                                                                                             \
        API(api, NULL);                                                                                        \
        sg_stream *s = sg_stream_resolve(st, pt);                                                              \
        if (!s) RET(cudaErrorInvalidResourceHandle);                                                           \
        int pinned;                                                                                            \
        int k = sg_rt_copy_kind(dst, src, kind, &pinned);                                                      \
        RET(sg_rt_copy(_c.correlation, dst, src, n, 1, n, n, k, pinned, s, async));                            \
    }
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t st);
MEMCPY_FN(cudaMemcpyAsync, "cudaMemcpyAsync", 0, 1)
MEMCPY_FN(cudaMemcpyAsync_ptsz, "cudaMemcpyAsync_ptsz", 1, 1)

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    sg_rt_init();
    API("cudaMemcpy", NULL);
    sg_stream *s = sg_stream_resolve(NULL, 0);
    int pinned;
    int k = sg_rt_copy_kind(dst, src, kind, &pinned);
    RET(sg_rt_copy(_c.correlation, dst, src, n, 1, n, n, k, pinned, s, 0));
}
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    sg_rt_init();
    API("cudaMemcpy_ptds", NULL);
    sg_stream *s = sg_stream_resolve(NULL, 1);
    int pinned;
    int k = sg_rt_copy_kind(dst, src, kind, &pinned);
    RET(sg_rt_copy(_c.correlation, dst, src, n, 1, n, n, k, pinned, s, 0));
}

static cudaError_t memcpy2d(const char *api, void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h,
                            enum cudaMemcpyKind kind, cudaStream_t st, int pt, int async)
{
    sg_rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    if (w > dp || w > sp) RET(cudaErrorInvalidPitchValue);
    int pinned;
    int k = sg_rt_copy_kind(dst, src, kind, &pinned);
    RET(sg_rt_copy(_c.correlation, dst, src, w, h, dp, sp, k, pinned, s, async));
}
cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k)
{
    return memcpy2d("cudaMemcpy2D", d, dp, s, sp, w, h, k, NULL, 0, 0);
}
cudaError_t cudaMemcpy2D_ptds(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k);
cudaError_t cudaMemcpy2D_ptds(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k)
{
    return memcpy2d("cudaMemcpy2D_ptds", d, dp, s, sp, w, h, k, NULL, 1, 0);
}
cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k,
                              cudaStream_t st)
{
    return memcpy2d("cudaMemcpy2DAsync", d, dp, s, sp, w, h, k, st, 0, 1);
}
cudaError_t cudaMemcpy2DAsync_ptsz(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                                   enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemcpy2DAsync_ptsz(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                                   enum cudaMemcpyKind k, cudaStream_t st)
{
    return memcpy2d("cudaMemcpy2DAsync_ptsz", d, dp, s, sp, w, h, k, st, 1, 1);
}

static cudaError_t memcpy_peer(const char *api, void *dst, int dd, const void *src, int sd, size_t n,
                               cudaStream_t st, int pt, int async)
{
    sg_rt_init();
    API(api, NULL);
    (void)dd, (void)sd;
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    RET(sg_rt_copy(_c.correlation, dst, src, n, 1, n, n, SG_COPY_PTOP, 0, s, async));
}
cudaError_t cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n)
{
    return memcpy_peer("cudaMemcpyPeer", dst, dd, src, sd, n, NULL, 0, 0);
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t st)
{
    return memcpy_peer("cudaMemcpyPeerAsync", dst, dd, src, sd, n, st, 0, 1);
}
cudaError_t cudaMemcpyPeerAsync_ptsz(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t st);
cudaError_t cudaMemcpyPeerAsync_ptsz(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t st)
{
    return memcpy_peer("cudaMemcpyPeerAsync_ptsz", dst, dd, src, sd, n, st, 1, 1);
}

static cudaError_t memset_common(const char *api, void *p, int value, size_t n, cudaStream_t st, int pt, int async)
{
    sg_rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    if (n && check_dev_range(p, n) != cudaSuccess) RET(cudaErrorInvalidValue);
    sg_graph_node node;
    memset(&node, 0, sizeof node);
    node.type = SG_NODE_COPY;
    node.c.is_memset = 1;
    node.c.bytes = n;
    node.c.value = (uint32_t)(value & 0xff);
    node.c.is_async = async;
    node.c.correlation = _c.correlation;
    node.dst = p, node.width = n, node.height = 1, node.dpitch = n, node.elem_size = 1;
    cudaError_t err;
    if (sg_rt_capture_node(s, &node, &err)) RET(err);
    sg_rt_node_move_bytes(&node);
    sg_enqueue_copy(s, &node.c, 0);
    RET(cudaSuccess);
}
cudaError_t cudaMemset(void *p, int v, size_t n) { return memset_common("cudaMemset", p, v, n, NULL, 0, 0); }
cudaError_t cudaMemset_ptds(void *p, int v, size_t n);
cudaError_t cudaMemset_ptds(void *p, int v, size_t n) { return memset_common("cudaMemset_ptds", p, v, n, NULL, 1, 0); }
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
    return memset_common("cudaMemsetAsync", p, v, n, st, 0, 1);
}
cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t st);
cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t st)
{
    return memset_common("cudaMemsetAsync_ptsz", p, v, n, st, 1, 1);
}
