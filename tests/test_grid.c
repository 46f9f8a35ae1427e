/* test_grid.c: the process grid: coordinates, communicator sizes and membership, and layout
 * errors, for every factorisation of the job size; grid_place (a hot spare's place) agrees
 * with grid_create; replicas leaving (grid_without), bad lists refused.
 * ft-test: ranks 1 2 4 8 */
#include <string.h>

#include "ft_test.h"
#include "ftllm/grid.h"

static int csize(MPI_Comm c)
{
    int n;
    MPI_Comm_size(c, &n);
    return n;
}
static int crank(MPI_Comm c)
{
    int r;
    MPI_Comm_rank(c, &r);
    return r;
}

/* Checks one layout on the whole job. */
static void check_layout(int tp, int pp, int dp, int ep)
{
    FtGrid g;
    char err[256];
    assert_all(grid_create(&g, ft_test_comm(), tp, pp, dp, ep, err, sizeof err) == 0);
    /* the rank formula (Megatron order: tp fastest, then ep, pp, dp) */
    assert_all(grid_rank_of(&g, g.dp_rank, g.pp_rank, g.ep_rank, g.tp_rank) == g.rank);
    assert_all(g.rank == ft_test_rank());
    assert_all(csize(g.tp_comm) == tp && csize(g.pp_comm) == pp && csize(g.dp_comm) == dp &&
               csize(g.ep_comm) == ep);
    assert_all(csize(g.replica_comm) == tp * pp * ep && csize(g.dense_dp_comm) == dp * ep);
    /* rank inside a dimension's communicator is the coordinate along it */
    assert_all(crank(g.tp_comm) == g.tp_rank && crank(g.pp_comm) == g.pp_rank &&
               crank(g.dp_comm) == g.dp_rank && crank(g.ep_comm) == g.ep_rank);
    /* members of tp_comm share every other coordinate: gather (dp, pp, ep) over tp_comm */
    int mine[4] = {g.dp_rank, g.pp_rank, g.ep_rank, g.tp_rank};
    int all[4 * 8];
    MPI_Allgather(mine, 4, MPI_INT, all, 4, MPI_INT, g.tp_comm);
    int ok = 1;
    for (int i = 0; i < tp; i++)
        ok &= all[4 * i] == g.dp_rank && all[4 * i + 1] == g.pp_rank && all[4 * i + 2] == g.ep_rank &&
              all[4 * i + 3] == i;
    MPI_Allgather(mine, 4, MPI_INT, all, 4, MPI_INT, g.dp_comm);
    for (int i = 0; i < dp; i++)
        ok &= all[4 * i] == i && all[4 * i + 1] == g.pp_rank && all[4 * i + 2] == g.ep_rank &&
              all[4 * i + 3] == g.tp_rank;
    MPI_Allgather(mine, 4, MPI_INT, all, 4, MPI_INT, g.replica_comm);
    for (int i = 0; i < tp * pp * ep; i++) ok &= all[4 * i] == g.dp_rank;
    MPI_Allgather(mine, 4, MPI_INT, all, 4, MPI_INT, g.dense_dp_comm);
    for (int i = 0; i < dp * ep; i++) ok &= all[4 * i + 1] == g.pp_rank && all[4 * i + 3] == g.tp_rank;
    assert_all(ok);
    /* grid_place (a hot spare's place) gives the coordinates grid_create gives the same index
     * within a replica */
    int place[3];
    grid_place(g.rank % (tp * pp * ep), tp, ep, &place[0], &place[1], &place[2]);
    assert_all(place[0] == g.tp_rank && place[1] == g.pp_rank && place[2] == g.ep_rank);
    grid_destroy(&g);
}

static void test_every_factorisation(void **state)
{
    (void)state;
    int n = ft_test_size(), layouts = 0;
    for (int tp = 1; tp <= n; tp *= 2)
        for (int pp = 1; tp * pp <= n; pp *= 2)
            for (int ep = 1; tp * pp * ep <= n; ep *= 2) {
                int dp = n / (tp * pp * ep);
                if (tp * pp * ep * dp != n) continue;
                /* with 8 ranks on a 2-core machine each split is slow (MPICH busy-polls in
                 * blocking collectives): keep the layouts that mix all four dimensions */
                if (n > 4 && !(tp == 2 && pp == 2)) continue;
                check_layout(tp, pp, dp, ep);
                layouts++;
            }
    assert_all(layouts >= 1);
}

static void test_layout_errors(void **state)
{
    (void)state;
    FtGrid g;
    char err[256] = "";
    int n = ft_test_size();
    assert_all(grid_create(&g, ft_test_comm(), 1, 1, n + 1, 1, err, sizeof err) == -1);
    assert_all(strstr(err, "but the communicator has") != NULL);
    assert_all(grid_create(&g, ft_test_comm(), 0, 1, n, 1, err, sizeof err) == -1);
    assert_all(strstr(err, "at least 1") != NULL);
}

static void test_rebuild(void **state)
{
    (void)state;
    /* a grid can be destroyed and built again (replicas leaving/joining rebuild it) */
    for (int i = 0; i < 3; i++) check_layout(1, 1, ft_test_size(), 1);
}

/* grid_without: replicas 0 and 2 of dp 4 (tp 2 when the job allows) leave together, split out
 * of a communicator without one of their ranks (as the survivors of a process failure are):
 * the others get a grid of dp 2 in their old order, the leaving ranks 1. Bad lists: -1. */
static void test_without(void **state)
{
    (void)state;
    int n = ft_test_size();
    if (n < 4) skip();
    int tp = n / 4;
    FtGrid g, out;
    char err[256] = "";
    assert_all(grid_create(&g, ft_test_comm(), tp, 1, 4, 1, err, sizeof err) == 0);
    int gone = g.dp_rank == 0 && g.tp_rank == 0; /* "dead": not in the survivors' communicator */
    MPI_Comm from;
    MPI_Comm_split(g.world, gone ? MPI_UNDEFINED : 0, g.rank, &from);
    int leave[2] = {0, 2}, rc = gone ? 1 : grid_without(&g, from, leave, 2, &out, err, sizeof err);
    int leaving = g.dp_rank == 0 || g.dp_rank == 2;
    int ok = rc == (leaving ? 1 : 0);
    if (rc == 0) {
        int new_dp = g.dp_rank == 1 ? 0 : 1; /* replicas 1 and 3 become 0 and 1 */
        ok &= out.dp == 2 && out.tp == tp && out.dp_rank == new_dp && out.tp_rank == g.tp_rank;
        ok &= csize(out.world) == 2 * tp && csize(out.dp_comm) == 2;
        grid_destroy(&out);
    }
    assert_all(ok);
    if (from != MPI_COMM_NULL) MPI_Comm_free(&from);
    int bad1[2] = {2, 0}, bad2[4] = {0, 1, 2, 3}, bad3[2] = {1, 1};
    assert_all(grid_without(&g, g.world, bad1, 2, &out, err, sizeof err) == -1);
    assert_all(grid_without(&g, g.world, bad3, 2, &out, err, sizeof err) == -1); /* twice */
    assert_all(grid_without(&g, g.world, bad2, 4, &out, err, sizeof err) == -1);
    assert_all(strstr(err, "cannot leave") != NULL);
    grid_destroy(&g);
}

FT_TEST_MAIN(cmocka_unit_test(test_every_factorisation), cmocka_unit_test(test_layout_errors),
             cmocka_unit_test(test_rebuild), cmocka_unit_test(test_without))
