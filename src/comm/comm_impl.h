/* comm_impl.h (private to comm*.c): the backend table behind FtComm. A backend starts each
 * operation and tests requests; the generic layer (comm.c) owns the wait loop, the blocking
 * forms, counters and argument checks. The NCCL backend will fill the same table. */
#ifndef FTLLM_COMM_IMPL_H
#define FTLLM_COMM_IMPL_H

#include "ftllm/comm.h"

struct ft_comm_backend {
    const char *name;
    void (*iallreduce_sum)(FtComm *c, const void *send, void *recv, size_t count,
                           enum ft_dtype t, FtReq *req);
    void (*ireduce_scatter_sum)(FtComm *c, const void *send, void *recv, size_t recvcount,
                                enum ft_dtype t, FtReq *req);
    void (*iallgather)(FtComm *c, const void *send, void *recv, size_t sendcount,
                       enum ft_dtype t, FtReq *req);
    void (*ialltoallv)(FtComm *c, const void *send, const int *sendcounts, const int *sdispls,
                       void *recv, const int *recvcounts, const int *rdispls, enum ft_dtype t,
                       FtReq *req);
    void (*ibcast)(FtComm *c, void *buf, size_t count, enum ft_dtype t, int root, FtReq *req);
    void (*isend)(FtComm *c, const void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                  FtReq *req);
    void (*irecv)(FtComm *c, void *buf, size_t count, enum ft_dtype t, int peer, int tag,
                  FtReq *req);
    bool (*test)(FtReq *req);
    void (*destroy)(FtComm *c);
};

struct ft_comm {
    const struct ft_comm_backend *be;
    MPI_Comm mpi; /* the communicator (also used by the NCCL backend for set-up) */
    bool owns_mpi; /* a duplicate made by comm_create_mpi_dup: freed by comm_destroy */
    int rank, size;
    char name[32];
    FtCommStats stats;
    void *ctx; /* backend state */
    /* comm_create_routed: collectives none of whose buffers is host memory go to dev (NCCL),
     * owned; dev_st tells host memory from device memory. NULL: everything goes to be. */
    struct ft_comm *dev;
    FtCommStager dev_st;
    struct ft_comm *next_live; /* comm_ft's list of this process's FtComms (revoked together) */
};

/* comm_ft.c: every FtComm is on one list while it lives (so a failure revokes them all), and
 * every MPI return code of an operation goes through comm_ft_rc: MPI_SUCCESS -> 0; a process
 * failure under ULFM -> 1 (noted, every FtComm revoked: the operation counts as done); any
 * other error dies naming the operation and the communicator. */
void comm_ft_track(FtComm *c);
void comm_ft_untrack(FtComm *c);
int comm_ft_rc(FtComm *c, const char *op, int rc, const char *file, int line);
#define COMM_FT_RC(c, op, call) comm_ft_rc((c), (op), (call), __FILE__, __LINE__)

/* comm_mpi.c's helpers, shared with the staged backend (comm_staged.c): the MPI type of t, a
 * count as int (dies naming op above INT_MAX), a request's common fields, destroy. */
MPI_Datatype comm_mpi_type(enum ft_dtype t);
int comm_mpi_count(const FtComm *c, const char *op, size_t n);
void comm_req_start(FtReq *req, FtComm *c, const char *op, size_t bytes);
/* The MPI backend's destroy: untracked, the communicator freed when the FtComm owns it. */
void comm_mpi_destroy(FtComm *c);

/* Dies naming the operation and the communicator when rc is not MPI_SUCCESS. */
void comm_check_mpi(const FtComm *c, const char *op, int rc, const char *file, int line);
#define COMM_CHECK(c, op, call) comm_check_mpi((c), (op), (call), __FILE__, __LINE__)

#endif
