/* exit_truth: the ground truth of a process that ends with _exit (no exit handlers, no destructors)
 * holds every op that completed before it: children launch kernels and copies, wait for them
 * (device synchronize, a synchronous copy, or a host sleep past their end) and _exit at once; the
 * parent counts their truth lines. Also a line written with sg_truth_line right before _exit. */
#include "st_common.h"
#include "simgpu_core.h"
#include <sys/wait.h>

#define CHILDREN 24
#define KERNELS 5

static void k_step(void) {}

/* mode 0: cudaDeviceSynchronize; 1: the last op is a synchronous D2H copy; 2: sleep past the end */
static int child(int mode)
{
    st_register((const void *)k_step, "_Z9exit_stepv");
    void *d = NULL;
    static char host[1 << 16];
    if (cudaMalloc(&d, sizeof host)) return 10;
    if (cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice)) return 11;
    for (int i = 0; i < KERNELS; i++)
        if (cudaLaunchKernel((const void *)k_step, (dim3){64, 1, 1}, (dim3){128, 1, 1}, NULL, 0, 0)) return 12;
    if (mode == 0 && cudaDeviceSynchronize()) return 13;
    if (mode == 1 && cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost)) return 14;
    if (mode == 2) {
        struct timespec ts = {0, 30 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sg_truth_line("{\"type\":\"exit_marker\"}");
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "child")) return child(atoi(argv[2]));
    const char *dir = getenv("SIMGPU_TRUTH");
    CHECK(dir != NULL, "SIMGPU_TRUTH is set");
    if (!dir) return 1;
    int complete[3] = {0}, runs[3] = {0};
    for (int i = 0; i < CHILDREN; i++) {
        int mode = i % 3;
        char m[8];
        snprintf(m, sizeof m, "%d", mode);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "child", m, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d exit status %d", i, st);
        char path[4096];
        snprintf(path, sizeof path, "%s/truth-%d.jsonl", dir, (int)pid);
        FILE *f = fopen(path, "r");
        int kernels = 0, copies = 0, markers = 0, process = 0;
        char line[4096];
        while (f && fgets(line, sizeof line, f)) {
            kernels += st_is(line, "kernel");
            copies += st_is(line, "memcpy");
            markers += st_is(line, "exit_marker");
            process += st_is(line, "process");
        }
        if (f) fclose(f);
        int want_copies = mode == 1 ? 2 : 1;
        runs[mode]++;
        int ok = process == 1 && kernels == KERNELS && copies == want_copies && markers == 1;
        complete[mode] += ok;
        CHECK(ok, "child %d (mode %d): process=%d kernels=%d/%d copies=%d/%d marker=%d", i, mode, process, kernels,
              KERNELS, copies, want_copies, markers);
    }
    printf("exit_truth: children=%d complete_sync=%d/%d complete_sync_copy=%d/%d complete_sleep=%d/%d failures=%d\n",
           CHILDREN, complete[0], runs[0], complete[1], runs[1], complete[2], runs[2], st_failures);
    return st_failures ? 1 : 0;
}
