/* cuda_drv.c - mock CUDA driver (libcuda.so.1). */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

#define DAPI(name, sym)                                                                                        \
    sg_api_call _c;                                                                                            \
    sg_api_enter(&_c, SG_DOMAIN_DRIVER, name, sym, NULL)
#define DRET(err)                                                                                              \
    do {                                                                                                       \
        CUresult _e = (err);                                                                                   \
        sg_api_exit(&_c, (int)_e);                                                                             \
        return _e;                                                                                             \
    } while (0)

static int g_inited;

CUresult cuInit(unsigned flags)
{
    (void)flags;
    sg_init();
    DAPI("cuInit", NULL);
    g_inited = 1;
    DRET(CUDA_SUCCESS);
}
