/* analytic.h: reliability models that tell a user what redundancy, checkpoint interval and spares
 * to use on a cluster nobody can test on. No MPI here; `optimize`, `simulate`, `train` (auto
 * values) and the tests call it.
 *
 * 1. SPARe ring model (PAPERS.md section 2). N groups (replicas), N shard types; group i holds
 *    shards i..i+r-1 (mod N), so shard j is held by groups j-r+1..j. Groups fail one at a time in
 *    uniformly random order (iid lifetimes) and stay failed until the next global restart. A
 *    *wipe-out* is r cyclically consecutive failed groups (some shard type lost every holder).
 *    T = the index of the failure that wipes out (T = 1 for r = 1).
 *      mu(N, r)  = E[T], the mean number of failures up to and including the wipe-out; the
 *                  failures masked per epoch are T - 1. The closed form Gamma(1/r)/r N^(1-1/r)
 *                  is its large-N (Poisson) limit; analytic_mu_exact() counts exactly.
 *      depth d   = the stack depth needed with k failed groups: the least d such that every
 *                  surviving group computing d of its r shards (free reordering) covers all N
 *                  shard types. Hall's condition for this b-matching reduces, on the ring, to
 *                  contiguous arcs (see analytic_spare.c), which gives
 *                    d <= t  iff  t (N - k) >= N  and every circular window of groups has
 *                                 (#failed) - (t - 1)(#alive) <= r - 1.
 *                  d = 1 with no failure, d >= 2 after the first one, d <= r until a wipe-out.
 *      S(N, r)   = the mean compute overhead over a failure epoch, defined as
 *                  E[sum_{k=0}^{T-1} d_k] / E[T]: the long-run mean stack depth when every
 *                  inter-failure interval of the epoch (state k = 0..T-1 failures) counts once
 *                  (= the time average when the failure rate is constant over the epoch). The
 *                  time-weighted variant for iid exponential groups (state k lasts 1/((N-k) lam))
 *                  is reported too (S_time) with the epoch's mean throughput 1/d.
 *    Plain replication with factor r for comparison: floor(N/r) sets of r identical replicas,
 *    a wipe-out when one set has lost all r, throughput floor(N/r)/N.
 * 2. Checkpointing: Young's and Daly's intervals, the exact expected time of a segment under
 *    Poisson failures, expected waste, and the interval when detection has latency.
 * 3. Sparing (Meta, PAPERS.md section 3): CETT of B zones x L blocks x K trays with R spare
 *    blocks per zone and I spare trays per block (equations in analytic_sparing.c). Exponential
 *    law: the stationary model. Weibull law (every tray and rack new at t = 0 and new again after
 *    each repair, as the simulator does): CETT averaged over the horizon from new, with the part
 *    processes' time-varying availability and failure rate (assumptions below).
 * 4. The failure process over a run: every GPU starts new, a failed GPU is replaced by a new one
 *    (the simulator's process), so one GPU slot is a renewal process and its renewal density
 *    m(t) (exponential: 1/MTBF; Weibull: computed numerically, analytic_renewal.c) times the
 *    GPUs of a group is the group's failure rate lam_g(t) at wall time t of the run. An epoch
 *    (restart to wipe-out) is then a distribution in wall time (analytic_epoch.c), and the run
 *    a chain of checkpoint pieces over it (analytic_opt.c).
 * 5. The joint optimizer: minimizes the expected time-to-train over the policy, r and the
 *    checkpoint interval for a cluster (struct FtCluster), reports what an interval growing with
 *    the run would buy, and the spare counts.
 *
 * Assumptions of the time-to-train model (4 + 5), next to the ring model's:
 *  - Order and rates: within an epoch groups fail one at a time in a uniformly random order, each
 *    group in use at the same rate lam_g, so the ring / replication counts of 1 give the epoch
 *    stage by stage (exactly, in operational time). Checkpoint-only with exponential failures
 *    is then the exact Poisson model of 2 (the Young/Daly setting); for r > 1 the epoch's
 *    wipe-out hazard grows with its age, and the model uses that distribution, not a Poisson
 *    process of wipe-outs. A wipe-out loses the piece in progress (and a checkpoint being
 *    written); the restart (plus detection latency) is not interrupted and absorbs failures.
 *    The mean throughput of an epoch still up at time u is used for the work (not its spread).
 *  - Law: lam_g(t) = gpus_per_replica * m(t), the mean over slots, plus one correction for the
 *    simulator's replacement rule: the GPUs that failed during a cycle (epoch + restart) all
 *    start new together when the restart ends, so with shape < 1 an epoch's first minutes see
 *    more failures than the mean rate and its end fewer (a first-order time change of the epoch,
 *    analytic_epoch.c). Left out: (a) that a replaced GPU's delay (up to an epoch) shortens its
 *    slot's life by that much against years; (b) differences between groups beyond that mean
 *    correction: a group whose GPUs are new fails more often when shape < 1, the groups of a
 *    wipe-out are new together (likelier than random groups to wipe out again), and the groups
 *    still up late in an epoch are the ones with old, slow-failing GPUs. With many GPUs per group
 *    one new GPU barely changes its group's rate (600 per group in the SPARe setting); with one
 *    GPU per group and many failures per epoch these move the time-to-train by up to about 1.5%
 *    (measured in perf/README.md).
 *  - Quasi-static: the epoch at wall time t is the steady state of the rate at t (tabulated at
 *    times a factor of 2 apart, interpolated in log t); a piece is evaluated at the middle of its
 *    own span, which follows the fast fall of the rate in the first minutes of new GPUs. The
 *    state distribution of the pieces is followed exactly from the start (a run shorter than an
 *    epoch is all start) until it has settled.
 *
 * Assumptions of the sparing model (3), next to its Poisson ones (parts independent, hot spares,
 * one repair per failed part, interrupts Poisson at the rate of the parts in use):
 *  - Law: each tray and rack alternates a Weibull up time (new at t = 0 and after each repair)
 *    and an exponential repair; its availability A(t) and failures Phi(t) come from the
 *    alternating renewal equation (renewal_alt). Block usability and the not-blocked fraction at
 *    t follow exactly from A(t), as in the stationary model (use does not change a part's law).
 *  - Parts in use are not a random sample of the up parts: a repaired part waits as an idle spare
 *    until a failure in use calls it, burning in meanwhile (shape < 1: the parts in use fail up to
 *    13% less often than the average up part, measured). Mean field: the fresh spares' ages are
 *    followed per class, a part entering use is drawn at random from all idle up parts (intra-
 *    and inter-block spares pooled), and the idle parts that were in use before (the other trays
 *    of a swapped block) fail like the parts in use. Left out: that an intra-block spare serves
 *    only its own block and that a zone takes its first usable spare block (not a random one).
 *  - Quasi-static: the interrupt rate at t gives the checkpoint pieces' cost at t (Young/Daly
 *    exact model at that rate), averaged over the horizon on intervals short at the start, where
 *    new parts fail fast; one fixed interval over the horizon, the one maximizing that average. */
#ifndef FTLLM_ANALYTIC_H
#define FTLLM_ANALYTIC_H

#include <stddef.h>
#include <stdint.h>

/* ---- SPARe ring model ----------------------------------------------------------------------- */

/* Gamma(1/r)/r * N^(1-1/r): the large-N limit of mu(N, r). */
double analytic_mu_closed(double N, int r);

/* floor(log2 N + 0.833): the paper's optimal redundancy. */
int analytic_rstar_paper(double N);

/* P(T > k) for k = 0..N into p[0..N] (p[N] = 0): the probability that k random failed groups
 * contain no r consecutive ones. Exact (counting, long double); N <= 20000. Returns 0 or -1. */
int analytic_spare_survival(int N, int r, double *p);

/* mu(N, r) = E[T] exactly (sum of P(T > k)); -1 when N is out of range. */
double analytic_mu_exact(int N, int r);

/* The survival counts for plain replication (floor(N/r) sets of r). */
int analytic_rep_survival(int N, int r, double *p);

/* Depth oracle, incremental over one failure epoch: one max-subarray segment tree per threshold
 * t = 2..r over the ring with weights +1 (failed) and -(t-1) (alive), brought up to date
 * lazily, so a failure costs O(log N) per threshold the depth search actually reaches. */
typedef struct ft_depth_oracle {
    int N, r, ntree;   /* ntree = number of leaves (power of 2 >= N) */
    int k, depth;      /* failed groups, current depth (r + 1 after a wipe-out) */
    unsigned char *dead;
    int32_t *node;     /* per threshold t (2..r): 2*ntree nodes x 4 (sum, pre, suf, sub) */
    int *failed;       /* the failed groups in order (to undo on reset) */
    int *applied;      /* applied[t]: failures already in tree t (trees are updated lazily) */
} FtDepthOracle;

int depth_oracle_init(FtDepthOracle *o, int N, int r); /* 0 or -1 (out of memory / range) */
void depth_oracle_free(FtDepthOracle *o);
void depth_oracle_reset(FtDepthOracle *o); /* everyone alive again: depth 1 */
/* Group g fails (must be alive). Returns the new depth, or r + 1 on a wipe-out. */
int depth_oracle_fail(FtDepthOracle *o, int g);
/* Whether the current dead set has r consecutive failed groups around g (wipe-out test). */
int depth_oracle_run_at(const FtDepthOracle *o, int g);

/* Depth of an arbitrary dead set from scratch (for tests; O(r N)): least d, or r + 1. */
int analytic_depth(const unsigned char *dead, int N, int r);

/* Exact epoch statistics of the ring model. */
typedef struct ft_spare_epoch {
    int N, r;
    double mu;        /* E[T] */
    double S;         /* E[sum_{k<T} d_k] / E[T] */
    double S_time;    /* time-weighted mean depth, iid exponential groups */
    double thr_time;  /* time-weighted mean throughput E[1/d] */
    double up_units;  /* E[epoch length] in units of one group's mean lifetime: sum P(T>k)/(N-k) */
    int exact;        /* 1 from the transfer-matrix count, 0 from a Monte Carlo estimate */
} FtSpareEpoch;

/* Exact S by counting (a transfer matrix over the reflected walk, per threshold); cost about
 * r^3 N K long-double operations (K = the largest k with P(T > k) > 1e-18). Returns 0, or -1
 * when that exceeds max_ops (then nothing is written). */
int analytic_spare_epoch(int N, int r, double max_ops, FtSpareEpoch *out);

/* Replication epoch (exact; depth r, throughput floor(N/r)/N). */
int analytic_rep_epoch(int N, int r, FtSpareEpoch *out);

/* An epoch stage by stage, for the epoch's distribution in time (analytic_epoch.c): M groups in
 * use; alive[k] = P(T > k) and inv_depth[k] = E[1/d_k | T > k] (throughput in state k) for
 * k = 0..K (alive[k] negligible beyond K). */
typedef struct ft_epoch_stages {
    int M, K;
    double *alive, *inv_depth; /* M + 1 entries each */
} FtEpochStages;

int epoch_stages_alloc(FtEpochStages *st, int M); /* zeroed arrays; 0 or -1 */
void epoch_stages_free(FtEpochStages *st);
/* analytic_spare_epoch / analytic_rep_epoch plus the stages (allocated here). 0 or -1. */
int analytic_spare_stages(int N, int r, double max_ops, FtSpareEpoch *out, FtEpochStages *st);
int analytic_rep_stages(int N, int r, FtSpareEpoch *out, FtEpochStages *st);

/* ---- checkpointing ---------------------------------------------------------------------------- */

/* Young: sqrt(2 C M). Daly's higher-order: sqrt(2CM)[1 + sqrt(C/2M)/3 + (C/2M)/9] - C for
 * C < 2M, else M. C = checkpoint cost, M = mean time between failures (same unit). */
double analytic_young(double C, double M);
double analytic_daly(double C, double M);

/* Expected wall time to complete x seconds of uninterrupted compute under Poisson failures of
 * rate lam, each followed by a non-interruptible downtime D (restart), losing the attempt:
 *   (e^(lam x) - 1)(1/lam + D). */
double analytic_segment_time(double x, double lam, double D);

/* Expected wall time of W seconds of work with a checkpoint (cost C) after every tau of work
 * (none after the last piece), failures Poisson(lam), restart D. Exact for that model. */
double analytic_ckpt_time(double W, double tau, double C, double lam, double D);

/* The tau minimizing analytic_ckpt_time's steady-state rate (e^(lam(tau+C)) - 1)/tau (golden
 * section on log tau). */
double analytic_ckpt_opt(double C, double lam);

/* Expected waste fraction, first order: C/tau + lam (tau/2 + delta + D). */
double analytic_waste(double tau, double C, double lam, double D, double delta);

/* Interval when detection has latency delta (DMR deferred checks): a failure caught delta after
 * it happened must roll back past every checkpoint taken in that delta, so the expected loss per
 * failure is tau/2 + delta and the last ceil(delta/tau) + 1 checkpoints must be kept. The
 * first-order optimum stays sqrt(2 C / lam); the higher-order optimum is found numerically on
 * the exact model with loss tau/2 + delta. Writes the checkpoints to keep into *keep. */
double analytic_ckpt_latency(double C, double lam, double D, double delta, int *keep);

/* ---- sparing (Meta) ------------------------------------------------------------------------- */

typedef struct ft_sparing {
    int B, L, K;          /* zones, blocks per zone in use, trays per block in use */
    int R, I;             /* spare blocks per zone, spare trays per block */
    int gpus_per_tray;
    double tray_mtbf, tray_mttr, rack_mtbf, rack_mttr; /* hours */
    double ckpt, restart; /* seconds: checkpoint cost, restart cost */
    double interval;      /* seconds of work between checkpoints; <= 0: optimal */
    int law;              /* up-time law of trays and racks (enum ft_failure_law, same means) */
    double shape;         /* Weibull shape (law = FT_LAW_WEIBULL) */
    double horizon;       /* hours of hardware life from new that CETT averages (Weibull) */
    int pop_rate;         /* Weibull, for comparison only: 1 = parts in use fail at the rate of
                           * the average up part (idle spares' burn-in ignored) */
} FtSparing;

typedef struct ft_sparing_result {
    double p_block;       /* P(a block is usable) */
    double avail;         /* P(every zone has >= L usable blocks): the not-blocked fraction */
    double lam;           /* interruptions per second while running */
    double interval;      /* the checkpoint interval used, seconds */
    double run_eff;       /* useful work per running second */
    double util;          /* L K / ((L + R)(K + I)): GPUs working over GPUs provisioned */
    double cett;          /* avail * run_eff * util */
    double work;          /* cett * provisioned GPUs: useful GPU-seconds per second */
} FtSparingResult;

/* The CETT model. Returns 0 or -1 (invalid parameters, message in err). */
int analytic_sparing(const FtSparing *s, FtSparingResult *out, char *err, size_t errlen);

/* Best R in [0, max_R] for the given I by CETT (the same provisioned-GPU budget is not held
 * fixed: CETT is work per provisioned GPU). Returns R. */
int analytic_sparing_best_R(const FtSparing *s, int max_R, FtSparingResult *out);

/* ---- cluster and the joint optimizer ----------------------------------------------------------- */

enum ft_failure_law { FT_LAW_EXP = 0, FT_LAW_WEIBULL = 1 };
enum ft_policy { FT_POL_CKPT = 0, FT_POL_REP = 1, FT_POL_SPARE = 2, FT_POL_NPOL = 3 };

typedef struct ft_cluster {
    long long gpus, gpus_per_replica;
    double gpu_mtbf;       /* seconds, per GPU */
    int law;               /* enum ft_failure_law */
    double weibull_shape;
    double restart;        /* seconds, global restart */
    double ckpt;           /* seconds, one checkpoint write */
    double step;           /* seconds, one failure-free step at depth 1 */
    double steps;          /* steps of the run */
    double latency;        /* seconds between a failure and its detection (0 for fail-stop) */
} FtCluster;

/* A checkpoint interval over the run: pieces that start at wall time t >= t[i] (and < t[i+1])
 * get tau[i] seconds of work before their checkpoint; t[0] = 0. A fixed interval is n = 1. */
#define FT_SCHED_MAX 24
typedef struct ft_sched {
    int n;
    double t[FT_SCHED_MAX], tau[FT_SCHED_MAX];
} FtSched;

/* One evaluated alternative. */
typedef struct ft_plan {
    int policy, r;
    double interval;       /* seconds of work between checkpoints */
    double mu;             /* failures per epoch (T) */
    double epoch;          /* mean up-time between wipe-outs, seconds */
    double depth;          /* time-weighted mean depth (compute overhead) */
    double ttt;            /* predicted time-to-train, seconds */
    double goodput;        /* failure-free time / ttt */
    double avail;          /* fraction of wall time not spent in restarts */
    int exact;             /* S from the exact count (1) or Monte Carlo (0) */
    double wipeouts;       /* expected wipe-outs (restarts) over the run */
    FtSched sched;         /* the interval over the run (n = 1: fixed, = interval) */
    double sched_scale;    /* growing schedules: the factor on the local optimum */
} FtPlan;

/* ---- the failure process (analytic_renewal.c) ------------------------------------------------- */

/* The renewal function M(t) = E[failures of one GPU slot in [0, t]] (lifetimes iid, the slot's
 * GPU replaced by a new one at each failure). Weibull: tabulated by product integration on a
 * fine table over [0, tfine] and a coarse one over 40 mean lifetimes (when tfine is shorter),
 * beyond it the long-run slope 1/mean; exponential: t / mean. err bounds |M - exact| on the
 * tables (from the same solve on half the cells). */
struct ft_renewal_tab {
    int n;          /* cells */
    double h;       /* cell width, seconds */
    double *R;      /* R[i] = M(i h) - F(i h): renewals after the first (interpolated linearly) */
    double M_end;   /* M(n h) */
};
typedef struct ft_renewal {
    int law;
    double shape, mean, scale; /* Weibull scale = mean / Gamma(1 + 1/shape) */
    int ntab;
    struct ft_renewal_tab tab[2];
    double err;
} FtRenewal;

int renewal_init(FtRenewal *rn, int law, double shape, double mean, double tfine, int n);
void renewal_free(FtRenewal *rn);
double renewal_M(const FtRenewal *rn, double t);
/* (M(t1) - M(t0)) / (t1 - t0): the mean renewal density over [t0, t1] (t1 <= t0: at t0). */
double renewal_rate(const FtRenewal *rn, double t0, double t1);

/* One part that alternates up (lifetimes of `law` with this shape and mean, new at t = 0 and
 * after each repair) and down (exponential repair, mean mttr; 0 = instant: the renewal function),
 * on n cells of width tmax / n: Phi[i] = E[failures in [0, i h]], Down[i] = P(down at i h)
 * (n + 1 entries each). Same product integration as renewal_init. 0 or -1. */
int renewal_alt(int law, double shape, double mean, double mttr, double tmax, int n, double *Phi,
                double *Down);

/* An epoch's distribution in operational time (every group in use failing at rate 1), exact
 * from the stages by uniformization, tabulated (analytic_epoch.c). */
typedef struct ft_epoch_curve {
    int M;            /* groups in use */
    int n;            /* grid points */
    double dth;       /* grid step of theta */
    double *S, *A;    /* P(epoch > theta), E[1/d(theta); epoch > theta] */
    double up_units;  /* int S: the mean epoch x the group rate */
    double thr;       /* int A / int S: the time-averaged throughput */
    int single;       /* one stage (checkpoint-only): S = e^(-M theta) exactly */
} FtEpochCurve;

int epoch_curve_init(FtEpochCurve *c, const FtEpochStages *st);
void epoch_curve_free(FtEpochCurve *c);
double epoch_curve_S(const FtEpochCurve *c, double theta);
double epoch_curve_A(const FtEpochCurve *c, double theta);
/* The epoch in wall time at group rate lam_g, with the simulator's replacement rule (the GPUs
 * that failed in a cycle start new together after its restart, `restart` seconds): *up = the
 * mean up-time, *work = the mean of int 1/d over it. Exponential: up_units / lam_g and thr x
 * that. 0 or -1. */
int epoch_real(const FtEpochCurve *c, const FtRenewal *gpu, double lam_g, double restart, double *up,
               double *work);

/* The same epoch against wall time u since its restart ended, tabulated (u[0] = 0, then
 * log-spaced): S = P(up-time > u), IS = int_0^u S, IA = int_0^u A (expected work by u),
 * W = int_0^u A/S (the work an epoch still up at u has done, on average). */
typedef struct ft_epoch_wall {
    int n;
    double *u, *S, *IS, *IA, *W;
    double lam, L, up; /* group rate, cycle length, E[up-time] */
} FtEpochWall;

int epoch_wall_init(FtEpochWall *w, const FtEpochCurve *c, const FtRenewal *gpu, double lam_g, double restart);
void epoch_wall_free(FtEpochWall *w);
double epoch_wall_at(const FtEpochWall *w, const double *y, double u); /* y one of w's arrays */
double epoch_wall_inv(const FtEpochWall *w, const double *y, double v); /* u: y(u) = v, y rising */

/* A cluster's failure process, built once and shared by the plans. */
typedef struct ft_fail_model {
    FtCluster c;
    int N;
    FtRenewal gpu;  /* one GPU slot */
    double t_span;  /* wall time up to which the plans tabulate their epochs */
} FtFailModel;

int analytic_fail_init(FtFailModel *m, const FtCluster *c); /* 0 or -1 */
void analytic_fail_free(FtFailModel *m);
/* lam_g averaged over wall time [t0, t1] of the run: one group's failure rate. */
double analytic_group_rate(const FtFailModel *m, double t0, double t1);

/* N = gpus / gpus_per_replica. */
int cluster_groups(const FtCluster *c);

/* Evaluates one policy at one r with a fixed interval (interval <= 0: the one minimizing the
 * expected time-to-train) under the model above. Returns 0 or -1. analytic_plan builds the
 * failure model for the one call. */
int analytic_fail_plan(const FtFailModel *m, int policy, int r, double interval, FtPlan *out);
int analytic_plan(const FtCluster *c, int policy, int r, double interval, FtPlan *out);

/* The growing interval for the policy and r of `fixed`: on FT_SCHED_MAX wall-time segments of
 * doubling width up to fixed->ttt, scale x the interval that is optimal at the segment's mean
 * wipe-out rate, the scale minimizing the time-to-train. Returns 0 or -1. */
int analytic_plan_sched(const FtFailModel *m, const FtPlan *fixed, FtPlan *out);

/* For each policy, the best r in [1, r_max] (ckpt: r = 1; a larger r wins only when its
 * predicted time-to-train is lower by more than one part per million, so a run whose failures
 * are negligible gets the smallest r), plus every r of SPARe and replication into `all` (size FT_POL_NPOL * r_max, may be NULL). best[FT_POL_NPOL]. */
int analytic_optimize(const FtCluster *c, int r_max, FtPlan *best, FtPlan *all);
int analytic_fail_optimize(const FtFailModel *m, int r_max, FtPlan *best, FtPlan *all);
/* The policy `optimize` recommends among best[FT_POL_NPOL]: the least predicted time-to-train
 * (ties to the lower policy; checkpoint-only when nothing else is finite). `train` with
 * spare.r = auto uses the same choice. */
int analytic_best_policy(const FtPlan *best);

/* Estimates the ring epoch by Monte Carlo when the exact count is too costly (deterministic
 * given seed), and fills st (allocated there). Defined in sim_ring.c. */
int sim_spare_stages_mc(int N, int r, int trials, uint64_t seed, FtSpareEpoch *out,
                        FtEpochStages *st);

#endif
