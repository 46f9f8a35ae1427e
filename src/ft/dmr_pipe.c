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
 *    all-gather of doubles; a few thousand numbers per stage). */
#include "ftllm/dmr_pipesim.h"

#include <stdlib.h>
#include <string.h>

#include "ftllm/comm.h"
#include "ftllm/log.h"
#include "dmr_impl.h"

int dmr_refine_pipeline(FtDmr *d, FtComm *pp, long long max_work, FtPipeRefine *out)
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
    }
    for (int s = 0; s < P; s++) dmr_pipe_rank_free(&r[s]);
    dmr_pipe_rank_free(&mine);
    free(pad), free(all), free(r);
    return rc;
}
