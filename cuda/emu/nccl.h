/* nccl.h (ftllm's CUDA emulator): NCCL on one rank, on the emulator's device memory
 * (emu_runtime.cc): collectives are copies, a send and a receive to oneself inside a group
 * match in order. A communicator of more than one rank is refused (ncclInvalidUsage): the
 * emulator's ranks share one emulated GPU, where ftllm stages through MPI anyway. ftllm opens
 * the real NCCL with dlopen (src/comm/comm_nccl.c); the emulator build links these instead. */
#ifndef FTEMU_NCCL_H
#define FTEMU_NCCL_H

typedef struct ftemu_nccl_comm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2,
               ncclInternalError = 3, ncclInvalidArgument = 4, ncclInvalidUsage = 5 } ncclResult_t;
typedef enum { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4,
               ncclUint64 = 5, ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8,
               ncclBfloat16 = 9 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;


#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t st);
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t st);
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t st);
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t st);
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t st);
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t st);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
const char *ncclGetErrorString(ncclResult_t r);
#ifdef __cplusplus
}
#endif

#endif
