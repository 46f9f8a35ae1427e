/* threads.c: see threads.h. */
#define _GNU_SOURCE
#include "ftllm/threads.h"

#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftllm/log.h"

int threads_pick(long long requested, const char *env, int bound, int online, int local_ranks)
{
    if (requested > 0) return (int)requested;
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (end != env && v > 0) return (int)v; /* OpenMP reads the rest of a list itself */
    }
    if (online < 1) online = 1;
    if (bound >= 1 && bound < online) return bound; /* the launcher chose our cores */
    int share = online / (local_ranks > 0 ? local_ranks : 1);
    return share > 0 ? share : 1;
}

int threads_setup(MPI_Comm comm, long long requested)
{
    MPI_Comm node;
    int local = 1;
    FT_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    FT_CHECK_MPI(MPI_Comm_size(node, &local));
    MPI_Comm_free(&node);
    cpu_set_t set;
    int bound = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    int online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int n = threads_pick(requested, getenv("OMP_NUM_THREADS"), bound, online, local);
    omp_set_num_threads(n);
    return n;
}
