/* exec.c: the executor (exec.h). The one place ops are launched: walks tape entries, resolves
 * tensors, calls the op table's forward or backward, optionally timing each call, and carries
 * out the communication markers: tensor-parallel all-reduces (in place, waited at once: the
 * next op needs the sum), pipeline receives (waited at once) and sends (left in flight),
 * expert-parallel all-to-alls of MoE token rows (row counts, then the rows as all-to-all(v);
 * waited at once, charged to the timeline as ep), and the gradients-complete hook. DMR checks
 * and fault injection attach to the after-op hook of exactly these calls and run deferred
 * checkers from the poll hook of every wait. */
#include "ftllm/exec.h"

#include <omp.h>
#include <string.h>

#include "ftllm/log.h"

enum { TAG_ACT = 11, TAG_GRAD = 12 }; /* pipeline messages; MPI keeps their order per pair */

void exec_op(FtOpKind kind, FtOpDir dir, const FtOpCall *c, FtExecStats *stats)
{
    FtOpCall cc = *c;
    exec_op_on(NULL, kind, dir, &cc, stats);
}

void exec_op_on(const FtBackend *be, FtOpKind kind, FtOpDir dir, FtOpCall *c, FtExecStats *stats)
{
    if (!be) be = backend_cpu();
    FT_ASSERT(kind >= 0 && kind < FT_OP_NKINDS);
    const FtOpDesc *d = &be->ops[kind];
    FtOpFn fn = dir == FT_FWD ? d->fwd : d->bwd;
    c->ctx = be->ctx;
    FT_ASSERT(fn);
    if (!stats) {
        fn(c);
        return;
    }
    bool wait = stats->sync && !backend_is_host(be); /* to the op's end, not its launch */
    if (wait) be->sync(be->ctx);
    double t0 = omp_get_wtime();
    fn(c);
    if (wait) be->sync(be->ctx);
    stats->seconds[kind][dir] += omp_get_wtime() - t0;
    stats->calls[kind][dir]++;
    stats->flops[kind][dir] += d->flops(c, dir);
}

void exec_wait(FtExec *ex, FtReq *reqs, int n, FtTlKind kind)
{
    double t0 = MPI_Wtime();
    comm_waitall(reqs, n, &ex->poll);
    if (ex->tl) timeline_add(ex->tl, kind, t0, MPI_Wtime());
}

/* The in-flight sends of tape tp (a new slot the first time). */
static int send_slot(FtExec *ex, const FtTape *tp)
{
    for (int i = 0; i < ex->nsends; i++)
        if (ex->sends[i].tape == tp) return i;
    if (ex->nsends == FT_EXEC_MAX_TAPES) FT_DIE("executor: more than %d tapes in flight", FT_EXEC_MAX_TAPES);
    int i = ex->nsends++;
    ex->sends[i].tape = tp;
    ex->sends[i].act.active = ex->sends[i].grad.active = false;
    return i;
}

static void pp_mark(FtExec *ex, const FtTape *tp, const FtTapeEntry *e)
{
    if (!ex->pp) FT_DIE("executor: the tape has a pipeline marker but there is no pp communicator");
    int stage = comm_rank(ex->pp);
    bool fwd = e->dir == FT_FWD;
    if (e->mark == FT_MARK_PP_RECV) {
        const FtTensor *t = &tp->t[e->out[0]];
        FtReq r;
        comm_irecv(ex->pp, t->data, t->n, t->dtype, fwd ? stage - 1 : stage + 1,
                   fwd ? TAG_ACT : TAG_GRAD, &r);
        exec_wait(ex, &r, 1, FT_TL_PP);
    } else {
        const FtTensor *t = &tp->t[e->in[0]];
        int s = send_slot(ex, tp);
        FtReq *r = fwd ? &ex->sends[s].act : &ex->sends[s].grad;
        if (r->active) exec_wait(ex, r, 1, FT_TL_PP);
        comm_isend(ex->pp, t->data, t->n, t->dtype, fwd ? stage + 1 : stage - 1,
                   fwd ? TAG_ACT : TAG_GRAD, r);
    }
}

/* An expert-parallel exchange (tape.h FT_MARK_EP_*): the row counts first when the entry asks
 * (an all-to-all of El ints per peer), then the rows as an all-to-all(v) whose counts come from
 * them; the unused tail of the receive buffer is zeroed, so its bytes are a function of the
 * messages. */
static void ep_mark(FtExec *ex, const FtTape *tp, const FtTapeEntry *e)
{
    const FtTensor *src = &tp->t[e->in[0]], *dst = &tp->t[e->out[0]];
    if (!ex->ep) {
        if (src->data != dst->data)
            FT_DIE("executor: the tape has an expert-parallel exchange but there is no ep "
                   "communicator");
        return;
    }
    int np = comm_size(ex->ep);
    const FtTensor *ct = &tp->t[e->in[1]];
    const int *counts = ct->data;
    int El = (int)ct->n / np;
    FT_ASSERT(El * np == (int)ct->n && e->d[0] > 0);
    int *ecounts = e->out[1] >= 0 ? tp->t[e->out[1]].data : tp->t[e->in[2]].data;
    int one[np], step[np], own[np], theirs[np], sc[np], sd[np], rc[np], rd[np];
    if (e->out[1] >= 0) {
        for (int q = 0; q < np; q++) one[q] = El, step[q] = q * El;
        FtReq r;
        comm_ialltoallv(ex->ep, counts, one, step, ecounts, one, step, FT_I32, &r);
        exec_wait(ex, &r, 1, FT_TL_EP);
    }
    long long W = e->d[0];
    const FtBackend *be = ex->be ? ex->be : backend_cpu();
    int hc[np * El], he[np * El]; /* the counts live in the backend's memory: read on the host */
    be->to_host(be->ctx, hc, counts, sizeof hc);
    be->to_host(be->ctx, he, ecounts, sizeof he);
    for (int q = 0; q < np; q++) { /* rows this side sends to / receives from peer q */
        own[q] = theirs[q] = 0;
        for (int j = 0; j < El; j++) own[q] += hc[q * El + j], theirs[q] += he[q * El + j];
    }
    bool to_experts = e->mark == FT_MARK_EP_TO_EXPERTS;
    long long so = 0, ro = 0;
    for (int q = 0; q < np; q++) {
        long long s = (to_experts ? own[q] : theirs[q]) * W, rr = (to_experts ? theirs[q] : own[q]) * W;
        if (so + s > (long long)src->n || ro + rr > (long long)dst->n || so + s > 2147483647LL ||
            ro + rr > 2147483647LL)
            FT_DIE("executor: expert exchange of %s: %lld + %lld elements to send (buffer %zu), "
                   "%lld + %lld to receive into %s (buffer %zu)", src->name, so, s, src->n, ro,
                   rr, dst->name, dst->n);
        sc[q] = (int)s, sd[q] = (int)so, rc[q] = (int)rr, rd[q] = (int)ro;
        so += s, ro += rr;
    }
    FtReq r;
    comm_ialltoallv(ex->ep, src->data, sc, sd, dst->data, rc, rd, src->dtype, &r);
    exec_wait(ex, &r, 1, FT_TL_EP);
    be->set(be->ctx, (float *)dst->data + ro, 0, sizeof(float) * (dst->n - (size_t)ro));
}

void exec_watch(FtExec *ex, FtReq *req)
{
    if (ex->no_progress || !req->active) return;
    for (int i = 0; i < ex->nwatch; i++)
        if (ex->watch[i] == req) return;
    if (ex->nwatch == FT_EXEC_MAX_WATCH) return; /* enough already in flight: no test */
    ex->watch[ex->nwatch++] = req;
}

/* Tests the watched requests; forgets the completed ones. */
static void progress(FtExec *ex)
{
    int k = 0;
    for (int i = 0; i < ex->nwatch; i++)
        if (!comm_test(ex->watch[i])) ex->watch[k++] = ex->watch[i];
    ex->nwatch = k;
}

void exec_run_ctx(FtExec *ex, const FtTape *tp, int begin, int end)
{
    FT_ASSERT(begin >= 0 && end <= tp->ne);
    if (ex->pp && begin < end) { /* this tape's buffers are about to be written again */
        int s = send_slot(ex, tp);
        FtReq *r = begin < tp->fwd_end ? &ex->sends[s].act : &ex->sends[s].grad;
        if (r->active) exec_wait(ex, r, 1, FT_TL_PP);
    }
    for (int i = begin; i < end; i++) {
        const FtTapeEntry *e = &tp->e[i];
        if (e->kind != FT_OP_MARK) {
            FtOpCall c;
            tape_call(tp, i, &c);
            exec_op_on(ex->be, e->kind, e->dir, &c, ex->stats);
            if (ex->hooks.after_op) ex->hooks.after_op(ex->hooks.arg, tp, i, ex->instance, &c);
            if (ex->nwatch) progress(ex);
            continue;
        }
        switch (e->mark) {
        case FT_MARK_COMM_TP:
            if (ex->tp && comm_size(ex->tp) > 1) {
                const FtTensor *t = &tp->t[e->in[0]];
                FtReq r;
                comm_iallreduce_sum(ex->tp, FT_IN_PLACE, t->data, t->n, t->dtype, &r);
                exec_wait(ex, &r, 1, FT_TL_TP);
            }
            break;
        case FT_MARK_PP_RECV:
        case FT_MARK_PP_SEND: pp_mark(ex, tp, e); break;
        case FT_MARK_EP_TO_EXPERTS:
        case FT_MARK_EP_TO_SOURCES: ep_mark(ex, tp, e); break;
        case FT_MARK_COMM_GRADS:
            if (ex->grads_ready) ex->grads_ready(ex->grads_arg, e->layer);
            break;
        default: break; /* segment markers: nothing to do */
        }
    }
}

void exec_finish(FtExec *ex)
{
    for (int i = 0; i < ex->nsends; i++) {
        if (ex->sends[i].act.active) exec_wait(ex, &ex->sends[i].act, 1, FT_TL_PP);
        if (ex->sends[i].grad.active) exec_wait(ex, &ex->sends[i].grad, 1, FT_TL_PP);
    }
}

void exec_stats_print(FILE *out, const FtExecStats *s)
{
    double total = 0;
    for (int k = 0; k < FT_OP_NKINDS; k++) total += s->seconds[k][0] + s->seconds[k][1];
    fprintf(out, "%-16s %8s %10s %9s %6s\n", "op", "calls", "ms", "GFLOP/s", "%");
    for (int k = 0; k < FT_OP_NKINDS; k++)
        for (int dir = 0; dir < 2; dir++) {
            if (!s->calls[k][dir]) continue;
            double sec = s->seconds[k][dir];
            char name[32];
            snprintf(name, sizeof name, "%s.%s", ops_desc(k)->name, dir ? "bwd" : "fwd");
            fprintf(out, "%-16s %8lld %10.1f %9.2f %6.1f\n", name, s->calls[k][dir], 1e3 * sec,
                    sec > 0 ? s->flops[k][dir] / sec / 1e9 : 0.0, total > 0 ? 100 * sec / total : 0.0);
        }
}
