/* model.h: the GPT-2 model: configuration, parameter layout, initialization, and the tape
 * builder (the forward and backward of one micro-batch as a list of op invocations).
 *
 * GPT-2 as in Radford et al. 2019 / llm.c: learned token and position embeddings, pre-LN
 * blocks (LN -> causal multi-head attention -> residual, LN -> GELU(tanh) MLP of width 4C ->
 * residual), final LayerNorm, LM head tied to the token embedding, vocabulary padded to Vp
 * (a multiple of model.vocab_pad; logits and the loss exclude the padding).
 *
 * Parameters live in one allocation carved into 16 named tensors in llm.c's order (wte, wpe,
 * ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw,
 * lnfb); weights are (OC, C) row-major. The 12 per-block tensors are stacked over layers
 * (L, ...), so a pipeline stage's layer range is a contiguous slice of each. Gradients and the
 * AdamW moments m, v use the same layout, in the same allocation.
 *
 * Sharding (FtShard): a model may hold only this rank's part. Pipeline stage s of pp holds
 * layers [s L/pp, (s+1) L/pp); wte on the first and the last stage (tied: the encoder and the
 * LM head; the two copies' gradients are summed by the train loop), wpe on the first, lnf on
 * the last; a tensor a stage does not hold has size 0. Tensor parallelism (Megatron-LM): qkv
 * and fc are column-parallel (this rank's heads / MLP columns: qkvw holds, for each of q, k, v,
 * the rows of heads [r NH/tp, (r+1) NH/tp)), attproj and fcproj row-parallel (their input
 * columns), biases of row-parallel layers, LayerNorms and the embeddings replicated.
 * FtParamInfo.rows/cols are this rank's shape of one layer's slice. The unsharded dense model
 * (tp = pp = 1) is the one llm.c reads and writes.
 *
 * Mixture of experts (cfg.E > 0): every block's MLP becomes E expert MLPs (each GELU, width 4C)
 * behind a router (linear C -> E, no bias, softmax, top K; see ops.h MOE_ROUTE for the
 * tie-break, capacity and auxiliary loss). fcw, fcb, fcprojw, fcprojb gain an expert axis
 * ((L, El, 4C, C), ...) and routerw (L, E, C) appears. Expert parallelism: ep rank q holds
 * experts [q El, (q+1) El), El = E / ep (FtParamInfo.expert: split over ep, so reduced over dp
 * only); everything else is replicated over ep. Tensor parallelism splits each expert like the
 * dense MLP. Capacity is per micro-batch of each data rank (GShard's groups): a layout routes,
 * drops and combines exactly the tokens the single-rank run does. */
#ifndef FTLLM_MODEL_H
#define FTLLM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftllm/deck.h"
#include "ftllm/tape.h"

enum ft_param_id {
    FT_P_WTE,      /* (Vp, C) */
    FT_P_WPE,      /* (maxT, C) */
    FT_P_LN1W,     /* (L, C) */
    FT_P_LN1B,     /* (L, C) */
    FT_P_QKVW,     /* (L, 3C, C) */
    FT_P_QKVB,     /* (L, 3C) */
    FT_P_ATTPROJW, /* (L, C, C) */
    FT_P_ATTPROJB, /* (L, C) */
    FT_P_LN2W,     /* (L, C) */
    FT_P_LN2B,     /* (L, C) */
    FT_P_FCW,      /* (L, 4C, C) */
    FT_P_FCB,      /* (L, 4C) */
    FT_P_FCPROJW,  /* (L, C, 4C) */
    FT_P_FCPROJB,  /* (L, C) */
    FT_P_LNFW,     /* (C) */
    FT_P_LNFB,     /* (C) */
    FT_P_ROUTERW,  /* (L, E, C): the MoE router; absent (size 0) in a dense model */
    FT_NPARAM_TENSORS
};

enum ft_tp_split { FT_SPLIT_NONE, FT_SPLIT_ROWS, FT_SPLIT_COLS };

typedef struct ft_gpt2_config {
    int L, NH, C, V, Vp, maxT;
    int E, K;               /* experts per MoE block (0: dense) and top-k */
    double capacity_factor; /* expert capacity, see model_moe_capacity; 0: no limit */
    double aux_coef;        /* weight of the load-balance loss */
} FtGpt2Config;

/* Which part of the model this rank holds: tensor-parallel rank of tp, pipeline stage of pp,
 * expert-parallel rank of ep (ep 0 is read as 1). */
typedef struct ft_shard {
    int tp, tp_rank;
    int pp, pp_rank;
    int ep, ep_rank;
} FtShard;

typedef struct ft_param_info {
    const char *name;
    size_t offset, size; /* elements, in the whole allocation / this rank's tensor (0: absent) */
    bool per_layer;      /* stacked over this stage's layers: layer l0+j starts at
                            offset + j * size / nl */
    bool decay;          /* AdamW weight decay applies (matrices and embeddings, not biases/LN) */
    int rows, cols;      /* this rank's shape of one layer's slice (cols 1 for vectors) */
    enum ft_tp_split tp_split; /* ROWS: output rows split over tp; COLS: input columns */
    bool expert;               /* MoE expert weights: split over ep (not replicated there) */
} FtParamInfo;

/* Up to 4 dimensions of a tensor's global dataset and this rank's hyperslab of it. */
#define FT_SLAB_MAX_DIMS 4
typedef struct ft_slab {
    int ndims;
    size_t gshape[FT_SLAB_MAX_DIMS], offset[FT_SLAB_MAX_DIMS], count[FT_SLAB_MAX_DIMS];
    bool writer; /* this rank writes it (the first of the tp / pp / ep copies of a replicated
                    tensor) */
} FtSlab;

#define FT_MODEL_BUFFERS 8

typedef struct ft_model {
    FtGpt2Config cfg;
    FtShard sh;
    int l0, nl;         /* this stage's layers [l0, l0 + nl) */
    int El, e0;         /* MoE: this rank's experts [e0, e0 + El) (0, 0 when dense) */
    bool first, last;   /* first / last pipeline stage */
    FtParamInfo p[FT_NPARAM_TENSORS];
    size_t nparams;
    const FtBackend *be; /* where the buffers live */
    float *mem; /* one allocation of FT_MODEL_BUFFERS buffers of `stride` floats (nparams
                   rounded up to 64 bytes), the buffers below */
    size_t stride;
    float *params, *grads, *m, *v; /* parameters, the last step's gradients, AdamW moments */
    float *params_new, *m_new, *v_new; /* the optimizer's outputs (current after model_commit) */
    float *grads_alt; /* the second gradient bank: micro-batches alternate between the two */
    long long step;   /* optimizer steps taken */
} FtModel;

/* The model shape from the deck. Returns 0 (no failure mode beyond the deck's own checks). */
void model_config_from_deck(const FtConfig *cfg, FtGpt2Config *mc);

/* Expert capacity of a micro-batch of N tokens: ceil(capacity_factor N K / E), at least 1 and
 * at most N (no limit when capacity_factor is 0). */
int model_moe_capacity(const FtGpt2Config *mc, long long N);

/* Lays out and allocates (zeroed) parameters, gradients and moments of the whole model. */
void model_create(FtModel *m, const FtGpt2Config *mc);
/* The same for this rank's shard (sh NULL: the whole model). The caller checks divisibility
 * (deck_check: heads % tp, layers % pp, experts % ep); violations here are fatal. */
void model_create_sharded(FtModel *m, const FtGpt2Config *mc, const FtShard *sh);
/* The same with the buffers on backend be. Initialization, llm.c files and checkpoints read
 * and write them from the host: a device backend stages them (the CPU's is the host). */
void model_create_on(FtModel *m, const FtGpt2Config *mc, const FtShard *sh, const FtBackend *be);
void model_free(FtModel *m);

/* GPT-2 initialization: N(0, 0.02) weights, N(0, 0.02/sqrt(2L)) for the residual projections,
 * zero biases, LayerNorm weight 1 and bias 0, padded wte rows 0. Deterministic in seed, and
 * each shard gets exactly its part of the whole model's values (each tensor is drawn whole,
 * in its global order, and this rank's hyperslab kept). */
void model_init_random(FtModel *m, uint64_t seed);

/* Start of parameter tensor id (global layer l in [l0, l0 + nl), or -1 for an unstacked
 * tensor) in base (params, grads, m or v). */
float *model_tensor(const FtModel *m, float *base, int id, int l);

/* The global dataset shape of tensor id and this rank's hyperslab of it, chosen so that every
 * shard is one hyperslab: qkvw is (L, 3, C, C) and qkvb (L, 3, C) (q, k, v rows; the same bytes
 * as llm.c's (L, 3C, C)), attprojw (L, C, C), fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C),
 * per-layer vectors (L, C), wte (Vp, C), wpe (maxT, C), lnf (C); MoE: fcw (L, E, 4C, C), fcb
 * (L, E, 4C), fcprojw (L, E, C, 4C), fcprojb (L, E, C) with this ep rank's experts, routerw
 * (L, E, C). The slab's elements, in
 * row-major order, are this rank's tensor (model_tensor(m, base, id, l0 or -1), size
 * p[id].size). A tensor this stage does not hold has ndims 0 and writer false. */
void model_param_slab(const FtModel *m, int id, FtSlab *s);

/* Copies this rank's hyperslab of tensor id out of the whole tensor `global` (llm.c layout)
 * into `local` (p[id].size elements). */
void model_slab_extract(const FtModel *m, int id, const float *global, float *local);

/* Sets this shard's parameters from the whole (unsharded) model `full`. */
void model_copy_from_full(FtModel *m, const FtModel *full);

/* Makes the optimizer's outputs (params_new, m_new, v_new) the current state and counts the
 * step; the old state's buffers take the next step's outputs. Tapes then need model_tape_bind. */
void model_commit(FtModel *m);

/* Copies the state a step leaves behind (parameters, AdamW moments, the step count) from src to
 * dst: two models of the same configuration and shard, one of them in host memory. This is the
 * staging of a device model: initialization, llm.c files and checkpoints read and write a host
 * model, which is copied to the device model before training and back before writing. */
void model_copy_state(FtModel *dst, const FtModel *src);

/* Activation checkpointing of the tape. */
typedef enum ft_ac { FT_AC_OFF, FT_AC_FULL, FT_AC_EVERY } FtAcMode;

typedef struct ft_tape_opts {
    int B, T;          /* micro-batch shape (T <= maxT) */
    FtAcMode ac;       /* segments of 1 block (FULL) or ac_every blocks (EVERY) */
    int ac_every;
    bool backward;     /* false: forward only (evaluation, sampling) */
    double loss_scale; /* d(objective)/d(mean loss of this micro-batch): 1/microbatches */
} FtTapeOpts;

/* Builds the tape of one micro-batch on this model's parameters and gradients and allocates
 * its arena. Every parameter gradient is written by exactly one entry, as its earlier sum
 * (role FT_TR_GRAD_PREV) plus this micro-batch's contribution (role FT_TR_GRAD); bound to
 * grads and no earlier sum until model_tape_bind says otherwise. Recompute entries and their
 * forward twins point at each other (FtTapeEntry.twin). */
void model_build_tape(const FtModel *m, const FtTapeOpts *o, FtTape *tp);

/* Points tp's model-state tensors at the model's current buffers: parameters, moments, the
 * optimizer's outputs, gradients written into `grads` (a bank: m->grads or m->grads_alt) on
 * top of `grads_prev` (the other bank, or NULL: the first micro-batch of a step). */
void model_tape_bind(const FtModel *m, FtTape *tp, float *grads, const float *grads_prev);

/* A splitmix64 stream (initialization, sampling): deterministic, no global state. */
uint64_t model_rng_next(uint64_t *state);
double model_rng_uniform(uint64_t *state); /* [0, 1) */
double model_rng_normal(uint64_t *state);

#endif
