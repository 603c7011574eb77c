/* cuda_drv_attr.c - mock CUDA driver: attributes of functions (cuFuncGetAttribute / cuFuncSetAttribute)
 * and of pointers (cuPointerGetAttribute / cuPointerGetAttributes).
 *
 * Function attributes are those of the core's function handle, shared with the runtime's
 * cudaFuncGetAttributes / cudaFuncSetAttribute (core.c: the simulated H100's values, settable ones
 * checked). Pointer attributes come from the allocation registry, value types as cuda.h and NVIDIA's
 * bindings use them (unsigned int: MEMORY_TYPE, ALLOWED_HANDLE_TYPES, IS_GPU_DIRECT_RDMA_CAPABLE,
 * ACCESS_FLAGS; int: DEVICE_ORDINAL and the booleans). Choices: managed memory is
 * CU_MEMORYTYPE_DEVICE with a host pointer; every registered range is read-write accessible
 * (ACCESS_FLAGS 3) and not RDMA-capable; memory of cuMemAlloc / cudaMalloc is legacy-IPC capable;
 * no allocation exports handles (ALLOWED_HANDLE_TYPES 0); P2P_TOKENS is CUDA_ERROR_NOT_SUPPORTED. */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <string.h>

#include "cuda_drv_internal.h"

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    DAPI("cuFuncGetAttribute", NULL);
    if (!pi || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) DRET(CUDA_ERROR_INVALID_VALUE);
    if (!sg_func_name(hfunc)) DRET(CUDA_ERROR_INVALID_HANDLE);
    *pi = sg_func_attr_value(hfunc, (int)attrib);
    DRET(CUDA_SUCCESS);
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    DAPI("cuFuncSetAttribute", NULL);
    if (!sg_func_name(hfunc)) DRET(CUDA_ERROR_INVALID_HANDLE);
    DRET(sg_func_attr_update(hfunc, (int)attrib, value) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* One attribute of the registered range e (found: ptr is in it), or the defaults of an unknown pointer
 * (found 0: NULL / 0 values, for cuPointerGetAttributes). */
static CUresult pointer_attribute(void *data, CUpointer_attribute a, CUdeviceptr ptr, const mem_ent *e, int found)
{
    int dev_mem = found && sg_mem_kind_is_device(e->kind);
    int managed = found && e->kind == SG_MEM_MANAGED;
    unsigned u;
    int i;
    unsigned long long ull;
    size_t sz;
    void *p;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        p = found ? sg_context_handle(e->device) : NULL;
        memcpy(data, &p, sizeof p);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        u = !found ? 0 : dev_mem ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        memcpy(data, &u, sizeof u);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        ull = found ? (unsigned long long)ptr : 0;
        memcpy(data, &ull, sizeof ull);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (found && dev_mem && !managed) return CUDA_ERROR_INVALID_VALUE; /* no host address for it */
        p = found ? (void *)(uintptr_t)ptr : NULL;
        memcpy(data, &p, sizeof p);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS: return CUDA_ERROR_NOT_SUPPORTED;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        i = 0;
        memcpy(data, &i, sizeof i);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        ull = found ? e->id : 0;
        memcpy(data, &ull, sizeof ull);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        i = managed;
        memcpy(data, &i, sizeof i);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        i = found ? e->device : -2; /* unregistered: -2, as the runtime's cudaPointerGetAttributes reports */
        memcpy(data, &i, sizeof i);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        i = found && e->kind == SG_MEM_DEVICE;
        memcpy(data, &i, sizeof i);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        ull = found ? e->base : 0;
        memcpy(data, &ull, sizeof ull);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        sz = found ? e->size : 0;
        memcpy(data, &sz, sizeof sz);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        i = found;
        memcpy(data, &i, sizeof i);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        u = 0;
        memcpy(data, &u, sizeof u);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        u = found ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
        memcpy(data, &u, sizeof u);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        p = found && e->kind == SG_MEM_POOL ? e->pool : NULL;
        memcpy(data, &p, sizeof p);
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    DAPI("cuPointerGetAttribute", NULL);
    if (!data) DRET(CUDA_ERROR_INVALID_VALUE);
    if (!sg_drv_initialized()) DRET(CUDA_ERROR_NOT_INITIALIZED);
    mem_ent e;
    if (!sg_mem_find((const void *)(uintptr_t)ptr, &e)) DRET(CUDA_ERROR_INVALID_VALUE);
    DRET(pointer_attribute(data, attribute, ptr, &e, 1));
}

CUresult cuPointerGetAttributes(unsigned numAttributes, CUpointer_attribute *attributes, void **data, CUdeviceptr ptr)
{
    DAPI("cuPointerGetAttributes", NULL);
    if (!numAttributes || !attributes || !data) DRET(CUDA_ERROR_INVALID_VALUE);
    if (!sg_drv_initialized()) DRET(CUDA_ERROR_NOT_INITIALIZED);
    mem_ent e;
    int found = sg_mem_find((const void *)(uintptr_t)ptr, &e);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i]) DRET(CUDA_ERROR_INVALID_VALUE);
        CUresult r = pointer_attribute(data[i], attributes[i], ptr, &e, found);
        if (r == CUDA_ERROR_INVALID_VALUE && found && attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
            void *none = NULL; /* no host address: NULL, not an error, in the plural call */
            memcpy(data[i], &none, sizeof none);
            continue;
        }
        if (r != CUDA_SUCCESS) DRET(r);
    }
    DRET(CUDA_SUCCESS);
}
