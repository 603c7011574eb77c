/* cudart_symbol.c - mock CUDA runtime: module variables. __cudaRegisterVar / __cudaRegisterManagedVar
 * (as nvcc's generated host code calls them), cudaMemcpyToSymbol / cudaMemcpyFromSymbol (+ Async,
 * _ptds, _ptsz), cudaGetSymbolAddress, cudaGetSymbolSize.
 *
 * A __device__ / __constant__ variable is known by the address of its host shadow (what the C++
 * templates of cuda_runtime.h pass as `symbol`). Each device has its own copy, created zero-filled on
 * first use on that device (initialisers in the fat binary are not applied), registered as device
 * memory (SG_MEM_MODULE: copies and kernels may use it, cudaFree may not) and not charged to the
 * device's capacity (module memory). Copies are ordinary copies on the legacy / given stream with
 * the call's correlation: HtoD (or DtoD, PtoP) to a symbol, DtoH (or DtoD) from one. An unregistered
 * symbol is cudaErrorInvalidSymbol, a copy in the wrong direction cudaErrorInvalidMemcpyDirection,
 * offset + count past the variable cudaErrorInvalidValue. A __managed__ variable is managed memory
 * allocated at registration; its address is stored where nvcc's code reads it. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cudart_internal.h"

typedef struct module_var {
    const void *host; /* the symbol */
    const char *name; /* interned */
    size_t size;
    int constant;
    void *dev[SG_MAX_DEVICES];
    struct module_var *next;
} module_var;

static pthread_mutex_t g_var_lock = PTHREAD_MUTEX_INITIALIZER;
static module_var *g_vars;

void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext, size_t size,
                       int constant, int global);
void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext, size_t size,
                       int constant, int global)
{
    (void)h, (void)ext, (void)global;
    sg_init();
    if (!hostVar) return;
    module_var *v = calloc(1, sizeof *v);
    if (!v) return;
    v->host = hostVar;
    v->name = sg_intern(deviceName ? deviceName : deviceAddress);
    v->size = size;
    v->constant = constant;
    pthread_mutex_lock(&g_var_lock);
    v->next = g_vars;
    g_vars = v;
    pthread_mutex_unlock(&g_var_lock);
}

void __cudaRegisterManagedVar(void **h, void **hostVarPtrAddress, char *deviceAddress, const char *deviceName,
                              int ext, size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **h, void **hostVarPtrAddress, char *deviceAddress, const char *deviceName,
                              int ext, size_t size, int constant, int global)
{
    (void)h, (void)deviceAddress, (void)deviceName, (void)ext, (void)constant, (void)global;
    sg_init();
    void *p = NULL;
    if (sg_no_driver()) return; /* nothing to allocate it on: the address stays unset, as NVIDIA's */
    if (hostVarPtrAddress && size && sg_dev_alloc(&p, size, 0, SG_MEM_MANAGED, 0, 0, 0) == 0) *hostVarPtrAddress = p;
}

/* The copy of v on device dev (created on first use), NULL when out of memory. Lock held. */
static void *var_storage_locked(module_var *v, int dev)
{
    if (!v->dev[dev]) {
        size_t n = sg_page_round(v->size ? v->size : 1);
        void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        sg_mem_add_ext((uintptr_t)m, v->size ? v->size : 1, dev, SG_MEM_MODULE, v, NULL, 0);
        v->dev[dev] = m;
    }
    return v->dev[dev];
}

/* The current device's copy of `symbol` and its size; cudaErrorInvalidSymbol when it is not a variable. */
static cudaError_t symbol_storage(const void *symbol, void **p, size_t *size)
{
    int dev = sg_current_device();
    cudaError_t e = cudaErrorInvalidSymbol;
    pthread_mutex_lock(&g_var_lock);
    for (module_var *v = g_vars; v; v = v->next)
        if (v->host == symbol) {
            *p = var_storage_locked(v, dev);
            *size = v->size;
            e = *p ? cudaSuccess : cudaErrorMemoryAllocation;
            break;
        }
    pthread_mutex_unlock(&g_var_lock);
    return e;
}

/* to_symbol: a copy into the variable, else out of it. */
static cudaError_t symbol_copy(const char *api, int to_symbol, void *mem, const void *symbol, size_t count,
                               size_t offset, enum cudaMemcpyKind kind, cudaStream_t st, int pt, int async)
{
    sg_rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    void *var;
    size_t size;
    cudaError_t e = symbol_storage(symbol, &var, &size);
    if (e != cudaSuccess) RET(e);
    int ok_kind = to_symbol ? kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault
                            : kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault;
    if (!ok_kind) RET(cudaErrorInvalidMemcpyDirection);
    if (offset > size || count > size - offset) RET(cudaErrorInvalidValue);
    void *dst = to_symbol ? (char *)var + offset : mem;
    const void *src = to_symbol ? (const void *)mem : (const char *)var + offset;
    int pinned;
    int k = sg_rt_copy_kind(dst, src, kind, &pinned);
    RET(sg_rt_copy(_c.correlation, dst, src, count, 1, count, count, k, pinned, s, async));
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind)
{
    return symbol_copy("cudaMemcpyToSymbol", 1, (void *)src, symbol, count, offset, kind, NULL, 0, 0);
}
cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind)
{
    return symbol_copy("cudaMemcpyToSymbol_ptds", 1, (void *)src, symbol, count, offset, kind, NULL, 1, 0);
}
cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t st)
{
    return symbol_copy("cudaMemcpyToSymbolAsync", 1, (void *)src, symbol, count, offset, kind, st, 0, 1);
}
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
                                         enum cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
                                         enum cudaMemcpyKind kind, cudaStream_t st)
{
    return symbol_copy("cudaMemcpyToSymbolAsync_ptsz", 1, (void *)src, symbol, count, offset, kind, st, 1, 1);
}
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
    return symbol_copy("cudaMemcpyFromSymbol", 0, dst, symbol, count, offset, kind, NULL, 0, 0);
}
cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind)
{
    return symbol_copy("cudaMemcpyFromSymbol_ptds", 0, dst, symbol, count, offset, kind, NULL, 1, 0);
}
cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t st)
{
    return symbol_copy("cudaMemcpyFromSymbolAsync", 0, dst, symbol, count, offset, kind, st, 0, 1);
}
cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind, cudaStream_t st)
{
    return symbol_copy("cudaMemcpyFromSymbolAsync_ptsz", 0, dst, symbol, count, offset, kind, st, 1, 1);
}

cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    sg_rt_init();
    API("cudaGetSymbolAddress", NULL);
    if (!devPtr) RET(cudaErrorInvalidValue);
    size_t size;
    RET(symbol_storage(symbol, devPtr, &size));
}
cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
    sg_rt_init();
    API("cudaGetSymbolSize", NULL);
    if (!size) RET(cudaErrorInvalidValue);
    void *p;
    RET(symbol_storage(symbol, &p, size));
}
