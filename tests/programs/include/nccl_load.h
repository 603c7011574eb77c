/* nccl_load.h: NCCL loaded at run time, as the NCCL test programs (cuda/nccl_*.c) use it: `lib`
 * (the caller dlopens libnccl.so.2), `sym` (a symbol of it, or exit EXIT_NCCL naming it), `NCK`
 * (a call that must return ncclSuccess, or exit EXIT_NCCL naming it), and `get_id`: the unique id
 * rank 0 makes and leaves in a file (written whole, then renamed) for the other ranks, as torchrun's
 * store hands it over. Include after check.h (prog_name defined) and nccl_api.h. */
#ifndef TPROF_TEST_NCCL_LOAD_H
#define TPROF_TEST_NCCL_LOAD_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define EXIT_NCCL 5

static void *lib;
static void *sym(const char *name)
{
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "%s: libnccl.so.2 lacks %s\n", prog_name, name);
    exit(EXIT_NCCL);
  }
  return p;
}
#define NCK(call)                                                                \
  do {                                                                           \
    ncclResult_t r_ = (call);                                                    \
    if (r_ != ncclSuccess) {                                                     \
      fprintf(stderr, "%s: %s failed: %d\n", prog_name, #call, (int)r_);         \
      exit(EXIT_NCCL);                                                           \
    }                                                                            \
  } while (0)

/* Rank 0: makes the id and writes it to `path`. Others: wait up to 20 s for the file. 0 or -1. */
static inline int get_id(int rank, const char *path, ncclUniqueId *id)
{
  if (rank == 0) {
    NCK(((ncclGetUniqueId_fn)sym("ncclGetUniqueId"))(id));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0) return -1;
    return rename(tmp, path);
  }
  for (int i = 0; i < 20000; i++) { /* up to 20 s */
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (n == 1) return 0;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

#endif
