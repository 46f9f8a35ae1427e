/* comm.c: the backend-independent half of FtComm: argument checks, the wait loop (test, poll
 * hook, sched_yield), blocking forms, small agreements and counters. See comm.h. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "ftllm/log.h"

void comm_check_mpi(const FtComm *c, const char *op, int rc, const char *file, int line)
{
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    ft_die_at(file, line, "comm", "%s on %s (%d ranks) failed: %s", op, c ? c->name : "?",
              c ? c->size : 0, msg);
}

void comm_destroy(FtComm *c)
{
    if (!c) return;
    comm_destroy(c->dev);
    if (c->be->destroy) c->be->destroy(c);
    free(c);
}

int comm_rank(const FtComm *c) { return c->rank; }
int comm_size(const FtComm *c) { return c->size; }
const char *comm_name(const FtComm *c) { return c->name; }
FtCommStats comm_stats(const FtComm *c)
{
    FtCommStats s = c->stats;
    if (c->dev) s.wait_s += c->dev->stats.wait_s; /* its requests carry it (comm_waitall) */
    return s;
}

static void count_call(FtComm *c, const FtReq *req)
{
    c->stats.calls++;
    c->stats.bytes += (double)req->bytes;
    if (req->comm && req->comm == c->dev) {
        c->stats.dev_calls++;
        c->stats.dev_bytes += (double)req->bytes;
    }
}

/* Where a collective with buffers a and b goes (comm_create_routed): the device transport
 * unless one of them is host memory. */
static FtComm *route(FtComm *c, const void *a, const void *b)
{
    if (!c->dev) return c;
    const FtCommStager *st = &c->dev_st;
    if (a && a != FT_IN_PLACE && !st->is_device(st->ctx, a)) return c;
    if (b && b != FT_IN_PLACE && !st->is_device(st->ctx, b)) return c;
    return c->dev;
}

static void check_peer(const FtComm *c, const char *op, int peer)
{
    if (peer < 0 || peer >= c->size)
        FT_DIE("%s on %s: peer %d is not a rank of this communicator (size %d)", op, c->name, peer,
               c->size);
}

void comm_iallreduce_sum(FtComm *c, const void *send, void *recv, size_t count, enum ft_dtype t,
                         FtReq *req)
{
    FtComm *to = route(c, send, recv);
    to->be->iallreduce_sum(to, send, recv, count, t, req);
    count_call(c, req);
}

void comm_ireduce_scatter_sum(FtComm *c, const void *send, void *recv, size_t recvcount,
                              enum ft_dtype t, FtReq *req)
{
    FtComm *to = route(c, send, recv);
    to->be->ireduce_scatter_sum(to, send, recv, recvcount, t, req);
    count_call(c, req);
}

void comm_iallgather(FtComm *c, const void *send, void *recv, size_t sendcount, enum ft_dtype t,
                     FtReq *req)
{
    FtComm *to = route(c, send, recv);
    to->be->iallgather(to, send, recv, sendcount, t, req);
    count_call(c, req);
}

void comm_ialltoallv(FtComm *c, const void *send, const int *sendcounts, const int *sdispls,
                     void *recv, const int *recvcounts, const int *rdispls, enum ft_dtype t,
                     FtReq *req)
{
    FtComm *to = route(c, send, recv);
    to->be->ialltoallv(to, send, sendcounts, sdispls, recv, recvcounts, rdispls, t, req);
    count_call(c, req);
}

void comm_ibcast(FtComm *c, void *buf, size_t count, enum ft_dtype t, int root, FtReq *req)
{
    check_peer(c, "bcast", root);
    FtComm *to = route(c, buf, NULL);
    to->be->ibcast(to, buf, count, t, root, req);
    count_call(c, req);
}

void comm_isend(FtComm *c, const void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                FtReq *req)
{
    check_peer(c, "send", peer);
    c->be->isend(c, buf, count, t, peer, tag, req);
    count_call(c, req);
}

void comm_irecv(FtComm *c, void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                FtReq *req)
{
    check_peer(c, "recv", peer);
    c->be->irecv(c, buf, count, t, peer, tag, req);
    count_call(c, req);
}

bool comm_test(FtReq *req)
{
    if (!req->active) return true;
    if (!req->comm->be->test(req)) return false;
    req->active = false;
    return true;
}

void comm_waitall(FtReq *reqs, int n, const FtPoll *poll)
{
    double t0 = MPI_Wtime();
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) pending += !comm_test(&reqs[i]);
        if (!pending) break;
        if (poll && poll->fn && poll->fn(poll->arg)) continue;
        sched_yield();
    }
    double dt = MPI_Wtime() - t0;
    /* the wait is charged to the first request's communicator */
    if (n > 0 && reqs[0].comm) reqs[0].comm->stats.wait_s += dt;
}

void comm_wait(FtReq *req, const FtPoll *poll) { comm_waitall(req, 1, poll); }

void comm_allreduce_sum(FtComm *c, const void *send, void *recv, size_t count, enum ft_dtype t)
{
    FtReq r;
    comm_iallreduce_sum(c, send, recv, count, t, &r);
    comm_wait(&r, NULL);
}

void comm_reduce_scatter_sum(FtComm *c, const void *send, void *recv, size_t recvcount,
                             enum ft_dtype t)
{
    FtReq r;
    comm_ireduce_scatter_sum(c, send, recv, recvcount, t, &r);
    comm_wait(&r, NULL);
}

void comm_allgather(FtComm *c, const void *send, void *recv, size_t sendcount, enum ft_dtype t)
{
    FtReq r;
    comm_iallgather(c, send, recv, sendcount, t, &r);
    comm_wait(&r, NULL);
}

void comm_bcast(FtComm *c, void *buf, size_t count, enum ft_dtype t, int root)
{
    FtReq r;
    comm_ibcast(c, buf, count, t, root, &r);
    comm_wait(&r, NULL);
}

int comm_all_true_poll(FtComm *c, int value, const FtPoll *poll)
{
    /* sum of "false" flags: MPI_SUM keeps the backend table small (no min/max ops needed) */
    long long bad = value ? 0 : 1;
    FtReq r;
    comm_iallreduce_sum(c, FT_IN_PLACE, &bad, 1, FT_I64, &r);
    comm_wait(&r, poll);
    return bad == 0;
}

/* every rank's value, in rank order (malloc'ed; free it) */
static void *gather_one(FtComm *c, const void *value, enum ft_dtype t, const FtPoll *poll)
{
    void *all = calloc((size_t)c->size, ft_dtype_size(t));
    if (!all) FT_DIE("out of memory");
    FtReq r;
    comm_iallgather(c, value, all, 1, t, &r);
    comm_wait(&r, poll);
    return all;
}

long long comm_max_i64_poll(FtComm *c, long long value, const FtPoll *poll)
{
    long long *all = gather_one(c, &value, FT_I64, poll);
    long long m = all[0];
    for (int i = 1; i < c->size; i++) m = all[i] > m ? all[i] : m;
    free(all);
    return m;
}

double comm_sum_f64_poll(FtComm *c, double value, const FtPoll *poll)
{
    /* gathered and summed in rank order, so every rank gets the same bits */
    double *all = gather_one(c, &value, FT_F64, poll);
    double s = 0;
    for (int i = 0; i < c->size; i++) s += all[i];
    free(all);
    return s;
}

double comm_max_f64_poll(FtComm *c, double value, const FtPoll *poll)
{
    double *all = gather_one(c, &value, FT_F64, poll);
    double m = all[0];
    for (int i = 1; i < c->size; i++) m = all[i] > m ? all[i] : m;
    free(all);
    return m;
}

int comm_all_true(FtComm *c, int value) { return comm_all_true_poll(c, value, NULL); }
long long comm_max_i64(FtComm *c, long long value) { return comm_max_i64_poll(c, value, NULL); }
double comm_sum_f64(FtComm *c, double value) { return comm_sum_f64_poll(c, value, NULL); }
