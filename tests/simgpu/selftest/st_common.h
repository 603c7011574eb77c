/* st_common.h - helpers for the simgpu selftests (plain C against the real CUDA/CUPTI headers). */
#ifndef ST_COMMON_H
#define ST_COMMON_H
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int st_failures;
#define CHECK(cond, ...)                                                                                       \
    do {                                                                                                       \
        if (!(cond)) {                                                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                    \
            fprintf(stderr, __VA_ARGS__);                                                                      \
            fprintf(stderr, "\n");                                                                             \
            st_failures++;                                                                                     \
        }                                                                                                      \
    } while (0)
#define CK(call) CHECK((call) == 0, "%s returned nonzero", #call)

/* nvcc's registration entry points (crt/host_runtime.h is C++ only) */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **h);
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int tl,
                            uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);

/* Registers a host stub address under a kernel name, as nvcc-generated code does. */
static inline void st_register(const void *stub, const char *name)
{
    static void **h;
    if (!h) {
        static int fake_fatbin[4] = {0x466243B1, 1, 0, 0};
        h = __cudaRegisterFatBinary(fake_fatbin);
        __cudaRegisterFatBinaryEnd(h);
    }
    __cudaRegisterFunction(h, (const char *)stub, (char *)name, name, -1, NULL, NULL, NULL, NULL, NULL);
}

static inline uint64_t st_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ground truth lines of this process */
typedef struct { char **lines; int n; } st_truth;
static inline st_truth st_truth_load(void)
{
    st_truth t = {0, 0};
    const char *dir = getenv("SIMGPU_TRUTH");
    if (!dir) return t;
    char path[4096];
    snprintf(path, sizeof path, "%s/truth-%d.jsonl", dir, (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f) return t;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        t.lines = realloc(t.lines, (size_t)(t.n + 1) * sizeof(char *));
        t.lines[t.n++] = strdup(line);
    }
    free(line);
    fclose(f);
    return t;
}
static inline int st_is(const char *line, const char *type)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"type\":\"%s\"", type);
    return strstr(line, pat) != NULL;
}
static inline long long st_num(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return -999;
    p += strlen(pat);
    if (!strncmp(p, "null", 4)) return -1;
    if (*p == 't') return 1;
    if (*p == 'f') return 0;
    return strtoll(p, NULL, 10);
}
static inline void st_str(const char *line, const char *key, char *out, size_t n)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(line, pat);
    out[0] = 0;
    if (!p) return;
    p += strlen(pat);
    size_t i = 0;
    while (*p && *p != '"' && i + 1 < n) out[i++] = *p++;
    out[i] = 0;
}
#endif
