/* process_ends: CUDA work that ends the ways that skip exit handlers, and threads that make the
 * process's first CUDA calls all at once.
 * usage: process_ends MODE N [T]
 *   _exit      N kernels, synchronise, then _exit(0)
 *   _Exit      N kernels, synchronise, then _Exit(0)
 *   fork_exit  a forked child (the parent made no CUDA call) does N kernels and _exit(0); the parent
 *              waits, then does N kernels and returns (the Python multiprocessing pattern)
 *   exec       N kernels, synchronise, then execv("/bin/true")
 *   execvp     N kernels, synchronise, then execvp("true")
 *   execl, execlp, execle   the same through the variadic calls
 *   exec_fail  N kernels, execv of a missing file (fails), then N more kernels and return
 *   execlp_fail  the same with execlp
 *   signal_exit  N kernels, synchronise, then a signal handler calls _exit(0)
 *   vfork_exec N kernels, a vfork child execs /bin/true (its exec must leave the parent's ring
 *              alone), then N more kernels and return
 *   threads    T threads released together by a barrier, each launching N kernels
 *   devices    T threads, one per device (cudaSetDevice(i)), released together, N kernels each */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_min.h"

static const char stubs[2];
#define K_WORK "_Z11ending_workPfi"
#define K_THREAD "_Z12thread_work_Pfi"

__attribute__((constructor)) static void register_kernels(void) {
  void **h = __cudaRegisterFatBinary((void *)&tprof_fatbin_wrap);
  __cudaRegisterFunction(h, &stubs[0], (char *)K_WORK, K_WORK, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFunction(h, &stubs[1], (char *)K_THREAD, K_THREAD, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

static int launch(int which, int n) {
  dim3 g = {64, 1, 1}, b = {128, 1, 1};
  for (int i = 0; i < n; i++) CK(cudaLaunchKernel(&stubs[which], g, b, NULL, 0, NULL));
  CK(cudaDeviceSynchronize());
  return 0;
}

static void exit_from_handler(int sig) {
  (void)sig;
  _exit(0);
}

static pthread_barrier_t start_together;
static int per_thread, by_device;

static void *worker(void *arg) {
  int index = (int)(long)arg;
  pthread_barrier_wait(&start_together);
  if (by_device && cudaSetDevice(index) != 0) return (void *)1;
  return (void *)(long)launch(1, per_thread);
}

static int threads(int t, int n, int devices) {
  pthread_t ids[64];
  per_thread = n;
  by_device = devices;
  if (t > 64) t = 64;
  pthread_barrier_init(&start_together, NULL, (unsigned)t);
  for (int i = 0; i < t; i++) pthread_create(&ids[i], NULL, worker, (void *)(long)i);
  int failed = 0;
  for (int i = 0; i < t; i++) {
    void *rc;
    pthread_join(ids[i], &rc);
    failed |= rc != NULL;
  }
  return failed ? 21 : 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: process_ends MODE N [T]\n");
    return 2;
  }
  const char *mode = argv[1];
  int n = atoi(argv[2]);
  int t = argc > 3 ? atoi(argv[3]) : 1;
  int rc = 0;
  if (!strcmp(mode, "_exit")) {
    if ((rc = launch(0, n))) return rc;
    _exit(0);
  } else if (!strcmp(mode, "_Exit")) {
    if ((rc = launch(0, n))) return rc;
    _Exit(0);
  } else if (!strcmp(mode, "fork_exit")) {
    pid_t child = fork();
    if (child == 0) _exit(launch(0, n));
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 22;
    return launch(0, n);
  } else if (!strcmp(mode, "exec") || !strcmp(mode, "execvp")) {
    if ((rc = launch(0, n))) return rc;
    char *args[] = {"true", NULL};
    if (!strcmp(mode, "exec"))
      execv("/bin/true", args);
    else
      execvp("true", args);
    perror("exec");
    return 23;
  } else if (!strcmp(mode, "execl") || !strcmp(mode, "execlp") || !strcmp(mode, "execle")) {
    if ((rc = launch(0, n))) return rc;
    extern char **environ;
    if (!strcmp(mode, "execl"))
      execl("/bin/true", "true", (char *)NULL);
    else if (!strcmp(mode, "execlp"))
      execlp("true", "true", (char *)NULL);
    else
      execle("/bin/true", "true", (char *)NULL, environ);
    perror(mode);
    return 23;
  } else if (!strcmp(mode, "exec_fail") || !strcmp(mode, "execlp_fail")) {
    if ((rc = launch(0, n))) return rc;
    char *args[] = {"missing", NULL};
    if (!strcmp(mode, "exec_fail")) {
      if (execv("/nonexistent/tprof-missing-program", args) == 0) return 24;
    } else if (execlp("tprof-missing-program", "missing", (char *)NULL) == 0) {
      return 24;
    }
    return launch(0, n);
  } else if (!strcmp(mode, "signal_exit")) {
    if ((rc = launch(0, n))) return rc;
    signal(SIGUSR1, exit_from_handler);
    raise(SIGUSR1);
    return 25;
  } else if (!strcmp(mode, "vfork_exec")) {
    if ((rc = launch(0, n))) return rc;
    char *args[] = {"true", NULL};
    pid_t child = vfork();
    if (child == 0) {
      execv("/bin/true", args);
      _exit(127);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 26;
    return launch(0, n);
  } else if (!strcmp(mode, "threads")) {
    return threads(t, n, 0);
  } else if (!strcmp(mode, "devices")) {
    return threads(t, n, 1);
  }
  fprintf(stderr, "process_ends: unknown mode %s\n", mode);
  return 2;
}
