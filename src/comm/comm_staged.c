/* comm_staged.c: MPI with host staging, the FtComm backend for device buffers where NCCL cannot
 * be had (several ranks on one GPU, no libnccl: comm.h, FT_DEVCOMM_MPI_STAGED). Each operation
 * looks at each of its buffers: one the stager calls device memory is copied into a fresh host
 * buffer before MPI starts (what MPI reads), or gets one that MPI writes and that is copied back
 * when the request completes (in the test that sees it done, so comm.c's wait loop and its poll
 * hook stay the one wait); host buffers go to MPI as they are. The per-request state lives on
 * the heap, its pointer in the FtReq's handle. A process failure (ULFM) completes the request
 * without copying anything back, as the MPI backend leaves its buffers undefined. The stager is
 * the caller's (train.c builds it from the model's backend): this layer knows no backend. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "ftllm/log.h"

typedef struct staged {
    MPI_Request mreq;
    void *hsend, *hrecv; /* host copies this request owns (NULL: none) */
    void *drecv;         /* the device buffer hrecv goes back to, when the request completes */
    size_t rbytes;
} Staged;

_Static_assert(sizeof(Staged *) <= sizeof(((FtReq *)0)->handle), "a pointer fits FtReq");
#define ST(r) (*(Staged **)(void *)(r)->handle.raw)

static const FtCommStager *stager(const FtComm *c)
{
    return c->ctx;
}

static Staged *st_start(FtReq *req, FtComm *c, const char *op, size_t bytes)
{
    comm_req_start(req, c, op, bytes);
    Staged *s = calloc(1, sizeof *s);
    if (!s) FT_DIE("%s on %s: out of memory", op, c->name);
    ST(req) = s;
    return s;
}

/* The request's state freed (its host copies with it). */
static void st_end(FtReq *req)
{
    Staged *s = ST(req);
    free(s->hsend), free(s->hrecv), free(s);
    ST(req) = NULL;
}

static bool is_dev(const FtComm *c, const void *p)
{
    return p && p != FT_IN_PLACE && stager(c)->is_device(stager(c)->ctx, p);
}

/* A host buffer of bytes for p (p itself when it is host memory); copy_in: with p's bytes. */
static void *host_buf(FtComm *c, const char *op, const void *p, size_t bytes, bool copy_in,
                      void **own)
{
    *own = NULL;
    if (!is_dev(c, p)) return (void *)p;
    void *h = malloc(bytes ? bytes : 1);
    if (!h) FT_DIE("%s on %s: out of memory staging %zu bytes", op, c->name, bytes);
    if (copy_in && bytes) stager(c)->to_host(stager(c)->ctx, h, p, bytes);
    c->stats.staged_bytes += copy_in ? (double)bytes : 0;
    *own = h;
    return h;
}

/* The receive side: a host buffer MPI writes, copied back to p (device) at completion. */
static void *recv_buf(FtComm *c, const char *op, Staged *s, void *p, size_t bytes, bool copy_in)
{
    void *h = host_buf(c, op, p, bytes, copy_in, &s->hrecv);
    if (s->hrecv) s->drecv = p, s->rbytes = bytes;
    return h;
}

/* After the MPI call: a process failure (rc != 0) ends the request at once. */
static void st_started(FtReq *req, int failed)
{
    if (!failed) return;
    st_end(req);
    req->active = false;
}

static void st_iallreduce_sum(FtComm *c, const void *send, void *recv, size_t count,
                              enum ft_dtype t, FtReq *req)
{
    size_t bytes = count * ft_dtype_size(t);
    Staged *s = st_start(req, c, "allreduce", bytes);
    bool inplace = send == FT_IN_PLACE;
    const void *hs =
        inplace ? MPI_IN_PLACE : host_buf(c, "allreduce", send, bytes, true, &s->hsend);
    void *hr = recv_buf(c, "allreduce", s, recv, bytes, inplace);
    st_started(req, COMM_FT_RC(c, "allreduce",
                               MPI_Iallreduce(hs, hr, comm_mpi_count(c, "allreduce", count),
                                              comm_mpi_type(t), MPI_SUM, c->mpi, &s->mreq)));
}

static void st_ireduce_scatter_sum(FtComm *c, const void *send, void *recv, size_t recvcount,
                                   enum ft_dtype t, FtReq *req)
{
    size_t rb = recvcount * ft_dtype_size(t), sb = rb * (size_t)c->size;
    Staged *s = st_start(req, c, "reduce_scatter", sb);
    const void *hs = host_buf(c, "reduce_scatter", send, sb, true, &s->hsend);
    void *hr = recv_buf(c, "reduce_scatter", s, recv, rb, false);
    st_started(req, COMM_FT_RC(c, "reduce_scatter",
                               MPI_Ireduce_scatter_block(
                                   hs, hr, comm_mpi_count(c, "reduce_scatter", recvcount),
                                   comm_mpi_type(t), MPI_SUM, c->mpi, &s->mreq)));
}

static void st_iallgather(FtComm *c, const void *send, void *recv, size_t sendcount,
                          enum ft_dtype t, FtReq *req)
{
    size_t sb = sendcount * ft_dtype_size(t), rb = sb * (size_t)c->size;
    Staged *s = st_start(req, c, "allgather", rb);
    const void *hs = host_buf(c, "allgather", send, sb, true, &s->hsend);
    void *hr = recv_buf(c, "allgather", s, recv, rb, false);
    int n = comm_mpi_count(c, "allgather", sendcount);
    st_started(req, COMM_FT_RC(c, "allgather",
                               MPI_Iallgather(hs, n, comm_mpi_type(t), hr, n, comm_mpi_type(t),
                                              c->mpi, &s->mreq)));
}

/* Elements spanned by counts/displacements: the end of the farthest block. */
static size_t extent(const FtComm *c, const int *counts, const int *displs)
{
    size_t e = 0;
    for (int i = 0; i < c->size; i++)
        if (counts[i] > 0 && (size_t)displs[i] + (size_t)counts[i] > e)
            e = (size_t)displs[i] + (size_t)counts[i];
    return e;
}

static void st_ialltoallv(FtComm *c, const void *send, const int *sendcounts, const int *sdispls,
                          void *recv, const int *recvcounts, const int *rdispls, enum ft_dtype t,
                          FtReq *req)
{
    size_t es = ft_dtype_size(t), total = 0;
    for (int i = 0; i < c->size; i++)
        total += (size_t)sendcounts[i];
    Staged *s = st_start(req, c, "alltoallv", total * es);
    const void *hs =
        host_buf(c, "alltoallv", send, extent(c, sendcounts, sdispls) * es, true, &s->hsend);
    /* copied in: the blocks no rank sends keep their bytes when they go back */
    void *hr = recv_buf(c, "alltoallv", s, recv, extent(c, recvcounts, rdispls) * es, true);
    st_started(req,
               COMM_FT_RC(c, "alltoallv",
                          MPI_Ialltoallv(hs, sendcounts, sdispls, comm_mpi_type(t), hr, recvcounts,
                                         rdispls, comm_mpi_type(t), c->mpi, &s->mreq)));
}

static void st_ibcast(FtComm *c, void *buf, size_t count, enum ft_dtype t, int root, FtReq *req)
{
    size_t bytes = count * ft_dtype_size(t);
    Staged *s = st_start(req, c, "bcast", bytes);
    void *h = recv_buf(c, "bcast", s, buf, bytes, c->rank == root);
    st_started(req, COMM_FT_RC(c, "bcast",
                               MPI_Ibcast(h, comm_mpi_count(c, "bcast", count), comm_mpi_type(t),
                                          root, c->mpi, &s->mreq)));
}

static void st_isend(FtComm *c, const void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                     FtReq *req)
{
    size_t bytes = count * ft_dtype_size(t);
    Staged *s = st_start(req, c, "send", bytes);
    const void *h = host_buf(c, "send", buf, bytes, true, &s->hsend);
    st_started(req, COMM_FT_RC(c, "send",
                               MPI_Isend(h, comm_mpi_count(c, "send", count), comm_mpi_type(t),
                                         peer, tag, c->mpi, &s->mreq)));
}

static void st_irecv(FtComm *c, void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                     FtReq *req)
{
    size_t bytes = count * ft_dtype_size(t);
    Staged *s = st_start(req, c, "recv", bytes);
    void *h = recv_buf(c, "recv", s, buf, bytes, false);
    st_started(req, COMM_FT_RC(c, "recv",
                               MPI_Irecv(h, comm_mpi_count(c, "recv", count), comm_mpi_type(t),
                                         peer, tag, c->mpi, &s->mreq)));
}

static bool st_test(FtReq *req)
{
    Staged *s = ST(req);
    FtComm *c = req->comm;
    int done = 0;
    if (COMM_FT_RC(c, req->op, MPI_Test(&s->mreq, &done, MPI_STATUS_IGNORE))) {
        st_end(req); /* ended by a process failure (ULFM): its buffers are undefined */
        return true;
    }
    if (!done) return false;
    if (s->drecv && s->rbytes) {
        stager(c)->to_device(stager(c)->ctx, s->drecv, s->hrecv, s->rbytes);
        c->stats.staged_bytes += (double)s->rbytes;
    }
    st_end(req);
    return true;
}

static void st_destroy(FtComm *c)
{
    comm_mpi_destroy(c);
    free(c->ctx);
}

static const struct ft_comm_backend g_staged_backend = {
    .name = "mpi-staged",
    .iallreduce_sum = st_iallreduce_sum,
    .ireduce_scatter_sum = st_ireduce_scatter_sum,
    .iallgather = st_iallgather,
    .ialltoallv = st_ialltoallv,
    .ibcast = st_ibcast,
    .isend = st_isend,
    .irecv = st_irecv,
    .test = st_test,
    .destroy = st_destroy,
};

FtComm *comm_create_staged(MPI_Comm mpi, const char *name, const FtCommStager *st)
{
    FT_ASSERT(st && st->is_device && st->to_host && st->to_device);
    FtComm *c = comm_create_mpi(mpi, name);
    FtCommStager *own = malloc(sizeof *own);
    if (!own) FT_DIE("out of memory");
    *own = *st;
    c->be = &g_staged_backend;
    c->ctx = own;
    return c;
}
