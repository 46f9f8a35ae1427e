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
 * (L, ...), so a pipeline stage's layer range is a contiguous slice of each. Each tensor also
 * records how tensor parallelism would split it (Megatron: qkv/fc column-parallel = split OC,
 * attproj/fcproj row-parallel = split C, the rest replicated); the sharding itself is a later
 * issue. Gradients and the AdamW moments m, v use the same layout, in the same allocation. */
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
    FT_NPARAM_TENSORS
};

enum ft_tp_split { FT_SPLIT_NONE, FT_SPLIT_ROWS, FT_SPLIT_COLS };

typedef struct ft_gpt2_config {
    int L, NH, C, V, Vp, maxT;
} FtGpt2Config;

typedef struct ft_param_info {
    const char *name;
    size_t offset, size; /* elements, in the whole allocation / whole tensor */
    bool per_layer;      /* stacked (L, ...): layer l's slice starts at offset + l * size / L */
    bool decay;          /* AdamW weight decay applies (matrices and embeddings, not biases/LN) */
    int rows, cols;      /* shape of one layer's slice (cols 1 for vectors) */
    enum ft_tp_split tp_split;
} FtParamInfo;

typedef struct ft_model {
    FtGpt2Config cfg;
    FtParamInfo p[FT_NPARAM_TENSORS];
    size_t nparams;
    float *mem; /* one allocation: params | grads | m | v */
    float *params, *grads, *m, *v;
    long long step; /* optimizer steps taken */
} FtModel;

/* The model shape from the deck. Returns 0 (no failure mode beyond the deck's own checks). */
void model_config_from_deck(const FtConfig *cfg, FtGpt2Config *mc);

/* Lays out and allocates (zeroed) parameters, gradients and moments. */
void model_create(FtModel *m, const FtGpt2Config *mc);
void model_free(FtModel *m);

/* GPT-2 initialization: N(0, 0.02) weights, N(0, 0.02/sqrt(2L)) for the residual projections,
 * zero biases, LayerNorm weight 1 and bias 0, padded wte rows 0. Deterministic in seed. */
void model_init_random(FtModel *m, uint64_t seed);

/* Start of parameter tensor id (layer l, or -1 for an unstacked tensor) in base (params,
 * grads, m or v). */
float *model_tensor(const FtModel *m, float *base, int id, int l);

void model_zero_grad(FtModel *m);

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
 * its arena. */
void model_build_tape(const FtModel *m, const FtTapeOpts *o, FtTape *tp);

/* A splitmix64 stream (initialization, sampling): deterministic, no global state. */
uint64_t model_rng_next(uint64_t *state);
double model_rng_uniform(uint64_t *state); /* [0, 1) */
double model_rng_normal(uint64_t *state);

#endif
