/* plan_predict.h: what-if DMR plans for a cluster ftllm cannot run. From the deck's model shape
 * ([model]), layout ([parallel], [train] batch and ac) and hardware ([cluster] gpu_*, hbm_gbs,
 * intra_* / inter_*, gpus_per_node) it predicts the operator list and the idle windows of one
 * training step on one pipeline stage, with analytic times, then hands them to the three-phase
 * planner (planner.h). No MPI, no training: a pure function of the configuration.
 *
 * The stage. The last pipeline stage (its L/pp blocks, the final norm, the LM head and the loss;
 * with pp = 1 also the embedding): it carries the head, so with layers split evenly it is the
 * slowest stage, and a 1F1B pipeline runs at its slowest stage's pace. predict_build_stage
 * builds any stage the same way (the first carries the embedding and its table's AdamW), in its
 * schedule's order (1F1B: pp - 1 - s warm-up forwards; GPipe: every forward first), and "The
 * pipeline" below simulates them together.
 *
 * Shapes (per GPU; N = B T tokens of a micro-batch, Megatron TP sharding, bf16 = 2 bytes):
 *   heads NH, kv heads KV (GQA; model.kv_heads, 0 = NH), HS = C / NH, Q = NH HS / tp,
 *   K = ceil(KV / tp) HS (kv heads replicated when KV < tp), F = ffn / tp (model.ffn,
 *   0 = 4 C), g = 2 for a SwiGLU MLP (gate and up), 1 for GELU; V = vocab / tp (vocab-parallel).
 * Operators of one block, forward (FLOPs; inputs kept by a deferred check, elements):
 *   norm1 (5 N C; N C)  qkv (2 N C (Q + 2K); N C)  attn (2 B T^2 Q, causal flash; N (Q + 2K))
 *   proj (2 N Q C; N Q)  [TP all-reduce]  res1 (N C; 2 N C)  norm2 (5 N C; N C)
 *   up (2 N C g F; N C)  act (8 g N F; g N F)  down (2 N F C; N F)  [TP all-reduce]
 *   res2 (N C; 2 N C)
 * Backward, blocks in reverse (FLOPs twice the forward's, attention 2.5x as flash attention's
 * five GEMMs against two; inputs: the forward's plus the output gradient):
 *   down' act' up' [TP all-reduce of dx] norm2' proj' attn' qkv' [TP all-reduce of dx] norm1'
 *   (residual gradients pass through: no operator). Head: normf, head (2 N C V), loss (5 N V;
 *   N V) forward; loss' (5 N V), head', normf' backward. pp = 1: embed (gather) and embed'
 *   (scatter-add), no FLOPs.
 * Optimizer, once per step: one AdamW operator per block (and the head), its stage's parameters
 *   P / tp; 30 bytes per parameter moved (bf16 weight, fp32 master, gradient, two moments), its
 *   FLOPs not counted (memory-bound by far).
 * Time of an operator = max(FLOPs / (cluster.gpu_tflops x cluster.gpu_eff), bytes /
 *   cluster.hbm_gbs) (a roofline; bytes = inputs + outputs + weights, bf16; the loss's logits in
 *   fp32); a checker runs as long as its primary. Keeping a deferred check
 *   (cluster.dmr_keep = copy, as ftllm's executor does it): its kept bytes read and written and
 *   its outputs read once (the fingerprint), at hbm_gbs: FtPlanOp copy and fp; free: 0 (the
 *   paper's model, inputs kept by reference).
 * Activation checkpointing (train.ac): full = one segment per block, every = train.ac_every
 *   blocks per segment. The forward of a segment is recomputed before its backward (time in the
 *   step, its two TP all-reduces per block are windows too); every forward operator of a segment
 *   except its last (res2 of its last block, whose output is kept) is `recomputed` (Phase 1:
 *   piggyback). The head, the loss and the embedding are outside AC.
 * Windows (idle time the GPU waits on a message; PLAN_WIN_INTRA unless said):
 *   TP all-reduce of N C bf16 over tp GPUs of a node (ring): 2 (tp-1) intra_lat +
 *     2 (tp-1)/tp N C 2 / intra_gbs; 2 per block in forward, recompute and backward each.
 *   PP (PLAN_WIN_PP): per micro-batch after its backward: the gradient's hop to the previous
 *     stage and the next activation's hop in (1F1B steady state puts both on the stage's
 *     cycle): 2 (lat + N C 2 / bw), inter-node when the neighbour stage is on another node
 *     (Megatron order: rank = tp index + tp (pp index + pp dp index); node = rank / per node).
 *     Its block is the stage's first block of that micro-batch (the last backward): Phase 2
 *     puts at most one AGC segment of that block into it, Phase 3 uses it when Phase 2 did not.
 *   DP: after the last micro-batch's backward, a reduce-scatter of the stage's fp32 gradients
 *     ((dp-1)/dp P/tp 4 bytes / bw + (dp-1) lat; FSDP/ZeRO over dp as TorchTitan).
 *   Pipeline bubbles ((pp-1) micro-batch cycles per step) are idle too but, as in the paper,
 *   not used as windows: they are reported.
 * Block ids for the planner: micro-batch i's block b is i Ls + b (Ls = L / pp), so each
 *   micro-batch's block gets its own Phase-2 segment; the head belongs to the stage's last block.
 * Step time = m (forward + recompute + backward + TP all-reduces + PP hops) + bubble
 *   ((pp-1) x that cycle) + DP reduction + optimizer. Overhead % = plan.overhead / step time:
 *   a checker on the slowest stage's cycle lengthens the whole pipeline's (first order).
 * Memory per GPU (training footprint of the stage): parameters P / tp at 2 bytes + 16 / dp
 *   bytes (bf16 weights; fp32 master, gradient and two moments sharded over dp) + activations:
 *   with AC the block inputs (N C / tp per block: sequence-parallel shards, as TorchTitan and
 *   Megatron keep the residual stream between TP regions) of the micro-batches in flight (1F1B:
 *   pp - s for stage s, so 1 on the last; gpipe: m), plus one block's full activations being
 *   recomputed;
 *   without AC every block's saved tensors; plus the logits and loss (N V 10 bytes) + the
 *   reserve (cluster.mem_reserve_gb: CUDA context, NCCL buffers, fragmentation).
 *   Deferred-checker budget = cluster.gpu_mem_gb - footprint (an error when <= 0: it does not
 *   fit). Stage 0 holds the most micro-batches in flight: its footprint is reported too.
 * Not modelled: the paper's P-DMR exception (naive when the last operator's input gathering
 *   costs more), compute/communication overlap (async TP, overlapped p2p), kernel launch gaps,
 *   uneven layer splits, MoE (model.experts > 0 is refused); sequence parallelism only in the
 *   memory of AC's block inputs (an all-reduce and SP's reduce-scatter + all-gather move the
 *   same bytes, and the norms are counted unsharded). */
#ifndef FTLLM_PLAN_PREDICT_H
#define FTLLM_PLAN_PREDICT_H

#include <stdbool.h>
#include <stddef.h>

#include "ftllm/deck.h"
#include "ftllm/dmr_pipesim.h"
#include "ftllm/planner.h"

/* Operator groups: one per operator kind and pass, for the report. */
#define FT_PREDICT_GROUPS(G)                                                                     \
    G(embed) G(norm1) G(qkv) G(attn) G(proj) G(res1) G(norm2) G(up) G(act) G(down) G(res2)      \
    G(normf) G(head) G(loss)                                                                     \
    G(loss_b) G(head_b) G(normf_b) G(down_b) G(act_b) G(up_b) G(norm2_b) G(proj_b) G(attn_b)    \
    G(qkv_b) G(norm1_b) G(embed_b) G(adamw)
#define FT_PREDICT_GROUP_ID_(g) PRED_G_##g,
enum ft_predict_group { FT_PREDICT_GROUPS(FT_PREDICT_GROUP_ID_) PRED_NGROUPS };
#undef FT_PREDICT_GROUP_ID_

/* Window classes, for the report. */
enum ft_predict_win { PRED_W_TP = 0, PRED_W_PP = 1, PRED_W_DP = 2, PRED_NWIN = 3 };

/* The stage's timeline, for the pipeline's simulation (dmr_pipesim.h): in execution order,
 * an operator (arg: its index), busy time without operators (AC's recomputation: t), a fixed
 * wait (a TP all-reduce, the DP reduce-scatter: t), a pipeline message received (arg: its
 * dmr_pipe_msg id) or sent (arg, t: its transfer time), and the stages' meeting before the
 * optimizer (the gradient norm's all-reduce over every rank). */
enum ft_predict_ev_kind { PRED_EV_OP, PRED_EV_BUSY, PRED_EV_WAIT, PRED_EV_RECV, PRED_EV_SEND,
                     PRED_EV_MEET };
typedef struct ft_predict_ev {
    int kind, arg;
    double t;
} FtPredictEv;

typedef struct ft_predict {
    /* the planner's inputs */
    int nops, nwin;
    FtPlanOp *ops;      /* [nops] in execution order */
    FtPlanWindow *win;  /* [nwin] in execution order */
    int *group;         /* [nops] enum ft_predict_group */
    int *win_class;     /* [nwin] enum ft_predict_win */
    int *entry;         /* [nops] its position in its micro-batch's forward and backward (the
                           same for every micro-batch; -1: the optimizer's) */
    int nev;
    FtPredictEv *ev;    /* [nev] the timeline */
    size_t budget;      /* deferred-checker memory, bytes */
    int stage, nstage;  /* which of the pipeline's stages */
    /* the stage, per micro-batch (seconds) */
    int Ls, m;          /* blocks on the stage, micro-batches per step */
    double t_fwd, t_recompute, t_bwd, t_tp, t_pp; /* t_tp: all its TP all-reduces */
    double t_tp_one, t_pp_hop; /* one TP all-reduce, one PP hop */
    int pp_inter;       /* 1: PP hops leave the node */
    /* per step (seconds) */
    double t_cycle;     /* one micro-batch's cycle: fwd + recompute + bwd + t_tp + t_pp */
    double t_bubble, t_dp, t_opt, t_step;
    double t_naive;     /* checker time of every operator (naive DMR everywhere) */
    /* memory per GPU (bytes) */
    double params;      /* parameters of the stage on one GPU (P / tp) */
    double mem_state, mem_act, mem_reserve, footprint, footprint0, gpu_mem;
} FtPredict;

/* The largest stage plan --predict builds (about 20 operators per block and micro-batch). */
#define PREDICT_MAX_OPS 20000000

/* Builds the stage's operators, windows, times and memory from cfg (a deck that passed
 * deck_check). Returns 0, or -1 with a one-line message naming the key's line in err (MoE, tp
 * beyond a node, more than PREDICT_MAX_OPS operators, a footprint over the GPU's memory, out of
 * memory); p is then empty (predict_free is safe). */
int predict_build(const FtConfig *cfg, FtPredict *p, char *err, size_t errlen);
/* The same for pipeline stage `stage` (predict_build: the last): its blocks, the embedding on
 * the first, the head on the last, in its schedule's order (parallel.schedule: 1F1B's warm-up
 * forwards, or GPipe's), its messages in the timeline, its own footprint and budget. */
int predict_build_stage(const FtConfig *cfg, int stage, FtPredict *p, char *err, size_t errlen);
void predict_free(FtPredict *p);

/* planner_run on p's operators and windows under p's budget with `phases` (enum
 * ft_plan_phase mask). Returns planner_run's status. */
int predict_plan(const FtPredict *p, int phases, FtDmrPlan *plan);

/* Overhead of a plan (or, plan NULL, of naive DMR everywhere) as a percentage of the step. */
double predict_overhead_pct(const FtPredict *p, const FtDmrPlan *plan);

/* ---- The pipeline (plan_predict_pipe.c) ----------------------------------------------------
 * Every stage built (predict_build_stage), each planned on its own, and the step of all of them
 * simulated in dmr_pipesim's model (the one `dmr.refine = pipeline` runs on a real pipeline's
 * profiles): operators with their checker times, AC's recomputation as busy time, TP and DP as
 * fixed waits, PP hops as the messages' transfer times, so that the warm-up and cool-down
 * bubbles, a stage waiting on a slower neighbour (the last carries the head) and what deferred
 * checks replayed there give come out of the simulation; then the plans refined together. */
typedef struct ft_predict_pipe {
    int P;
    FtPredict *st; /* [P] */
} FtPredictPipe;

/* The most operators predict_pipe_build simulates over all its stages: the search's 1000
 * simulations of them, twice (with and without hops_only), take about ten seconds on this
 * project's 2-core VM (2026-12-02). */
#define PREDICT_PIPE_MAX_OPS 250000

/* Every stage of cfg (a deck plan --predict accepts: predict_build's checks passed). Returns 0,
 * or -1 with a one-line reason in err ("not simulated: ..." when the stages hold more than
 * PREDICT_PIPE_MAX_OPS operators; out of memory); pp is then empty. */
int predict_pipe_build(const FtConfig *cfg, FtPredictPipe *pp, char *err, size_t errlen);
void predict_pipe_free(FtPredictPipe *pp);

/* Every stage planned with `phases`, then simulated: out->off (no checks), naive (every check
 * at once), start (the stages' own plans), bound (dmr_pipe_bound); best: refined together when
 * max_work > 0 (simulations times executions, as dmr_refine_pipeline's; at least 1000
 * simulations: with 100, Mistral-Large's 112000 operators at 64 micro-batches refined to 33.1%
 * where 1000 reach 23.7%), else the stages' own plans. hops_only: deferred checks replay in a pipeline
 * wait only for the message's transfer time (FtPipeRank.hops_only: the paper's PP windows,
 * without the bubbles). Returns 0, or -1 (a planner failure). */
int predict_pipe_run(const FtPredictPipe *pp, int phases, long long max_work, bool hops_only,
                     FtPipeRefine *out);

/* Stage p under its plan as the simulation's input (r: dmr_pipe_rank_free it): an execution per
 * operator (its strategy; a piggyback operator inside an AGC segment's span joins the segment:
 * its replay re-executes it), per stretch of recomputation (never checked) and one for the
 * meeting (the micro-batches' part ends there); the waits before each, the messages. */
void predict_pipe_rank(const FtPredict *p, const FtDmrPlan *plan, FtPipeRank *r);

/* A simulated step as a percentage over out's step without checks. */
double predict_pipe_pct(const FtPipeRefine *rf, double step);

const char *predict_group_name(int g); /* "qkv", "attn_b", ... */
const char *predict_win_name(int w);   /* "TP", "PP", "DP" */

#endif
