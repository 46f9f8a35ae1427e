/* comm_nccl.c: the NCCL backend of FtComm (comm.h, comm_impl.h): device buffers, one GPU per
 * rank. Compiled in CUDA builds only (FTLLM_CUDA); elsewhere comm_create_nccl says so.
 *
 * Key decisions:
 *  - NCCL is opened with dlopen at the first use, not linked: a binary built here starts on a
 *    machine without libnccl, and comm_device_choice then picks MPI with host staging.
 *  - The communicator is made from the MPI one: rank 0's ncclUniqueId is broadcast over it.
 *  - Operations run on the backend's own communication stream, after an event that marks what
 *    the compute stream had launched; each request is a CUDA event recorded after its
 *    operation, tested with cudaEventQuery (never blocks: the wait loop of comm.c stays the
 *    one wait). An all-to-all(v) is a group of sends and receives.
 * Status: compiled, run on no GPU yet. The trainer's collectives on device buffers come here
 * under parallel.device_comm = nccl (comm_create_routed, comm_select.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "ftllm/log.h"

#ifndef FTLLM_CUDA

FtComm *comm_create_nccl(MPI_Comm comm, const char *name, void *compute_stream, char *err,
                         size_t errlen)
{
    (void)comm, (void)name, (void)compute_stream;
    snprintf(err, errlen, "NCCL: this ftllm was built without the CUDA backend (make CUDA=1)");
    return NULL;
}

bool comm_nccl_available(char *err, size_t errlen)
{
    snprintf(err, errlen, "NCCL: this ftllm was built without the CUDA backend (make CUDA=1)");
    return false;
}

#else

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

/* The NCCL functions used, resolved from libnccl.so.2. */
static struct {
    bool tried, ok;
    char why[256];
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                   ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*error_string)(ncclResult_t);
} g_nccl;

static bool load(void)
{
    if (g_nccl.tried) return g_nccl.ok;
    g_nccl.tried = true;
#ifdef FTLLM_CUDA_EMU /* the CUDA emulator's one-rank NCCL (cuda/emu/nccl.h), linked in */
    g_nccl.get_unique_id = ncclGetUniqueId, g_nccl.init_rank = ncclCommInitRank;
    g_nccl.destroy = ncclCommDestroy, g_nccl.all_reduce = ncclAllReduce;
    g_nccl.reduce_scatter = ncclReduceScatter, g_nccl.all_gather = ncclAllGather;
    g_nccl.broadcast = ncclBroadcast, g_nccl.send = ncclSend, g_nccl.recv = ncclRecv;
    g_nccl.group_start = ncclGroupStart, g_nccl.group_end = ncclGroupEnd;
    g_nccl.error_string = ncclGetErrorString;
    g_nccl.ok = true;
    return true;
#endif
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(g_nccl.why, sizeof g_nccl.why, "NCCL: cannot load libnccl.so.2: %s", dlerror());
        return false;
    }
#define SYM(field, name)                                                                       \
    do {                                                                                       \
        *(void **)(&g_nccl.field) = dlsym(h, name);                                            \
        if (!g_nccl.field) {                                                                   \
            snprintf(g_nccl.why, sizeof g_nccl.why, "NCCL: libnccl.so.2 has no %s", name);     \
            return false;                                                                      \
        }                                                                                      \
    } while (0)
    SYM(get_unique_id, "ncclGetUniqueId");
    SYM(init_rank, "ncclCommInitRank");
    SYM(destroy, "ncclCommDestroy");
    SYM(all_reduce, "ncclAllReduce");
    SYM(reduce_scatter, "ncclReduceScatter");
    SYM(all_gather, "ncclAllGather");
    SYM(broadcast, "ncclBroadcast");
    SYM(send, "ncclSend");
    SYM(recv, "ncclRecv");
    SYM(group_start, "ncclGroupStart");
    SYM(group_end, "ncclGroupEnd");
    SYM(error_string, "ncclGetErrorString");
#undef SYM
    g_nccl.ok = true;
    return true;
}

bool comm_nccl_available(char *err, size_t errlen)
{
    if (load()) return true;
    snprintf(err, errlen, "%s", g_nccl.why);
    return false;
}

typedef struct nccl_ctx {
    ncclComm_t comm;
    cudaStream_t stream, compute;
    cudaEvent_t ready; /* what the compute stream launched before an operation */
} NcclCtx;

_Static_assert(sizeof(cudaEvent_t) <= sizeof(((FtReq *)0)->handle), "a CUDA event fits FtReq");
#define REQ_EVENT(r) (*(cudaEvent_t *)(void *)(r)->handle.raw)

static void check_nccl(const FtComm *c, const char *op, ncclResult_t r)
{
    if (r != ncclSuccess)
        FT_DIE("%s on %s (%d ranks, NCCL) failed: %s", op, c->name, c->size,
               g_nccl.error_string(r));
}

static void check_cuda(const FtComm *c, const char *op, cudaError_t e)
{
    if (e != cudaSuccess)
        FT_DIE("%s on %s (%d ranks, NCCL) failed: %s", op, c->name, c->size,
               cudaGetErrorString(e));
}

static ncclDataType_t nccl_type(enum ft_dtype t)
{
    switch (t) {
    case FT_F32: return ncclFloat32;
    case FT_F64: return ncclFloat64;
    case FT_I32: return ncclInt32;
    case FT_I64: return ncclInt64;
    case FT_U8: return ncclUint8;
    }
    FT_DIE("unknown dtype %d", (int)t);
}

/* Orders the communication stream after the compute stream's work so far. */
static NcclCtx *begin(FtComm *c, FtReq *req, const char *op, size_t bytes)
{
    NcclCtx *x = c->ctx;
    req->comm = c;
    req->op = op;
    req->bytes = bytes;
    req->active = true;
    check_cuda(c, op, cudaEventRecord(x->ready, x->compute));
    check_cuda(c, op, cudaStreamWaitEvent(x->stream, x->ready, 0));
    return x;
}

/* The request's event, recorded after the operation on the communication stream. */
static void end(FtComm *c, FtReq *req)
{
    NcclCtx *x = c->ctx;
    cudaEvent_t ev;
    check_cuda(c, req->op, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    check_cuda(c, req->op, cudaEventRecord(ev, x->stream));
    REQ_EVENT(req) = ev;
}

static void nc_iallreduce_sum(FtComm *c, const void *send, void *recv, size_t count,
                              enum ft_dtype t, FtReq *req)
{
    NcclCtx *x = begin(c, req, "allreduce", count * ft_dtype_size(t));
    const void *s = send == FT_IN_PLACE ? recv : send;
    check_nccl(c, "allreduce",
               g_nccl.all_reduce(s, recv, count, nccl_type(t), ncclSum, x->comm, x->stream));
    end(c, req);
}

static void nc_ireduce_scatter_sum(FtComm *c, const void *send, void *recv, size_t recvcount,
                                   enum ft_dtype t, FtReq *req)
{
    NcclCtx *x = begin(c, req, "reduce_scatter", recvcount * (size_t)c->size * ft_dtype_size(t));
    check_nccl(c, "reduce_scatter", g_nccl.reduce_scatter(send, recv, recvcount, nccl_type(t),
                                                          ncclSum, x->comm, x->stream));
    end(c, req);
}

static void nc_iallgather(FtComm *c, const void *send, void *recv, size_t sendcount,
                          enum ft_dtype t, FtReq *req)
{
    NcclCtx *x = begin(c, req, "allgather", sendcount * (size_t)c->size * ft_dtype_size(t));
    check_nccl(c, "allgather",
               g_nccl.all_gather(send, recv, sendcount, nccl_type(t), x->comm, x->stream));
    end(c, req);
}

static void nc_ialltoallv(FtComm *c, const void *send, const int *sendcounts, const int *sdispls,
                          void *recv, const int *recvcounts, const int *rdispls, enum ft_dtype t,
                          FtReq *req)
{
    size_t total = 0, es = ft_dtype_size(t);
    for (int i = 0; i < c->size; i++) total += (size_t)sendcounts[i];
    NcclCtx *x = begin(c, req, "alltoallv", total * es);
    check_nccl(c, "alltoallv", g_nccl.group_start());
    for (int p = 0; p < c->size; p++) {
        if (sendcounts[p] > 0)
            check_nccl(c, "alltoallv",
                       g_nccl.send((const char *)send + (size_t)sdispls[p] * es,
                                   (size_t)sendcounts[p], nccl_type(t), p, x->comm, x->stream));
        if (recvcounts[p] > 0)
            check_nccl(c, "alltoallv",
                       g_nccl.recv((char *)recv + (size_t)rdispls[p] * es, (size_t)recvcounts[p],
                                   nccl_type(t), p, x->comm, x->stream));
    }
    check_nccl(c, "alltoallv", g_nccl.group_end());
    end(c, req);
}

static void nc_ibcast(FtComm *c, void *buf, size_t count, enum ft_dtype t, int root, FtReq *req)
{
    NcclCtx *x = begin(c, req, "bcast", count * ft_dtype_size(t));
    check_nccl(c, "bcast",
               g_nccl.broadcast(buf, buf, count, nccl_type(t), root, x->comm, x->stream));
    end(c, req);
}

static void nc_isend(FtComm *c, const void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                     FtReq *req)
{
    (void)tag;
    NcclCtx *x = begin(c, req, "send", count * ft_dtype_size(t));
    check_nccl(c, "send", g_nccl.send(buf, count, nccl_type(t), peer, x->comm, x->stream));
    end(c, req);
}

static void nc_irecv(FtComm *c, void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                     FtReq *req)
{
    (void)tag;
    NcclCtx *x = begin(c, req, "recv", count * ft_dtype_size(t));
    check_nccl(c, "recv", g_nccl.recv(buf, count, nccl_type(t), peer, x->comm, x->stream));
    end(c, req);
}

static bool nc_test(FtReq *req)
{
    cudaEvent_t ev = REQ_EVENT(req);
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaErrorNotReady) return false;
    check_cuda(req->comm, req->op, e);
    check_cuda(req->comm, req->op, cudaEventDestroy(ev));
    return true;
}

static void nc_destroy(FtComm *c)
{
    NcclCtx *x = c->ctx;
    if (!x) return;
    check_cuda(c, "destroy", cudaStreamSynchronize(x->stream));
    check_nccl(c, "destroy", g_nccl.destroy(x->comm));
    check_cuda(c, "destroy", cudaEventDestroy(x->ready));
    check_cuda(c, "destroy", cudaStreamDestroy(x->stream));
    free(x);
    c->ctx = NULL;
}

static const struct ft_comm_backend g_nccl_backend = {
    .name = "nccl",
    .iallreduce_sum = nc_iallreduce_sum,
    .ireduce_scatter_sum = nc_ireduce_scatter_sum,
    .iallgather = nc_iallgather,
    .ialltoallv = nc_ialltoallv,
    .ibcast = nc_ibcast,
    .isend = nc_isend,
    .irecv = nc_irecv,
    .test = nc_test,
    .destroy = nc_destroy,
};

FtComm *comm_create_nccl(MPI_Comm mpi, const char *name, void *compute_stream, char *err,
                         size_t errlen)
{
    int rank = 0, size = 1;
    FT_CHECK_MPI(MPI_Comm_rank(mpi, &rank));
    FT_CHECK_MPI(MPI_Comm_size(mpi, &size));
    /* every rank must be able to load NCCL before any creates a communicator */
    int ok = load(), all = 0;
    FT_CHECK_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, mpi));
    if (!all) {
        snprintf(err, errlen, "%s", ok ? "NCCL: another rank cannot load libnccl.so.2" : g_nccl.why);
        return NULL;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (rank == 0) r = g_nccl.get_unique_id(&id);
    int bad = r != ncclSuccess;
    FT_CHECK_MPI(MPI_Bcast(&bad, 1, MPI_INT, 0, mpi));
    if (bad) {
        snprintf(err, errlen, "NCCL: ncclGetUniqueId failed on rank 0");
        return NULL;
    }
    FT_CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpi));
    NcclCtx *x = calloc(1, sizeof *x);
    FtComm *c = calloc(1, sizeof *c);
    if (!x || !c) FT_DIE("out of memory");
    r = g_nccl.init_rank(&x->comm, size, id, rank);
    int mine = r == ncclSuccess, every = 0;
    FT_CHECK_MPI(MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, mpi));
    if (!every) {
        snprintf(err, errlen, "NCCL: ncclCommInitRank failed%s%s",
                 mine ? " on another rank" : ": ", mine ? "" : g_nccl.error_string(r));
        if (mine) g_nccl.destroy(x->comm);
        free(x), free(c);
        return NULL;
    }
    c->be = &g_nccl_backend;
    c->mpi = mpi;
    c->rank = rank, c->size = size;
    c->ctx = x;
    snprintf(c->name, sizeof c->name, "%s", name);
    x->compute = (cudaStream_t)compute_stream;
    check_cuda(c, "create", cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    check_cuda(c, "create", cudaEventCreateWithFlags(&x->ready, cudaEventDisableTiming));
    return c;
}

#endif
