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
#include <sys/prctl.h>
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

static void worker_main(int w, int fd, const options *o) {
  static unsigned char sample[SAMPLE_BYTES];
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_DFL);
  for (int step = w; step < o->steps; step += o->workers) {
    sleep_ms(o->batch_ms); /* decode + augment + collate */
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
