/* mem.c - allocation registry of libsimgpu.so (device, managed, pinned, registered host memory),
 * shared by the runtime and driver mocks. */
#define _GNU_SOURCE
#include "core_internal.h"
#include <cupti_activity.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

static mem_ent *g_mem;
static size_t g_nmem, g_capmem;
static pthread_mutex_t g_mem_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t mem_lower(uintptr_t p)
{
    size_t lo = 0, hi = g_nmem;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_mem[mid].base < p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static uint64_t g_mem_ids;

int sg_mem_add(uintptr_t base, size_t size, int device, int kind)
{
    return sg_mem_add_ext(base, size, device, kind, NULL, NULL, 0);
}

int sg_mem_add_ext(uintptr_t base, size_t size, int device, int kind, void *owner, void *pool, unsigned flags)
{
    pthread_mutex_lock(&g_mem_lock);
    if (g_nmem == g_capmem) {
        size_t nc = g_capmem ? g_capmem * 2 : 256;
        mem_ent *n = realloc(g_mem, nc * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g_mem_lock);
            return -1;
        }
        g_mem = n;
        g_capmem = nc;
    }
    size_t i = mem_lower(base);
    memmove(&g_mem[i + 1], &g_mem[i], (g_nmem - i) * sizeof *g_mem);
    g_mem[i] = (mem_ent){base, size, device, kind, owner, pool, ++g_mem_ids, flags};
    g_nmem++;
    pthread_mutex_unlock(&g_mem_lock);
    return 0;
}

/* Finds the allocation containing p; out copies it. Returns 1 if found. */
int sg_mem_find(const void *p, mem_ent *out)
{
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&g_mem_lock);
    size_t i = mem_lower(a + 1);
    int found = 0;
    if (i > 0) {
        mem_ent *e = &g_mem[i - 1];
        if (a >= e->base && a < e->base + (e->size ? e->size : 1)) {
            if (out) *out = *e;
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_mem_lock);
    return found;
}

/* Removes the allocation starting exactly at p. */
int sg_mem_remove(const void *p, mem_ent *out)
{
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&g_mem_lock);
    size_t i = mem_lower(a);
    int found = i < g_nmem && g_mem[i].base == a;
    if (found) {
        if (out) *out = g_mem[i];
        memmove(&g_mem[i], &g_mem[i + 1], (g_nmem - i - 1) * sizeof *g_mem);
        g_nmem--;
    }
    pthread_mutex_unlock(&g_mem_lock);
    return found;
}

size_t sg_page_round(size_t n)
{
    size_t pg = 4096;
    return (n + pg - 1) & ~(pg - 1);
}


/* device / managed allocation backed by MAP_NORESERVE anonymous memory */
int sg_dev_alloc(void **p, size_t size, int device, int kind, uint32_t corr, uint32_t stream_id,
                            int is_async)
{
    if (!p) return 1;
    if (size == 0) {
        *p = NULL;
        return 0;
    }
    if (sg_mem_reserve(device, size) != 0) return 2;
    void *m = mmap(NULL, sg_page_round(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        sg_mem_unreserve(device, size);
        return 2;
    }
    sg_mem_add((uintptr_t)m, size, device, kind);
    *p = m;
    sgc_emit_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                    kind == SG_MEM_MANAGED ? CUPTI_ACTIVITY_MEMORY_KIND_MANAGED : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                    corr, (uint64_t)(uintptr_t)m, size, device, stream_id, is_async);
    return 0;
}

int sg_dev_free(void *p, uint32_t corr, uint32_t stream_id, int is_async)
{
    if (!p) return 0;
    mem_ent e;
    /* only what sg_dev_alloc made: pinned, pool, graph and module memory stay with their owners */
    if (!sg_mem_find(p, &e) || e.base != (uintptr_t)p || (e.kind != SG_MEM_DEVICE && e.kind != SG_MEM_MANAGED))
        return 1;
    sg_mem_remove(p, NULL);
    munmap(p, sg_page_round(e.size));
    sg_mem_unreserve(e.device, e.size);
    sgc_emit_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                    e.kind == SG_MEM_MANAGED ? CUPTI_ACTIVITY_MEMORY_KIND_MANAGED : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                    corr, (uint64_t)(uintptr_t)p, e.size, e.device, stream_id, is_async);
    return 0;
}

