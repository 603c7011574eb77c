/* vmm: the driver's versioned entry points (cuGetProcAddress picks the ABI by version) and virtual
 * memory management with the real driver's rules: physical memory charged at cuMemCreate and given
 * back when the last handle reference and the last mapping are gone, whole-mapping unmaps,
 * granularity checks and the errors cuda.h lists. */
#include "st_common.h"
#include <cuda.h>
#include <dlfcn.h>

#define MB ((size_t)1 << 20)

static size_t used(void)
{
    size_t fr = 0, tot = 0;
    cuMemGetInfo(&fr, &tot);
    return tot - fr;
}

int main(void)
{
    CK(cuInit(0));
    CUcontext ctx;
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));

    /* entry points by version */
    void *self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *p = NULL;
    CUdriverProcAddressQueryResult q;
    CK(cuGetProcAddress("cuCtxSynchronize", &p, 12090, 0, &q));
    CHECK(p == dlsym(self, "cuCtxSynchronize") && q == CU_GET_PROC_ADDRESS_SUCCESS, "12.9 ABI: cuCtxSynchronize(void)");
    CK(cuGetProcAddress("cuCtxSynchronize", &p, 13000, 0, &q));
    void *v2 = dlsym(self, "cuCtxSynchronize_v2");
    CHECK(v2 && p == v2, "13.0 ABI: cuCtxSynchronize_v2(CUcontext)");
    CUresult (*sync_ctx)(CUcontext) = (CUresult(*)(CUcontext))p;
    CK(sync_ctx(ctx));
    CK(sync_ctx(NULL));
    CHECK(sync_ctx((CUcontext)&dev) == CUDA_ERROR_INVALID_CONTEXT, "a context that is none");
    CK(cuGetProcAddress("cuGetProcAddress", &p, 11080, 0, &q));
    CHECK(p == dlsym(self, "cuGetProcAddress"), "11.x ABI of cuGetProcAddress (4 arguments)");
    CHECK(cuGetProcAddress("cuGetProcAddress", &p, 10000, 0, &q) == CUDA_SUCCESS && !p &&
              q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
          "before 11.3 there is no cuGetProcAddress");
    CHECK(cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, &q) == CUDA_SUCCESS && !p &&
              q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
          "unknown symbol");
    CK(cuGetProcAddress("cuMemAlloc", &p, 12000, 0, &q));
    CHECK(p == dlsym(self, "cuMemAlloc_v2"), "cuMemAlloc is cuMemAlloc_v2 from 3.2");

    /* VMM */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(g == 2 * MB, "granularity %zu", g);
    size_t base_used = used();
    CUdeviceptr va = 0;
    CK(cuMemAddressReserve(&va, 64 * MB, 0, 0, 0));
    CHECK(va != 0 && va % g == 0, "reservation at %llx", (unsigned long long)va);
    CHECK(used() == base_used, "reserving address space allocates no memory");
    CUmemGenericAllocationHandle h[3];
    for (int i = 0; i < 3; i++) CK(cuMemCreate(&h[i], g, &prop, 0));
    CHECK(used() == base_used + 3 * g, "cuMemCreate allocates: used %zu", used() - base_used);
    for (int i = 0; i < 3; i++) CK(cuMemMap(va + (CUdeviceptr)i * g, g, 0, h[i], 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(va, 3 * g, &acc, 1));
    static char in[4096], out[4096];
    for (size_t i = 0; i < sizeof in; i++) in[i] = (char)(i * 7);
    CK(cuMemcpyHtoD(va + g - 2048, in, sizeof in)); /* across two mappings */
    CK(cuMemcpyDtoH(out, va + g - 2048, sizeof out));
    CHECK(memcmp(in, out, sizeof in) == 0, "data through two mappings");

    /* bad arguments */
    CUmemGenericAllocationHandle bad;
    CHECK(cuMemCreate(&bad, g + 4096, &prop, 0) == CUDA_ERROR_INVALID_VALUE, "size not a multiple of granularity");
    CUmemAllocationProp far = prop;
    far.location.id = 99;
    CHECK(cuMemCreate(&bad, g, &far, 0) == CUDA_ERROR_INVALID_DEVICE, "no device 99");
    CHECK(cuMemCreate(&bad, g, &prop, 1) == CUDA_ERROR_INVALID_VALUE, "flags must be 0");
    CHECK(cuMemMap(va, g, 0, h[0], 0) == CUDA_ERROR_INVALID_VALUE, "mapping over a mapping");
    CHECK(cuMemMap(va + 3 * g + 4096, g, 0, h[0], 0) == CUDA_ERROR_INVALID_VALUE, "unaligned address");
    CHECK(cuMemMap(va + 64 * MB, g, 0, h[0], 0) == CUDA_ERROR_INVALID_VALUE, "past the reservation");
    CHECK(cuMemMap(va + 4 * g, 2 * g, 0, h[0], 0) == CUDA_ERROR_INVALID_VALUE, "larger than the allocation");
    CHECK(cuMemUnmap(va, g / 2) == CUDA_ERROR_INVALID_VALUE, "part of a mapping");
    CHECK(cuMemUnmap(va + 3 * g, g) == CUDA_ERROR_INVALID_VALUE, "nothing mapped there");
    CHECK(cuMemRelease((CUmemGenericAllocationHandle)12345) == CUDA_ERROR_INVALID_VALUE, "not a handle");
    CHECK(cuMemAddressFree(va, 32 * MB) == CUDA_ERROR_INVALID_VALUE, "not the reserved size");
    CHECK(cuMemAddressFree(va, 64 * MB) == CUDA_ERROR_INVALID_VALUE, "still mapped");
    CHECK(cuMemSetAccess(va + 3 * g, g, &acc, 1) == CUDA_ERROR_INVALID_VALUE, "access to unmapped range");
    CHECK(cuMemAddressReserve(&va, 3000, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE, "size not page-aligned");
    CHECK(used() == base_used + 3 * g, "failed calls allocate nothing");

    /* a released handle lives while mapped */
    CK(cuMemRelease(h[0]));
    CHECK(used() == base_used + 3 * g, "released but still mapped: kept");
    CK(cuMemUnmap(va, g));
    CHECK(used() == base_used + 2 * g, "last mapping gone: freed (used %zu)", used() - base_used);
    /* an unmapped handle lives until released; a retained one needs one more release */
    CUmemGenericAllocationHandle r = 0;
    CK(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(va + g + 100)));
    CHECK(r == h[1], "retain gives the mapping's handle");
    CK(cuMemUnmap(va + g, 2 * g)); /* two adjacent mappings at once */
    CHECK(used() == base_used + 2 * g, "unmapped, handles held: kept");
    CK(cuMemRelease(h[1]));
    CK(cuMemRelease(h[2]));
    CHECK(used() == base_used + g, "h[1] still retained once (used %zu)", used() - base_used);
    CK(cuMemRelease(r));
    CHECK(used() == base_used, "all freed (used %zu)", used() - base_used);
    CHECK(cuMemRelease(h[2]) == CUDA_ERROR_INVALID_VALUE, "released twice");
    CK(cuMemAddressFree(va, 64 * MB));
    printf("vmm: granularity_mib=%zu failures=%d\n", g / MB, st_failures);
    return st_failures ? 1 : 0;
}
