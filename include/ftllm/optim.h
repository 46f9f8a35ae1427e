/* optim.h: the optimizer step: global gradient norm, clipping, learning-rate schedule, AdamW.
 *
 * AdamW (Loshchilov & Hutter 2019): decoupled weight decay, applied to matrices and embeddings
 * only (FtParamInfo.decay), not to biases and LayerNorm parameters. Clipping scales the
 * gradients by grad_clip / (norm + 1e-6) when the norm exceeds grad_clip (as
 * torch.nn.utils.clip_grad_norm_), folded into the AdamW kernel rather than a separate pass.
 * Schedule: linear warm-up over `warmup` steps to lr, then constant, cosine or linear decay to
 * lr * lr_min_frac at the last step. The kernels are op kinds (GRADNORM, ADAMW) on a tape
 * that the executor runs. */
#ifndef FTLLM_OPTIM_H
#define FTLLM_OPTIM_H

#include <stdbool.h>

#include "ftllm/deck.h"
#include "ftllm/exec.h"
#include "ftllm/model.h"

typedef struct ft_optim_cfg {
    double lr, lr_min_frac;
    long long warmup, steps;
    int schedule; /* enum ft_schedule */
    double beta1, beta2, eps, weight_decay, grad_clip;
} FtOptimCfg;

void optim_cfg_from_deck(const FtConfig *cfg, FtOptimCfg *o);

/* Learning rate of optimizer step `step` (0-based). */
double optim_lr(const FtOptimCfg *o, long long step);

/* Whether this rank's copy of parameter tensor i counts in the global gradient norm: each
 * parameter once (tensor-parallel copies of replicated tensors, the last stage's copy of the
 * tied wte and the expert-parallel copies of dense tensors are left out). */
bool optim_norm_counts(const FtModel *m, int i);

/* The optimizer as a tape, run by the executor like the model's: entries [0, fwd_end) are one
 * GRADNORM per counted tensor (a double each, over fixed chunks: optim_tape_sumsq adds them in
 * order); entries [fwd_end, ne) one ADAMW per tensor, reading gradients, parameters and moments
 * and writing the new ones into the model's *_new buffers (made current by model_commit), so
 * every entry can run again from its inputs. Bound like a model tape (model_tape_bind). */
void optim_build_tape(const FtModel *m, FtTape *tp);
double optim_tape_sumsq(const FtTape *tp);

/* Sets the AdamW entries' scalars for the model's next step (m->step + 1): learning rate lr,
 * clipping by grad_norm, bias corrections, each tensor's weight decay. */
void optim_tape_set(FtTape *tp, const FtModel *m, const FtOptimCfg *o, double lr,
                    double grad_norm);

#endif
