/* capture: stream capture rules (fork/join across streams, invalidation, interaction modes, capture
 * into an existing graph), host functions and stream callbacks on the device timeline, and kernels
 * of libraries loaded from PTX and from a cubin. Kernels run (ground truth) only when they execute. */
#include "st_common.h"
#include <cupti.h>
#include <elf.h>

static void slow(void) {}
static void fast(void) {}
static void k1(void) {}
static void k2(void) {}

typedef struct { int calls; uint64_t start, end; cudaStream_t stream; cudaError_t status; } host_log;
static void CUDART_CB host_fn(void *arg)
{
    host_log *l = arg;
    l->start = st_now();
    usleep(5000);
    l->calls++;
    l->end = st_now();
}
static void CUDART_CB stream_cb(cudaStream_t s, cudaError_t status, void *arg)
{
    host_log *l = arg;
    l->start = st_now();
    l->stream = s;
    l->status = status;
    l->calls++;
    l->end = st_now();
}
static void CUPTIAPI req(uint8_t **b, size_t *s, size_t *m) { *b = aligned_alloc(8, 1 << 16); *s = 1 << 16; *m = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t sid, uint8_t *b, size_t s, size_t v) { (void)c, (void)sid, (void)s, (void)v; free(b); }

/* truth kernels named `name`: count, and start/end of the last one */
static int truth_kernels(const char *name, long long *start, long long *end)
{
    CK(cuptiActivityFlushAll(0));
    st_truth t = st_truth_load();
    int n = 0;
    for (int i = 0; i < t.n; i++) {
        char nm[128];
        st_str(t.lines[i], "name", nm, sizeof nm);
        if (!st_is(t.lines[i], "kernel") || strcmp(nm, name)) continue;
        n++;
        if (start) *start = st_num(t.lines[i], "start_ns");
        if (end) *end = st_num(t.lines[i], "end_ns");
    }
    return n;
}

/* A minimal cubin: ELF64 with a symbol table holding two entry functions and one plain function. */
static unsigned char *make_cubin(void)
{
    static const char strtab[] = "\0_Z8elf_gemmPf\0_Z9elf_scalePfi\0helper\0";
    enum { NSYM = 4, NSEC = 3 };
    size_t off_sym = sizeof(Elf64_Ehdr), off_str = off_sym + NSYM * sizeof(Elf64_Sym);
    size_t off_sh = (off_str + sizeof strtab + 7) & ~(size_t)7, total = off_sh + NSEC * sizeof(Elf64_Shdr);
    unsigned char *img = calloc(1, total);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_shoff = off_sh;
    eh->e_shentsize = sizeof(Elf64_Shdr);
    eh->e_shnum = NSEC;
    Elf64_Sym *sym = (Elf64_Sym *)(img + off_sym);
    sym[1] = (Elf64_Sym){.st_name = 1, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_other = 0x10};
    sym[2] = (Elf64_Sym){.st_name = 15, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_other = 0x10};
    sym[3] = (Elf64_Sym){.st_name = 31, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC)};
    memcpy(img + off_str, strtab, sizeof strtab);
    Elf64_Shdr *sh = (Elf64_Shdr *)(img + off_sh);
    sh[1] = (Elf64_Shdr){.sh_type = SHT_SYMTAB, .sh_offset = off_sym, .sh_size = NSYM * sizeof(Elf64_Sym), .sh_link = 2};
    sh[2] = (Elf64_Shdr){.sh_type = SHT_STRTAB, .sh_offset = off_str, .sh_size = sizeof strtab};
    return img;
}

static const char PTX[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n\n"
                          ".visible .entry _Z9ptx_scalePff(\n\t.param .u64 p0,\n\t.param .f32 p1\n)\n{\n\tret;\n}\n"
                          ".visible .entry lib_plain()\n{\n\tret;\n}\n";

int main(void)
{
    setenv("SIMGPU_KERNEL_NS", "slow=20000000", 1);
    CK(cuptiActivityRegisterCallbacks(req, done));
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    st_register((const void *)slow, "_Z4slowv");
    st_register((const void *)fast, "_Z4fastv");
    st_register((const void *)k1, "_Z2k1v");
    st_register((const void *)k2, "_Z2k2v");
    dim3 g1 = {1, 1, 1}, b32 = {32, 1, 1};
    cudaStream_t s1, s2;
    CK(cudaStreamCreate(&s1));
    CK(cudaStreamCreate(&s2));

    /* host function: after the slow kernel, and the next kernel after it returns */
    host_log hl = {0};
    CK(cudaLaunchKernel((const void *)slow, g1, b32, NULL, 0, s1));
    CK(cudaLaunchHostFunc(s1, host_fn, &hl));
    CK(cudaLaunchKernel((const void *)fast, g1, b32, NULL, 0, s1));
    CHECK(cudaStreamQuery(s1) == cudaErrorNotReady, "stream busy behind the host function");
    CK(cudaStreamSynchronize(s1));
    long long slow_end = 0, fast_start = 0;
    truth_kernels("_Z4slowv", NULL, &slow_end);
    truth_kernels("_Z4fastv", &fast_start, NULL);
    CHECK(hl.calls == 1, "host function calls %d", hl.calls);
    CHECK((long long)hl.start >= slow_end, "host function started %lld ns before the kernel ended",
          slow_end - (long long)hl.start);
    CHECK(fast_start >= (long long)hl.end, "next kernel started %lld ns before the host function returned",
          (long long)hl.end - fast_start);

    /* stream callback */
    host_log cb = {0};
    CK(cudaStreamAddCallback(s2, stream_cb, &cb, 0));
    CHECK(cudaStreamAddCallback(s2, stream_cb, &cb, 1) == cudaErrorInvalidValue, "flags must be 0");
    CK(cudaStreamSynchronize(s2));
    CHECK(cb.calls == 1 && cb.stream == s2 && cb.status == cudaSuccess, "callback calls %d", cb.calls);

    /* fork/join capture over two streams, with a host node; nothing runs until the graph does */
    host_log gh = {0};
    cudaEvent_t fork, join;
    CK(cudaEventCreate(&fork));
    CK(cudaEventCreate(&join));
    CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CK(cudaLaunchKernel((const void *)k1, g1, b32, NULL, 0, s1));
    CK(cudaEventRecord(fork, s1));
    CK(cudaStreamWaitEvent(s2, fork, 0));
    enum cudaStreamCaptureStatus st;
    unsigned long long id1 = 0, id2 = 0;
    CK(cudaStreamGetCaptureInfo(s1, &st, &id1, NULL, NULL, NULL));
    CK(cudaStreamGetCaptureInfo(s2, &st, &id2, NULL, NULL, NULL));
    CHECK(st == cudaStreamCaptureStatusActive && id1 && id1 == id2, "s2 joined the capture (%llu %llu)", id1, id2);
    CK(cudaLaunchKernel((const void *)k2, g1, b32, NULL, 0, s2));
    CK(cudaLaunchHostFunc(s2, host_fn, &gh));
    CK(cudaEventRecord(join, s2));
    CK(cudaStreamWaitEvent(s1, join, 0));
    cudaGraph_t graph;
    CK(cudaStreamEndCapture(s1, &graph));
    CK(cudaStreamIsCapturing(s2, &st));
    CHECK(st == cudaStreamCaptureStatusNone, "capture over on the forked stream");
    CK(cudaDeviceSynchronize());
    CHECK(truth_kernels("_Z2k1v", NULL, NULL) == 0 && gh.calls == 0, "captured work ran");
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphLaunch(exec, s1));
    CK(cudaGraphLaunch(exec, s1));
    CK(cudaStreamSynchronize(s1));
    int nk1 = truth_kernels("_Z2k1v", NULL, NULL), nk2 = truth_kernels("_Z2k2v", NULL, NULL);
    CHECK(nk1 == 2 && nk2 == 2 && gh.calls == 2, "graph runs: k1 %d k2 %d host %d", nk1, nk2, gh.calls);

    /* a fork never joined */
    CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CK(cudaEventRecord(fork, s1));
    CK(cudaStreamWaitEvent(s2, fork, 0));
    CK(cudaLaunchKernel((const void *)k2, g1, b32, NULL, 0, s2));
    cudaError_t e = cudaStreamEndCapture(s1, &graph);
    CHECK(e == cudaErrorStreamCaptureUnjoined && !graph, "unjoined: %d", (int)e);
    CK(cudaStreamIsCapturing(s2, &st));
    CHECK(st == cudaStreamCaptureStatusNone, "unjoined stream released");

    /* unsafe calls: forbidden in global mode (the capture is invalidated), allowed when relaxed */
    void *p = NULL;
    CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CHECK(cudaMalloc(&p, 256) == cudaErrorStreamCaptureUnsupported, "cudaMalloc while capturing");
    CK(cudaStreamIsCapturing(s1, &st));
    CHECK(st == cudaStreamCaptureStatusInvalidated, "invalidated status");
    CHECK(cudaLaunchKernel((const void *)k1, g1, b32, NULL, 0, s1) == cudaErrorStreamCaptureInvalidated, "launch");
    CHECK(cudaStreamEndCapture(s1, &graph) == cudaErrorStreamCaptureInvalidated && !graph, "end invalidated");
    CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CK(cudaThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == cudaStreamCaptureModeGlobal, "previous mode");
    CK(cudaMalloc(&p, 256));
    CK(cudaThreadExchangeStreamCaptureMode(&mode));
    CHECK(cudaStreamQuery(s1) == cudaErrorStreamCaptureUnsupported, "query of a capturing stream");
    CHECK(cudaStreamEndCapture(s1, &graph) == cudaErrorStreamCaptureInvalidated, "query invalidated");

    /* the legacy stream while a blocking stream captures; a captured event queried */
    CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
    CHECK(cudaLaunchKernel((const void *)k1, g1, b32, NULL, 0, NULL) == cudaErrorStreamCaptureImplicit, "legacy");
    CHECK(cudaStreamEndCapture(s1, &graph) == cudaErrorStreamCaptureInvalidated, "legacy invalidated");
    CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
    CK(cudaEventRecord(fork, s1));
    CHECK(cudaEventQuery(fork) == cudaErrorCapturedEvent, "query of a captured event");
    CHECK(cudaStreamEndCapture(s1, &graph) == cudaErrorStreamCaptureInvalidated, "event query invalidated");
    CHECK(cudaStreamAddCallback(s1, stream_cb, &cb, 0) == cudaSuccess, "callback outside capture");
    CK(cudaStreamSynchronize(s1));

    /* capture into an existing graph */
    cudaGraph_t mine;
    CK(cudaGraphCreate(&mine, 0));
    CK(cudaStreamBeginCaptureToGraph(s1, mine, NULL, NULL, 0, cudaStreamCaptureModeGlobal));
    CK(cudaLaunchKernel((const void *)fast, g1, b32, NULL, 0, s1));
    CK(cudaStreamEndCapture(s1, &graph));
    CHECK(graph == mine, "same graph back");
    int fast_before = truth_kernels("_Z4fastv", NULL, NULL);
    CK(cudaGraphInstantiateWithFlags(&exec, mine, 0));
    CK(cudaGraphLaunch(exec, s1));
    CK(cudaStreamSynchronize(s1));
    CHECK(truth_kernels("_Z4fastv", NULL, NULL) == fast_before + 1, "kernel captured into the graph ran");

    /* libraries: PTX and cubin kernels run under their names */
    cudaLibrary_t lp, le;
    CK(cudaLibraryLoadData(&lp, PTX, NULL, NULL, 0, NULL, NULL, 0));
    unsigned char *cubin = make_cubin();
    CK(cudaLibraryLoadData(&le, cubin, NULL, NULL, 0, NULL, NULL, 0));
    unsigned np = 0, ne = 0;
    CK(cudaLibraryGetKernelCount(&np, lp));
    CK(cudaLibraryGetKernelCount(&ne, le));
    CHECK(np == 2 && ne == 2, "library kernels ptx %u cubin %u", np, ne);
    cudaKernel_t kp, ke, missing;
    CK(cudaLibraryGetKernel(&kp, lp, "_Z9ptx_scalePff"));
    CK(cudaLibraryGetKernel(&ke, le, "_Z9elf_scalePfi"));
    CHECK(cudaLibraryGetKernel(&missing, le, "helper") == cudaErrorSymbolNotFound, "not an entry");
    CK(cudaLaunchKernel((const void *)kp, g1, b32, NULL, 0, s1));
    CK(cudaLaunchKernel((const void *)ke, g1, b32, NULL, 0, s1));
    CK(cudaStreamSynchronize(s1));
    int nptx = truth_kernels("_Z9ptx_scalePff", NULL, NULL), nelf = truth_kernels("_Z9elf_scalePfi", NULL, NULL);
    CHECK(nptx == 1 && nelf == 1, "library kernels ran: ptx %d cubin %d", nptx, nelf);
    CK(cudaLibraryUnload(lp));
    CK(cudaLibraryUnload(le));
    CHECK(cudaLibraryGetKernel(&kp, lp, "_Z9ptx_scalePff") == cudaErrorInvalidResourceHandle, "unloaded");
    free(cubin);

    printf("capture: host_calls=%d callback_calls=%d graph_k1=%d graph_k2=%d graph_host=%d lib_ptx=%d lib_cubin=%d "
           "failures=%d\n",
           hl.calls, cb.calls, nk1, nk2, gh.calls, nptx, nelf, st_failures);
    return st_failures ? 1 : 0;
}
