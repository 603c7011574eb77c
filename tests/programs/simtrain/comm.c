/* NCCL, loaded at run time with dlopen("libnccl.so.2") so simtrain also runs single-rank on a
 * stack without NCCL (the real libnccl or tests/simgpu's mock, whichever the loader finds). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "simtrain.h"

int nccl_load(nccl_lib *n, char *err, size_t errlen) {
  memset(n, 0, sizeof *n);
  n->handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!n->handle) {
    snprintf(err, errlen, "%s", dlerror());
    return -1;
  }
#define SYM(field, name)                                               \
  do {                                                                 \
    *(void **)(&n->field) = dlsym(n->handle, name);                    \
    if (!n->field) {                                                   \
      snprintf(err, errlen, "libnccl.so.2 lacks %s", name);            \
      dlclose(n->handle);                                              \
      n->handle = NULL;                                                \
      return -1;                                                       \
    }                                                                  \
  } while (0)
  SYM(GetUniqueId, "ncclGetUniqueId");
  SYM(CommInitRank, "ncclCommInitRank");
  SYM(CommDestroy, "ncclCommDestroy");
  SYM(CommAbort, "ncclCommAbort");
  SYM(GetErrorString, "ncclGetErrorString");
  SYM(AllReduce, "ncclAllReduce");
  SYM(Broadcast, "ncclBroadcast");
  SYM(GetVersion, "ncclGetVersion");
#undef SYM
  *(void **)(&n->CommInitRankScalable) = dlsym(n->handle, "ncclCommInitRankScalable");
  return 0;
}

int write_id_file(const char *path, const char *text) {
  char tmp[300];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  int ok = fputs(text, f) >= 0;
  ok = (fclose(f) == 0) && ok;
  return ok && rename(tmp, path) == 0 ? 0 : -1;
}

const char *read_id_file(const char *path, char *buf, size_t cap, double timeout_s) {
  double deadline = now_s() + timeout_s;
  for (;;) {
    FILE *f = fopen(path, "r");
    if (f) {
      size_t n = fread(buf, 1, cap - 1, f);
      fclose(f);
      buf[n] = '\0';
      return buf;
    }
    if (now_s() > deadline) return NULL;
    sleep_ms(1);
  }
}

void hex_encode(const unsigned char *in, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int hex_decode(const char *in, unsigned char *out, size_t n) {
  if (strlen(in) != 2 * n) return -1;
  for (size_t i = 0; i < n; i++) {
    int hi = hexval(in[2 * i]), lo = hexval(in[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}
