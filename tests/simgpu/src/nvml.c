/* nvml.c - mock libnvidia-ml.so.1 (being written). */
#define _GNU_SOURCE
#include "simgpu_core.h"
typedef int nvmlReturn_t;
__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2(void) { sg_init(); return 0; }
__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown(void) { return 0; }
