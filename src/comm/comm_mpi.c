/* comm_mpi.c: the MPI backend of FtComm (host buffers). Each operation is the matching
 * non-blocking MPI call; test is MPI_Test; every return code goes through comm_ft_rc (a
 * process failure under ULFM completes the request, anything else is fatal). Counts above INT_MAX
 * are refused with a fatal error naming the operation (no single collective that large is needed:
 * gradient buckets are far smaller). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm_impl.h"

/* The MPI request inside an FtReq's opaque handle. */
_Static_assert(sizeof(MPI_Request) <= sizeof(((FtReq *)0)->handle), "MPI_Request fits FtReq");
#define MPI_REQ(r) ((MPI_Request *)(void *)(r)->handle.raw)
#include "ftllm/log.h"

MPI_Datatype comm_mpi_type(enum ft_dtype t)
{
    switch (t) {
    case FT_F32: return MPI_FLOAT;
    case FT_F64: return MPI_DOUBLE;
    case FT_I32: return MPI_INT32_T;
    case FT_I64: return MPI_INT64_T;
    case FT_U8: return MPI_UINT8_T;
    }
    FT_DIE("unknown dtype %d", (int)t);
}

int comm_mpi_count(const FtComm *c, const char *op, size_t n)
{
    if (n > INT_MAX) FT_DIE("%s on %s: count %zu exceeds INT_MAX", op, c->name, n);
    return (int)n;
}

void comm_req_start(FtReq *req, FtComm *c, const char *op, size_t bytes)
{
    req->comm = c;
    req->op = op;
    req->bytes = bytes;
    req->active = true;
}

static void mpi_iallreduce_sum(FtComm *c, const void *send, void *recv, size_t count,
                               enum ft_dtype t, FtReq *req)
{
    comm_req_start(req, c, "allreduce", count * ft_dtype_size(t));
    const void *s = send == FT_IN_PLACE ? MPI_IN_PLACE : send;
    if (COMM_FT_RC(c, "allreduce",
                   MPI_Iallreduce(s, recv, comm_mpi_count(c, "allreduce", count), comm_mpi_type(t),
                                  MPI_SUM, c->mpi, MPI_REQ(req))))
        req->active = false; /* a process failure (ULFM): done, nothing moved */
}

static void mpi_ireduce_scatter_sum(FtComm *c, const void *send, void *recv, size_t recvcount,
                                    enum ft_dtype t, FtReq *req)
{
    comm_req_start(req, c, "reduce_scatter", recvcount * (size_t)c->size * ft_dtype_size(t));
    if (COMM_FT_RC(c, "reduce_scatter",
                   MPI_Ireduce_scatter_block(send, recv,
                                             comm_mpi_count(c, "reduce_scatter", recvcount),
                                             comm_mpi_type(t), MPI_SUM, c->mpi, MPI_REQ(req))))
        req->active = false; /* a process failure (ULFM): done, nothing moved */
}

static void mpi_iallgather(FtComm *c, const void *send, void *recv, size_t sendcount,
                           enum ft_dtype t, FtReq *req)
{
    comm_req_start(req, c, "allgather", sendcount * (size_t)c->size * ft_dtype_size(t));
    int n = comm_mpi_count(c, "allgather", sendcount);
    if (COMM_FT_RC(c, "allgather",
                   MPI_Iallgather(send, n, comm_mpi_type(t), recv, n, comm_mpi_type(t), c->mpi,
                                  MPI_REQ(req))))
        req->active = false; /* a process failure (ULFM): done, nothing moved */
}

static void mpi_ialltoallv(FtComm *c, const void *send, const int *sendcounts, const int *sdispls,
                           void *recv, const int *recvcounts, const int *rdispls, enum ft_dtype t,
                           FtReq *req)
{
    size_t total = 0;
    for (int i = 0; i < c->size; i++)
        total += (size_t)sendcounts[i];
    comm_req_start(req, c, "alltoallv", total * ft_dtype_size(t));
    if (COMM_FT_RC(c, "alltoallv",
                   MPI_Ialltoallv(send, sendcounts, sdispls, comm_mpi_type(t), recv, recvcounts,
                                  rdispls, comm_mpi_type(t), c->mpi, MPI_REQ(req))))
        req->active = false; /* a process failure (ULFM): done, nothing moved */
}

static void mpi_ibcast(FtComm *c, void *buf, size_t count, enum ft_dtype t, int root, FtReq *req)
{
    comm_req_start(req, c, "bcast", count * ft_dtype_size(t));
    if (COMM_FT_RC(c, "bcast",
                   MPI_Ibcast(buf, comm_mpi_count(c, "bcast", count), comm_mpi_type(t), root,
                              c->mpi, MPI_REQ(req))))
        req->active = false; /* a process failure (ULFM): done, nothing moved */
}

static void mpi_isend(FtComm *c, const void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                      FtReq *req)
{
    comm_req_start(req, c, "send", count * ft_dtype_size(t));
    if (COMM_FT_RC(c, "send",
                   MPI_Isend(buf, comm_mpi_count(c, "send", count), comm_mpi_type(t), peer, tag,
                             c->mpi, MPI_REQ(req))))
        req->active = false; /* a process failure (ULFM): done, nothing moved */
}

static void mpi_irecv(FtComm *c, void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                      FtReq *req)
{
    comm_req_start(req, c, "recv", count * ft_dtype_size(t));
    if (COMM_FT_RC(c, "recv",
                   MPI_Irecv(buf, comm_mpi_count(c, "recv", count), comm_mpi_type(t), peer, tag,
                             c->mpi, MPI_REQ(req))))
        req->active = false; /* a process failure (ULFM): done, nothing moved */
}

static bool mpi_test(FtReq *req)
{
    int done = 0;
    if (COMM_FT_RC(req->comm, req->op, MPI_Test(MPI_REQ(req), &done, MPI_STATUS_IGNORE)))
        return true; /* ended by a process failure (ULFM): its buffers are undefined */
    return done != 0;
}

void comm_mpi_destroy(FtComm *c)
{
    comm_ft_untrack(c);
    if (c->owns_mpi) COMM_FT_RC(c, "comm_free", MPI_Comm_free(&c->mpi));
}

static const struct ft_comm_backend g_mpi_backend = {
    .name = "mpi",
    .iallreduce_sum = mpi_iallreduce_sum,
    .ireduce_scatter_sum = mpi_ireduce_scatter_sum,
    .iallgather = mpi_iallgather,
    .ialltoallv = mpi_ialltoallv,
    .ibcast = mpi_ibcast,
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .test = mpi_test,
    .destroy = comm_mpi_destroy,
};

FtComm *comm_create_mpi(MPI_Comm mpi, const char *name)
{
    FtComm *c = calloc(1, sizeof *c);
    if (!c) FT_DIE("out of memory");
    c->be = &g_mpi_backend;
    c->mpi = mpi;
    snprintf(c->name, sizeof c->name, "%s", name);
    FT_CHECK_MPI(MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN));
    FT_CHECK_MPI(MPI_Comm_rank(mpi, &c->rank));
    FT_CHECK_MPI(MPI_Comm_size(mpi, &c->size));
    comm_ft_track(c);
    return c;
}

FtComm *comm_create_mpi_dup(MPI_Comm mpi, const char *name)
{
    MPI_Comm dup;
    int rc = MPI_Comm_dup(mpi, &dup);
    if (rc != MPI_SUCCESS) comm_check_mpi(NULL, "comm_dup", rc, __FILE__, __LINE__);
    FtComm *c = comm_create_mpi(dup, name);
    c->owns_mpi = true;
    return c;
}
