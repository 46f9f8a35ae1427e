/* tape.h: the tape: the ordered list of op invocations of one micro-batch's forward and
 * backward on this rank, over a table of named tensors.
 *
 * Everything that runs is on the tape, including activation-checkpointing recomputation
 * (entries with phase FT_PH_RECOMPUTE: the segment's forward ops again, from its saved input,
 * just before the segment's backward) and markers (op kind FT_OP_MARK) for segment boundaries
 * and for the points where communication goes (tensor-parallel all-reduces, pipeline sends and
 * receives between stages, expert-parallel all-to-alls of MoE token rows, a layer's gradients
 * being complete for data-parallel reduction):
 * no-ops on one rank; the executor (exec.h) starts and waits for the messages there. The tape is built once (model_build_tape) and run many times
 * by the executor (exec.h), the one place ops are launched.
 *
 * Tensors: each has a name ("l3.qkv", "d.l3.fcw"), a type, an element count and storage that is
 * either outside the tape (parameters, gradients: views into the model's one allocation), in the
 * tape's arena, or aliased to another tensor's storage (activations inside checkpointed
 * segments share one segment's worth of memory; that is what AC saves). */
#ifndef FTLLM_TAPE_H
#define FTLLM_TAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ftllm/dtype.h"
#include "ftllm/ops.h"


typedef enum ft_tensor_role {
    FT_TR_PARAM,    /* a view of parameters (outside the tape) */
    FT_TR_GRAD,     /* a view of parameter gradients (outside; accumulated, zeroed per step) */
    FT_TR_ACT,      /* an activation (arena) */
    FT_TR_ACT_GRAD, /* an activation's gradient (arena) */
    FT_TR_IO,       /* tokens, targets, loss (arena; the train loop fills / reads them) */
} FtTensorRole;

typedef struct ft_tensor {
    char name[40];
    FtDtype dtype;
    FtTensorRole role;
    size_t n;    /* elements */
    void *data;  /* set by tape_alloc for arena tensors */
    int alias;   /* -1, or the tensor whose storage this one shares */
    int layer;   /* -1 outside the transformer blocks */
} FtTensor;

typedef enum ft_phase { FT_PH_FWD, FT_PH_BWD, FT_PH_RECOMPUTE } FtPhase;

typedef enum ft_mark {
    FT_MARK_NONE,
    FT_MARK_SEG_BEGIN,   /* forward of an AC segment begins; its input tensor is saved */
    FT_MARK_SEG_END,
    FT_MARK_RECOMPUTE,   /* backward of a segment begins with its recomputation */
    FT_MARK_COMM_TP,     /* tensor-parallel all-reduce (sum, in place) of tensor in[0] = out[0]:
                            the partial output of a row-parallel layer (forward) or the partial
                            input gradient of a column-parallel one (backward) */
    FT_MARK_COMM_GRADS,  /* a layer's parameter gradients are complete for this micro-batch
                            (layer -1: the final LayerNorm's, on the last pipeline stage) */
    FT_MARK_PP_RECV,     /* pipeline: receive out[0]; dir FT_FWD: the activation from the
                            previous stage, FT_BWD: its gradient from the next stage */
    FT_MARK_PP_SEND,     /* pipeline: send in[0]; FT_FWD: to the next stage, FT_BWD: to the
                            previous one */
    FT_MARK_EP_TO_EXPERTS, /* expert parallelism: all-to-all(v) of the packed token rows in[0]
                            (row width d[0]; in[1]: rows per expert on this side, E ints) to the
                            ranks holding their experts, into out[0] (by source rank, then local
                            expert: in[2] or out[1], ep x El ints); when out[1] >= 0 the row
                            counts are exchanged first into out[1]. Forward: dispatch; backward:
                            the combine's gradient */
    FT_MARK_EP_TO_SOURCES, /* the reverse all-to-all(v): rows in[0] on the experts' side (counts
                            in[2]) back to their source ranks, into out[0] (counts in[1]).
                            Forward: the experts' outputs; backward: their input gradients. With
                            ep 1 both exchanges are no-ops: out[0] shares in[0]'s storage */
} FtMark;

typedef struct ft_tape_entry {
    FtOpKind kind;
    FtOpDir dir;
    FtPhase phase;
    FtMark mark;   /* FT_OP_MARK entries only */
    int layer;     /* -1 outside the blocks */
    int seg;       /* AC segment, -1 when not checkpointed */
    const char *label;
    int in[FT_OP_MAX_IN], out[FT_OP_MAX_OUT]; /* tensor ids, -1 = none */
    long long d[FT_OP_MAX_DIMS];
    double x[FT_OP_MAX_X];
    unsigned acc; /* bit i: out[i] accumulates */
} FtTapeEntry;

typedef struct ft_tape {
    FtTensor *t;
    int nt, cap_t;
    FtTapeEntry *e;
    int ne, cap_e;
    int fwd_end; /* entries [0, fwd_end) are the forward, [fwd_end, ne) the backward */
    void *arena;
    size_t arena_bytes;
    int B, T;
    /* tensor ids the train loop uses */
    int tokens, targets, logits, probs, loss;
} FtTape;

void tape_init(FtTape *tp);
void tape_free(FtTape *tp);

/* Declares a tensor; data NULL = arena storage (allocated by tape_alloc). Returns its id. */
int tape_tensor(FtTape *tp, const char *name, FtDtype dt, FtTensorRole role, size_t n,
                void *data, int layer);
/* Declares a tensor sharing the storage of tensor `of` (n <= that tensor's n). */
int tape_alias(FtTape *tp, const char *name, int of, int layer);
/* Appends an entry (copied). */
void tape_push(FtTape *tp, const FtTapeEntry *e);
/* Allocates the arena (zeroed) and resolves aliases. */
void tape_alloc(FtTape *tp);

/* The op call of entry i, with tensor ids resolved to pointers. */
void tape_call(const FtTape *tp, int i, FtOpCall *c);

/* FLOPs of entries [begin, end); recomputation counted only when with_recompute. */
double tape_flops(const FtTape *tp, int begin, int end, bool with_recompute);

/* Byte size of tensor id (0 for -1). */
size_t tape_tensor_bytes(const FtTape *tp, int id);

/* One line per entry: index, phase, kind/dir, label, inputs -> outputs. */
void tape_print(FILE *out, const FtTape *tp);

#endif
