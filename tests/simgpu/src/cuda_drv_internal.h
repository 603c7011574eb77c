/* cuda_drv_internal.h - shared by the files of the mock driver (libcuda.so.1) only. */
#ifndef SIMGPU_CUDA_DRV_INTERNAL_H
#define SIMGPU_CUDA_DRV_INTERNAL_H
#include "core_internal.h"

/* One driver call as CUPTI sees it: DAPI opens it, DRET closes it with its result. */
#define DAPI(name, sym)                                                                                        \
    sg_api_call _c;                                                                                            \
    sg_api_enter(&_c, SG_DOMAIN_DRIVER, name, sym, NULL)
#define DRET(err)                                                                                              \
    do {                                                                                                       \
        CUresult _e = (err);                                                                                   \
        sg_api_exit(&_c, (int)_e);                                                                             \
        return _e;                                                                                             \
    } while (0)

/* cuInit has run in this process. */
SG_HIDDEN int sg_drv_initialized(void);
/* The device of a context handle, -1 for anything else. */
SG_HIDDEN int sg_drv_context_device(CUcontext c);
#endif
