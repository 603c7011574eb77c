/*
 * nccl_internal.h - the public NCCL 2.x ABI the mock libnccl.so.2 implements (types, enum values,
 * prototypes), written from the public API (nccl.h of NCCL 2.32.3, the newest nvidia-nccl-cu12/cu13
 * wheels), plus the mock's own shared-memory layout. The selftests include it in place of nccl.h
 * (not installed here).
 */
#ifndef SIMGPU_NCCL_INTERNAL_H
#define SIMGPU_NCCL_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 32
#define NCCL_PATCH 3
#define NCCL_VERSION_CODE 23203
#define NCCL_UNIQUE_ID_BYTES 128

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
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
    ncclTimeout = 8,
    ncclNumResults = 9
} ncclResult_t;

#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5,
               ncclMaxRedOp = 0x7fffffff } ncclRedOp_t;

typedef enum {
    ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt = 2, ncclUint32 = 3,
    ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6, ncclHalf = 6, ncclFloat32 = 7, ncclFloat = 7,
    ncclFloat64 = 8, ncclDouble = 8, ncclBfloat16 = 9, ncclFloat8e4m3 = 10, ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

/* ncclConfig_t (ncclConfig_v23100): only the leading fields are read (size, magic, version, blocking). */
typedef struct ncclConfig_v23100 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
    int graphUsageMode;
    int numRmaCtx;
    int maxP2pPeers;
    int graphStreamOrdering;
    int launchOrderImplicit;
    int numRmaSig;
    int rmaEagerInit;
    int hostCftMode;
    int nvlsHostMode;
} ncclConfig_t;

typedef void *nccl_cudaStream_t; /* cudaStream_t without the CUDA headers */

ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, nccl_cudaStream_t stream);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, nccl_cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               nccl_cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, nccl_cudaStream_t stream);
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       nccl_cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, nccl_cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, nccl_cudaStream_t stream);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      nccl_cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      nccl_cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

typedef struct {
    int opCnt;
    int peer;
    int sigIdx;
    int ctx;
} ncclWaitSignalDesc_t;

ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t ncclMemFree(void *ptr);
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                                      ncclConfig_t *config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                            ncclConfig_t *config, int shrinkFlags);
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank, ncclComm_t *newcomm,
                          ncclConfig_t *config);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           nccl_cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, nccl_cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, nccl_cudaStream_t stream);

/* ---------------------------------------------------------------- the mock's shared memory */

/* ncclUniqueId contents (the rest is zero). */
#define SGN_ID_MAGIC 0x44494c43434e4753ull /* "SGNCCLID" */
typedef struct sgn_id {
    uint64_t magic;
    uint64_t key;      /* random 64-bit session key; the communicator's hex id in the ground truth */
    char shm_name[64]; /* "/simgpu-nccl-<uid>-<key hex>" */
    int32_t creator_pid;
    uint32_t reserved[9];
} sgn_id;

#define SGN_SHM_MAGIC 0x31304d4853434e53ull /* "SNCSHM01" */
#define SGN_MAX_RANKS 256
#define SGN_COLL_SLOTS 1024 /* collectives a rank may run ahead of the slowest reader */
#define SGN_P2P_SLOTS 32    /* send/recv per (src, dst) pair in flight */
#define SGN_SPLIT_SLOTS 4   /* split rendezvous: a rank is at most one split ahead of the slowest */
#define SGN_SIG_SLOTS 64    /* signals per (src, dst) pair a sender may run ahead of the waiter */

enum { SGN_SLOT_EMPTY = 0, SGN_SLOT_JOINED = 1, SGN_SLOT_GONE = 2 };

typedef struct sgn_rank_slot {
    int32_t pid;
    uint32_t state;
    int32_t device;
    uint32_t pad;
    uint64_t joined_ns;
} sgn_rank_slot;

/* One rank's arrival at one collective (or one side of a send/recv). tag = gen<<40 | (index+1),
 * stored last with release order. */
typedef struct sgn_entry {
    uint64_t tag;
    uint64_t arrival_ns;
    uint64_t dur_ns;  /* latency + bus bytes / bandwidth, as this rank computes it */
    uint64_t sig;     /* op | datatype<<8 | redop<<16 | (root+1)<<24 */
    uint64_t count;
} sgn_entry;

/* One rank's part in one ncclCommSplit of the communicator. tag = gen<<40 | (split index+1). */
typedef struct sgn_split_entry {
    uint64_t tag;
    int32_t color, key;
} sgn_split_entry;

/* One signal (put with signal, or signal) from src to dst: when it lands. tag = gen<<40 | (k+1). */
typedef struct sgn_signal {
    uint64_t tag;
    uint64_t arrival_ns;
} sgn_signal;

typedef struct sgn_shm {
    uint64_t magic; /* SGN_SHM_MAGIC once initialised */
    uint64_t key;
    uint32_t nranks;
    uint32_t lock; /* pid of the process changing membership, 0 when free */
    uint64_t generation;
    uint64_t ids_digest; /* of every unique id the ranks passed (ncclCommInitRankScalable: all, in order) */
    uint64_t reserved[3];
    /* followed by: sgn_rank_slot ranks[nranks];
     *              sgn_entry coll[SGN_COLL_SLOTS][nranks];
     *              sgn_entry p2p[nranks (src)][nranks (dst)][SGN_P2P_SLOTS][2 (send, recv)];
     *              sgn_split_entry split[nranks][SGN_SPLIT_SLOTS];
     *              sgn_signal sig[nranks (src)][nranks (dst)][SGN_SIG_SLOTS]; */
} sgn_shm;

#ifdef __cplusplus
}
#endif
#endif
