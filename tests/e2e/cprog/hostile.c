/* hostile: CUDA called where a profiler is easily caught out. Output is deterministic.
 *   signal   a 200 us interval timer whose handler calls cudaSetDevice while main launches kernels
 *            and copies in a loop (the handler lands inside tprof's wrappers; the simulated runtime's
 *            cudaSetDevice takes no lock, so the handler cannot deadlock the runtime itself)
 *   dtor     CUDA called from a pthread key destructor and a C++-style TLS teardown at thread exit
 *   plain    a few launches and copies (used with a hostile environment: TPROF_OUT, ulimit -f) */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "cuda_min.h"

static const char stub;
#define K_H "_Z13hostile_kernv"
__attribute__((constructor)) static void reg(void) {
  void **h = __cudaRegisterFatBinary((void *)&tprof_fatbin_wrap);
  __cudaRegisterFunction(h, &stub, (char *)K_H, K_H, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(h);
}

static void *dev;
static volatile sig_atomic_t in_handler_calls;

static void on_alarm(int sig) {
  (void)sig;
  if (cudaSetDevice(0) == 0) in_handler_calls++;
}

static int work(int iters) {
  static char host[4096];
  dim3 g = {4, 1, 1}, b = {32, 1, 1};
  for (int i = 0; i < iters; i++) {
    CK(cudaLaunchKernel(&stub, g, b, NULL, 0, NULL));
    CK(cudaMemcpyAsync(dev, host, sizeof host, cudaMemcpyHostToDevice, NULL));
  }
  CK(cudaDeviceSynchronize());
  return 0;
}

static pthread_key_t key;
static int dtor_result = -1;
static void key_dtor(void *p) {
  (void)p;
  void *d = NULL;
  int r = cudaMalloc(&d, 1024);
  r |= cudaMemset(d, 0, 1024);
  r |= cudaLaunchKernel(&stub, (dim3){1, 1, 1}, (dim3){1, 1, 1}, NULL, 0, NULL);
  r |= cudaDeviceSynchronize();
  r |= cudaFree(d);
  dtor_result = r;
}
static void *thread_main(void *arg) {
  (void)arg;
  pthread_setspecific(key, (void *)1);
  int r = work(10);
  return (void *)(long)r;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "plain";
  CK(cudaMalloc(&dev, 1 << 16));
  if (!strcmp(mode, "signal")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    int r = work(3000);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    if (r) return r;
    fprintf(stderr, "hostile: %d calls from the signal handler\n", (int)in_handler_calls);
  } else if (!strcmp(mode, "dtor")) {
    pthread_key_create(&key, key_dtor);
    pthread_t t;
    void *ret;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, &ret);
    if (ret || dtor_result != 0) {
      printf("hostile dtor: thread %ld, destructor %d\n", (long)ret, dtor_result);
      return 23;
    }
  } else {
    int r = work(50);
    if (r) return r;
  }
  CK(cudaFree(dev));
  printf("hostile %s: ok\n", mode);
  return 0;
}
