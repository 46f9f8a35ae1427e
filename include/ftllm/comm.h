/* comm.h: the collectives and point-to-point messages ftllm needs, behind one interface.
 *
 * An FtComm wraps a communicator (a grid dimension) with a backend: MPI (host buffers), MPI
 * with host staging (device buffers through host copies: comm_create_staged) or NCCL (device
 * buffers of the CUDA backend; never run on a GPU between ranks), all filling the same table of
 * operations (struct ft_comm_backend in comm_impl.h). A CUDA trainer's communicators are
 * staged MPI, or with parallel.device_comm = nccl routed (comm_create_routed): collectives on
 * device buffers to NCCL, the rest staged. Every operation is non-blocking and returns a request
 * that can be tested; the "blocking" calls are the non-blocking call plus comm_wait(). The wait
 * is this module's own loop of test + poll hook + sched_yield(), never a blocking MPI call:
 * MPICH busy-polls, and with more ranks than cores a blocking call starves the rank it waits
 * for (DESIGN.md, measured: 500 all-reduces of 256 KB on 8 ranks, 46 s blocking vs 0.46 s with
 * the loop). The poll hook is where the executor runs useful work (deferred DMR checkers) while
 * a message is in flight.
 *
 * Errors: communicators get MPI_ERRORS_RETURN, and any failed call dies through the one error
 * path naming the operation and the communicator ("allreduce on dp: ..."), except a process
 * failure under ULFM (below). Each FtComm keeps counters (calls, bytes, seconds spent waiting)
 * for the timeline report.
 *
 * Process failures (comm_ft_*): built against an MPI with the ULFM extension (Open MPI 5,
 * OMPI_HAVE_MPI_EXT_FTMPI: `make MPI=openmpi`) and launched with it (`mpirun --with-ft ulfm`),
 * an operation that fails with MPIX_ERR_PROC_FAILED or MPIX_ERR_REVOKED (or any error on a
 * communicator that has lost a member: Open MPI's 2-rank collectives say MPI_ERR_OTHER) is not
 * fatal: this process revokes every FtComm it holds (so every survivor's pending and later
 * operations on them end with an error instead of waiting on the dead), the request counts as
 * complete (its
 * buffers are undefined) and the failure is remembered. The caller runs on to its agreement
 * point (comm_ft_agree), where every survivor learns the same verdict, then shrinks
 * (comm_ft_shrink) and rebuilds. Without ULFM (MPICH) comm_ft_enabled() is false, the others
 * are never needed, and a process failure is fatal as before.
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
    double wait_s;       /* time inside comm_wait/comm_waitall */
    double staged_bytes; /* device bytes copied through host memory (comm_create_staged) */
    long dev_calls;      /* of calls, those the device transport carried (comm_create_routed) */
    double dev_bytes;    /* and their bytes */
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

/* ---- device buffers (the CUDA backend; comm_select.c, comm_nccl.c, comm_staged.c) ----
 * How the ranks of a CUDA job talk: NCCL when every rank of a node has a GPU of its own (NCCL
 * refuses two ranks on one GPU) and NCCL loads, else MPI with host staging. */

/* How staging tells device memory from host memory and moves it (the caller fills it from its
 * compute backend: this layer knows none). to_host/to_device finish before they return. */
typedef struct ft_comm_stager {
    void *ctx;
    int (*is_device)(void *ctx, const void *p);
    void (*to_host)(void *ctx, void *host, const void *dev, size_t bytes);
    void (*to_device)(void *ctx, void *dev, const void *host, size_t bytes);
} FtCommStager;

/* An FtComm over comm (not duplicated, as comm_create_mpi) with MPI and host staging: every
 * buffer st calls device memory goes through a host copy (sent: copied before the operation
 * starts; received: copied back when a test sees it complete); host buffers go to MPI as they
 * are, so one communicator carries both. st is copied. Collective. */
FtComm *comm_create_staged(MPI_Comm comm, const char *name, const FtCommStager *st);
typedef enum ft_devcomm { FT_DEVCOMM_NCCL, FT_DEVCOMM_MPI_STAGED } FtDevComm;

/* This rank's choice, not collective: uuid holds the GPU of each of the local_size ranks on this
 * node (16 bytes each, in local rank order: what each rank's backend drives, however the GPUs
 * are bound: one visible per task, or all visible and picked by local rank), local_rank is this
 * rank's place, nccl_ok whether NCCL loaded. NCCL where no other rank of the node drives this
 * rank's GPU (NCCL refuses two ranks on one GPU) and NCCL loads; else MPI with host staging, with
 * the reason in why ("" for NCCL); -1 with the reason when the arguments are inconsistent. */
int comm_device_choice(const unsigned char *uuid, int local_rank, int local_size, bool nccl_ok,
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

/* An FtComm over comm for a device model with NCCL beside MPI: every all-reduce,
 * reduce-scatter, all-gather, all-to-all(v) and broadcast none of whose buffers is host memory
 * (as st tells; NULL buffers count as device memory, so a rank that passes none goes where the
 * others go) runs on the device transport, a communicator of its own over comm (NCCL, ordered
 * after what stream, a cudaStream_t, has launched); everything else (host buffers, sends and
 * receives) goes over MPI with host staging, as comm_create_staged. Point-to-point stays on
 * MPI because NCCL's sends and receives, issued one by one on one stream, deadlock when both
 * neighbours of a pipeline send before they receive. The routing depends only on where the
 * buffers live, which is the same on every rank of an SPMD job, so every rank takes the same
 * transport for the same call. Requests of the device transport carry its communicator
 * (req->comm); their waits count in this FtComm's comm_stats. Under ULFM a failed rank is
 * still fatal to the device transport (NCCL cannot be revoked from here): callers choose MPI
 * there (comm_device_pick). Collective over comm. NULL with a one-line reason in err when the
 * device transport cannot be had. */
FtComm *comm_create_routed(MPI_Comm comm, const char *name, const FtCommStager *st,
                           void *stream, char *err, size_t errlen);
/* The device transport comm_create_routed uses: NULL (the default) is comm_create_nccl; tests
 * without a GPU set a stand-in. */
typedef FtComm *(*FtDeviceTransport)(MPI_Comm comm, const char *name, void *stream, char *err,
                                     size_t errlen);
void comm_set_device_transport(FtDeviceTransport fn);

/* What parallel.device_comm (want: enum ft_device_comm_choice of deck_keys.h) comes to for a
 * job of nranks ranks, ulfm whether it runs under ULFM, spare whether SPARe is on (auto then
 * stages: its regrids have not run over NCCL; an explicit nccl is let through), agreed the
 * job's agreed choice (comm_device_agree of every rank's comm_device_choice) and why_not that
 * rank's reason when it is not NCCL. Returns FT_DEVCOMM_NCCL or FT_DEVCOMM_MPI_STAGED with a
 * one-line account in msg ("" for an explicit mpi), or -1 with the reason in msg when want is
 * nccl and the job cannot have it. Pure: every rank gets the same answer from the same agreed
 * inputs. */
int comm_device_pick(int want, int nranks, bool ulfm, bool spare, FtDevComm agreed,
                     const char *why_not, char *msg, size_t msglen);

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

/* ---- process failures (ULFM); see the top comment ---- */
/* True when ULFM is compiled in and the job runs with it (the MPI_FT attribute of
 * MPI_COMM_WORLD); the same on every rank. */
bool comm_ft_enabled(void);
/* True once an operation of this process saw a process failure (since comm_ft_clear). Local:
 * agree on it with comm_ft_agree before branching. */
bool comm_ft_failed(void);
/* When this process first saw a failure since comm_ft_clear (timers_wall; 0: none). */
double comm_ft_failed_at(void);
/* Collective over the surviving ranks of c, fault tolerant (MPIX_Comm_agree; works on a
 * revoked communicator): 1 when every survivor passed ok != 0, saw no failure and no rank of c
 * died before taking part; else 0. The same result on every survivor. Without ULFM: ok agreed
 * over c (comm_all_true). */
int comm_ft_agree(FtComm *c, int ok);
/* ULFM: revokes c, so that every rank of c waiting in an operation of c (or starting one)
 * sees it fail and comes to the agreement (comm_ft_agree) that starts a recovery. Nothing
 * without ULFM. */
void comm_ft_revoke(FtComm *c);
/* MPI_Comm_split of c's communicator (collective over c): 0 with *out the new communicator
 * (MPI_COMM_NULL for color MPI_UNDEFINED); 1 when a process of c failed (noted as any failed
 * operation is: comm_ft_failed() is true and this process's communicators are revoked; *out
 * is MPI_COMM_NULL). Local: agree (comm_ft_agree) before branching on it. Other errors die. */
int comm_ft_split(FtComm *c, int color, int key, MPI_Comm *out);
/* Collective over the survivors of c, after comm_ft_agree said 0: *survivors is a new
 * communicator of the living ranks of c in their old order (MPIX_Comm_shrink; the caller frees
 * it) and dead[0 .. *ndead-1] the ranks of c that failed, ascending (dead has comm_size(c)
 * places); the same on every survivor. Dies without ULFM. */
void comm_ft_shrink(FtComm *c, MPI_Comm *survivors, int *dead, int *ndead);
/* After comm_ft_shrink(c, live, ...): *live lost a member too (every survivor of it calls
 * this): *live is replaced by a communicator of its survivors (the old one freed) and
 * dead[0 .. *ndead-1] are the ranks of c not in it, ascending (both deaths' ranks). Dies
 * without ULFM. */
void comm_ft_shrink_again(FtComm *c, MPI_Comm *live, int *dead, int *ndead);
/* True once this process saw a process failure in this run (comm_ft_clear does not reset it;
 * after comm_ft_repair it is the same on every survivor). Then main ends with comm_ft_exit
 * instead of MPI_Finalize: Open MPI 5's finalize can wait forever on the dead (measured here:
 * 1 run in 5 under load; open-mpi/ompi issue 11404). */
bool comm_ft_survived(void);
/* Collective over the survivors of MPI_COMM_WORLD: flushes every stream, waits until every
 * survivor has (a barrier on the shrunk world, so no survivor's exit code ends the job while
 * another still prints), then _exit(rc). */
_Noreturn void comm_ft_exit(int rc);
/* Forgets the failures seen so far (after the rebuild on the survivors). */
void comm_ft_clear(void);
/* Notes a process failure that another layer saw on its own communicator (the checkpoint
 * writer): as a failed FtComm operation does, comm_ft_failed() becomes true and this process's
 * FtComms are revoked, so the next step's operations fail at once and its agreement starts the
 * recovery. Main thread only; nothing without ULFM. */
void comm_ft_note_failure(const char *what);
/* The same tests and actions on a raw MPI communicator, for layers that keep their own (the
 * checkpoint writer's; callable from its thread, they touch no FtComm):
 * comm_ft_mpi_failed: rc (not MPI_SUCCESS) of an operation on comm reports a process failure
 * (a failure class, or any error on a communicator that has lost a member); 0 without ULFM.
 * comm_ft_mpi_lost: a process of comm is known to have failed; 0 without ULFM.
 * comm_ft_mpi_agree: MPIX_Comm_agree over comm's survivors: nonzero on every survivor when ok
 * is nonzero on every survivor and none of comm failed; other errors die. Without ULFM: ok.
 * comm_ft_mpi_revoke: MPIX_Comm_revoke (nothing without ULFM). */
int comm_ft_mpi_failed(MPI_Comm comm, int rc);
int comm_ft_mpi_lost(MPI_Comm comm);
int comm_ft_mpi_agree(MPI_Comm comm, int ok);
void comm_ft_mpi_revoke(MPI_Comm comm);
/* For the end-of-run agreements over a communicator that may hold dead ranks: collective over
 * the survivors of c; when some rank of c died, c is moved onto the survivors (its communicator
 * shrunk, rank and size updated) and the count of dead ranks is returned; else 0. Without ULFM:
 * 0 at once (no collective). */
int comm_ft_repair(FtComm *c);

#endif
