/* own_cupti: a program with its own CUPTI client (as torch.profiler / Kineto has), to check that
 * tprof never takes CUPTI away from it.
 *   own_cupti before   claims CUPTI (subscribe, buffer callbacks, CONCURRENT_KERNEL) before any CUDA
 *                      call, then launches 12 kernels
 *   own_cupti after    launches 5 kernels, then claims CUPTI, then launches 7 more
 * Prints what each CUPTI call returned and how many kernel records its own buffers received; exits 0
 * only when every call succeeded and it received a record for each kernel launched after its claim. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_min.h"

/* cupti.h, the few declarations used (CUPTI 12/13 ABI) */
typedef int CUptiResult;
typedef void *CUpti_SubscriberHandle;
typedef void (*CUpti_CallbackFunc)(void *, int, unsigned, const void *);
typedef void (*BufReq)(uint8_t **, size_t *, size_t *);
typedef void (*BufDone)(void *, uint32_t, uint8_t *, size_t, size_t);
typedef struct { uint32_t kind; } CUpti_Activity;
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle);
CUptiResult cuptiActivityRegisterCallbacks(BufReq, BufDone);
CUptiResult cuptiActivityEnable(uint32_t kind);
CUptiResult cuptiActivityFlushAll(uint32_t flag);
CUptiResult cuptiActivityGetNextRecord(uint8_t *, size_t, CUpti_Activity **);
#define KIND_CONCURRENT_KERNEL 10

static const char stub;
#define K_OWN "_Z14own_cupti_kernv"
__attribute__((constructor)) static void reg(void) {
  void **h = __cudaRegisterFatBinary((void *)&tprof_fatbin_wrap);
  __cudaRegisterFunction(h, &stub, (char *)K_OWN, K_OWN, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

static volatile int kernels_seen;
static void on_callback(void *u, int d, unsigned cbid, const void *data) { (void)u; (void)d; (void)cbid; (void)data; }
static void buf_request(uint8_t **buf, size_t *size, size_t *max) {
  *size = 1 << 20;
  *buf = aligned_alloc(8, *size);
  *max = 0;
}
static void buf_complete(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
  (void)ctx; (void)stream; (void)size;
  CUpti_Activity *r = NULL;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == 0)
    if (r->kind == KIND_CONCURRENT_KERNEL) __atomic_add_fetch(&kernels_seen, 1, __ATOMIC_RELAXED);
  free(buf);
}

static int launch(int n) {
  dim3 g = {2, 1, 1}, b = {64, 1, 1};
  for (int i = 0; i < n; i++) CK(cudaLaunchKernel(&stub, g, b, NULL, 0, NULL));
  CK(cudaDeviceSynchronize());
  return 0;
}

int main(int argc, char **argv) {
  int after = argc > 1 && strcmp(argv[1], "after") == 0;
  int before_n = after ? 5 : 0, after_n = after ? 7 : 12;
  if (before_n && launch(before_n)) return 2;
  CUpti_SubscriberHandle sub = NULL;
  int rs = cuptiSubscribe(&sub, on_callback, NULL);
  int rc = cuptiActivityRegisterCallbacks(buf_request, buf_complete);
  int re = cuptiActivityEnable(KIND_CONCURRENT_KERNEL);
  if (launch(after_n)) return 2;
  int rf = cuptiActivityFlushAll(1);
  int ru = cuptiUnsubscribe(sub);
  printf("own profiler: subscribe=%d register=%d enable=%d flush=%d unsubscribe=%d kernels=%d of %d\n", rs, rc, re, rf,
         ru, kernels_seen, after_n);
  return (rs | rc | re | rf | ru) == 0 && kernels_seen == after_n ? 0 : 1;
}
