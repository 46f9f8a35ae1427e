/* timeline.h: a per-rank timeline of compute versus waiting on communication.
 *
 * The executor and the train loop record intervals: each wait on a message (by kind: tensor-
 * parallel all-reduce, pipeline send/receive, data-parallel bucket, embedding reconciliation,
 * expert all-to-all) and each optimizer step. Totals per kind are always kept; the individual
 * intervals are kept up to a fixed number (the DMR profiler reads them: where the windows in
 * which a deferred checker could run are, and how long they last). At the end of a run
 * timeline_report gathers every rank's totals and rank 0 prints, per rank, the fraction of the
 * step time spent waiting. No globals: one FtTimeline per trainer. */
#ifndef FTLLM_TIMELINE_H
#define FTLLM_TIMELINE_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

/* X(enum suffix, printed name, what it is) */
#define FT_TL_LIST(X)                                                                          \
    X(STEP, "step", "a whole optimizer step")                                                  \
    X(TP, "tp", "waiting: tensor-parallel all-reduce")                                         \
    X(PP, "pp", "waiting: pipeline receive or send")                                           \
    X(DP, "dp", "waiting: data-parallel gradient buckets")                                     \
    X(EMB, "emb", "waiting: tied-embedding gradient between first and last stage")             \
    X(EP, "ep", "waiting: expert all-to-all")                                                  \
    X(OTHER, "other", "waiting: loss / norm agreements")

typedef enum ft_tl_kind {
#define FT_TL_ENUM(name, text, help) FT_TL_##name,
    FT_TL_LIST(FT_TL_ENUM)
#undef FT_TL_ENUM
    FT_TL_NKINDS
} FtTlKind;

typedef struct ft_tl_event {
    double t0, t1; /* MPI_Wtime */
    int kind;
} FtTlEvent;

typedef struct ft_timeline {
    double total[FT_TL_NKINDS];
    long long count[FT_TL_NKINDS];
    FtTlEvent *ev;
    size_t nev, cap; /* events beyond cap are counted in the totals only */
} FtTimeline;

/* cap: how many intervals to keep (0: totals only). */
void timeline_init(FtTimeline *tl, size_t cap);
void timeline_free(FtTimeline *tl);
void timeline_reset(FtTimeline *tl);
void timeline_add(FtTimeline *tl, FtTlKind kind, double t0, double t1);
/* Seconds waiting on any kind of message. */
double timeline_wait(const FtTimeline *tl);

/* Collective over comm: rank 0 prints one line per rank ("[r3] dp 1 pp 0 tp 1: step 12.3 ms,
 * waiting 18.2% (tp 10.1%, pp 8.1%, ...)") to out; label names each rank's coordinates (may be
 * NULL). Returns this rank's waiting fraction. */
double timeline_report(const FtTimeline *tl, MPI_Comm comm, const char *label, FILE *out);

#endif
