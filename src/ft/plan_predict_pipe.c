/* plan_predict_pipe.c: every stage of a what-if pipeline, planned and simulated together
 * (plan_predict.h, "The pipeline"): each stage's operators, windows and timeline from
 * predict_build_stage, its own three-phase plan, then the step of all of them in dmr_pipesim's
 * model, and the plans refined together as `dmr.refine = pipeline` refines a run's.
 *
 * Key decisions:
 *  - The stage's timeline becomes the simulation's executions one to one: an operator is an
 *    execution with its checker time; AC's recomputation (no operators: its forward operators
 *    are piggyback) a busy execution that is never checked; the meeting before the optimizer
 *    an empty execution that closes the micro-batch part (the DP reduce-scatter is a wait before
 *    it). TP all-reduces and the DP reduction are fixed waits; PP hops are the messages'
 *    transfer times, so the pipeline's own waits (warm-up, bubbles, a slower neighbour) come
 *    out of the simulation instead of the planner's two-hop PP window.
 *  - A piggyback operator inside an AGC segment's span joins the segment's unit (its replay is
 *    the segment's extra cost), as the runtime replays it.
 *  - Every check at once or deferred may move (no plan file to name a window here: a deferred
 *    check left over is replayed at the step's end, as the runtime drains). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/dmr_pipesim.h"
#include "ftllm/log.h"
#include "ftllm/plan_predict.h"

void predict_pipe_free(FtPredictPipe *pp)
{
    if (!pp) return;
    for (int s = 0; s < pp->P && pp->st; s++) predict_free(&pp->st[s]);
    free(pp->st);
    memset(pp, 0, sizeof *pp);
}

int predict_pipe_build(const FtConfig *cfg, FtPredictPipe *pp, char *err, size_t errlen)
{
    memset(pp, 0, sizeof *pp);
    int P = (int)cfg->parallel.pp;
    /* about 20 operators per block and micro-batch, on every stage */
    double nops = 20.0 * (double)cfg->model.layers * (double)cfg->parallel.microbatches;
    if (nops > PREDICT_PIPE_MAX_OPS) {
        snprintf(err, errlen, "not simulated: about %.0f operators on the %d stages, more than "
                 "%d (HINT: fewer micro-batches of more sequences, train.batch)", nops, P,
                 PREDICT_PIPE_MAX_OPS);
        return -1;
    }
    pp->st = calloc((size_t)P, sizeof *pp->st);
    if (!pp->st) {
        snprintf(err, errlen, "plan --predict: out of memory for %d pipeline stages", P);
        return -1;
    }
    pp->P = P;
    for (int s = 0; s < P; s++)
        if (predict_build_stage(cfg, s, &pp->st[s], err, errlen)) {
            predict_pipe_free(pp);
            return -1;
        }
    return 0;
}

void predict_pipe_rank(const FtPredict *p, const FtDmrPlan *plan, FtPipeRank *r)
{
    int n = 0;
    for (int e = 0; e < p->nev; e++)
        n += p->ev[e].kind == PRED_EV_OP || p->ev[e].kind == PRED_EV_BUSY ||
             p->ev[e].kind == PRED_EV_MEET;
    dmr_pipe_rank_init(r, p->stage, p->nstage, n, n, (double)p->budget);
    int *seg = malloc(((size_t)p->nops + 1) * sizeof *seg);
    FT_ASSERT(seg);
    for (int i = 0; i < p->nops; i++) seg[i] = plan->segment[i];
    for (int g = 0; g < plan->nseg; g++) { /* piggyback operators its replay re-executes */
        int a = plan->seg_first[g], z = plan->seg_last[g];
        for (int i = a; i <= z; i++)
            if (p->ops[i].block == p->ops[a].block && plan->strategy[i] == PLAN_PIGGYBACK)
                seg[i] = g;
    }
    double pend = 0;
    int recv = -1, k = 0;
    for (int e = 0; e < p->nev; e++) {
        const FtPredictEv *v = &p->ev[e];
        if (v->kind == PRED_EV_WAIT) {
            pend += v->t;
            continue;
        }
        if (v->kind == PRED_EV_RECV) {
            recv = v->arg;
            continue;
        }
        if (v->kind == PRED_EV_SEND) {
            FT_ASSERT(k > 0);
            r->send[k - 1] = v->arg, r->lat[k - 1] = v->t;
            continue;
        }
        r->slot[k] = k, r->wait[k] = pend, r->recv[k] = recv;
        pend = 0, recv = -1;
        if (v->kind == PRED_EV_OP) {
            int i = v->arg, st = plan->strategy[i];
            const FtPlanOp *o = &p->ops[i];
            r->dur[k] = r->chk[k] = o->time;
            r->strat[k] = st, r->seg[k] = seg[i];
            r->keep[k] = o->copy + o->fp, r->kept[k] = (double)o->mem;
            r->group[k] = p->entry[i];
            r->flip[k] = (st == PLAN_NAIVE || st == PLAN_DEFERRED) && seg[i] < 0;
        } else if (v->kind == PRED_EV_BUSY) {
            r->dur[k] = v->t;
        } else { /* the meeting: the micro-batches' part ends here */
            r->last_micro = k;
        }
        k++;
    }
    r->wait[n] = pend;
    free(seg);
}

int predict_pipe_run(const FtPredictPipe *pp, int phases, long long max_work, bool hops_only,
                     FtPipeRefine *out)
{
    int P = pp->P;
    FtPipeRank *r = calloc((size_t)P, sizeof *r);
    FT_ASSERT(r);
    int rc = 0;
    long long total = 0;
    for (int s = 0; s < P && !rc; s++) {
        FtDmrPlan plan;
        if (predict_plan(&pp->st[s], phases, &plan)) {
            rc = -1;
            break;
        }
        predict_pipe_rank(&pp->st[s], &plan, &r[s]);
        r[s].hops_only = hops_only;
        total += r[s].n;
        planner_free(&plan);
    }
    if (!rc) {
        long long cap = 0; /* no search: the stages' own plans simulated */
        if (max_work > 0) cap = total > 0 && max_work / total > 1000 ? max_work / total : 1000;
        dmr_pipe_refine(r, P, cap, out);
        if (!out->start.ok) rc = -1;
    }
    for (int s = 0; s < P; s++) dmr_pipe_rank_free(&r[s]);
    free(r);
    return rc;
}

double predict_pipe_pct(const FtPipeRefine *rf, double step)
{
    return rf->off.step > 0 ? 100.0 * (step - rf->off.step) / rf->off.step : 0;
}
