/*
 * nccl_internal.h - the public NCCL 2.x ABI the mock libnccl.so.2 implements (types, enum values,
 * prototypes), written from the public API (nccl.h of NCCL 2.27), plus the mock's own shared-memory
 * layout. The selftests include it in place of nccl.h (not installed here).
 */
#ifndef SIMGPU_NCCL_INTERNAL_H
#define SIMGPU_NCCL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 3
#define NCCL_VERSION_CODE 22703
#define NCCL_UNIQUE_ID_BYTES 128

typedef struct ncclComm *ncclComm_t;
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

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5,
               ncclMaxRedOp = 0x7fffffff } ncclRedOp_t;

typedef enum {
    ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt = 2, ncclUint32 = 3,
    ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6, ncclHalf = 6, ncclFloat32 = 7, ncclFloat = 7,
    ncclFloat64 = 8, ncclDouble = 8, ncclBfloat16 = 9, ncclFloat8e4m3 = 10, ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

/* ncclConfig_t: only the leading fields are read (size, magic, version, blocking). */
typedef struct ncclConfig_v21700 {
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

typedef struct sgn_shm {
    uint64_t magic; /* SGN_SHM_MAGIC once initialised */
    uint64_t key;
    uint32_t nranks;
    uint32_t lock; /* pid of the process changing membership, 0 when free */
    uint64_t generation;
    uint64_t reserved[4];
    /* followed by: sgn_rank_slot ranks[nranks];
     *              sgn_entry coll[SGN_COLL_SLOTS][nranks];
     *              sgn_entry p2p[nranks (src)][nranks (dst)][SGN_P2P_SLOTS][2 (send, recv)]; */
} sgn_shm;

#ifdef __cplusplus
}
#endif
#endif
