/* ops.h: every kernel of the model as an op kind, in one table.
 *
 * An op kind has a forward and (where the model needs one) a backward, each a pure function of
 * the tensors named in its FtOpCall: it reads in[], writes out[], and touches nothing else (no
 * hidden state, no statics). DMR re-executes any single call and compares output bytes, so:
 *   - every output is written completely (every byte, padding included) from the inputs alone,
 *     and no output shares storage with an input: any call can run again and give the same
 *     bytes. Sums over several calls are explicit: a parameter gradient's earlier sum (the
 *     previous micro-batches', or the tied embedding's other use) is an input `prev` (NULL: 0)
 *     and the output is prev + this call's contribution, in another buffer; AdamW reads the
 *     old parameters and moments and writes the new ones into other buffers;
 *   - results are bitwise deterministic for a given thread count: OpenMP loops use static
 *     schedules, every reduction runs in a fixed order inside one thread (reductions over rows,
 *     e.g. a bias gradient, are split over columns, never over rows), GEMMs go to OpenBLAS
 *     (deterministic per thread count, see DESIGN.md).
 * Each kind also reports FLOPs and bytes moved for a call (for the planner and the benchmark).
 * The CPU implementation lives in ops_cpu.c; a CUDA backend fills the same table. Where the fast
 * path differs from the plain loops (the BLAS GEMMs), a naive twin is kept in `fwd_ref`/`bwd_ref`.
 *
 * Dimension names: B batch, T sequence, C channels, NH heads, HS = C/NH, V vocab, Vp padded
 * vocab, N = B*T rows, OC output channels; MoE: E experts, K = top-k, El experts on this rank,
 * G source groups (expert-parallel ranks), R expert-side rows, cap the capacity per expert.
 * Argument layout per kind (in / out / d / x):
 *
 *   ENCODER     fwd  in: tokens (N int), wte (Vp,C), wpe (maxT,C)     out: x (B,T,C)
 *                    d: B T C
 *               bwd  in: dx (B,T,C), tokens (N int), dwte prev, dwpe prev, [dlogits (N,Vp),
 *                    lnf (N,C)]   out: dwte (Vp,C) = prev [+ dlogits^T lnf] + dx rows by token,
 *                    dwpe (maxT,C)   d: B T C   x: Vp, maxT   (the optional pair is the tied
 *                    LM head's weight gradient, folded in on a one-stage model so the whole
 *                    wte gradient is written by one call: no second pass over the table)
 *   LAYERNORM   fwd  in: x (N,C), w (C), b (C)                        out: y (N,C), mean (N), rstd (N)
 *                    d: N C
 *               bwd  in: dy (N,C), x, w, mean, rstd, dres (N,C) or NULL, dw prev, db prev
 *                    out: dx (N,C) = dres + d(LN)/dx, dw (C), db (C)  d: N C
 *                    (the residual stream's gradient is folded in here, so no op writes a
 *                    gradient twice and no residual-backward op is needed on the tape)
 *   MATMUL      fwd  in: x (N,C), w (OC,C), b (OC) or NULL            out: y (N,OC) = x w^T + b
 *                    d: N C OC
 *               bwd  in: dy (N,OC), x (N,C), w (OC,C), dw prev, db prev   out: dx (N,C) or NULL,
 *                    dw (OC,C) or NULL (then db NULL: dx only), db (OC) or NULL   d: N C OC
 *   ATTENTION   fwd  in: qkv (B,T,3C)                                 out: y (B,T,C), lse (B,NH,T)
 *                    d: B T C NH   (causal; lse holds each row's log-sum-exp of its scaled scores
 *                    s = q.k / sqrt(C/NH), t2 <= t: the backward recomputes the probabilities
 *                    exp(s - lse), so no T x T matrix is kept between the passes)
 *               bwd  in: dy (B,T,C), qkv, lse                         out: dqkv (B,T,3C)
 *   GELU        fwd  in: x (N)  out: y (N)   d: N   (tanh approximation, as GPT-2)
 *               bwd  in: dy, x  out: dx
 *   RESIDUAL    fwd  in: a, b   out: y = a + b   d: N
 *               bwd  in: dy     out: da = db = dy  (unused by the GPT-2 tape, see LAYERNORM bwd)
 *   CROSSENT    fwd  in: logits (N,Vp), targets (N int)               out: probs (N,Vp), losses (N)
 *                    d: N V Vp   (softmax over the first V columns; padding gets probability 0)
 *               bwd  in: probs, targets                               out: dlogits (N,Vp)
 *                    d: N V Vp   x[0]: dloss, the gradient of the objective w.r.t. each loss
 *   LOSSMEAN    fwd  in: losses (N)  out: loss (1 float), mean in double, fixed order.  d: N
 *   GRADNORM    fwd  in: g (n)  out: sumsq (1 double), over fixed chunks of FT_OPS_CHUNK elements
 *                    (the result does not even depend on the thread count)   d: n
 *   ADAMW       fwd  in: g, p, m, v (n)  out: p', m', v' (n, other buffers)   d: n
 *                    x: lr, beta1, beta2, eps, weight_decay, 1-beta1^t, 1-beta2^t, grad scale
 *   MOE_ROUTE   fwd  in: logits (N,E)                                out: probs (N,E), expert (N,K int),
 *                    gate (N,K), row (N,K int), aux (1)               d: N E K cap   x[0]: aux coefficient
 *                    probs = softmax(logits); each token's K experts in descending logit order,
 *                    ties to the lower expert index; gate = the chosen experts' probabilities
 *                    (raw, not renormalized over the K); capacity: choice j = 0 of every token
 *                    (tokens in order) is served first, then j = 1, ...; an expert's first cap
 *                    assignments are kept, later ones dropped (row -1); row = the assignment's
 *                    row in the packed expert-major buffer (expert e's rows follow those of
 *                    experts < e); aux = coef E sum_e f_e P_e (f_e: fraction of the N K choices
 *                    that picked e, before capacity; P_e: mean probability of e; Switch/GShard)
 *               bwd  in: dgate (N,K), probs, expert                   out: dlogits (N,E)
 *                    d: N E K   x[0]: aux coefficient, x[1]: d(objective)/d(aux)
 *   MOE_DISPATCH fwd in: x (N,C), expert (N,K int), row (N,K int)     out: xs (N K, C) packed
 *                    rows (unused rows 0), counts (E int: kept rows per expert)   d: N C K E
 *               bwd  in: dxs (N K, C), row, dadd (N,C) or NULL        out: dx (N,C) = dadd +
 *                    sum over the token's kept rows                   d: N C K E
 *   MOE_EXPERT  fwd  in: x (R,C), w (El,OC,C), b (El,OC) or NULL, counts (G El int)  out: y (R,OC)
 *                    d: R C OC El   x[0]: G, x[1]: nominal rows (FLOPs)   rows come in blocks
 *                    (group g, expert e) in that order, counts[g El + e] rows each, block (g, e)
 *                    multiplied by expert e's weights (a grouped matmul); rows past the blocks 0
 *               bwd  in: dy (R,OC), x, w, counts, dw prev, db prev    out: dx (R,C) or NULL,
 *                    dw (El,OC,C), db (El,OC) or NULL (prev + the blocks in order)
 *   MOE_COMBINE fwd  in: yr (N K, C), gate (N,K), row (N,K int)       out: y (N,C) = sum over the
 *                    token's kept choices of gate * yr[row] (dropped choices add 0)   d: N C K
 *               bwd  in: dy (N,C), yr, gate, row                      out: dyr (N K, C),
 *                    dgate (N,K)                                      d: N C K
 *   MARK        a no-op: tape markers (segment boundaries, communication points)
 */
#ifndef FTLLM_OPS_H
#define FTLLM_OPS_H

#include <stdbool.h>
#include <stddef.h>

#define FT_OP_MAX_IN 8
#define FT_OP_MAX_OUT 5
#define FT_OP_MAX_DIMS 4
#define FT_OP_MAX_X 8
#define FT_OPS_CHUNK 65536 /* fixed reduction chunk of GRADNORM */

typedef enum ft_op_kind {
    FT_OP_ENCODER,
    FT_OP_LAYERNORM,
    FT_OP_MATMUL,
    FT_OP_ATTENTION,
    FT_OP_GELU,
    FT_OP_RESIDUAL,
    FT_OP_CROSSENT,
    FT_OP_LOSSMEAN,
    FT_OP_GRADNORM,
    FT_OP_ADAMW,
    FT_OP_MOE_ROUTE,
    FT_OP_MOE_DISPATCH,
    FT_OP_MOE_EXPERT,
    FT_OP_MOE_COMBINE,
    FT_OP_MARK,
    FT_OP_NKINDS
} FtOpKind;

typedef enum ft_op_dir { FT_FWD = 0, FT_BWD = 1 } FtOpDir;

/* One invocation: the tensors, dimensions and scalars an op reads and writes. */
typedef struct ft_op_call {
    const void *in[FT_OP_MAX_IN];
    void *out[FT_OP_MAX_OUT];
    long long d[FT_OP_MAX_DIMS];
    double x[FT_OP_MAX_X];
    void *ctx; /* the backend's context (backend.h; NULL on the CPU) */
} FtOpCall;

typedef void (*FtOpFn)(const FtOpCall *c);

typedef struct ft_op_desc {
    const char *name;
    FtOpFn fwd, bwd;         /* bwd NULL: the kind has no backward */
    FtOpFn fwd_ref, bwd_ref; /* naive twins; NULL where fwd/bwd is already the plain loop */
    double (*flops)(const FtOpCall *c, FtOpDir dir);
    double (*bytes)(const FtOpCall *c, FtOpDir dir);
} FtOpDesc;

/* Elementwise CPU kernels smaller than `work` elements run on one thread (default 2^20: a
 * parallel region of a small op loses more to a busy machine's scheduler than it gains).
 * Results do not depend on it; tests set 0 to exercise the threaded paths on tiny shapes. */
void ops_cpu_set_parallel_min(long long work);

/* On: the CPU ops round the operands of the model's GEMMs (MATMUL, MOE_EXPERT, the tied LM
 * head in ENCODER's backward) to bf16 before multiplying in fp32, as the CUDA backend's GEMMs
 * do under run.precision = bf16; everything else stays fp32. The stand-in device turns it on
 * around its ops under run.precision = bf16 (backend_standin.c); off by default. */
void ops_cpu_set_gemm_bf16(bool on);
/* The same for ATTENTION's products (Q K^T, P V and the backward's), as the CUDA backend's
 * batched-GEMM attention (FTLLM_CUDA_ATTENTION=gemm) computes them under bf16; off by default. */
void ops_cpu_set_attention_bf16(bool on);

/* The CPU table, indexed by FtOpKind (ops_cpu.c; a backend's table: backend.h). */
const FtOpDesc *ops_cpu_table(void);
/* A kind's description (name, FLOPs, bytes; the CPU functions, for tests and reference runs):
 * ops.c. The executor runs ops through its backend's table instead. */
const FtOpDesc *ops_desc(FtOpKind kind);

#endif
