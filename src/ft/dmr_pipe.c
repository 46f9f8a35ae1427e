/* dmr_pipe.c: the stages of a pipeline refine their DMR plans together (dmr_pipesim.h): each
 * stage's part gathered over the pipeline communicator, the same search on every stage, each
 * takes its own slots.
 *
 * Key decisions:
 *  - Whether to go on is agreed (one max) before any stage branches on it. Stage 0 runs the
 *    search and broadcasts every stage's strategies: the answer is the same on all even
 *    where ranks' arithmetic could differ (other CPUs, other builds), and the search runs
 *    once.
 *  - Parts differ in length: the longest is agreed and every part padded to it (one
 *    all-gather of doubles; a few thousand numbers per stage).
 *  - Tensor and expert parallelism (dmr_refine_pipeline_peers): the peers of a stage run the
 *    same ops (shards of one size, as many experts each) and meet at every all-reduce and
 *    all-to-all, so where their plans differ a check one peer runs at once is time the others
 *    wait at the next collective. The first peer's pipeline refines (its profiles stand for
 *    every peer's: the same ops, the same waits; with experts, the others route other tokens,
 *    an approximation) and each stage's first peer gives the others its plan for the
 *    micro-batch executions: strategies, AGC segments, the windows named by the slot they open
 *    after and their kind (the peers wait at the same places), costs. The simulation takes a
 *    stage's collectives as the waits it measured, which holds when its peers choose alike.
 *    Not the whole plan: the optimizer tapes differ between peers (tp rank 0 alone sums the
 *    replicated parameters' norms), so each keeps its optimizer part. Where the first peer's
 *    part cannot be taken whole (a window the peer lacks), the peer takes its naive/deferred
 *    choices where its own plan may move the slot, and says how many executions differ. */
#include "ftllm/dmr_pipesim.h"

#include <stdlib.h>
#include <string.h>

#include "ftllm/comm.h"
#include "ftllm/log.h"
#include "dmr_impl.h"

/* dmr_refine_pipeline; with `replayed` (nslot ints) also this stage's simulated replays under
 * the refined strategies (FtPipeRank.replayed_before), and *last its last micro-batch
 * execution. */
static int refine(FtDmr *d, FtComm *pp, long long max_work, FtPipeRefine *out, int *replayed,
                  int *last)
{
    memset(out, 0, sizeof *out);
    int P = comm_size(pp), me = comm_rank(pp);
    FtPipeRank mine;
    bool ok = d->plan.strat && d->plan.pos && d->prof.steps > 0 &&
              !dmr_pipe_rank_build(&d->prof, &d->plan, d->micro, d->opt, me, P, d->budget, &mine);
    double *buf = NULL;
    size_t len = ok ? dmr_pipe_rank_pack(&mine, &buf) : 0;
    long long most = comm_max_i64(pp, ok ? (long long)len : -1);
    long long bad = comm_max_i64(pp, ok ? 0 : 1);
    if (bad || most <= 0) {
        free(buf);
        if (ok) dmr_pipe_rank_free(&mine);
        return -1;
    }
    double *pad = calloc((size_t)most, sizeof *pad), *all = malloc((size_t)most * (size_t)P * sizeof *all);
    FtPipeRank *r = calloc((size_t)P, sizeof *r);
    FT_ASSERT(pad && all && r);
    memcpy(pad, buf, len * sizeof *buf);
    free(buf);
    comm_allgather(pp, pad, all, (size_t)most, FT_F64);
    int rc = 0;
    for (int s = 0; s < P && !rc; s++)
        if (dmr_pipe_rank_unpack(all + (size_t)s * (size_t)most, (size_t)most, &r[s]) || r[s].stage != s ||
            r[s].nstage != P)
            rc = -1;
    /* stage 0 searches and sends every stage the answer: the same on all, whatever each
     * rank's floating point would have done (rc too: every stage unpacked the same bytes) */
    if (!rc && me == 0) {
        long long execs = 0; /* the search's work: simulations x executions simulated */
        for (int s = 0; s < P; s++) execs += r[s].n;
        long long cap = max_work / (execs > 0 ? execs : 1);
        dmr_pipe_refine(r, P, cap > 1000 ? cap : 1000, out);
        if (!out->start.ok) rc = -1;
    }
    rc = (int)comm_max_i64(pp, rc ? 1 : 0) ? -1 : 0;
    if (!rc) {
        comm_bcast(pp, out, sizeof *out, FT_U8, 0);
        for (int s = 0; s < P; s++) {
            comm_bcast(pp, r[s].strat, (size_t)r[s].nslot, FT_I32, 0);
            comm_bcast(pp, r[s].replayed_before, (size_t)r[s].nslot, FT_I32, 0);
        }
        dmr_pipe_apply(&r[me], &d->plan);
        dmr_dyn_prepare(d); /* what the plan reserves changed */
        if (replayed) {
            FT_ASSERT(r[me].nslot == d->plan.n);
            memcpy(replayed, r[me].replayed_before, (size_t)r[me].nslot * sizeof *replayed);
            *last = r[me].last_micro;
        }
    }
    for (int s = 0; s < P; s++) dmr_pipe_rank_free(&r[s]);
    dmr_pipe_rank_free(&mine);
    free(pad), free(all), free(r);
    return rc;
}

int dmr_refine_pipeline(FtDmr *d, FtComm *pp, long long max_work, FtPipeRefine *out)
{
    return refine(d, pp, max_work, out, NULL, NULL);
}

/* The micro-batch tape's ops, not their sizes (a vocabulary split unevenly gives tp peers
 * shards of other sizes): what a slot names. */
static unsigned long long tape_ops_sig(const FtTape *tp)
{
    int *v = malloc(((size_t)tp->ne * 6 + 1) * sizeof *v);
    FT_ASSERT(v);
    v[0] = tp->ne;
    for (int i = 0; i < tp->ne; i++) {
        const FtTapeEntry *e = &tp->e[i];
        int *w = v + 1 + 6 * i;
        w[0] = e->kind, w[1] = e->dir, w[2] = e->phase, w[3] = e->layer, w[4] = e->twin;
        w[5] = e->mark;
    }
    unsigned long long h = dmr_pipe_sig(v, 6 * tp->ne + 1);
    free(v);
    return h;
}

/* What the peers must share for root's slots and replays to name theirs: the micro-batch part
 * (micro-batches planned apart, entries), the tape's ops and the micro-batch executions' order
 * (every one a micro-batch slot, up to the barrier). 0: none (an execution out of the part). */
static unsigned long long micro_sig(const FtDmrEntryPlan *p, const FtTape *micro,
                                    const FtPipeRank *r)
{
    int M = p->ninst * p->nmicro;
    for (int k = 0; k <= r->last_micro; k++)
        if (r->slot[k] >= M) return 0;
    unsigned long long h[2] = {tape_ops_sig(micro), dmr_pipe_sig(r->slot, r->last_micro + 1)};
    int v[7] = {p->nmicro, p->ninst, r->last_micro};
    memcpy(v + 3, h, sizeof h);
    unsigned long long sig = dmr_pipe_sig(v, 7);
    return sig ? sig : 1;
}

/* What the first peer (root) sends of each micro-batch execution's plan (M slots each). */
typedef struct root_choice {
    int *strat, *seg, *win_after, *win_kind; /* its window as the slot it opens after and its
                                                kind (-2: no window) */
    double *cost;
    int nseg;
} RootChoice;

/* The window of p that root's (after, kind) names: the same opening after the same
 * micro-batch slot (M: the micro-batch slots, the same on every peer); else, for a deferred
 * check, the first window at or after its slot s (its replay is accounting only: any wait
 * replays); -1 when none. */
static int window_of(const FtDmrEntryPlan *p, int M, int s, int after, int kind, bool agc)
{
    for (int w = 0; after < M && w < p->nwin; w++)
        if (p->win_after[w] == after && p->win_kind[w] == kind) return w;
    if (agc) return -1;
    for (int w = 0; w < p->nwin; w++)
        if (dmr_plan_pos(p, p->win_after[w]) >= p->pos[s]) return w;
    return -1;
}

/* The peer's plan takes root's for every micro-batch execution, AGC segments included, where
 * it can: its own segments are all in the micro-batch part (they are: Phase 2 segments a
 * micro-batch's blocks) and every AGC member's window opens where root's does. Then its
 * windows' use is counted again from its slots (the planner's accounting, as a table shows
 * it; the run replays in any wait). Returns 0, or -1 with p unchanged. */
static int follow_whole(FtDmrEntryPlan *p, int M, const RootChoice *rc)
{
    for (int s = M; s < p->n; s++)
        if (p->seg[s] >= 0) return -1;
    int *win = malloc(((size_t)M + 1) * sizeof *win);
    FT_ASSERT(win);
    int rcode = 0;
    for (int s = 0; s < M && !rcode; s++) {
        win[s] = -1;
        if (rc->win_after[s] == -2) continue;
        win[s] = window_of(p, M, s, rc->win_after[s], rc->win_kind[s], rc->strat[s] == PLAN_AGC);
        if (win[s] < 0) rcode = -1;
    }
    if (!rcode) {
        for (int s = 0; s < M; s++)
            p->strat[s] = rc->strat[s], p->seg[s] = rc->seg[s], p->window[s] = win[s],
            p->cost[s] = rc->cost[s];
        p->nseg = rc->nseg, p->overhead = 0;
        for (int s = 0; s < p->n; s++) p->overhead += p->strat[s] >= 0 ? p->cost[s] : 0;
        for (int w = 0; w < p->nwin; w++) p->win_used[w] = 0, p->win_use[w] = 0;
        for (int s = 0; s < p->n; s++) {
            int w = p->window[s];
            if (w < 0 || p->strat[s] < 0) continue;
            p->win_used[w] += p->time[s];
            p->win_use[w] = p->strat[s] == PLAN_AGC || p->seg[s] >= 0 ? 2 : 3;
        }
    }
    free(win);
    return rcode;
}

int dmr_refine_pipeline_peers(FtDmr *d, FtComm *pp, FtComm *peers, long long max_work,
                              FtPipeRefine *out)
{
    if (!peers || comm_size(peers) < 2) return dmr_refine_pipeline(d, pp, max_work, out);
    memset(out, 0, sizeof *out);
    int st = comm_rank(pp), P = comm_size(pp);
    bool root = comm_rank(peers) == 0;
    /* every peer's stage as its plan has it: the micro-batch executions must be the same ops in
     * the same order on every peer (their optimizer tapes differ: tp rank 0 alone sums the
     * replicated parameters' norms), so that the first peer's (root's) slots and replays name
     * the peer's */
    FtPipeRank mine;
    FtDmrEntryPlan *p = &d->plan;
    bool have = p->strat && p->pos && d->prof.steps > 0 &&
                !dmr_pipe_rank_build(&d->prof, p, d->micro, d->opt, st, P, d->budget, &mine);
    unsigned long long sig = have ? micro_sig(p, d->micro, &mine) : 0, root_sig = sig;
    comm_bcast(peers, &root_sig, 1, FT_I64, 0);
    long long bad = !comm_all_true(peers, sig != 0 && sig == root_sig);
    int rc = -1, last = -1, *theirs = NULL;
    if (!bad) {
        theirs = malloc((size_t)p->n * sizeof *theirs);
        FT_ASSERT(theirs);
    }
    if (root) { /* the first peers' pipeline: every stage's first peer, or none */
        if (!comm_max_i64(pp, bad)) rc = refine(d, pp, max_work, out, theirs, &last);
    }
    int ok = rc == 0;
    comm_bcast(peers, &ok, 1, FT_I32, 0);
    if (!ok) {
        free(theirs);
        if (have) dmr_pipe_rank_free(&mine);
        return -1;
    }
    /* root's choices for the micro-batch executions: its strategies, then its replays */
    int M = p->ninst * p->nmicro;
    comm_bcast(peers, out, sizeof *out, FT_U8, 0);
    comm_bcast(peers, &last, 1, FT_I32, 0);
    size_t mi = (size_t)M * sizeof(int);
    RootChoice ch = {.strat = malloc(mi), .seg = malloc(mi), .win_after = malloc(mi),
                     .win_kind = malloc(mi), .cost = malloc((size_t)M * sizeof(double)),
                     .nseg = p->nseg};
    FT_ASSERT(ch.strat && ch.seg && ch.win_after && ch.win_kind && ch.cost);
    for (int s = 0; s < M; s++) /* the peers' copies defined before root's arrive */
        ch.strat[s] = ch.seg[s] = ch.win_after[s] = ch.win_kind[s] = -1, ch.cost[s] = 0;
    if (root)
        for (int s = 0; s < M; s++) {
            int w = p->window[s];
            ch.strat[s] = p->strat[s], ch.seg[s] = p->seg[s], ch.cost[s] = p->cost[s];
            ch.win_after[s] = w >= 0 ? p->win_after[w] : -2;
            ch.win_kind[s] = w >= 0 ? p->win_kind[w] : -1;
        }
    comm_bcast(peers, ch.strat, (size_t)M, FT_I32, 0);
    comm_bcast(peers, ch.seg, (size_t)M, FT_I32, 0);
    comm_bcast(peers, ch.win_after, (size_t)M, FT_I32, 0);
    comm_bcast(peers, ch.win_kind, (size_t)M, FT_I32, 0);
    comm_bcast(peers, ch.cost, (size_t)M, FT_F64, 0);
    comm_bcast(peers, &ch.nseg, 1, FT_I32, 0);
    comm_bcast(peers, theirs, (size_t)M, FT_I32, 0);
    int unfollowed = 0;
    if (!root && !follow_whole(p, M, &ch)) {
        dmr_dyn_prepare(d); /* what the plan reserves changed */
    } else if (!root) {
        /* the peer takes root's naive/deferred choice where its own plan may move the slot
         * (not one of its AGC members, ...): its window is the one root's replay fell in
         * (root's micro-batch executions are the peer's; a replay at root's optimizer or
         * drain is the peer's drain) */
        for (int s = 0; s < M; s++) {
            mine.replayed_before[s] = -1;
            int st_s = ch.strat[s];
            if (!mine.flip[s] || (st_s != PLAN_NAIVE && st_s != PLAN_DEFERRED)) continue;
            mine.strat[s] = st_s;
            if (st_s == PLAN_DEFERRED)
                mine.replayed_before[s] = theirs[s] >= 0 && theirs[s] <= last ? theirs[s] : mine.n;
        }
        if (dmr_pipe_apply(&mine, p)) dmr_dyn_prepare(d); /* what the plan reserves changed */
    }
    for (int s = 0; s < M; s++) unfollowed += p->strat[s] != ch.strat[s] || p->seg[s] != ch.seg[s];
    free(ch.strat), free(ch.seg), free(ch.win_after), free(ch.win_kind), free(ch.cost);
    free(theirs);
    dmr_pipe_rank_free(&mine);
    return unfollowed;
}
