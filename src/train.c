/* train.c: the training step and loop (train.h).
 *
 * Key decisions:
 *  - The tape is built once; each micro-batch copies its tokens into the tape's input tensors
 *    and the executor runs the forward and backward ranges. Gradient accumulation over
 *    micro-batches is the parameter gradients' accumulate flag plus a loss scale of
 *    1/microbatches folded into the cross-entropy backward.
 *  - Validation reuses the training tape's forward range (same shapes, no second arena).
 *  - Rates leave out the first train.rate_skip steps; the model FLOP count is the tape's
 *    forward + backward FLOPs without AC recomputation (so AC shows up as a lower rate). */
#include "ftllm/train.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "ftllm/log.h"

int train_seq_len(const FtConfig *cfg)
{
    return (int)(cfg->train.seq_len > 0 ? cfg->train.seq_len : cfg->model.seq_len);
}

void train_init(FtTrainer *tr, const FtConfig *cfg, FtModel *model, const FtBatchSource *train,
                const FtBatchSource *val)
{
    memset(tr, 0, sizeof *tr);
    tr->cfg = cfg;
    tr->model = model;
    tr->train = *train;
    if (val) {
        tr->val = *val;
        tr->has_val = true;
    }
    tr->B = (int)cfg->train.batch;
    tr->T = train_seq_len(cfg);
    tr->micro = (int)cfg->parallel.microbatches;
    optim_cfg_from_deck(cfg, &tr->opt);
    FtTapeOpts o = {.B = tr->B, .T = tr->T, .backward = true, .loss_scale = 1.0 / tr->micro,
                    .ac_every = (int)cfg->train.ac_every};
    o.ac = cfg->train.ac == FT_AC_CHOICE_FULL    ? FT_AC_FULL
           : cfg->train.ac == FT_AC_CHOICE_EVERY ? FT_AC_EVERY
                                                 : FT_AC_OFF;
    model_build_tape(model, &o, &tr->tape);
    tr->step_flops = tr->micro * tape_flops(&tr->tape, 0, tr->tape.ne, false);
}

void train_free(FtTrainer *tr)
{
    tape_free(&tr->tape);
    memset(tr, 0, sizeof *tr);
}

static float run_forward(FtTrainer *tr, const FtBatchSource *src, uint64_t first, bool backward)
{
    FtTape *tp = &tr->tape;
    src->fetch(src->ctx, first, tr->B, tp->t[tp->tokens].data, tp->t[tp->targets].data);
    exec_run(tp, 0, tp->fwd_end, &tr->stats);
    if (backward) exec_run(tp, tp->fwd_end, tp->ne, &tr->stats);
    return *(float *)tp->t[tp->loss].data;
}

void train_step(FtTrainer *tr, FtStepInfo *info)
{
    double t0 = omp_get_wtime();
    FtModel *m = tr->model;
    model_zero_grad(m);
    double loss = 0;
    for (int k = 0; k < tr->micro; k++) {
        loss += run_forward(tr, &tr->train, tr->cursor, true);
        tr->cursor += (uint64_t)tr->B;
    }
    /* here: the data-parallel gradient reduction (a no-op on one rank) */
    double norm = optim_grad_norm(m, &tr->stats);
    double lr = optim_lr(&tr->opt, m->step);
    optim_adamw_step(m, &tr->opt, lr, norm, &tr->stats);
    info->step = m->step;
    info->loss = loss / tr->micro;
    info->lr = lr;
    info->grad_norm = norm;
    info->seconds = omp_get_wtime() - t0;
}

double train_eval(FtTrainer *tr, int n)
{
    if (!tr->has_val || n <= 0) return NAN;
    double s = 0;
    for (int k = 0; k < n; k++) s += run_forward(tr, &tr->val, (uint64_t)k * tr->B, false);
    return s / n;
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
    double tokens = (double)tr->B * tr->T * tr->micro;
    long long i0 = tr->model->step; /* checkpoint hook: a resumed run continues after its step */
    log_info("model: %zu parameters (%.2f M), L %d, NH %d, C %d, V %d (Vp %d), T %d; tape %d "
             "entries, activations %.1f MiB; %.3f GFLOP per step",
             tr->model->nparams, tr->model->nparams / 1e6, tr->model->cfg.L, tr->model->cfg.NH,
             tr->model->cfg.C, tr->model->cfg.V, tr->model->cfg.Vp, tr->T, tr->tape.ne,
             tr->tape.arena_bytes / 1048576.0, tr->step_flops / 1e9);
    for (long long i = 0; i0 + i < steps; i++) { /* checkpoint hook: i0 + */
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
