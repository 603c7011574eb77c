/* inject: CUDA_INJECTION64_PATH is loaded at the first cuInit, including the runtime's implicit
 * initialisation, once per process, and missing files/symbols are ignored; cudaGetFuncBySymbol
 * gives a cudaFunction_t that cuLaunchKernel (via cudaGetDriverEntryPoint) and cudaLaunchKernel
 * accept, reported under the registered kernel name.
 *   inject TRUTH_DIR              the main test (sets CUDA_INJECTION64_PATH itself)
 *   inject --bad PATH             a child: injection of PATH must be ignored, CUDA still works */
#include "st_common.h"
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <sys/wait.h>

static const char stub_a, stub_b;
#define K_A "_Z13func_by_symbolPfi"
#define K_B "_Z12rt_via_handlePf"

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);

static int probe_int(const char *sym)
{
    int *p = (int *)dlsym(RTLD_DEFAULT, sym);
    return p ? *p : -100;
}

static int bad_child(const char *path)
{
    setenv("CUDA_INJECTION64_PATH", path, 1);
    void *p = NULL;
    if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess) return 2;
    if (cuInit(0) != CUDA_SUCCESS) return 3;
    return 0;
}

static int run_bad(const char *self, const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "--bad", path, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--bad") == 0) return bad_child(argv[2]);

    char self[4096], dir[4096], probe[4200], nosym[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    snprintf(dir, sizeof dir, "%s", self);
    *strrchr(dir, '/') = 0;
    snprintf(probe, sizeof probe, "%s/libinject_probe.so", dir);
    snprintf(nosym, sizeof nosym, "%s/../libsimgpu.so", dir); /* a library without InitializeInjection */

    /* missing file, library without the symbol: ignored silently */
    int bad_missing = run_bad(self, "/nonexistent/libnothing.so");
    int bad_nosym = run_bad(self, nosym);
    CHECK(bad_missing == 0, "missing injection library: child exit %d", bad_missing);
    CHECK(bad_nosym == 0, "library without InitializeInjection: child exit %d", bad_nosym);

    st_register(&stub_a, K_A);
    st_register(&stub_b, K_B);
    setenv("CUDA_INJECTION64_PATH", probe, 1);
    CHECK(dlsym(RTLD_DEFAULT, "probe_calls") == NULL, "probe loaded before any CUDA call");
    /* the runtime's implicit initialisation reaches cuInit, which injects */
    float *buf = NULL;
    CK(cudaMalloc((void **)&buf, 1 << 20));
    int calls_after_rt = probe_int("probe_calls");
    CHECK(calls_after_rt == 1, "InitializeInjection calls after the first runtime call: %d", calls_after_rt);
    CHECK(probe_int("probe_reinit") == 0, "cuInit from InitializeInjection returned %d", probe_int("probe_reinit"));
    CHECK(probe_int("probe_devices") == 8, "cudaGetDeviceCount from InitializeInjection: %d",
          probe_int("probe_devices"));
    CK(cuInit(0));
    CK(cuInit(0));
    int calls = probe_int("probe_calls");
    CHECK(calls == 1, "InitializeInjection calls after more cuInit: %d", calls);

    /* cudaGetFuncBySymbol -> cuLaunchKernel, and back into cudaLaunchKernel */
    cudaFunction_t fa = NULL, fa2 = NULL, fb = NULL, fbad = NULL;
    CK(cudaGetFuncBySymbol(&fa, &stub_a));
    CK(cudaGetFuncBySymbol(&fa2, &stub_a));
    CK(cudaGetFuncBySymbol(&fb, &stub_b));
    CHECK(fa && fa == fa2 && fa != fb, "handles %p %p %p", (void *)fa, (void *)fa2, (void *)fb);
    static const char unregistered = 0;
    cudaError_t e = cudaGetFuncBySymbol(&fbad, &unregistered);
    CHECK(e == cudaErrorInvalidDeviceFunction, "unregistered symbol: %d", (int)e);
    CHECK(cudaGetLastError() == cudaErrorInvalidDeviceFunction, "last error");
    CHECK(cudaGetFuncBySymbol(NULL, &stub_a) == cudaErrorInvalidValue, "NULL functionPtr");
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPoint("cuLaunchKernel", &fn, cudaEnableDefault, &q));
    CHECK(fn && q == cudaDriverEntryPointSuccess, "cuLaunchKernel entry point");
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int count = 1 << 18;
    void *args[] = {&buf, &count};
    int drv_launched = 0;
    if (fn) {
        CUresult r = ((launch_fn)fn)((CUfunction)fa, 16, 1, 1, 64, 1, 1, 0, (CUstream)s, args, NULL);
        CHECK(r == CUDA_SUCCESS, "cuLaunchKernel(cudaGetFuncBySymbol handle) = %d", (int)r);
        drv_launched = r == CUDA_SUCCESS;
    }
    CK(cudaLaunchKernel((const void *)fb, (dim3){8, 1, 1}, (dim3){32, 1, 1}, args, 0, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(buf));
    CK(cudaDeviceSynchronize());

    /* ground truth: both kernels under their registered names */
    CK(cuptiActivityFlushAll(0)); /* completes finished work: truth lines are written */
    st_truth t = st_truth_load();
    int na = 0, nb = 0;
    for (int i = 0; i < t.n; i++) {
        if (!st_is(t.lines[i], "kernel")) continue;
        if (strstr(t.lines[i], "\"name\":\"" K_A "\"")) na++;
        if (strstr(t.lines[i], "\"name\":\"" K_B "\"")) nb++;
    }
    CHECK(na == drv_launched, "%d truth kernels named %s", na, K_A);
    CHECK(nb == 1, "%d truth kernels named %s", nb, K_B);
    printf("inject: injection_calls=%d devices_from_injection=%d bad_missing=%d bad_nosym=%d "
           "func_by_symbol_kernels=%d rt_handle_kernels=%d failures=%d\n",
           calls, probe_int("probe_devices"), bad_missing, bad_nosym, na, nb, st_failures);
    return st_failures ? 1 : 0;
}
