/* bench_sim.c: speed of the cluster simulator: simulated events per second, and the wall time
 * of a 90-day run of 600k GPUs (1000 replicas of 600, 5-minute system MTBF, 60-minute restart,
 * Weibull k = 0.8, SPARe r = 10 with a 200-step interval) for 100 trials, on the ranks given
 * (mpiexec -n 2 for "two cores"). Baseline in the same run: the same trials with exponential
 * failures (one clock per replica instead of one per GPU). Target: under one minute.
 * Usage: bench_sim [trials] (default 100); FT_BENCH_SMOKE=1: 2 trials (checks that it runs). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftllm/sim.h"

static int fn(int trial, double *out, void *ctx) { return sim_cluster_trial(ctx, trial, out); }

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void bench(const char *name, FtSimSpec *s, int trials, int rank)
{
    double *all = malloc((size_t)trials * SIM_NOUT * sizeof *all);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    sim_trials(MPI_COMM_WORLD, trials, SIM_NOUT, fn, s, all);
    double dt = now() - t0;
    double ev = 0, ttt = 0;
    for (int i = 0; i < trials; i++) ev += all[i * SIM_NOUT + SIM_EVENTS], ttt += all[i * SIM_NOUT + SIM_TTT];
    if (rank == 0)
        printf("%-34s %4d trials %8.2f s wall  %6.2f M events/s  (%.0f events/trial, TTT %.1f days)\n",
               name, trials, dt, ev / dt / 1e6, ev / trials, ttt / trials / 86400);
    free(all);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *smoke = getenv("FT_BENCH_SMOKE");
    int trials = argc > 1 ? atoi(argv[1]) : smoke && *smoke && strcmp(smoke, "0") ? 2 : 100;
    if (trials < 1) trials = 1;
    FtCluster c = {.gpus = 600000, .gpus_per_replica = 600, .gpu_mtbf = 50000 * 3600.0,
                   .law = FT_LAW_WEIBULL, .weibull_shape = 0.8, .restart = 3600, .ckpt = 60,
                   .step = 10, .steps = 777600};
    FtSimSpec s = {.c = c, .policy = FT_POL_SPARE, .r = 10, .interval = 2000, .seed = 1};
    if (rank == 0) printf("bench_sim: 600k GPUs, 90-day run, SPARe r = 10, %d rank%s\n", size, size == 1 ? "" : "s");
    bench("weibull, one clock per GPU", &s, trials, rank);
    s.c.law = FT_LAW_EXP;
    bench("exponential, one clock per replica", &s, trials, rank);
    MPI_Finalize();
    return 0;
}
