/* signal_fates: CUDA work, then a signal decides how the process ends (tests/e2e/tests/signal_fates.rs).
 * usage: signal_fates MODE
 *   brief       N kernels, then exit 0
 *   wait        N kernels, "ready" on stderr, then N kernels every 100 ms for up to 60 s; exit 0 after
 *   own_before  installs its own SIGUSR2 handler first, then as wait; after the handler ran, the main
 *               loop writes "app-usr2", waits 300 ms and exits 0
 *   own_after   as own_before, installing that handler after its first CUDA calls
 *   segv        N kernels, then a store through a NULL pointer
 *   abort       N kernels, then abort() */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_min.h"

static const char stub;
#define K_NAME "_Z10fate_worksPfi"

__attribute__((constructor)) static void register_kernels(void) {
  void **h = __cudaRegisterFatBinary((void *)&tprof_fatbin_wrap);
  __cudaRegisterFunction(h, &stub, (char *)K_NAME, K_NAME, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

static volatile sig_atomic_t got_usr2;

static void app_usr2(int sig) {
  (void)sig;
  got_usr2 = 1;
}

static void own_usr2(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = app_usr2;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, NULL);
}

static int work(void) {
  dim3 g = {8, 1, 1}, b = {32, 1, 1};
  for (int i = 0; i < 20; i++) CK(cudaLaunchKernel(&stub, g, b, NULL, 0, NULL));
  CK(cudaDeviceSynchronize());
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: signal_fates MODE\n");
    return 2;
  }
  const char *mode = argv[1];
  if (!strcmp(mode, "own_before")) own_usr2();
  if (work()) return 1;
  if (!strcmp(mode, "own_after")) own_usr2();
  if (!strcmp(mode, "segv")) {
    volatile int *p = NULL;
    *p = 1;
    return 3;
  }
  if (!strcmp(mode, "abort")) abort();
  if (!strcmp(mode, "brief")) return 0;
  fprintf(stderr, "ready\n");
  fflush(stderr);
  for (int i = 0; i < 600; i++) {
    usleep(100000);
    if (got_usr2) {
      fprintf(stderr, "app-usr2\n");
      fflush(stderr);
      usleep(300000);
      return 0;
    }
    if (work()) return 1;
  }
  return 0;
}
