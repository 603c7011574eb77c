/* nccl_probe: NCCL's first calls against NVIDIA's real libnccl.so.2 on a machine without a driver:
 * ncclGetVersion, ncclGetUniqueId and a one-rank ncclCommInitRank (which fail there), each result
 * printed on stdout. Exit code 0 when ncclGetVersion worked. */
#include <stdio.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
int ncclGetVersion(int *version);
int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
const char *ncclGetErrorString(int result);

int main(void) {
  int v = 0;
  int e1 = ncclGetVersion(&v);
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  int e2 = ncclGetUniqueId(&id);
  ncclComm_t comm = NULL;
  int e3 = e2 == 0 ? ncclCommInitRank(&comm, 1, id, 0) : -1;
  printf("version=%d e=%d,%d,%d %s\n", v, e1, e2, e3, ncclGetErrorString(e2));
  return e1 == 0 ? 0 : 1;
}
