/* cuda_vmm.c - the mock driver's virtual memory management (cuMemAddressReserve / cuMemCreate /
 * cuMemMap / cuMemSetAccess / cuMemUnmap / cuMemRelease / cuMemAddressFree,
 * cuMemRetainAllocationHandle, cuMemGetAllocationGranularity), as PyTorch's expandable segments
 * and NCCL use it.
 *
 * Semantics follow cuda.h: a physical allocation (cuMemCreate, a memfd here, charged to its
 * device's capacity) is freed once its handle references are all released and its mappings all
 * unmapped; an address reservation is PROT_NONE address space; cuMemMap maps an allocation into a
 * reservation with no access until cuMemSetAccess (so touching it before faults, as on a GPU);
 * cuMemUnmap takes back whole mappings (one or several adjacent ones, never part of one) and turns
 * the range back into reservation. Sizes, addresses and offsets must be multiples of the
 * granularity (2 MiB, an H100's). Bad arguments give the errors cuda.h lists. Mapped ranges are in
 * the allocation registry as SG_MEM_MAPPED, so copies see them as device memory. */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_drv_internal.h"

#define GRANULARITY ((size_t)2 << 20)

typedef struct vmm_alloc {
    int fd;
    size_t size;
    int device;
    int refs; /* handle references: 1 from cuMemCreate, +1 per cuMemRetainAllocationHandle */
    int maps; /* mappings */
    struct vmm_alloc *next;
} vmm_alloc;
typedef struct vmm_reservation {
    uintptr_t base;
    size_t size;
    struct vmm_reservation *next;
} vmm_reservation;
typedef struct vmm_mapping {
    uintptr_t base;
    size_t size;
    vmm_alloc *alloc;
    struct vmm_mapping *next;
} vmm_mapping;

static pthread_mutex_t g_vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static vmm_alloc *g_allocs;
static vmm_reservation *g_reservations;
static vmm_mapping *g_mappings;

static int aligned(uintptr_t v) { return v % GRANULARITY == 0; }

static vmm_alloc *find_alloc(CUmemGenericAllocationHandle h)
{
    for (vmm_alloc *a = g_allocs; a; a = a->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)a == h) return a;
    return NULL;
}
static vmm_reservation *reservation_of(uintptr_t p, size_t n)
{
    for (vmm_reservation *r = g_reservations; r; r = r->next)
        if (p >= r->base && n <= r->size && p - r->base <= r->size - n) return r;
    return NULL;
}
static vmm_mapping *mapping_at(uintptr_t p)
{
    for (vmm_mapping *m = g_mappings; m; m = m->next)
        if (m->base == p) return m;
    return NULL;
}
static vmm_mapping *mapping_containing(uintptr_t p)
{
    for (vmm_mapping *m = g_mappings; m; m = m->next)
        if (p >= m->base && p - m->base < m->size) return m;
    return NULL;
}
static int overlaps_mapping(uintptr_t p, size_t n)
{
    for (vmm_mapping *m = g_mappings; m; m = m->next)
        if (p < m->base + m->size && m->base < p + n) return 1;
    return 0;
}
/* [p, p + n) is exactly whole adjacent mappings (the first starts at p). */
static int whole_mappings(uintptr_t p, size_t n)
{
    uintptr_t end = p + n;
    for (uintptr_t cur = p; cur < end;) {
        vmm_mapping *m = mapping_at(cur);
        if (!m || m->size > end - cur) return 0;
        cur += m->size;
    }
    return 1;
}
/* Every byte of [p, p + n) is mapped. */
static int fully_mapped(uintptr_t p, size_t n)
{
    uintptr_t end = p + n;
    for (uintptr_t cur = p; cur < end;) {
        vmm_mapping *m = mapping_containing(cur);
        if (!m) return 0;
        cur = m->base + m->size;
    }
    return 1;
}
/* Frees the allocation when nothing holds it any more (lock held). */
static void release_if_unused(vmm_alloc *a)
{
    if (a->refs > 0 || a->maps > 0) return;
    for (vmm_alloc **pp = &g_allocs; *pp; pp = &(*pp)->next)
        if (*pp == a) {
            *pp = a->next;
            break;
        }
    close(a->fd);
    sg_mem_unreserve(a->device, a->size);
    free(a);
}
/* A device location (CU_MEM_LOCATION_TYPE_DEVICE and a valid ordinal): 0 ok, else the error. */
static CUresult device_location(const CUmemLocation *loc, int *device)
{
    if (loc->type == CU_MEM_LOCATION_TYPE_HOST || loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
        loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
        return CUDA_ERROR_NOT_SUPPORTED; /* host-backed VMM: not simulated */
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (loc->id < 0 || loc->id >= sg_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *device = loc->id;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    DAPI("cuMemGetAllocationGranularity", NULL);
    if (!granularity || !prop) DRET(CUDA_ERROR_INVALID_VALUE);
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        DRET(CUDA_ERROR_INVALID_VALUE);
    int device;
    CUresult e = device_location(&prop->location, &device);
    if (e) DRET(e);
    *granularity = GRANULARITY;
    DRET(CUDA_SUCCESS);
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    DAPI("cuMemAddressReserve", NULL);
    if (!sg_drv_initialized()) DRET(CUDA_ERROR_NOT_INITIALIZED);
    long page = sysconf(_SC_PAGESIZE);
    if (!ptr || size == 0 || flags != 0 || size % (size_t)page != 0 || addr % (CUdeviceptr)page != 0 ||
        (alignment & (alignment - 1)) != 0)
        DRET(CUDA_ERROR_INVALID_VALUE);
    /* start at a multiple of the larger of the alignment and the granularity, so it can be mapped */
    size_t align = alignment > GRANULARITY ? alignment : GRANULARITY;
    if (size > SIZE_MAX - align) DRET(CUDA_ERROR_OUT_OF_MEMORY);
    size_t span = size + align;
    void *m = mmap((void *)(uintptr_t)addr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) DRET(CUDA_ERROR_OUT_OF_MEMORY);
    uintptr_t start = ((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1);
    if (start > (uintptr_t)m) munmap(m, start - (uintptr_t)m);
    uintptr_t tail = start + size, span_end = (uintptr_t)m + span;
    if (span_end > tail) munmap((void *)tail, span_end - tail);
    vmm_reservation *r = calloc(1, sizeof *r);
    if (!r) {
        munmap((void *)start, size);
        DRET(CUDA_ERROR_OUT_OF_MEMORY);
    }
    r->base = start;
    r->size = size;
    pthread_mutex_lock(&g_vmm_lock);
    r->next = g_reservations;
    g_reservations = r;
    pthread_mutex_unlock(&g_vmm_lock);
    *ptr = (CUdeviceptr)start;
    DRET(CUDA_SUCCESS);
}

/* Only whole reservations, with nothing mapped in them any more. */
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    DAPI("cuMemAddressFree", NULL);
    uintptr_t p = (uintptr_t)ptr;
    pthread_mutex_lock(&g_vmm_lock);
    vmm_reservation **pp = &g_reservations;
    while (*pp && !((*pp)->base == p && (*pp)->size == size)) pp = &(*pp)->next;
    if (!*pp || overlaps_mapping(p, size)) {
        pthread_mutex_unlock(&g_vmm_lock);
        DRET(CUDA_ERROR_INVALID_VALUE);
    }
    vmm_reservation *r = *pp;
    *pp = r->next;
    pthread_mutex_unlock(&g_vmm_lock);
    munmap((void *)r->base, r->size);
    free(r);
    DRET(CUDA_SUCCESS);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    DAPI("cuMemCreate", NULL);
    if (!sg_drv_initialized()) DRET(CUDA_ERROR_NOT_INITIALIZED);
    if (!handle || !prop || flags != 0 || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) DRET(CUDA_ERROR_INVALID_VALUE);
    int device;
    CUresult e = device_location(&prop->location, &device);
    if (e) DRET(e);
    if (size == 0 || !aligned(size)) DRET(CUDA_ERROR_INVALID_VALUE);
    if (sg_mem_reserve(device, size) != 0) DRET(CUDA_ERROR_OUT_OF_MEMORY);
    vmm_alloc *a = calloc(1, sizeof *a);
    int fd = memfd_create("simgpu-vmm", MFD_CLOEXEC);
    if (!a || fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0) close(fd);
        free(a);
        sg_mem_unreserve(device, size);
        DRET(CUDA_ERROR_OUT_OF_MEMORY);
    }
    a->fd = fd;
    a->size = size;
    a->device = device;
    a->refs = 1;
    pthread_mutex_lock(&g_vmm_lock);
    a->next = g_allocs;
    g_allocs = a;
    pthread_mutex_unlock(&g_vmm_lock);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)a;
    DRET(CUDA_SUCCESS);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    DAPI("cuMemRelease", NULL);
    pthread_mutex_lock(&g_vmm_lock);
    vmm_alloc *a = find_alloc(handle);
    if (!a || a->refs == 0) {
        pthread_mutex_unlock(&g_vmm_lock);
        DRET(CUDA_ERROR_INVALID_VALUE);
    }
    a->refs--;
    release_if_unused(a);
    pthread_mutex_unlock(&g_vmm_lock);
    DRET(CUDA_SUCCESS);
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    DAPI("cuMemRetainAllocationHandle", NULL);
    if (!handle) DRET(CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&g_vmm_lock);
    vmm_mapping *m = mapping_containing((uintptr_t)addr);
    if (!m) {
        pthread_mutex_unlock(&g_vmm_lock);
        DRET(CUDA_ERROR_INVALID_VALUE);
    }
    m->alloc->refs++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->alloc;
    pthread_mutex_unlock(&g_vmm_lock);
    DRET(CUDA_SUCCESS);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    DAPI("cuMemMap", NULL);
    uintptr_t p = (uintptr_t)ptr;
    if (flags != 0 || size == 0 || !aligned(p) || !aligned(size) || !aligned(offset)) DRET(CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&g_vmm_lock);
    vmm_alloc *a = find_alloc(handle);
    CUresult e = CUDA_SUCCESS;
    if (!a || a->refs == 0 || offset > a->size || size > a->size - offset || !reservation_of(p, size) ||
        overlaps_mapping(p, size))
        e = CUDA_ERROR_INVALID_VALUE;
    vmm_mapping *m = e ? NULL : calloc(1, sizeof *m);
    if (!e && !m) e = CUDA_ERROR_OUT_OF_MEMORY;
    if (!e && mmap((void *)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, (off_t)offset) == MAP_FAILED) {
        free(m);
        e = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (e) {
        pthread_mutex_unlock(&g_vmm_lock);
        DRET(e);
    }
    m->base = p;
    m->size = size;
    m->alloc = a;
    m->next = g_mappings;
    g_mappings = m;
    a->maps++;
    sg_mem_add(p, size, a->device, SG_MEM_MAPPED);
    pthread_mutex_unlock(&g_vmm_lock);
    DRET(CUDA_SUCCESS);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    DAPI("cuMemSetAccess", NULL);
    uintptr_t p = (uintptr_t)ptr;
    if (!desc || count == 0 || size == 0) DRET(CUDA_ERROR_INVALID_VALUE);
    int prot = PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        int device;
        CUresult e = device_location(&desc[i].location, &device);
        if (e) DRET(e);
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
        else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ) prot |= PROT_READ;
        else if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) DRET(CUDA_ERROR_INVALID_VALUE);
    }
    pthread_mutex_lock(&g_vmm_lock);
    int ok = fully_mapped(p, size);
    pthread_mutex_unlock(&g_vmm_lock);
    if (!ok) DRET(CUDA_ERROR_INVALID_VALUE);
    if (mprotect((void *)p, size, prot) != 0) DRET(CUDA_ERROR_INVALID_VALUE);
    DRET(CUDA_SUCCESS);
}

/* Waits for the devices' work (cuMemUnmap synchronises), then takes back whole mappings. */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    DAPI("cuMemUnmap", NULL);
    uintptr_t p = (uintptr_t)ptr;
    if (size == 0) DRET(CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&g_vmm_lock);
    if (!whole_mappings(p, size)) {
        pthread_mutex_unlock(&g_vmm_lock);
        DRET(CUDA_ERROR_INVALID_VALUE);
    }
    int devices[SG_MAX_DEVICES] = {0};
    for (uintptr_t cur = p; cur < p + size;) {
        vmm_mapping *m = mapping_at(cur);
        if (m->alloc->device >= 0 && m->alloc->device < SG_MAX_DEVICES) devices[m->alloc->device] = 1;
        cur += m->size;
    }
    pthread_mutex_unlock(&g_vmm_lock);
    for (int d = 0; d < SG_MAX_DEVICES; d++)
        if (devices[d]) sg_device_synchronize(d);
    pthread_mutex_lock(&g_vmm_lock);
    if (!whole_mappings(p, size)) { /* another thread unmapped meanwhile */
        pthread_mutex_unlock(&g_vmm_lock);
        DRET(CUDA_ERROR_INVALID_VALUE);
    }
    for (uintptr_t cur = p; cur < p + size;) {
        vmm_mapping *m = mapping_at(cur);
        for (vmm_mapping **pp = &g_mappings; *pp; pp = &(*pp)->next)
            if (*pp == m) {
                *pp = m->next;
                break;
            }
        mmap((void *)m->base, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        sg_mem_remove((void *)m->base, NULL);
        cur += m->size;
        m->alloc->maps--;
        release_if_unused(m->alloc);
        free(m);
    }
    pthread_mutex_unlock(&g_vmm_lock);
    DRET(CUDA_SUCCESS);
}
