/*
 * nccl_profiler_abi.h - the NCCL profiler plugin interface, versions 1 to 6, as NCCL 2.23 .. 2.29+
 * define it in src/include/plugin/profiler/profiler_v{1..6}.h and nccl_profiler.h (the nvidia-nccl
 * wheels do not ship those headers). Written from the headers' field lists: the simulated NCCL
 * drives a plugin through these structs, and tests/e2e/tests/nccl_profiler_abi.rs checks that
 * libtprof's Rust structs have the same sizes and offsets.
 */
#ifndef SIMGPU_NCCL_PROFILER_ABI_H
#define SIMGPU_NCCL_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef int sgp_result_t; /* ncclResult_t */
typedef pid_t sgp_pid_t;  /* ncclPid_t on Linux */
typedef void (*sgp_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

enum { /* ncclProfile* event types */
    SGP_GROUP = 1 << 0, SGP_COLL = 1 << 1, SGP_P2P = 1 << 2, SGP_PROXY_OP = 1 << 3, SGP_PROXY_STEP = 1 << 4,
    SGP_PROXY_CTRL = 1 << 5, SGP_KERNEL_CH = 1 << 6, SGP_NET_PLUGIN = 1 << 7, SGP_GROUP_API = 1 << 8,
    SGP_COLL_API = 1 << 9, SGP_P2P_API = 1 << 10, SGP_KERNEL_LAUNCH = 1 << 11, SGP_CE_COLL = 1 << 12,
    SGP_CE_SYNC = 1 << 13, SGP_CE_BATCH = 1 << 14
};
enum { /* ncclProfilerEventState_t (the values this stack uses) */
    SGP_OP_SEND_POSTED = 0, SGP_OP_SEND_REM_FIFO_WAIT = 1, SGP_OP_SEND_TRANSMITTED = 2, SGP_OP_SEND_DONE = 3,
    SGP_OP_RECV_POSTED = 4, SGP_OP_RECV_RECEIVED = 5, SGP_OP_RECV_TRANSMITTED = 6, SGP_OP_RECV_DONE = 7,
    SGP_STEP_SEND_GPU_WAIT = 8, SGP_STEP_SEND_WAIT = 9, SGP_STEP_RECV_WAIT = 10, SGP_STEP_RECV_FLUSH_WAIT = 11,
    SGP_STEP_RECV_GPU_WAIT = 12, SGP_OP_IN_PROGRESS_V4 = 19, SGP_STEP_SEND_PEER_WAIT_V4 = 20, SGP_KERNEL_CH_STOP = 22
};

typedef struct { sgp_pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; } sgp_proxy_op;
typedef struct { int step; } sgp_proxy_step;
typedef struct { int64_t id; void *data; } sgp_net_plugin;
typedef struct { uint8_t channelId; uint64_t pTimer; } sgp_kernel_ch_v4;

/* ---- v1 */
typedef struct {
    uint8_t type; void *parentObj; int rank;
    union {
        struct { const char *name; uint64_t commHash; uint64_t seqNumber; uint8_t func; void const *sendBuff;
                 void *recvBuff; size_t count; int root; uint8_t datatype; uint32_t op; size_t trafficBytes;
                 uint8_t nMaxChannels; uint8_t nWarps; uint8_t algo; uint8_t proto; int isCollnet; int isNvls; } coll;
        struct { const char *name; uint64_t commHash; uint8_t func; void *buff; uint8_t datatype; size_t count;
                 int peer; } p2p;
        sgp_proxy_op proxyOp;
        sgp_proxy_step proxyStep;
    };
} sgp_descr_v1;
typedef union { struct { size_t transSize; int steps; } proxyOp; struct { int appendedProxyOps; } proxyCtrl; } sgp_args_v1;

/* ---- v2 */
typedef struct {
    uint8_t type; void *parentObj; int rank;
    union {
        struct { const char *name; uint64_t commHash; uint64_t seqNumber; const char *func; void const *sendBuff;
                 void *recvBuff; size_t count; int root; const char *datatype; size_t trafficBytes;
                 uint8_t nMaxChannels; uint8_t nWarps; const char *algo; const char *proto; } coll;
        struct { const char *name; uint64_t commHash; const char *func; void *buff; const char *datatype;
                 size_t count; int peer; } p2p;
        sgp_proxy_op proxyOp;
        sgp_proxy_step proxyStep;
    };
} sgp_descr_v2;

/* ---- v3 */
typedef struct {
    uint8_t type; void *parentObj; int rank;
    union {
        struct { const char *name; uint64_t commHash; uint64_t seqNumber; const char *func; void const *sendBuff;
                 void *recvBuff; size_t count; int root; const char *datatype; uint8_t nMaxChannels;
                 uint8_t nWarps; const char *algo; const char *proto; } coll;
        struct { const char *name; uint64_t commHash; const char *func; void *buff; const char *datatype;
                 size_t count; int peer; } p2p;
        sgp_proxy_op proxyOp;
        sgp_proxy_step proxyStep;
        struct { uint8_t channelId; } kernelCh;
        sgp_net_plugin netPlugin;
    };
} sgp_descr_v3;

/* ---- v4 */
typedef struct {
    uint8_t type; void *parentObj; int rank;
    union {
        struct { uint64_t seqNumber; const char *func; void const *sendBuff; void *recvBuff; size_t count; int root;
                 const char *datatype; uint8_t nChannels; uint8_t nWarps; const char *algo; const char *proto; } coll;
        struct { const char *func; void *buff; const char *datatype; size_t count; int peer; uint8_t nChannels; } p2p;
        sgp_proxy_op proxyOp;
        sgp_proxy_step proxyStep;
        sgp_kernel_ch_v4 kernelCh;
        sgp_net_plugin netPlugin;
    };
} sgp_descr_v4;
typedef union {
    struct { size_t transSize; } proxyStep;
    struct { int appendedProxyOps; } proxyCtrl;
    struct { void *data; } netPlugin;
    struct { uint64_t pTimer; } kernelCh;
} sgp_args_v4;

/* ---- v5 and v6 */
#define SGP_V5_MEMBERS                                                                                              \
    struct { bool graphCaptured; int groupDepth; } groupApi;                                                        \
    struct { const char *func; size_t count; const char *datatype; int root; void *stream; bool graphCaptured; }    \
        collApi;                                                                                                    \
    struct { const char *func; size_t count; const char *datatype; void *stream; bool graphCaptured; } p2pApi;      \
    struct { void *stream; } kernelLaunch;                                                                          \
    struct { uint64_t seqNumber; const char *func; void const *sendBuff; void *recvBuff; size_t count; int root;    \
             const char *datatype; uint8_t nChannels; uint8_t nWarps; const char *algo; const char *proto;          \
             void *parentGroup; } coll;                                                                             \
    struct { const char *func; void *buff; const char *datatype; size_t count; int peer; uint8_t nChannels;         \
             void *parentGroup; } p2p;                                                                              \
    sgp_proxy_op proxyOp;                                                                                           \
    sgp_proxy_step proxyStep;                                                                                       \
    sgp_kernel_ch_v4 kernelCh;                                                                                      \
    sgp_net_plugin netPlugin;
typedef struct {
    uint64_t type; void *parentObj; int rank;
    union { SGP_V5_MEMBERS };
} sgp_descr_v5;
typedef struct {
    uint64_t type; void *parentObj; int rank;
    union {
        SGP_V5_MEMBERS
        struct { uint64_t seqNumber; const char *func; void const *sendBuff; void *recvBuff; size_t count; int root;
                 const char *datatype; const char *syncStrategy; bool intraBatchSync; uint32_t batchSize;
                 uint32_t numBatches; uint32_t ceSeqNum; void *stream; } ceColl;
        struct { bool isComplete; int nRanks; } ceCollSync;
        struct { int numOps; size_t totalBytes; bool useIntraSync; } ceCollBatch;
    };
} sgp_descr_v6;
typedef sgp_args_v4 sgp_args_v5;
typedef sgp_args_v4 sgp_args_v6;

/* ---- function tables */
#define SGP_TABLE(v, init_args)                                                                                     \
    typedef struct {                                                                                                \
        const char *name;                                                                                           \
        sgp_result_t (*init) init_args;                                                                             \
        sgp_result_t (*startEvent)(void *context, void **eHandle, sgp_descr_##v *eDescr);                           \
        sgp_result_t (*stopEvent)(void *eHandle);                                                                   \
        sgp_result_t (*recordEventState)(void *eHandle, int eState, sgp_args_##v *eStateArgs);                      \
        sgp_result_t (*finalize)(void *context);                                                                    \
    } sgp_profiler_##v;
typedef sgp_args_v1 sgp_args_v2;
typedef sgp_args_v1 sgp_args_v3;
SGP_TABLE(v1, (void **context, int *eActivationMask))
SGP_TABLE(v2, (void **context, int *eActivationMask))
SGP_TABLE(v3, (void **context, int *eActivationMask))
SGP_TABLE(v4, (void **context, int *eActivationMask, const char *commName, uint64_t commHash, int nNodes,
               int nranks, int rank, sgp_logger_t logfn))
SGP_TABLE(v5, (void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes, int nranks,
               int rank, sgp_logger_t logfn))
SGP_TABLE(v6, (void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes, int nranks,
               int rank, sgp_logger_t logfn))

#endif
