/* drv_vmm_segments: PyTorch's expandable-segments allocator pattern on the driver's virtual memory
 * management, every function resolved through libcudart's cudaGetDriverEntryPointByVersion (12000),
 * as PyTorch does. One 128 MiB address reservation; 2 MiB physical segments created, mapped and
 * made accessible as the segment grows, unmapped and released as it shrinks; plus the two other
 * ways programs free such memory: released right after mapping (NVIDIA's samples: freed at the
 * unmap) and retained from its address then released twice (NCCL).
 *
 * Physical memory in use, in segments, after each call that changes it:
 *   grow to 4: 1 2 3 4 | shrink to 1: 3 2 1 | grow to 6: 2 3 4 5 6 (the 6th released at once)
 *   | free segment 0 the NCCL way: 5 | unmap segments 1-5 in one call: 4 | release 1-4: 3 2 1 0
 * Peak: 6 segments = 12 MiB. Prints "drv_vmm_segments: ok peak=12582912" or exits 70+. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemHandle;
/* CUmemAllocationProp / CUmemAccessDesc (cuda.h), the fields set here */
typedef struct {
  int type;
  int requestedHandleTypes;
  int locationType;
  int locationId;
  void *win32HandleMetaData;
  unsigned char allocFlags[8];
} MemProp;
typedef struct {
  int locationType;
  int locationId;
  int flags;
} AccessDesc;

#define SEG ((size_t)2 << 20)
#define SEGMENTS 64

static CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*address_free)(CUdeviceptr, size_t);
static CUresult (*create)(CUmemHandle *, size_t, const MemProp *, unsigned long long);
static CUresult (*release)(CUmemHandle);
static CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemHandle, unsigned long long);
static CUresult (*unmap)(CUdeviceptr, size_t);
static CUresult (*set_access)(CUdeviceptr, size_t, const AccessDesc *, size_t);
static CUresult (*retain)(CUmemHandle *, void *);

static CUdeviceptr base;
static CUmemHandle handles[SEGMENTS];
static MemProp prop = {1, 0, 1, 0, NULL, {0}}; /* pinned, on device 0 */
static AccessDesc access_rw = {1, 0, 3};       /* device 0, read-write */

#define CK(call)                                                               \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_) {                                                                  \
      fprintf(stderr, "drv_vmm_segments: %s returned %d\n", #call, r_);        \
      return 71;                                                               \
    }                                                                          \
  } while (0)

static int grow(int from, int to)
{
  for (int i = from; i < to; i++) {
    CK(create(&handles[i], SEG, &prop, 0));
    CK(map(base + i * SEG, SEG, 0, handles[i], 0));
  }
  CK(set_access(base + from * SEG, (size_t)(to - from) * SEG, &access_rw, 1));
  return 0;
}

static int shrink(int from, int to)
{
  for (int i = from - 1; i >= to; i--) {
    CK(unmap(base + i * SEG, SEG));
    CK(release(handles[i]));
  }
  return 0;
}

int main(void)
{
  void *rt = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
  if (!rt) return 72;
  int (*by_version)(const char *, void **, unsigned, unsigned long long, int *) =
      (int (*)(const char *, void **, unsigned, unsigned long long, int *))dlsym(rt, "cudaGetDriverEntryPointByVersion");
  if (!by_version) return 73;
  struct { const char *name; void **slot; } fns[] = {
      {"cuMemAddressReserve", (void **)&reserve}, {"cuMemAddressFree", (void **)&address_free},
      {"cuMemCreate", (void **)&create},          {"cuMemRelease", (void **)&release},
      {"cuMemMap", (void **)&map},                {"cuMemUnmap", (void **)&unmap},
      {"cuMemSetAccess", (void **)&set_access},   {"cuMemRetainAllocationHandle", (void **)&retain},
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    int st = -1;
    if (by_version(fns[i].name, fns[i].slot, 12000, 0, &st) || !*fns[i].slot) {
      fprintf(stderr, "drv_vmm_segments: no %s\n", fns[i].name);
      return 74;
    }
  }
  CK(reserve(&base, SEGMENTS * SEG, 0, 0, 0));
  if (grow(0, 4) || shrink(4, 1) || grow(1, 5)) return 75;
  /* the 6th segment: released as soon as it is mapped (freed by the unmap below) */
  CK(create(&handles[5], SEG, &prop, 0));
  CK(map(base + 5 * SEG, SEG, 0, handles[5], 0));
  CK(set_access(base + 5 * SEG, SEG, &access_rw, 1));
  CK(release(handles[5]));
  /* segment 0 as NCCL frees: retain from the address, release that, unmap, release the original */
  CUmemHandle again = 0;
  CK(retain(&again, (void *)(unsigned long)base));
  if (again != handles[0]) return 76;
  CK(release(again));
  CK(unmap(base, SEG));
  CK(release(handles[0]));
  /* segments 1-5 with one unmap, then the handles still held */
  CK(unmap(base + SEG, 5 * SEG));
  for (int i = 1; i <= 4; i++) CK(release(handles[i]));
  CK(address_free(base, SEGMENTS * SEG));
  printf("drv_vmm_segments: ok peak=%zu\n", 6 * SEG);
  return 0;
}
