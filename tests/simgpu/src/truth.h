/* truth.h - ground truth writer (SIMGPU_TRUTH=<dir>), part of libsimgpu.so. */
#ifndef SIMGPU_TRUTH_H
#define SIMGPU_TRUTH_H
#include "core_internal.h"
SG_HIDDEN void sg_truth_init(uint64_t capacity, double link_gbps, double link_lat_us, int rank);
SG_HIDDEN void sg_truth_op(const sg_op *op);
SG_HIDDEN void sg_truth_unfinished(const sg_op *op);
SG_HIDDEN void sg_truth_lock_for_fork(void);
SG_HIDDEN void sg_truth_unlock_after_fork(void);
SG_HIDDEN void sg_truth_atfork_child(void);
SG_HIDDEN void sg_write_unfinished(int trylock);
#endif
