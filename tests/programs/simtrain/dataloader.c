/* DataLoader-style workers (--workers N): forked after CUDA is initialised, as PyTorch forks
 * them when the DataLoader iterator is created. Worker w produces batches w, w+N, w+2N, ...,
 * each taking --batch-ms of host time, and sends them over its own pipe; the pipe's capacity
 * bounds how far a worker runs ahead (PyTorch's prefetch_factor). Workers never call CUDA,
 * never use stdio, and leave with _exit() as Python's multiprocessing children do. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simtrain.h"

#define SAMPLE_BYTES 16384

typedef struct {
  uint32_t step;
  uint32_t len;
} batch_header;

static int write_full(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

#define IO_FILE_BYTES (1 << 20)
#define IO_READS 16

/* The slow file: 1 MiB in TMPDIR, unlinked at once (one per process, made at its first batch). */
static int io_file(void) {
  static int fd = -1;
  if (fd >= 0) return fd;
  const char *dir = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/simtrain-batch-XXXXXX", dir && *dir ? dir : "/tmp");
  fd = mkstemp(path);
  if (fd < 0) return -1;
  unlink(path);
  static unsigned char block[65536];
  for (size_t i = 0; i < sizeof block; i++) block[i] = (unsigned char)(i * 7);
  for (int i = 0; i < IO_FILE_BYTES / (int)sizeof block; i++)
    if (write_full(fd, block, sizeof block)) return -1;
  return fd;
}

void batch_work(const options *o, int step) {
  switch (o->batch_work) {
  case WORK_CPU: { /* real computation for batch_ms of this thread's CPU time */
    double until = thread_cpu_ms() + o->batch_ms;
    volatile uint64_t x = (uint64_t)step;
    while (thread_cpu_ms() < until)
      for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    break;
  }
  case WORK_IO: { /* real reads from a slow file: each waits batch_ms / 16 first */
    int fd = io_file();
    static unsigned char chunk[IO_FILE_BYTES / IO_READS];
    for (int i = 0; i < IO_READS; i++) {
      sleep_ms(o->batch_ms / IO_READS);
      if (fd >= 0 && pread(fd, chunk, sizeof chunk, (off_t)i * (off_t)sizeof chunk) < 0) break;
    }
    break;
  }
  default: sleep_ms(o->batch_ms);
  }
}

static void worker_main(int w, int fd, const options *o) {
  static unsigned char sample[SAMPLE_BYTES];
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_DFL);
  for (int step = w; step < o->steps; step += o->workers) {
    batch_work(o, step); /* decode + augment + collate */
    for (size_t i = 0; i < sizeof sample; i++) sample[i] = (unsigned char)(step * 31 + i);
    batch_header h = {(uint32_t)step, (uint32_t)sizeof sample};
    if (write_full(fd, &h, sizeof h) || write_full(fd, sample, sizeof sample)) _exit(1);
  }
  close(fd);
  _exit(0);
}

int dataloader_start(dataloader *dl, const options *o, const rank_info *ri) {
  memset(dl, 0, sizeof *dl);
  dl->workers = o->workers;
  dl->fds = calloc((size_t)o->workers, sizeof(int));
  dl->pids = calloc((size_t)o->workers, sizeof(int));
  if (!dl->fds || !dl->pids) return -1;
  fflush(NULL); /* nothing buffered may be written twice */
  for (int w = 0; w < o->workers; w++) {
    int p[2];
    if (pipe(p) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      for (int j = 0; j < w; j++) close(dl->fds[j]);
      close(p[0]);
      worker_main(w, p[1], o);
    }
    close(p[1]);
    dl->fds[w] = p[0];
    dl->pids[w] = (int)pid;
    logf_rank(ri, "dataloader worker %d pid %d", w, (int)pid);
  }
  return 0;
}

long dataloader_next(dataloader *dl, int step, void *dst, size_t cap) {
  int fd = dl->fds[step % dl->workers];
  batch_header h;
  if (read_full(fd, &h, sizeof h) != 0 || h.step != (uint32_t)step) return -1;
  unsigned char buf[SAMPLE_BYTES];
  if (h.len > sizeof buf || read_full(fd, buf, h.len) != 0) return -1;
  memcpy(dst, buf, h.len < cap ? h.len : cap);
  dl->batches++;
  return (long)h.len;
}

void dataloader_stop(dataloader *dl) {
  for (int w = 0; w < dl->workers; w++) {
    close(dl->fds[w]);
    kill(dl->pids[w], SIGTERM);
  }
  for (int w = 0; w < dl->workers; w++) {
    while (waitpid(dl->pids[w], NULL, 0) < 0 && errno == EINTR) {
    }
  }
  free(dl->fds);
  free(dl->pids);
  dl->fds = dl->pids = NULL;
}
