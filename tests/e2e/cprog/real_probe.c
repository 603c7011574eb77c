/* real_probe: what a training process does first, against NVIDIA's real libraries on a machine
 * without a driver: NVTX3 ranges with a domain, a category and a payload, then CUDA runtime calls
 * (which fail there), then NVTX again. Prints every result on stdout, and on stderr whether a
 * libcupti got loaded (tprof must not load CUPTI before the driver has been shown to work).
 * Exit code: 3 when the runtime said "no driver" (35), 0 when every call worked, 4 otherwise. */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "cuda_min.h"

static int find_cupti(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  if (info->dlpi_name && strstr(info->dlpi_name, "libcupti")) *(int *)data = 1;
  return 0;
}

static const char stub;
#define K_PROBE "_Z11probe_kernv"
__attribute__((constructor)) static void reg(void) {
  void **h = __cudaRegisterFatBinary((void *)&tprof_fatbin_wrap);
  __cudaRegisterFunction(h, &stub, (char *)K_PROBE, K_PROBE, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

int main(void) {
  nvtxDomainHandle_t dom = nvtxDomainCreateA("probe");
  nvtxDomainNameCategoryA(dom, 7, "setup");
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 7;
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = 42;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "init";
  nvtxDomainRangePushEx(dom, &a);
  nvtxMarkA("before cuda");
  int n = -1;
  int e1 = cudaGetDeviceCount(&n);
  void *p = NULL;
  int e2 = cudaMalloc(&p, 1 << 20);
  int e3 = cudaLaunchKernel(&stub, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, NULL);
  int e4 = cudaDeviceSynchronize();
  nvtxDomainRangePop(dom);
  nvtxRangeId_t r = nvtxRangeStartA("after cuda");
  nvtxRangeEnd(r);
  int cupti = 0;
  dl_iterate_phdr(find_cupti, &cupti);
  printf("count=%d e=%d,%d,%d,%d\n", n, e1, e2, e3, e4);
  fprintf(stderr, "libcupti loaded: %s\n", cupti ? "yes" : "no");
  return e1 == 35 ? 3 : (e1 | e2 | e3 | e4) == 0 ? 0 : 4;
}
