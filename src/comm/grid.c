/* grid.c: MPI_Comm_split of the parent communicator into the tp/pp/dp/ep communicators (see
 * grid.h for the order). Split keys are the coordinate along the communicator, so rank i of
 * pp_comm is pipeline stage i, rank i of dp_comm is replica i, and so on. */
#include "ftllm/grid.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ftllm/log.h"

int grid_rank_of(const FtGrid *g, int dp_rank, int pp_rank, int ep_rank, int tp_rank)
{
    return ((dp_rank * g->pp + pp_rank) * g->ep + ep_rank) * g->tp + tp_rank;
}

static MPI_Comm split(MPI_Comm parent, int color, int key)
{
    MPI_Comm c;
    FT_CHECK_MPI(MPI_Comm_split(parent, color, key, &c));
    return c;
}

int grid_create(FtGrid *g, MPI_Comm parent, int tp, int pp, int dp, int ep, char *err,
                size_t errlen)
{
    memset(g, 0, sizeof *g);
    int size = 0;
    FT_CHECK_MPI(MPI_Comm_size(parent, &size));
    if (tp < 1 || pp < 1 || dp < 1 || ep < 1) {
        snprintf(err, errlen, "grid: every width must be at least 1 (tp %d, pp %d, dp %d, ep %d)",
                 tp, pp, dp, ep);
        return -1;
    }
    if ((long long)tp * pp * dp * ep != size) {
        snprintf(err, errlen,
                 "grid: dp x pp x ep x tp = %d x %d x %d x %d = %lld ranks, but the communicator "
                 "has %d",
                 dp, pp, ep, tp, (long long)tp * pp * dp * ep, size);
        return -1;
    }
    FT_CHECK_MPI(MPI_Comm_dup(parent, &g->world));
    FT_CHECK_MPI(MPI_Comm_rank(g->world, &g->rank));
    g->size = size;
    g->tp = tp, g->pp = pp, g->dp = dp, g->ep = ep;
    int r = g->rank;
    g->tp_rank = r % tp;
    r /= tp;
    g->ep_rank = r % ep;
    r /= ep;
    g->pp_rank = r % pp;
    g->dp_rank = r / pp;
    /* colour = the coordinates that stay fixed within the communicator */
    g->tp_comm = split(g->world, (g->dp_rank * pp + g->pp_rank) * ep + g->ep_rank, g->tp_rank);
    g->ep_comm = split(g->world, (g->dp_rank * pp + g->pp_rank) * tp + g->tp_rank, g->ep_rank);
    g->pp_comm = split(g->world, (g->dp_rank * ep + g->ep_rank) * tp + g->tp_rank, g->pp_rank);
    g->dp_comm = split(g->world, (g->pp_rank * ep + g->ep_rank) * tp + g->tp_rank, g->dp_rank);
    g->replica_comm = split(g->world, g->dp_rank, (g->pp_rank * ep + g->ep_rank) * tp + g->tp_rank);
    g->dense_dp_comm = split(g->world, g->pp_rank * tp + g->tp_rank, g->dp_rank * ep + g->ep_rank);
    return 0;
}

int grid_shrink_dp(const FtGrid *g, int leave, FtGrid *out, char *err, size_t errlen)
{
    if (g->dp < 2 || leave < 0 || leave >= g->dp) {
        memset(out, 0, sizeof *out);
        out->world = MPI_COMM_NULL;
        snprintf(err, errlen, "grid: data-parallel replica %d cannot leave a grid of dp %d", leave,
                 g->dp);
        return -1;
    }
    return grid_without(g, g->world, &leave, 1, out, err, errlen);
}

int grid_without(const FtGrid *g, MPI_Comm from, const int *leave, int nleave, FtGrid *out,
                 char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->world = MPI_COMM_NULL;
    bool mine = false;
    for (int i = 0; i < nleave; i++) {
        if (leave[i] < 0 || leave[i] >= g->dp || (i > 0 && leave[i] <= leave[i - 1]) ||
            nleave >= g->dp) {
            snprintf(err, errlen, "grid: %d data-parallel replicas (the %d-th: %d) cannot leave "
                     "a grid of dp %d", nleave, i, leave[i], g->dp);
            return -1;
        }
        mine |= leave[i] == g->dp_rank;
    }
    /* the survivors keep their order, so replicas above a leaving one move down */
    MPI_Comm sub = split(from, mine ? MPI_UNDEFINED : 0, g->rank);
    if (sub == MPI_COMM_NULL) return 1;
    int rc = grid_create(out, sub, g->tp, g->pp, g->dp - nleave, g->ep, err, errlen);
    FT_CHECK_MPI(MPI_Comm_free(&sub));
    return rc;
}

int grid_create_split(FtGrid *g, MPI_Comm sub, int tp, int pp, int dp, int ep, char *err,
                      size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->world = MPI_COMM_NULL;
    if (sub == MPI_COMM_NULL) return 1;
    int rc = grid_create(g, sub, tp, pp, dp, ep, err, errlen);
    FT_CHECK_MPI(MPI_Comm_free(&sub));
    return rc;
}

int grid_create_sub(FtGrid *g, MPI_Comm parent, int member, int key, int tp, int pp, int dp,
                    int ep, char *err, size_t errlen)
{
    return grid_create_split(g, split(parent, member ? 0 : MPI_UNDEFINED, key), tp, pp, dp, ep,
                             err, errlen);
}

void grid_place(int within, int tp, int ep, int *tp_rank, int *pp_rank, int *ep_rank)
{
    *tp_rank = within % tp;
    *ep_rank = within / tp % ep;
    *pp_rank = within / (tp * ep);
}

void grid_destroy(FtGrid *g)
{
    MPI_Comm *all[] = {&g->tp_comm, &g->ep_comm,      &g->pp_comm,
                       &g->dp_comm, &g->replica_comm, &g->dense_dp_comm, &g->world};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (*all[i] != MPI_COMM_NULL && *all[i] != 0) MPI_Comm_free(all[i]);
    memset(g, 0, sizeof *g);
}
