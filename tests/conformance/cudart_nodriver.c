/* cudart_nodriver - what a libcudart returns on a machine without a CUDA driver.
 *   cudart_nodriver /path/to/libcudart.so.N
 * Each call runs first in a fresh child process (probe_child.h), one line per step:
 * "<step> returned <cudaError_t>[ detail]" or how the child died. The last steps chain calls in one
 * process, to show what a failed call leaves for cudaGetLastError. */
#include "probe_child.h"

typedef int (*fn_int_ptr)(int *);
typedef int (*fn_malloc)(void **, size_t);
typedef int (*fn_free)(void *);
typedef int (*fn_void)(void);

static void *lib(const char *path) { return probe_open(path); }

static void runtime_get_version(const char *path)
{
    int v = -1;
    int r = ((fn_int_ptr)probe_sym(lib(path), "cudaRuntimeGetVersion"))(&v);
    probe_say("returned %d version=%d", r, v);
}
static void driver_get_version(const char *path)
{
    int v = -1;
    int r = ((fn_int_ptr)probe_sym(lib(path), "cudaDriverGetVersion"))(&v);
    probe_say("returned %d version=%d", r, v);
}
static void get_device_count(const char *path)
{
    int n = -1;
    int r = ((fn_int_ptr)probe_sym(lib(path), "cudaGetDeviceCount"))(&n);
    probe_say("returned %d count=%d", r, n);
}
static void malloc_1m(const char *path)
{
    void *p = (void *)1;
    int r = ((fn_malloc)probe_sym(lib(path), "cudaMalloc"))(&p, 1 << 20);
    probe_say("returned %d ptr_is_null=%d", r, p == NULL);
}
static void free_null(const char *path) { probe_say("returned %d", ((fn_free)probe_sym(lib(path), "cudaFree"))(NULL)); }
static void get_last_error(const char *path)
{
    probe_say("returned %d", ((fn_void)probe_sym(lib(path), "cudaGetLastError"))());
}
static void peek_at_last_error(const char *path)
{
    probe_say("returned %d", ((fn_void)probe_sym(lib(path), "cudaPeekAtLastError"))());
}
/* cudaGetDeviceCount, then cudaPeekAtLastError, cudaGetLastError twice: is the error kept, reset? */
static void count_then_errors(const char *path)
{
    void *h = lib(path);
    int n = -1;
    int r0 = ((fn_int_ptr)probe_sym(h, "cudaGetDeviceCount"))(&n);
    int r1 = ((fn_void)probe_sym(h, "cudaPeekAtLastError"))();
    int r2 = ((fn_void)probe_sym(h, "cudaGetLastError"))();
    int r3 = ((fn_void)probe_sym(h, "cudaGetLastError"))();
    probe_say("returned %d peek=%d get=%d get_again=%d", r0, r1, r2, r3);
}
/* cudaMalloc twice: does a second call after a failed initialisation fail the same way? */
static void malloc_twice(const char *path)
{
    void *h = lib(path);
    void *p = NULL;
    int r0 = ((fn_malloc)probe_sym(h, "cudaMalloc"))(&p, 1 << 20);
    int r1 = ((fn_malloc)probe_sym(h, "cudaMalloc"))(&p, 1 << 20);
    probe_say("returned %d second=%d", r0, r1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s /path/to/libcudart.so\n", argv[0]);
        return 2;
    }
    probe_run("cudaRuntimeGetVersion", runtime_get_version, argv[1]);
    probe_run("cudaDriverGetVersion", driver_get_version, argv[1]);
    probe_run("cudaGetDeviceCount", get_device_count, argv[1]);
    probe_run("cudaMalloc", malloc_1m, argv[1]);
    probe_run("cudaFree(NULL)", free_null, argv[1]);
    probe_run("cudaGetLastError", get_last_error, argv[1]);
    probe_run("cudaPeekAtLastError", peek_at_last_error, argv[1]);
    probe_run("cudaGetDeviceCount+errors", count_then_errors, argv[1]);
    probe_run("cudaMalloc+cudaMalloc", malloc_twice, argv[1]);
    return 0;
}
