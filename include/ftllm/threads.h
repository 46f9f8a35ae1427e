/* threads.h: how many OpenMP (and so OpenBLAS) threads each rank runs.
 *
 * The deck's run.threads wins; else OMP_NUM_THREADS; else the rank's share of its node: when the
 * launcher bound the rank to a set of cores (srun --cpu-bind, mpiexec -bind-to), that set;
 * otherwise the node's cores divided by the ranks on the node, at least 1. Without the last rule
 * two ranks on a 2-core machine would each start 2 threads, and OpenMP barriers spinning against
 * each other cost far more than a thread gains. Results depend on the thread count (BLAS), never
 * on how it was chosen. */
#ifndef FTLLM_THREADS_H
#define FTLLM_THREADS_H

#include <mpi.h>

/* The rule above as a pure function. env: OMP_NUM_THREADS's text or NULL; bound: cores in this
 * process's affinity mask; online: cores of the node; local_ranks: ranks on this node. */
int threads_pick(long long requested, const char *env, int bound, int online, int local_ranks);

/* Applies the rule (omp_set_num_threads) and returns the count. Collective over comm (it counts
 * the ranks sharing this node). */
int threads_setup(MPI_Comm comm, long long requested);

#endif
