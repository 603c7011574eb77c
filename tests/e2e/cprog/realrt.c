/* realrt: against NVIDIA's real libcudart.so.12 on a machine without a driver every call fails;
 * prints what it got and exits with a code derived from the errors (3 = no driver). */
#include <stdio.h>

#include "cuda_min.h"

int main(void) {
  int n = -1;
  int e1 = cudaGetDeviceCount(&n);
  void *p = NULL;
  int e2 = cudaMalloc(&p, 1 << 20);
  int e3 = cudaMemset(p, 0, 16);
  int e4 = cudaDeviceSynchronize();
  int e5 = cudaLaunchKernel((const void *)&main, (dim3){1, 1, 1}, (dim3){1, 1, 1}, NULL, 0, NULL);
  printf("count=%d e=%d,%d,%d,%d,%d %s\n", n, e1, e2, e3, e4, e5, cudaGetErrorString(e1));
  return e1 == 35 ? 3 : (e1 == 0 ? 0 : 4);
}
