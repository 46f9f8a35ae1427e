/* bench_gradsync.c: SPARe's shard-keyed reduction against the bucketed all-reduce it replaces,
 * at the same gradient size, in one run.
 *
 *   mpiexec -n P build/release/perf/bench_gradsync [C ...]   (perf/bench_gradsync.sh runs it)
 *
 * For each model width C (layers 4, the deck's other defaults): every rank fills its gradient,
 * then (a) the bucketed all-reduce (gradsync_create, parallel.bucket_mb's default 25 MiB: the
 * buckets are started layer by layer in backward order as the executor's hook would, then
 * finished) and (b) the shard-keyed reduction with one shard per rank (contributions gathered
 * and counted, slices to owners, summed in shard order, all-gathered), alternating, REPS times
 * each after a warm-up. Prints the median seconds of each and the ratio (b) / (a), the median
 * over ranks' maxima, and whether the two results agree bitwise (expected for P = 2: a + b is
 * commutative) or their largest difference. Without a second rank there is nothing to measure:
 * it says so and exits 0 (perf/bench.sh runs every binary once without mpiexec). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/deck.h"
#include "ftllm/gradsync.h"
#include "ftllm/model.h"

enum { REPS = 15 };

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static void fill(FtModel *m, int rank)
{
    for (size_t i = 0; i < m->nparams; i++)
        m->grads[i] = (float)sin(0.001 * (double)i + 1.7 * rank) * 1e-3f;
}

/* One bucketed all-reduce of m->grads, as in a step's last micro-batch. */
static double run_buckets(FtGradSync *g, FtModel *m, FtExec *ex, int rank)
{
    fill(m, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    float *grads;
    const float *prev;
    gradsync_backward(g, ex, 0, &grads, &prev);
    if (m->last) gradsync_layer_ready(g, -1);
    for (int l = m->l0 + m->nl - 1; l >= m->l0; l--) gradsync_layer_ready(g, l);
    gradsync_finish(g, ex);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

/* One shard-keyed reduction, shard = rank. */
static double run_shards(FtGradSync *g, FtModel *m, FtExec *ex, int rank)
{
    fill(m, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    gradsync_shard_begin(g, rank);
    gradsync_shard_end(g, ex);
    gradsync_finish(g, ex);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int cnt;
    if (gradsync_shard_violation(g, &cnt) >= 0) {
        fprintf(stderr, "bench_gradsync: exactly-once violated\n");
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    return tmax;
}

static void bench(int C, int rank, int P)
{
    FtConfig cfg;
    char err[FT_DECK_ERR_MAX];
    if (deck_defaults(&cfg, err, sizeof err)) MPI_Abort(MPI_COMM_WORLD, 4);
    cfg.model.channels = C;
    FtGpt2Config mc;
    model_config_from_deck(&cfg, &mc);
    FtModel m;
    model_create(&m, &mc);
    FtComm *dp = comm_create_mpi_dup(MPI_COMM_WORLD, "dp");
    FtGradSyncComms gc = {.dense = dp};
    FtGradSync *gb = gradsync_create(&m, &gc, 1, cfg.parallel.bucket_mb);
    FtGradSync *gs = gradsync_create_shards(&m, &gc, 1, P, 1);
    FtExec ex = {0};
    size_t n = m.nparams;
    float *a = malloc(sizeof(float) * n);
    double tb[REPS], ts[REPS];
    run_buckets(gb, &m, &ex, rank), run_shards(gs, &m, &ex, rank); /* warm-up */
    for (int k = 0; k < REPS; k++) {
        tb[k] = run_buckets(gb, &m, &ex, rank);
        memcpy(a, m.grads, sizeof(float) * n);
        ts[k] = run_shards(gs, &m, &ex, rank);
    }
    double diff = 0;
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)a[i] - m.grads[i]));
    double dmax;
    MPI_Allreduce(&diff, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double mb = median(tb, REPS), ms = median(ts, REPS);
    if (rank == 0) {
        char agree[64];
        if (dmax == 0) snprintf(agree, sizeof agree, "bitwise equal");
        else snprintf(agree, sizeof agree, "largest difference %.2g", dmax);
        printf("P %d, C %4d, %8zu floats (%6.1f MiB): bucketed all-reduce %8.3f ms, shard-keyed "
               "%8.3f ms, ratio %.2f; results %s\n", P, C, n, n * 4.0 / 1048576.0, 1e3 * mb,
               1e3 * ms, ms / mb, agree);
        fflush(stdout);
    }
    free(a);
    gradsync_free(gb), gradsync_free(gs);
    comm_destroy(dp);
    model_free(&m);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (P < 2) {
        printf("bench_gradsync: needs 2 or more ranks (perf/bench_gradsync.sh runs it under "
               "mpiexec)\n");
        MPI_Finalize();
        return 0;
    }
    if (argc < 2) {
        bench(128, rank, P);
        bench(512, rank, P);
    }
    for (int i = 1; i < argc; i++) bench(atoi(argv[i]), rank, P);
    MPI_Finalize();
    return 0;
}
