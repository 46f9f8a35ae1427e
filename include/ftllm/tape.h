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

#include "ftllm/backend.h"
#include "ftllm/dtype.h"
#include "ftllm/ops.h"


/* Roles. The model-state roles are views of the model's buffers (outside the tape), set by
 * model_tape_bind from the tensor's `param` and `layer`, so a tape can be pointed at another
 * gradient bank or, after an optimizer commit, at the new parameters without being rebuilt. */
typedef enum ft_tensor_role {
    FT_TR_PARAM,      /* parameters */
    FT_TR_GRAD,       /* parameter gradients this run writes (the bound gradient bank) */
    FT_TR_GRAD_PREV,  /* the gradients' earlier sum (the other bank; NULL on a step's first
                         micro-batch: the ops read it as zeros) */
    FT_TR_MOM1,       /* AdamW first moment */
    FT_TR_MOM2,       /* AdamW second moment */
    FT_TR_PARAM_NEW,  /* the optimizer's outputs: new parameters and moments, made current by */
    FT_TR_MOM1_NEW,   /*   model_commit */
    FT_TR_MOM2_NEW,
    FT_TR_ACT,        /* an activation (arena) */
    FT_TR_ACT_GRAD,   /* an activation's gradient (arena) */
    FT_TR_IO,         /* tokens, targets, loss (arena; the train loop fills / reads them) */
    FT_TR_SCRATCH,    /* other arena outputs (a partial gradient, the optimizer's sums) */
} FtTensorRole;

typedef struct ft_tensor {
    char name[40];
    FtDtype dtype;
    FtTensorRole role;
    size_t n;    /* elements */
    void *data;  /* set by tape_alloc for arena tensors */
    int alias;   /* -1, or the tensor whose storage this one shares */
    int layer;   /* -1 outside the transformer blocks (and for whole per-layer stacks) */
    int param;   /* model-state roles: the parameter tensor (FT_P_*); else -1 */
} FtTensor;

typedef enum ft_phase { FT_PH_FWD, FT_PH_BWD, FT_PH_RECOMPUTE } FtPhase;

/* Markers (FT_OP_MARK entries): X(enum suffix, printed name) */
#define FT_MARK_LIST(X)                                                                       \
    X(NONE, "")                                                                               \
    /* forward of an AC segment begins; its input tensor is saved */                          \
    X(SEG_BEGIN, "segment begin")                                                             \
    X(SEG_END, "segment end")                                                                 \
    /* backward of a segment begins with its recomputation */                                 \
    X(RECOMPUTE, "recompute")                                                                 \
    /* tensor-parallel all-reduce (sum, in place) of tensor in[0] = out[0]: the partial       \
       output of a row-parallel layer (forward) or the partial input gradient of a            \
       column-parallel one (backward) */                                                      \
    X(COMM_TP, "comm tp")                                                                     \
    /* a layer's parameter gradients are complete for this micro-batch (layer -1: the final   \
       LayerNorm's, on the last pipeline stage) */                                            \
    X(COMM_GRADS, "comm grads")                                                               \
    /* pipeline: receive out[0]; dir FT_FWD: the activation from the previous stage, FT_BWD:  \
       its gradient from the next stage */                                                    \
    X(PP_RECV, "pp recv")                                                                     \
    /* pipeline: send in[0]; FT_FWD: to the next stage, FT_BWD: to the previous one */        \
    X(PP_SEND, "pp send")                                                                     \
    /* expert parallelism: all-to-all(v) of the packed token rows in[0] (row width d[0];      \
       in[1]: rows per expert on this side, E ints) to the ranks holding their experts, into  \
       out[0] (by source rank, then local expert: in[2] or out[1], ep x El ints); when out[1] \
       >= 0 the row counts are exchanged first into out[1]. Forward: dispatch; backward: the  \
       combine's gradient */                                                                  \
    X(EP_TO_EXPERTS, "ep to experts")                                                         \
    /* the reverse all-to-all(v): rows in[0] on the experts' side (counts in[2]) back to      \
       their source ranks, into out[0] (counts in[1]). Forward: the experts' outputs;         \
       backward: their input gradients. With ep 1 both exchanges are no-ops: out[0] shares    \
       in[0]'s storage */                                                                     \
    X(EP_TO_SOURCES, "ep to sources")

typedef enum ft_mark {
#define FT_MARK_ENUM(name, text) FT_MARK_##name,
    FT_MARK_LIST(FT_MARK_ENUM)
#undef FT_MARK_ENUM
    FT_MARK_N
} FtMark;

/* The printed name of a marker. */
const char *tape_mark_name(FtMark mk);

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
    int twin;      /* activation checkpointing: a forward entry's recomputation, and a
                      recompute entry's forward (same kind, inputs and outputs); -1: none (no
                      AC, markers of the backward, and the last segment, which is not
                      recomputed) */
} FtTapeEntry;

typedef struct ft_tape {
    FtTensor *t;
    int nt, cap_t;
    FtTapeEntry *e;
    int ne, cap_e;
    int fwd_end; /* entries [0, fwd_end) are the forward, [fwd_end, ne) the backward */
    const FtBackend *be; /* where the arena lives (backend_cpu() unless set before tape_alloc) */
    void *arena;
    size_t arena_bytes;
    int B, T;
    /* tensor ids the train loop uses */
    int tokens, targets, logits, probs, loss;
} FtTape;

void tape_init(FtTape *tp);
void tape_free(FtTape *tp);

/* Declares a tensor; data NULL = arena storage (allocated by tape_alloc), except for the
 * model-state roles (bound later: tape_state). Returns its id. */
int tape_tensor(FtTape *tp, const char *name, FtDtype dt, FtTensorRole role, size_t n,
                void *data, int layer);
/* Declares a view of model state: role FT_TR_PARAM .. FT_TR_MOM2_NEW of parameter tensor
 * `param` (layer l of a per-layer tensor, or -1: the whole tensor); model_tape_bind sets its
 * storage. */
int tape_state(FtTape *tp, const char *name, FtTensorRole role, int param, int layer, size_t n);
/* Whether a role is a view of model state (bound by model_tape_bind, not in the arena). */
static inline int tape_role_is_state(FtTensorRole r) { return r <= FT_TR_MOM2_NEW; }
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
