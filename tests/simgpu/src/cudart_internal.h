/* cudart_internal.h - shared by the files of the mock runtime. */
#ifndef SIMGPU_CUDART_INTERNAL_H
#define SIMGPU_CUDART_INTERNAL_H
typedef struct sg_graph sg_graph;
/* CUDART_VERSION of the runtime being built (props.c, compiled per CUDA version). */
int sg_cudart_version(void);
#endif
