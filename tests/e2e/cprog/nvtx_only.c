/* nvtx_only: a CPU-only loop with NVTX ranges (NVIDIA's real NVTX3 headers), like a PyTorch CPU
 * training loop calling torch.cuda.nvtx.range_push/pop. It never calls CUDA. At the end it says
 * whether a libcupti is loaded in the process: tprof must not load CUPTI for NVTX alone (CUPTI 13.2
 * without a driver recurses until the stack overflows). */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

static int find_cupti(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  if (info->dlpi_name && strstr(info->dlpi_name, "libcupti")) *(int *)data = 1;
  return 0;
}

int main(void) {
  double sum = 0;
  for (int i = 0; i < 200; i++) {
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    for (int j = 0; j < 1000; j++) sum += j * 0.5;
    nvtxRangePop();
    nvtxRangePop();
  }
  int cupti = 0;
  dl_iterate_phdr(find_cupti, &cupti);
  printf("sum=%.1f\n", sum);
  fprintf(stderr, "libcupti loaded: %s\n", cupti ? "yes" : "no");
  return 0;
}
