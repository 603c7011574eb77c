/* access: peer access between devices (cudaDeviceCanAccessPeer, cudaDeviceEnablePeerAccess /
 * DisablePeerAccess with CUDA's error codes, revoked by cudaDeviceReset), copies between two devices'
 * memory (PtoP in the ground truth and in CUPTI), and mapped pinned memory (cudaHostGetDevicePointer). */
#include "st_common.h"
#include <cupti.h>

static int g_ptop_records;
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 16); *s = 1 << 16; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v)
{
    (void)c, (void)sid, (void)s;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(b, v, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY && ((CUpti_ActivityMemcpy6 *)r)->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP)
            g_ptop_records++;
    free(b);
}

int main(void)
{
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    int can = -1;
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    CHECK(can == 1, "0 -> 1 can access");
    CK(cudaDeviceCanAccessPeer(&can, 2, 2));
    CHECK(can == 0, "a device is not its own peer");
    CHECK(cudaDeviceCanAccessPeer(&can, 0, 99) == cudaErrorInvalidDevice, "bad peer");
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CHECK(cudaDeviceEnablePeerAccess(1, 0) == cudaErrorPeerAccessAlreadyEnabled, "enabled twice");
    CHECK(cudaGetLastError() == cudaErrorPeerAccessAlreadyEnabled, "sticky until read");
    CHECK(cudaDeviceEnablePeerAccess(0, 0) == cudaErrorInvalidDevice, "self");
    CHECK(cudaDeviceEnablePeerAccess(2, 1) == cudaErrorInvalidValue, "flags");
    CHECK(cudaDeviceDisablePeerAccess(2) == cudaErrorPeerAccessNotEnabled, "disable never enabled");
    CK(cudaSetDevice(1));
    CK(cudaDeviceEnablePeerAccess(0, 0)); /* the other direction is separate */
    CK(cudaSetDevice(0));
    CK(cudaDeviceDisablePeerAccess(1));
    CHECK(cudaDeviceDisablePeerAccess(1) == cudaErrorPeerAccessNotEnabled, "disabled twice");
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaDeviceReset()); /* device 0: its access to 1 and 1's to 0 are gone */
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaSetDevice(1));
    CK(cudaDeviceEnablePeerAccess(0, 0));
    (void)cudaGetLastError();

    /* copies between devices are peer-to-peer */
    void *d0, *d1;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&d0, 1 << 20));
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&d1, 1 << 20));
    CK(cudaMemset(d1, 9, 1 << 20));
    CK(cudaMemcpy(d0, d1, 1 << 20, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d1, d0, 4096, cudaMemcpyDefault));
    CK(cudaMemcpyPeer(d0, 0, d1, 1, 1 << 16));
    unsigned char b0 = 0;
    CK(cudaMemcpy(&b0, d0, 1, cudaMemcpyDeviceToHost));
    CHECK(b0 == 9, "bytes crossed devices");

    /* mapped pinned memory: the device pointer is the host pointer */
    void *hp, *hdev = NULL, *reg;
    CK(cudaHostAlloc(&hp, 8192, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&hdev, hp, 0));
    CHECK(hdev == hp, "mapped host alloc");
    CK(cudaHostGetDevicePointer(&hdev, (char *)hp + 100, 0));
    CHECK(hdev == (char *)hp + 100, "interior pointer");
    CHECK(cudaHostGetDevicePointer(&hdev, hp, 1) == cudaErrorInvalidValue, "flags must be 0");
    static char pageable[4096];
    CHECK(cudaHostGetDevicePointer(&hdev, pageable, 0) == cudaErrorInvalidValue, "pageable memory");
    CHECK(cudaHostGetDevicePointer(&hdev, d0, 0) == cudaErrorInvalidValue, "device memory");
    reg = aligned_alloc(4096, 8192);
    CK(cudaHostRegister(reg, 8192, cudaHostRegisterMapped));
    CK(cudaHostGetDevicePointer(&hdev, reg, 0));
    CHECK(hdev == reg, "registered memory");
    /* a copy into the mapped pointer is a pinned copy */
    CK(cudaMemcpy(hdev, d0, 4096, cudaMemcpyDeviceToHost));
    CK(cudaDeviceSynchronize());
    CK(cuptiActivityFlushAll(1));

    st_truth t = st_truth_load();
    int ptop = 0, pinned_dtoh = 0;
    char kind[16];
    for (int i = 0; i < t.n; i++) {
        if (!st_is(t.lines[i], "memcpy")) continue;
        st_str(t.lines[i], "copy_kind", kind, sizeof kind);
        ptop += !strcmp(kind, "PtoP");
        pinned_dtoh += !strcmp(kind, "DtoH") && st_num(t.lines[i], "host_pinned") == 1;
    }
    CHECK(ptop == 3 && g_ptop_records == 3, "peer copies: truth %d, CUPTI %d", ptop, g_ptop_records);
    CHECK(pinned_dtoh == 1, "copy to the mapped pointer is pinned (%d)", pinned_dtoh);
    printf("access: ptop_truth=%d ptop_cupti=%d failures=%d\n", ptop, g_ptop_records, st_failures);
    return st_failures ? 1 : 0;
}
