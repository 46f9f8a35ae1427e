/* sim.h: the discrete-event simulator of a whole training run on a large cluster (`ftllm
 * simulate`), the Monte Carlo of the SPARe ring model, and the composite-process simulator of the
 * sparing model. Every trial is seeded from (seed, trial index) alone, so results are the same
 * for any number of MPI ranks: trials are dealt round-robin to ranks and their results are
 * summed into per-trial slots (each slot has one non-zero contributor, so the sum is exact) and
 * reduced in trial order on every rank.
 *
 * Cluster model (sim_cluster.c): N = gpus / gpus_per_replica groups; each group's next failure is
 * drawn when it enters service (exponential or Weibull per GPU; the minimum over a group's GPUs is
 * of the same law). A failure the policy masks leaves the group out until the next restart; a
 * wipe-out loses the work since the last completed checkpoint (and a checkpoint in progress) and
 * costs a global restart during which every failed group is replaced: groups whose failure falls
 * inside the restart are replaced too (the restart absorbs them). Checkpoints are taken after
 * every `interval` seconds of work (steps x step time; or, with a schedule, the interval of the
 * segment in which the piece starts), none after the last piece; a checkpoint
 * continues through masked failures. Policies: checkpoint only (any failure wipes out),
 * replication r (floor(N/r) sets, throughput floor(N/r)/N), SPARe r (depth from the oracle,
 * throughput 1/depth).
 * Sparing composite process (sim_sparing.c): trays and racks up / in repair, blocks in and out of
 * use, a synchronous job on top; exponential up times from the stationary state, or Weibull up
 * times with every part new at t = 0 and after each repair (FtSparing.law). */
#ifndef FTLLM_SIM_H
#define FTLLM_SIM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ftllm/analytic.h"

/* ---- random numbers: a counter-based generator (a 64-bit mix of key and counter) ------------ */
typedef struct ft_rng {
    uint64_t key, ctr;
} FtRng;

void rng_seed(FtRng *g, uint64_t seed, uint64_t stream); /* independent stream per (seed, stream) */
uint64_t rng_next(FtRng *g);
double rng_uniform(FtRng *g);           /* in (0, 1) */
uint64_t rng_below(FtRng *g, uint64_t n); /* uniform in [0, n) */
double rng_exp(FtRng *g, double mean);
double rng_weibull(FtRng *g, double shape, double scale);

/* ---- event queue: an indexed binary min-heap, one pending time per id ------------------------- */
typedef struct ft_heap {
    int n, cap;
    int *id;    /* heap order */
    int *pos;   /* pos[id] = index in the heap, -1 if absent */
    double *t;  /* t[id] */
} FtHeap;

int heap_init(FtHeap *h, int cap);
void heap_free(FtHeap *h);
void heap_set(FtHeap *h, int id, double t); /* insert or move */
void heap_remove(FtHeap *h, int id);
static inline int heap_top(const FtHeap *h) { return h->n ? h->id[0] : -1; }
static inline double heap_top_time(const FtHeap *h) { return h->n ? h->t[h->id[0]] : 1e300; }

/* ---- statistics ---------------------------------------------------------------------------- */
typedef struct ft_stat {
    double mean, sd, half; /* half-width of the confidence interval at z */
    int n;
} FtStat;

FtStat stat_of(const double *x, int n, double z);
/* Ratio sum(x)/sum(y) with a delta-method confidence interval. */
FtStat stat_ratio(const double *x, const double *y, int n, double z);

/* Spreads trials [0, ntrials) over comm: fn(trial, out[nout], ctx) runs on rank trial % size;
 * out_all[trial * nout + j] is filled on every rank. Returns 0 or -1 (every rank agrees). */
typedef int (*FtTrialFn)(int trial, double *out, void *ctx);
int sim_trials(MPI_Comm comm, int ntrials, int nout, FtTrialFn fn, void *ctx, double *out_all);

/* ---- SPARe ring Monte Carlo ----------------------------------------------------------------- */
/* One epoch: failures in random order until the wipe-out. out: [0] T, [1] sum_{k<T} d_k,
 * [2] sum_{k<T} 1/(N-k), [3] sum d_k/(N-k), [4] sum 1/(d_k (N-k)). */
#define SIM_RING_NOUT 5
int sim_ring_trial(int N, int r, uint64_t seed, int trial, double *out);

/* ---- cluster simulation --------------------------------------------------------------------- */
typedef struct ft_sim_spec {
    FtCluster c;
    int policy, r;
    double interval;   /* seconds of work between checkpoints */
    const FtSched *sched; /* or, when not NULL, the interval of each piece by its start time */
    uint64_t seed;
    FILE *log;         /* CSV event log of trial 0, or NULL */
} FtSimSpec;

/* Per-trial outputs. */
enum {
    SIM_TTT, SIM_AVAIL, SIM_DEPTH, SIM_FAILURES, SIM_MASKED, SIM_RESTARTS, SIM_LOST,
    SIM_CKPTS, SIM_EVENTS, SIM_NOUT
};
int sim_cluster_trial(const FtSimSpec *s, int trial, double *out);

/* ---- sparing composite process ---------------------------------------------------------------- */
typedef struct ft_sparing_sim {
    FtSparing s;
    double horizon;    /* hours simulated per trial */
    uint64_t seed;
} FtSparingSim;
enum { SPS_CETT, SPS_AVAIL, SPS_INTERRUPTS, SPS_EVENTS, SPS_NOUT };
int sim_sparing_trial(const FtSparingSim *s, int trial, double *out);

/* ---- cluster decks (sim_deck.c) --------------------------------------------------------------- */
struct ft_config;
/* Collective over comm: rank 0 loads the deck as a one-rank job (the deck is a what-if cluster,
 * not this job's layout) and every rank gets the same configuration or the same error. */
int sim_deck_load(struct ft_config *cfg, const char *path, int nover, char **over, MPI_Comm comm,
                  char *err, size_t errlen);
/* [cluster] -> the models' structs. cluster.failure_law and cluster.policy use the enums
 * ft_failure_law and ft_policy (policy 3 = all). I = spare trays per block, R = spare blocks. */
void sim_cluster_from_cfg(const struct ft_config *cfg, FtCluster *c);
void sim_sparing_from_cfg(const struct ft_config *cfg, int R, int I, FtSparing *s);

#endif
