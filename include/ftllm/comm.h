/* comm.h: the collectives and point-to-point messages ftllm needs, behind one interface.
 *
 * An FtComm wraps a communicator (a grid dimension) with a backend: MPI (host buffers) or NCCL
 * (device buffers of the CUDA backend: compiled, not yet used by the trainer, never run on a
 * GPU), both filling the same table of operations (struct ft_comm_backend in comm_impl.h). Every operation is non-blocking and returns a request
 * that can be tested; the "blocking" calls are the non-blocking call plus comm_wait(). The wait
 * is this module's own loop of test + poll hook + sched_yield(), never a blocking MPI call:
 * MPICH busy-polls, and with more ranks than cores a blocking call starves the rank it waits
 * for (DESIGN.md, measured: 500 all-reduces of 256 KB on 8 ranks, 46 s blocking vs 0.46 s with
 * the loop). The poll hook is where the executor runs useful work (deferred DMR checkers) while
 * a message is in flight.
 *
 * Errors: communicators get MPI_ERRORS_RETURN, and any failed call dies through the one error
 * path naming the operation and the communicator ("allreduce on dp: ..."). Each FtComm keeps
 * counters (calls, bytes, seconds spent waiting) for the timeline report.
 *
 * Unless noted, every call is collective over the FtComm and needs equal counts and dtypes on
 * every rank. Buffers must stay valid until the request completes. */
#ifndef FTLLM_COMM_H
#define FTLLM_COMM_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "ftllm/dtype.h"


/* Pass as the send buffer for an in-place all-reduce (the data is in recv). */
#define FT_IN_PLACE ((const void *)1)

typedef struct ft_comm FtComm;

/* A request: one operation in flight. Plain value, owned by the caller; the backend keeps its
 * own handle (an MPI_Request, a CUDA event) in `handle`, which nothing else reads. */
typedef struct ft_req {
    union {
        void *ptr;
        long long i;
        unsigned char raw[16];
    } handle;
    FtComm *comm;
    const char *op; /* "allreduce", "send", ... for messages and the timeline */
    size_t bytes;
    bool active;
} FtReq;

/* Called between tests while a request is in flight; returns true if it did useful work (then
 * the wait loop tests again at once instead of yielding). */
typedef struct ft_poll {
    bool (*fn)(void *arg);
    void *arg;
} FtPoll;

typedef struct ft_comm_stats {
    long calls;
    double bytes;
    double wait_s; /* time inside comm_wait/comm_waitall */
} FtCommStats;

/* Wraps comm (not duplicated: the caller keeps ownership of the MPI communicator, whose error
 * handler becomes MPI_ERRORS_RETURN so that failures reach the one error path) with the MPI
 * backend. name ("tp", "dp", ...) appears in messages. Collective. */
FtComm *comm_create_mpi(MPI_Comm comm, const char *name);
/* The same over a duplicate of comm (its own message space, so its operations can stay in
 * flight across other code's collectives on comm; comm's own error handler is left alone);
 * comm_destroy frees the duplicate. Collective. */
FtComm *comm_create_mpi_dup(MPI_Comm comm, const char *name);
void comm_destroy(FtComm *c);

/* ---- device buffers (the CUDA backend; comm_select.c, comm_nccl.c) ----
 * How the ranks of a CUDA job talk: NCCL when every rank of a node has a GPU of its own (NCCL
 * refuses two ranks on one GPU) and NCCL loads, else MPI with host staging (not built yet: a
 * multi-rank CUDA run is still refused, verb_train.c). */
typedef enum ft_devcomm { FT_DEVCOMM_NCCL, FT_DEVCOMM_MPI_STAGED } FtDevComm;

/* This rank's choice, not collective: local_rank of local_size ranks on this node, ngpus GPUs
 * visible there, nccl_ok whether NCCL loaded. *device = the GPU this rank drives (local_rank
 * mod ngpus). Returns -1 with a reason when there is no GPU (ngpus < 1) or the arguments are
 * inconsistent; otherwise the choice, with why it is not NCCL in why ("" for NCCL). */
int comm_device_choice(int local_rank, int local_size, int ngpus, bool nccl_ok, int *device,
                       char *why, size_t whylen);
/* The job's choice (collective over world, NULL: one rank): NCCL only where every rank chose
 * it, the same answer on every rank. */
FtDevComm comm_device_agree(FtComm *world, FtDevComm mine);

/* An FtComm over comm with the NCCL backend (device buffers; one GPU per rank, the current CUDA
 * device): its own communication stream, which waits for what compute_stream (a cudaStream_t)
 * has launched before each operation starts; a request completes when its operation has
 * finished on the device. NCCL is loaded at run time (dlopen libnccl.so.2), so binaries start
 * where it is missing. Point-to-point tags are ignored (NCCL keeps per-peer order).
 * Collective over comm. NULL with a one-line reason in err when NCCL cannot be had (a build
 * without CUDA, no libnccl, an NCCL error). */
FtComm *comm_create_nccl(MPI_Comm comm, const char *name, void *compute_stream, char *err,
                         size_t errlen);
/* Whether NCCL loads here (libnccl.so.2 and its symbols); reason in err when not. Not
 * collective. */
bool comm_nccl_available(char *err, size_t errlen);

int comm_rank(const FtComm *c);
int comm_size(const FtComm *c);
const char *comm_name(const FtComm *c);
FtCommStats comm_stats(const FtComm *c);

/* Non-blocking operations; each starts the operation and fills *req. */
void comm_iallreduce_sum(FtComm *c, const void *send, void *recv, size_t count, enum ft_dtype t,
                         FtReq *req);
void comm_ireduce_scatter_sum(FtComm *c, const void *send, void *recv, size_t recvcount,
                              enum ft_dtype t, FtReq *req); /* send: size * recvcount */
void comm_iallgather(FtComm *c, const void *send, void *recv, size_t sendcount, enum ft_dtype t,
                     FtReq *req); /* recv: size * sendcount */
void comm_ialltoallv(FtComm *c, const void *send, const int *sendcounts, const int *sdispls,
                     void *recv, const int *recvcounts, const int *rdispls, enum ft_dtype t,
                     FtReq *req); /* counts and displacements in elements */
void comm_ibcast(FtComm *c, void *buf, size_t count, enum ft_dtype t, int root, FtReq *req);
/* Point to point: not collective. */
void comm_isend(FtComm *c, const void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                FtReq *req);
void comm_irecv(FtComm *c, void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                FtReq *req);

/* True once req has completed (then it is inactive); never blocks. Not collective. */
bool comm_test(FtReq *req);
/* Waits for req (poll may be NULL), or for all n requests. Not collective by themselves. */
void comm_wait(FtReq *req, const FtPoll *poll);
void comm_waitall(FtReq *reqs, int n, const FtPoll *poll);

/* Blocking forms: the non-blocking call + comm_wait. */
void comm_allreduce_sum(FtComm *c, const void *send, void *recv, size_t count, enum ft_dtype t);
void comm_reduce_scatter_sum(FtComm *c, const void *send, void *recv, size_t recvcount,
                             enum ft_dtype t);
void comm_allgather(FtComm *c, const void *send, void *recv, size_t sendcount, enum ft_dtype t);
void comm_bcast(FtComm *c, void *buf, size_t count, enum ft_dtype t, int root);
/* Agreements on one value over every rank (the same result, bit for bit, on every rank):
 * logical AND (e.g. "did every rank pass"), max, sum (in rank order). The _poll forms run the
 * poll hook while they wait (poll may be NULL), as comm_wait does; the plain forms wait without
 * one. */
int comm_all_true_poll(FtComm *c, int value, const FtPoll *poll);
long long comm_max_i64_poll(FtComm *c, long long value, const FtPoll *poll);
double comm_sum_f64_poll(FtComm *c, double value, const FtPoll *poll);
double comm_max_f64_poll(FtComm *c, double value, const FtPoll *poll);
int comm_all_true(FtComm *c, int value);
long long comm_max_i64(FtComm *c, long long value);
double comm_sum_f64(FtComm *c, double value);

#endif
