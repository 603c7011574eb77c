/* Minimal NCCL API declarations for programs that load libnccl.so.2 at run time.
 *
 * Written from the public NCCL API (nccl.h, NCCL 2.x): the types, enum values and prototypes below
 * are the ABI every libnccl.so.2 exports. Only what tests/programs use is declared. Programs
 * dlopen("libnccl.so.2") and look the functions up by name, so they also run without NCCL.
 */
#ifndef TPROF_PROGRAMS_NCCL_API_H
#define TPROF_PROGRAMS_NCCL_API_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_UNIQUE_ID_BYTES 128

/* Opaque communicator and memory window handles. */
typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;

/* Passed BY VALUE to ncclCommInitRank. */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9
} ncclDataType_t;

/* Prototypes (as function-pointer types for dlsym). */
typedef ncclResult_t (*ncclGetVersion_fn)(int *version);
typedef ncclResult_t (*ncclGetUniqueId_fn)(ncclUniqueId *uniqueId);
typedef ncclResult_t (*ncclCommInitRank_fn)(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                            int rank);
typedef struct ncclConfig_v23100 ncclConfig_t; /* only passed as NULL here */
typedef ncclResult_t (*ncclCommInitRankScalable_fn)(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                                    ncclUniqueId *commIds, ncclConfig_t *config);
typedef ncclResult_t (*ncclCommDestroy_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommAbort_fn)(ncclComm_t comm);
typedef ncclResult_t (*ncclCommGetAsyncError_fn)(ncclComm_t comm, ncclResult_t *asyncError);
typedef const char *(*ncclGetErrorString_fn)(ncclResult_t result);
typedef ncclResult_t (*ncclAllReduce_fn)(const void *sendbuff, void *recvbuff, size_t count,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream);
typedef ncclResult_t (*ncclBroadcast_fn)(const void *sendbuff, void *recvbuff, size_t count,
                                         ncclDataType_t datatype, int root, ncclComm_t comm,
                                         cudaStream_t stream);
typedef ncclResult_t (*ncclAllGather_fn)(const void *sendbuff, void *recvbuff, size_t sendcount,
                                         ncclDataType_t datatype, ncclComm_t comm,
                                         cudaStream_t stream);
typedef ncclResult_t (*ncclCommInitAll_fn)(ncclComm_t *comms, int ndev, const int *devlist);
typedef ncclResult_t (*ncclReduceScatter_fn)(const void *sendbuff, void *recvbuff, size_t recvcount,
                                             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                             cudaStream_t stream);
typedef ncclResult_t (*ncclSend_fn)(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                    ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclRecv_fn)(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                    ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclGroupStart_fn)(void);
typedef ncclResult_t (*ncclGroupEnd_fn)(void);

/* Derived communicators, memory, one-sided calls (NCCL 2.32 nccl.h). */
#define NCCL_SPLIT_NOCOLOR -1
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;
typedef ncclResult_t (*ncclCommSplit_fn)(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                         ncclConfig_t *config);
typedef ncclResult_t (*ncclCommShrink_fn)(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                          ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);
typedef ncclResult_t (*ncclMemAlloc_fn)(void **ptr, size_t size);
typedef ncclResult_t (*ncclMemFree_fn)(void *ptr);
typedef ncclResult_t (*ncclCommRegister_fn)(const ncclComm_t comm, void *buff, size_t size, void **handle);
typedef ncclResult_t (*ncclCommDeregister_fn)(const ncclComm_t comm, void *handle);
typedef ncclResult_t (*ncclCommWindowRegister_fn)(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                                  int winFlags);
typedef ncclResult_t (*ncclCommWindowDeregister_fn)(ncclComm_t comm, ncclWindow_t win);
typedef ncclResult_t (*ncclPutSignal_fn)(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                                         ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                         unsigned int flags, ncclComm_t comm, cudaStream_t stream);
typedef ncclResult_t (*ncclSignal_fn)(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                      cudaStream_t stream);
typedef ncclResult_t (*ncclWaitSignal_fn)(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                                          cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TPROF_PROGRAMS_NCCL_API_H */
