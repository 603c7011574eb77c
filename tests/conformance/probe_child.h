/* probe_child.h - runs one probe step in a forked child with a timeout and prints one line:
 *   <step> returned <code>[ <details>]     the child finished the step
 *   <step> killed by <SIGNAME>             the child died (SIGSEGV for a stack overflow)
 *   <step> timed out after <N> s           the child hung
 * Each step starts from a fresh process: dlopen happens in the child, so no library state, thread or
 * lock of an earlier step is inherited. */
#ifndef TPROF_PROBE_CHILD_H
#define TPROF_PROBE_CHILD_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_TIMEOUT_S 20
/* The child's stack may grow to 1 MiB: an endless recursion (CUPTI 13.2 without a driver) then dies
 * in 0.1 s instead of 1.5 s at the usual 8 MiB. No probed call needs more: the outcomes are the
 * same at 8 MiB. */
#define PROBE_STACK_BYTES (1 << 20)

/* The child's result line (without the step name), written to the pipe the parent reads. */
static int probe_fd = -1;
static void probe_say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof buf - 1) n = (int)sizeof buf - 1;
    ssize_t w = write(probe_fd, buf, (size_t)n);
    (void)w;
}

/* dlopen in the child; exits the child with a message when the library does not load. */
static void *probe_open(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        probe_say("dlopen failed: %s", dlerror());
        _exit(3);
    }
    return h;
}
static void *probe_sym(void *h, const char *name)
{
    void *f = dlsym(h, name);
    if (!f) {
        probe_say("symbol %s missing", name);
        _exit(3);
    }
    return f;
}

/* Runs step(path) in a child and prints the outcome line. */
static void probe_run(const char *name, void (*step)(const char *path), const char *path)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(2);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        close(fds[0]);
        probe_fd = fds[1];
        struct rlimit stack = {PROBE_STACK_BYTES, PROBE_STACK_BYTES};
        setrlimit(RLIMIT_STACK, &stack);
        alarm(PROBE_TIMEOUT_S);
        step(path);
        _exit(0);
    }
    close(fds[1]);
    char out[1024];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof out - 1 && (r = read(fds[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)r;
    out[len] = 0;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        printf("%s timed out after %d s\n", name, PROBE_TIMEOUT_S);
    else if (WIFSIGNALED(status))
        printf("%s killed by SIG%s\n", name, sigabbrev_np(WTERMSIG(status)));
    else if (len)
        printf("%s %s\n", name, out);
    else
        printf("%s exited %d without a result\n", name, WEXITSTATUS(status));
}
#endif
