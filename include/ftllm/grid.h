/* grid.h: the process grid. world = dp x pp x ep x tp, Megatron order: tp varies fastest, then
 * ep, then pp, then dp, so a rank's coordinates are
 *     rank = ((dp_rank * pp + pp_rank) * ep + ep_rank) * tp + tp_rank
 * and the tp ranks of one layer shard are neighbours (on one node, when nodes are filled in
 * rank order). A *replica* (SPARe's parallel group) is the tp x pp x ep ranks with one dp
 * coordinate: they hold one model copy. Dense (non-expert) parameters are replicated over dp and
 * ep, so their gradients are reduced over the dp x ep ranks with the same (tp, pp) coordinates
 * (dense_dp); expert parameters only over dp.
 *
 * A grid is a value built from any communicator, with no global state, so the trainer can
 * rebuild it when replicas leave or join. Every function here is collective over the parent
 * communicator and takes arguments equal on every rank. */
#ifndef FTLLM_GRID_H
#define FTLLM_GRID_H

#include <mpi.h>
#include <stddef.h>

typedef struct ft_grid {
    MPI_Comm world; /* a duplicate of the parent communicator */
    int rank, size;
    int tp, pp, dp, ep;                         /* widths */
    int tp_rank, pp_rank, dp_rank, ep_rank;     /* this rank's coordinates */
    MPI_Comm tp_comm, pp_comm, dp_comm, ep_comm; /* the ranks differing only in that coordinate */
    MPI_Comm replica_comm;                      /* tp x pp x ep ranks of this dp coordinate */
    MPI_Comm dense_dp_comm;                     /* dp x ep ranks of this (tp, pp) coordinate */
} FtGrid;

/* Splits parent into the grid. Returns 0, or -1 with a one-line message in err when
 * tp*pp*dp*ep differs from the number of ranks or a width is < 1 (every rank returns the same
 * status, since the arguments are equal everywhere). */
int grid_create(FtGrid *g, MPI_Comm parent, int tp, int pp, int dp, int ep, char *err,
                size_t errlen);

/* The world rank of the given coordinates. */
int grid_rank_of(const FtGrid *g, int dp_rank, int pp_rank, int ep_rank, int tp_rank);

/* The grid without data-parallel replica `leave` (its tp x pp x ep ranks): collective over
 * g->world. Returns 0 on a surviving rank (out: the grid of dp - 1 replicas on the survivors,
 * in their old order), 1 on a rank of the leaving replica (out->world is MPI_COMM_NULL), -1
 * with a message when leave is not a replica of g or g has one replica (the same everywhere:
 * the arguments are). g itself is untouched: destroy it after. */
int grid_shrink_dp(const FtGrid *g, int leave, FtGrid *out, char *err, size_t errlen);

/* The same for the sorted, distinct replicas leave[0 .. nleave-1] (nleave < g->dp), split out
 * of `from` instead of g->world: `from` holds at least every rank of g that stays, in g's
 * order (g->world itself, or the survivors of it after a process failure: comm_ft_shrink), and
 * the call is collective over `from`. Returns as grid_shrink_dp. */
int grid_without(const FtGrid *g, MPI_Comm from, const int *leave, int nleave, FtGrid *out,
                 char *err, size_t errlen);

/* The grid of tp x pp x dp x ep ranks picked out of parent: the ranks with member set, in the
 * order of their key (a rank's place in the grid: rank = key's position among the members).
 * Collective over parent (every rank calls, members or not); tp, pp, dp, ep equal everywhere.
 * Returns 0 on a member, 1 on a rank that is not (g->world is MPI_COMM_NULL), -1 with a message
 * when the members are not tp*pp*dp*ep ranks (the same on every member). Used for a job with
 * ranks beyond the layout (hot spares), and to rebuild a grid after a failure or a restart. */
int grid_create_sub(FtGrid *g, MPI_Comm parent, int member, int key, int tp, int pp, int dp,
                    int ep, char *err, size_t errlen);
/* grid_create_sub's second half, for a caller that split parent itself (a split that may
 * fail, train_spare.c): the grid on sub (which it frees), or 1 when sub is MPI_COMM_NULL (g->world
 * is MPI_COMM_NULL then); -1 as grid_create. */
int grid_create_split(FtGrid *g, MPI_Comm sub, int tp, int pp, int dp, int ep, char *err,
                      size_t errlen);

/* The (tp, pp, ep) place of the within-th rank of a replica (0 <= within < tp*pp*ep), in the
 * grid's order: within = (pp_rank * ep + ep_rank) * tp + tp_rank. */
void grid_place(int within, int tp, int ep, int *tp_rank, int *pp_rank, int *ep_rank);

/* Frees the communicators; the grid can be created again. */
void grid_destroy(FtGrid *g);

#endif
