/* Shared by the programs in tests/programs/cuda: every CUDA error is printed and ends the
 * program with exit code 3 (4: wrong data), so a run against NVIDIA's real libcudart without a
 * driver fails cleanly and recognisably instead of crashing. */
#ifndef TPROF_PROGRAMS_CHECK_H
#define TPROF_PROGRAMS_CHECK_H
#ifdef __cplusplus
#include <cstdio>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>

#define EXIT_CUDA_ERROR 3
#define EXIT_WRONG_DATA 4

#define CK(call)                                                                              \
  do {                                                                                        \
    cudaError_t ck_e = (call);                                                                \
    if (ck_e != cudaSuccess) {                                                                \
      fprintf(stderr, "%s: CUDA error %d %s: %s at %s:%d (%s)\n", prog_name, (int)ck_e,       \
              cudaGetErrorName(ck_e), cudaGetErrorString(ck_e), __FILE__, __LINE__, #call);   \
      exit(EXIT_CUDA_ERROR);                                                                  \
    }                                                                                         \
  } while (0)

#endif
