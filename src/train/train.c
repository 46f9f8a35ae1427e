/* train.c: the training step and loop (train.h).
 *
 * Key decisions:
 *  - The tape is built once per pipeline slot; each micro-batch copies its tokens into a slot's
 *    input tensors and the executor runs the forward and backward ranges in the order of the
 *    pipeline schedule (on one stage, 1F1B is F0 B0 F1 B1 ..., the plain loop). Gradient
 *    accumulation over micro-batches is the parameter gradients' accumulate flag plus a loss
 *    scale of 1/(micro-batches of the whole job) folded into the cross-entropy backward.
 *  - Data-parallel gradients: buckets of whole layers (in backward order, at least
 *    parallel.bucket_mb each) packed into one buffer per bucket and summed with a non-blocking
 *    all-reduce started from the executor's gradients-complete hook during the last
 *    micro-batch's backward, so the reduction of late layers overlaps the backward of early
 *    ones; all are completed (and unpacked) before the norm. The tied embedding is its own last
 *    bucket, after its two pipeline copies were summed.
 *  - Validation reuses the training tape's forward range (same shapes, no second arena).
 *  - Rates leave out the first train.rate_skip steps; the model FLOP count is the tape's
 *    forward + backward FLOPs without AC recomputation (so AC shows up as a lower rate). */
#include "ftllm/train.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"
#include "ftllm/pipeline.h"

/* ---- data-parallel gradient buckets -------------------------------------------------------- */

typedef struct slice {
    float *p;
    size_t n;
} Slice;

/* One half of a bucket: the slices reduced over one communicator. */
typedef struct part {
    Slice *sl;
    int nsl;
    float *buf;
    size_t n;
    FtReq req;
} Part;

/* Part 0: dense gradients (replicated over dp x ep: summed over dense_dp); part 1: MoE expert
 * gradients (split over ep: summed over dp only, nothing to do when dp is 1). */
typedef struct bucket {
    Part part[2];
    size_t n;      /* both parts */
    int last_item; /* the bucket starts when this item's gradients are complete */
    bool started;
} Bucket;

struct ft_buckets {
    Bucket *b;
    int nb;
    int *item_bucket; /* item -> bucket; items: [head (last stage)], layers l1-1 .. l0, embed */
    int nitems, embed_item;
};

static void bucket_add(Bucket *b, int part, float *p, size_t n)
{
    if (!n) return;
    Part *q = &b->part[part];
    q->sl = realloc(q->sl, sizeof *q->sl * (size_t)(q->nsl + 1));
    FT_ASSERT(q->sl);
    q->sl[q->nsl++] = (Slice){p, n};
    q->n += n;
    b->n += n;
}

/* Adds item `item`'s gradient slices to the open bucket. */
static void item_slices(const FtModel *m, int item, int nhead, Bucket *b)
{
    static const int head[] = {FT_P_LNFW, FT_P_LNFB};
    static const int embed[] = {FT_P_WTE, FT_P_WPE};
    int nlayer_items = m->nl;
    if (item < nhead) {
        for (int j = 0; j < 2; j++)
            bucket_add(b, 0, m->grads + m->p[head[j]].offset, m->p[head[j]].size);
    } else if (item < nhead + nlayer_items) {
        int l = m->l0 + m->nl - 1 - (item - nhead);
        for (int i = 0; i < FT_NPARAM_TENSORS; i++)
            if (m->p[i].per_layer && m->p[i].size)
                bucket_add(b, m->p[i].expert, model_tensor(m, m->grads, i, l),
                           m->p[i].size / m->nl);
    } else {
        for (int j = 0; j < 2; j++)
            bucket_add(b, 0, m->grads + m->p[embed[j]].offset, m->p[embed[j]].size);
    }
}

static struct ft_buckets *buckets_create(const FtModel *m, double bucket_mb)
{
    struct ft_buckets *bk = calloc(1, sizeof *bk);
    FT_ASSERT(bk);
    int nhead = m->last ? 1 : 0;
    bk->nitems = nhead + m->nl + 1;
    bk->embed_item = bk->nitems - 1;
    bk->item_bucket = malloc(sizeof(int) * (size_t)bk->nitems);
    bk->b = calloc((size_t)bk->nitems, sizeof *bk->b);
    FT_ASSERT(bk->item_bucket && bk->b);
    size_t limit = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
    if (limit < 1) limit = 1;
    for (int it = 0; it < bk->nitems; it++) {
        bool embed = it == bk->embed_item;
        if (embed || bk->nb == 0 || bk->b[bk->nb - 1].n >= limit) bk->nb++;
        Bucket *b = &bk->b[bk->nb - 1];
        item_slices(m, it, nhead, b);
        b->last_item = it;
        bk->item_bucket[it] = bk->nb - 1;
    }
    for (int i = 0; i < bk->nb; i++)
        for (int k = 0; k < 2; k++) {
            Part *q = &bk->b[i].part[k];
            q->buf = malloc(sizeof(float) * (q->n ? q->n : 1));
            FT_ASSERT(q->buf);
        }
    return bk;
}

static void buckets_free(struct ft_buckets *bk)
{
    if (!bk) return;
    for (int i = 0; i < bk->nb; i++)
        for (int k = 0; k < 2; k++) free(bk->b[i].part[k].sl), free(bk->b[i].part[k].buf);
    free(bk->b);
    free(bk->item_bucket);
    free(bk);
}

/* The communicator of part k (NULL: nothing to reduce). */
static FtComm *part_comm(const FtTrainer *tr, int k) { return k == 0 ? tr->c_dp : tr->c_edp; }

static void bucket_start(FtTrainer *tr, Bucket *b)
{
    FT_ASSERT(!b->started);
    b->started = true;
    for (int k = 0; k < 2; k++) {
        Part *q = &b->part[k];
        if (!q->n || !part_comm(tr, k)) continue;
        size_t off = 0;
        for (int i = 0; i < q->nsl; i++) {
            memcpy(q->buf + off, q->sl[i].p, sizeof(float) * q->sl[i].n);
            off += q->sl[i].n;
        }
        comm_iallreduce_sum(part_comm(tr, k), FT_IN_PLACE, q->buf, q->n, FT_F32, &q->req);
    }
}

/* The executor's gradients-complete hook during the last micro-batch's backward. */
static void grads_ready(void *arg, int layer)
{
    FtTrainer *tr = arg;
    struct ft_buckets *bk = tr->buckets;
    const FtModel *m = tr->model;
    int nhead = m->last ? 1 : 0;
    int item = layer < 0 ? 0 : nhead + (m->l0 + m->nl - 1 - layer);
    FT_ASSERT(item >= 0 && item < bk->embed_item);
    Bucket *b = &bk->b[bk->item_bucket[item]];
    if (b->last_item == item) bucket_start(tr, b);
}

/* After the last backward: the tied embedding's copies summed, the last bucket started, every
 * bucket waited for and unpacked. */
static void grads_finish(FtTrainer *tr)
{
    FtModel *m = tr->model;
    if (tr->c_emb && m->p[FT_P_WTE].size) {
        FtReq r;
        comm_iallreduce_sum(tr->c_emb, FT_IN_PLACE, m->grads + m->p[FT_P_WTE].offset,
                            m->p[FT_P_WTE].size, FT_F32, &r);
        exec_wait(&tr->ex, &r, 1, FT_TL_EMB);
    }
    struct ft_buckets *bk = tr->buckets;
    if (!bk) return;
    bucket_start(tr, &bk->b[bk->item_bucket[bk->embed_item]]);
    for (int i = 0; i < bk->nb; i++) {
        Bucket *b = &bk->b[i];
        FT_ASSERT(b->started);
        b->started = false;
        for (int k = 0; k < 2; k++) {
            Part *q = &b->part[k];
            if (!q->n || !part_comm(tr, k)) continue;
            exec_wait(&tr->ex, &q->req, 1, FT_TL_DP);
            size_t off = 0;
            for (int j = 0; j < q->nsl; j++) {
                memcpy(q->sl[j].p, q->buf + off, sizeof(float) * q->sl[j].n);
                off += q->sl[j].n;
            }
        }
    }
}

/* ---- set-up -------------------------------------------------------------------------------- */

int train_seq_len(const FtConfig *cfg)
{
    return (int)(cfg->train.seq_len > 0 ? cfg->train.seq_len : cfg->model.seq_len);
}

void train_init(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtBatchSource *train,
                const FtBatchSource *val)
{
    train_init_grid(tr, cfg, model, NULL, train, val);
}

static FtTape *slot(FtTrainer *tr, int k) { return k == 0 ? &tr->tape : &tr->more[k - 1]; }

void train_init_grid(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtGrid *grid,
                     const FtBatchSource *train, const FtBatchSource *val)
{
    memset(tr, 0, sizeof *tr);
    tr->cfg = cfg;
    tr->model = model;
    tr->grid = grid;
    tr->train = *train;
    if (val) {
        tr->val = *val;
        tr->has_val = true;
    }
    tr->B = (int)cfg->train.batch;
    tr->T = train_seq_len(cfg);
    tr->micro = (int)cfg->parallel.microbatches;
    tr->schedule = (int)cfg->parallel.schedule;
    tr->data_width = 1;
    tr->emb_comm = MPI_COMM_NULL;
    if (grid) {
        if (model->sh.tp != grid->tp || model->sh.tp_rank != grid->tp_rank ||
            model->sh.pp != grid->pp || model->sh.pp_rank != grid->pp_rank ||
            model->sh.ep != grid->ep || model->sh.ep_rank != grid->ep_rank)
            FT_DIE("train: the model's shard (tp %d/%d, pp %d/%d, ep %d/%d) is not this rank's "
                   "grid place (tp %d/%d, pp %d/%d, ep %d/%d)", model->sh.tp_rank, model->sh.tp,
                   model->sh.pp_rank, model->sh.pp, model->sh.ep_rank, model->sh.ep,
                   grid->tp_rank, grid->tp, grid->pp_rank, grid->pp, grid->ep_rank, grid->ep);
        tr->data_rank = grid->dp_rank * grid->ep + grid->ep_rank;
        tr->data_width = grid->dp * grid->ep;
        tr->c_world = comm_create_mpi(grid->world, "world");
        tr->c_replica = comm_create_mpi(grid->replica_comm, "replica");
        if (grid->tp > 1) tr->c_tp = comm_create_mpi(grid->tp_comm, "tp");
        if (grid->pp > 1) {
            tr->c_pp = comm_create_mpi(grid->pp_comm, "pp");
            int ends = grid->pp_rank == 0 || grid->pp_rank == grid->pp - 1;
            FT_CHECK_MPI(MPI_Comm_split(grid->pp_comm, ends ? 0 : MPI_UNDEFINED, grid->pp_rank,
                                        &tr->emb_comm));
            if (ends) tr->c_emb = comm_create_mpi(tr->emb_comm, "emb");
        }
        if (grid->ep > 1) tr->c_ep = comm_create_mpi(grid->ep_comm, "ep");
        if (grid->dp > 1 && model->cfg.E) tr->c_edp = comm_create_mpi(grid->dp_comm, "dp.experts");
        if (grid->dp * grid->ep > 1) {
            tr->c_dp = comm_create_mpi(grid->dense_dp_comm, "dp");
            tr->buckets = buckets_create(model, cfg->parallel.bucket_mb);
        }
    }
    int pp = model->sh.pp, stage = model->sh.pp_rank;
    tr->nslots = pipeline_slots(tr->schedule, pp, stage, tr->micro);
    optim_cfg_from_deck(cfg, &tr->opt);
    FtTapeOpts o = {.B = tr->B, .T = tr->T, .backward = true,
                    .loss_scale = 1.0 / ((double)tr->micro * tr->data_width),
                    .ac_every = (int)cfg->train.ac_every};
    o.ac = cfg->train.ac == FT_AC_CHOICE_FULL    ? FT_AC_FULL
           : cfg->train.ac == FT_AC_CHOICE_EVERY ? FT_AC_EVERY
                                                 : FT_AC_OFF;
    if (tr->nslots > 1) {
        tr->more = calloc((size_t)tr->nslots - 1, sizeof *tr->more);
        FT_ASSERT(tr->more);
    }
    for (int k = 0; k < tr->nslots; k++) model_build_tape(model, &o, slot(tr, k));
    tr->step_flops = tr->micro * tape_flops(&tr->tape, 0, tr->tape.ne, false);
    timeline_init(&tr->tl, 1 << 16);
    tr->ex = (FtExec){.stats = &tr->stats, .tl = &tr->tl, .tp = tr->c_tp, .pp = tr->c_pp,
                      .ep = tr->c_ep};
}

void train_free(FtTrainer *tr)
{
    for (int k = 0; k < tr->nslots; k++) tape_free(slot(tr, k));
    free(tr->more);
    buckets_free(tr->buckets);
    comm_destroy(tr->c_tp), comm_destroy(tr->c_pp), comm_destroy(tr->c_dp);
    comm_destroy(tr->c_ep), comm_destroy(tr->c_edp);
    comm_destroy(tr->c_emb), comm_destroy(tr->c_replica), comm_destroy(tr->c_world);
    if (tr->emb_comm != MPI_COMM_NULL) MPI_Comm_free(&tr->emb_comm);
    timeline_free(&tr->tl);
    memset(tr, 0, sizeof *tr);
}

/* ---- the step ------------------------------------------------------------------------------ */

/* Sum over the job of this rank's share of a value held on the last stage (counted once per
 * data rank: tp rank 0), in rank order so every rank gets the same bits. */
static double sum_last_stage(FtTrainer *tr, double v, bool count_here)
{
    if (!tr->grid) return v;
    bool mine = tr->model->last && tr->grid->tp_rank == 0 && count_here;
    double t0 = MPI_Wtime();
    double s = comm_sum_f64(tr->c_world, mine ? v : 0.0);
    timeline_add(&tr->tl, FT_TL_OTHER, t0, MPI_Wtime());
    return s;
}

/* L2 norm of the gradients of the whole model: each parameter counted once (tensor-parallel
 * copies of replicated tensors, the last stage's copy of the tied wte and the expert-parallel
 * copies of dense tensors left out). */
static double grad_norm(FtTrainer *tr)
{
    const FtModel *m = tr->model;
    double total = 0;
    for (int i = 0; i < FT_NPARAM_TENSORS; i++) {
        const FtParamInfo *p = &m->p[i];
        if (!p->size) continue;
        if (p->tp_split == FT_SPLIT_NONE && m->sh.tp_rank != 0) continue;
        if (i == FT_P_WTE && !m->first) continue;
        if (!p->expert && m->sh.ep_rank != 0) continue;
        double s = 0;
        FtOpCall c = {.in = {m->grads + p->offset}, .out = {&s}, .d = {(long long)p->size}};
        exec_op(FT_OP_GRADNORM, FT_FWD, &c, &tr->stats);
        total += s;
    }
    if (tr->grid) {
        double t0 = MPI_Wtime();
        total = comm_sum_f64(tr->c_replica, total);
        timeline_add(&tr->tl, FT_TL_OTHER, t0, MPI_Wtime());
    }
    return sqrt(total);
}

static void fetch(FtTrainer *tr, const FtBatchSource *src, FtTape *tp, uint64_t first)
{
    src->fetch(src->ctx, first, tr->B, tp->t[tp->tokens].data, tp->t[tp->targets].data);
}

void train_step(FtTrainer *tr, FtStepInfo *info)
{
    double t0 = MPI_Wtime();
    FtModel *m = tr->model;
    model_zero_grad(m);
    int M = tr->micro;
    FtPipeOp *ops = malloc(sizeof *ops * 2 * (size_t)M);
    FT_ASSERT(ops);
    pipeline_schedule(tr->schedule, m->sh.pp, m->sh.pp_rank, M, ops);
    double loss = 0;
    for (int i = 0; i < 2 * M; i++) {
        FtTape *tp = slot(tr, ops[i].mb % tr->nslots);
        if (ops[i].fwd) {
            uint64_t first = tr->cursor + ((uint64_t)tr->data_rank * M + ops[i].mb) * tr->B;
            fetch(tr, &tr->train, tp, first);
            exec_run_ctx(&tr->ex, tp, 0, tp->fwd_end);
            if (m->last) loss += *(float *)tp->t[tp->loss].data;
        } else {
            bool lastmb = ops[i].mb == M - 1;
            tr->ex.grads_ready = lastmb && tr->buckets ? grads_ready : NULL;
            tr->ex.grads_arg = tr;
            exec_run_ctx(&tr->ex, tp, tp->fwd_end, tp->ne);
            tr->ex.grads_ready = NULL;
        }
    }
    free(ops);
    exec_finish(&tr->ex);
    grads_finish(tr);
    double norm = grad_norm(tr);
    double lr = optim_lr(&tr->opt, m->step);
    optim_adamw_step(m, &tr->opt, lr, norm, &tr->stats);
    tr->cursor += (uint64_t)tr->B * M * tr->data_width;
    info->step = m->step;
    info->loss = sum_last_stage(tr, loss, true) / ((double)M * tr->data_width);
    info->lr = lr;
    info->grad_norm = norm;
    double t1 = MPI_Wtime();
    info->seconds = t1 - t0;
    timeline_add(&tr->tl, FT_TL_STEP, t0, t1);
}

double train_eval(FtTrainer *tr, int n)
{
    if (!tr->has_val || n <= 0) return NAN;
    double s = 0;
    FtTape *tp = &tr->tape;
    for (int k = 0; k < n; k++) {
        fetch(tr, &tr->val, tp, (uint64_t)k * tr->B);
        exec_run_ctx(&tr->ex, tp, 0, tp->fwd_end);
        if (tr->model->last) s += *(float *)tp->t[tp->loss].data;
    }
    exec_finish(&tr->ex);
    return sum_last_stage(tr, s, tr->data_rank == 0) / n;
}

double train_report_waiting(const FtTrainer *tr, FILE *out)
{
    char label[48] = "";
    MPI_Comm comm = MPI_COMM_SELF;
    if (tr->grid) {
        snprintf(label, sizeof label, "dp %d pp %d ep %d tp %d", tr->grid->dp_rank,
                 tr->grid->pp_rank, tr->grid->ep_rank, tr->grid->tp_rank);
        comm = tr->grid->world;
    }
    return timeline_report(&tr->tl, comm, label, out);
}

void train_run(FtTrainer *tr, FtTrainSummary *s)
{
    const FtConfig *cfg = tr->cfg;
    long long steps = cfg->train.steps, skip = cfg->train.rate_skip;
    int nval = tr->has_val ? (int)cfg->train.val_batches : 0;
    memset(s, 0, sizeof *s);
    s->ok = true;
    s->val_loss = NAN;
    double timed = 0;
    long long ntimed = 0;
    double tokens = (double)tr->B * tr->T * tr->micro * tr->data_width;
    long long i0 = tr->model->step; /* checkpoint hook: a resumed run continues after its step */
    log_info("model: %zu parameters on this rank (%.2f M), L %d, NH %d, C %d, V %d (Vp %d), T %d; "
             "tape %d entries x %d slot%s, activations %.1f MiB; %.3f GFLOP per step per rank",
             tr->model->nparams, tr->model->nparams / 1e6, tr->model->cfg.L, tr->model->cfg.NH,
             tr->model->cfg.C, tr->model->cfg.V, tr->model->cfg.Vp, tr->T, tr->tape.ne,
             tr->nslots, tr->nslots == 1 ? "" : "s", tr->nslots * tr->tape.arena_bytes / 1048576.0,
             tr->step_flops / 1e9);
    timeline_reset(&tr->tl);
    for (long long i = 0; i0 + i < steps; i++) { /* checkpoint hook: i0 + */
        if (i == skip) timeline_reset(&tr->tl); /* warm-up steps out of the waiting fractions */
        FtStepInfo st;
        train_step(tr, &st);
        if (i == 0) s->first_loss = st.loss;
        s->last_loss = st.loss;
        s->steps = st.step;
        if (i >= skip) {
            timed += st.seconds;
            ntimed++;
        }
        log_info("step %5lld/%lld | loss %.4f | lr %.3e | norm %.4f | %8.1f ms | %9.0f tok/s",
                 st.step, steps, st.loss, st.lr, st.grad_norm, 1e3 * st.seconds,
                 tokens / st.seconds);
        if (!isfinite(st.loss) || !isfinite(st.grad_norm)) {
            log_error("step %lld: the loss is %g and the gradient norm %g: stopping", st.step,
                      st.loss, st.grad_norm);
            s->ok = false;
            break;
        }
        bool last = i0 + i == steps - 1; /* checkpoint hook: i0 + */
        if (nval && (last || (cfg->train.val_every > 0 && st.step % cfg->train.val_every == 0))) {
            s->val_loss = train_eval(tr, nval);
            log_info("step %5lld/%lld | val loss %.4f (%d x %d sequences)", st.step, steps,
                     s->val_loss, nval, tr->B);
            if (!isfinite(s->val_loss)) s->ok = false;
        }
        if (tr->on_step) tr->on_step(tr->on_step_ctx, tr, &st, last); /* checkpoint hook */
    }
    if (ntimed) {
        s->mean_ms = 1e3 * timed / ntimed;
        s->tokens_per_s = tokens * ntimed / timed;
        s->gflops = tr->step_flops * ntimed / timed / 1e9;
    }
}
