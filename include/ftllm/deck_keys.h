/* deck_keys.h: every input-deck key, one line each. This table is the single source of truth:
 * it generates struct ft_config's fields, drives parsing and range checks, `ftllm help deck`,
 * inputs/README.md, the startup echo of the resolved deck and the copy stored in checkpoints.
 *
 * Adding a key is one line in its section's list:
 *   K(section, name, TYPE, "default", min, max, "choices", flags, "help")
 * TYPE: INT (long long), REAL (double), BOOL (bool), STR (char[FT_DECK_STR_MAX]),
 *       ENUM (int index into the '|'-separated choices; keep the C enum below in the same order).
 * min/max bound INT and REAL values (inclusive unless a GT_MIN / LT_MAX flag says otherwise).
 * flags: FT_KEY_AUTO      the value `auto` is accepted and stored as FT_AUTO (-1);
 *        FT_KEY_RESERVED  the feature behind the key is not built yet: only the default is
 *                         accepted, anything else is an error that says so;
 *        FT_KEY_GT_MIN / FT_KEY_LT_MAX  exclusive bounds.
 * Every section needs at least one key. */
#ifndef FTLLM_DECK_KEYS_H
#define FTLLM_DECK_KEYS_H

/* S(section, "help") in the order they are documented and echoed. */
#define FT_DECK_SECTIONS(S)                                                                      \
    S(run, "what the run is: name, seed, logging, threads")                                      \
    S(model, "the GPT-2 style model: sizes of every dimension")                                  \
    S(parallel, "decomposition over ranks: world = dp x pp x ep x tp")                           \
    S(train, "optimizer, schedule, batch and activation checkpointing")                          \
    S(data, "token shards (llm.c format) for training and validation")                           \
    S(dmr, "dual modular redundancy against silent data corruption (SpareTrain)")                \
    S(spare, "stacked data-parallel shards and reordering against failed ranks (SPARe)")         \
    S(checkpoint, "parallel HDF5 checkpoints: where, how often, how many to keep")               \
    S(faults, "injected faults: SDC bit flips and fail-stop events")                             \
    S(cluster, "the cluster that `optimize`, `simulate` and `plan --predict` plan for")          \
    S(perf, "timers and hardware counters")

#define FT_KEYS_run(K)                                                                           \
    K(run, name, STR, "ftllm", 0, 0, "", 0, "run name, used in log lines and file names")        \
    K(run, seed, INT, "1337", 0, 2147483647, "", 0,                                              \
      "seed of every random stream (initialization, data order, sampling)")                      \
    K(run, log_level, ENUM, "info", 0, 0, "error|warn|info|debug", 0,                            \
      "how much rank 0 prints")                                                                  \
    K(run, threads, INT, "0", 0, 4096, "", 0,                                                    \
      "OpenMP/BLAS threads per rank; 0 = OMP_NUM_THREADS, else the cores the launcher bound "   \
      "the rank to, else the node's cores shared among its ranks")                               \
    K(run, save_model, STR, "", 0, 0, "", 0,                                                     \
      "write the final weights to this llm.c model file (fp32, version 3); empty = none")       \
    K(run, backend, ENUM, "cpu", 0, 0, "cpu|cuda", 0,                                            \
      "where ops run: cpu (OpenMP + OpenBLAS) or cuda (one GPU per rank; needs a build with "   \
      "make CUDA=1; see cuda/README.md)")                                                        \
    K(run, precision, ENUM, "fp32", 0, 0, "fp32|bf16", 0,                                        \
      "GEMM precision: fp32, or bf16 (run.backend = cuda only): weights and activations rounded " \
      "to bf16 for every GEMM, fp32 accumulation, fp32 outputs, master weights and optimizer "   \
      "state")                                                                                   \
    K(run, progress, ENUM, "auto", 0, 0, "auto|live|lines", 0,                                   \
      "per-step output: live = one line rewritten in place (step, loss, tokens/s, ETA); lines = " \
      "a line per step; auto = live when rank 0's stdout is a terminal (under mpiexec it is a "  \
      "pipe: give live)")

#define FT_KEYS_model(K)                                                                         \
    K(model, layers, INT, "4", 1, 4096, "", 0, "transformer blocks (L)")                         \
    K(model, heads, INT, "4", 1, 4096, "", 0, "attention heads (NH)")                            \
    K(model, channels, INT, "128", 1, 1048576, "", 0,                                            \
      "model width (C); a multiple of model.heads")                                              \
    K(model, vocab, INT, "256", 2, 16777216, "", 0,                                              \
      "vocabulary size (V): 256 for the byte tokenizer, 50257 for GPT-2")                        \
    K(model, vocab_pad, INT, "128", 1, 65536, "", 0,                                             \
      "pad the vocabulary up to a multiple of this (Vp; llm.c pads 50257 to 50304)")             \
    K(model, seq_len, INT, "64", 1, 1048576, "", 0,                                              \
      "maximum sequence length (T), the size of the position table")                         \
    K(model, experts, INT, "0", 0, 65536, "", 0,                                                 \
      "mixture of experts: experts in every block's MLP (E); 0 = the dense GPT-2 MLP")           \
    K(model, top_k, INT, "1", 1, 64, "", 0, "experts each token is routed to (K <= experts)")    \
    K(model, capacity_factor, REAL, "1.25", 0, 1e6, "", 0,                                       \
      "expert capacity: ceil(factor x tokens x top_k / experts) per micro-batch of each data "  \
      "rank; later tokens are dropped (the residual passes them on); 0 = no limit")             \
    K(model, aux_loss_coef, REAL, "0.01", 0, 1e6, "", 0,                                         \
      "weight of the load-balance loss coef x E x sum_e f_e P_e (Switch/GShard) in the objective") \
    K(model, init, STR, "", 0, 0, "", 0,                                                         \
      "llm.c GPT-2 model file (fp32, version 3) to start from; empty = random initialization")   \
    K(model, ffn, INT, "0", 0, 16777216, "", 0,                                                  \
      "MLP hidden width; 0 = 4 x model.channels (the trainer builds only that; other widths "    \
      "are for `ftllm plan --predict`)")                                                         \
    K(model, kv_heads, INT, "0", 0, 4096, "", 0,                                                 \
      "key/value heads (grouped-query attention, a divisor of model.heads); 0 = model.heads "    \
      "(the trainer builds only that; GQA is for `ftllm plan --predict`)")                       \
    K(model, mlp, ENUM, "gelu", 0, 0, "gelu|swiglu", 0,                                          \
      "MLP kind: gelu (GPT-2, the trainer's) or swiglu (Llama/Mistral: gate and up "             \
      "projections; for `ftllm plan --predict`)")

#define FT_KEYS_parallel(K)                                                                      \
    K(parallel, tp, INT, "1", 1, 1048576, "", 0, "tensor-parallel width")                        \
    K(parallel, pp, INT, "1", 1, 1048576, "", 0, "pipeline-parallel stages")                     \
    K(parallel, dp, INT, "1", 1, 1048576, "", 0, "data-parallel replicas")                       \
    K(parallel, ep, INT, "1", 1, 1048576, "", 0, "expert-parallel width")                        \
    K(parallel, microbatches, INT, "1", 1, 1048576, "", 0,                                       \
      "micro-batches per step on each data-parallel rank")                                       \
    K(parallel, schedule, ENUM, "1f1b", 0, 0, "1f1b|gpipe", 0,                                   \
      "pipeline schedule over the micro-batches (1f1b: fewer activations in flight)")           \
    K(parallel, warmup_extra, INT, "0", 0, 1048576, "", 0,                                       \
      "1f1b: warm-up forwards beyond 1F1B's on every stage but the last (each holds that many "  \
      "more activation sets; under dmr.mode = planned a stage's inline checks then hold up its " \
      "neighbour less)")                                                                         \
    K(parallel, bucket_mb, REAL, "25", 0, 1e6, "", FT_KEY_GT_MIN,                                \
      "data-parallel gradient bucket size, MiB (reductions start bucket by bucket in backward)") \
    K(parallel, progress, BOOL, "true", 0, 0, "", 0,                                             \
      "test in-flight gradient reductions between tape entries (MPICH has no progress thread: "  \
      "without this a bucket's all-reduce advances only inside MPI calls)")                      \
    K(parallel, device_comm, ENUM, "auto", 0, 0, "auto|nccl|mpi", 0,                             \
      "how a CUDA job's collectives on device buffers travel: nccl (point-to-point and host "    \
      "buffers still go over MPI, staged), mpi (everything over MPI through host copies), or "   \
      "auto (nccl where the job has several ranks, each with a GPU of its own, NCCL loads, "     \
      "ULFM is off and SPARe is off; else mpi)")

#define FT_KEYS_train(K)                                                                         \
    K(train, steps, INT, "20", 0, 1e15, "", 0, "optimizer steps to run")                         \
    K(train, batch, INT, "4", 1, 1048576, "", 0, "sequences per micro-batch (B)")                \
    K(train, lr, REAL, "6e-4", 0, 10, "", 0, "peak learning rate")                               \
    K(train, lr_min_frac, REAL, "0.1", 0, 1, "", 0,                                              \
      "final learning rate of the decay, as a fraction of train.lr")                             \
    K(train, warmup, INT, "0", 0, 1e15, "", 0, "linear warm-up steps")                           \
    K(train, schedule, ENUM, "cosine", 0, 0, "constant|cosine|linear", 0,                        \
      "learning-rate decay after warm-up")                                                       \
    K(train, weight_decay, REAL, "0.1", 0, 1000, "", 0,                                          \
      "AdamW decoupled weight decay (not applied to biases and LayerNorm)")                      \
    K(train, beta1, REAL, "0.9", 0, 1, "", FT_KEY_LT_MAX, "AdamW first-moment decay")            \
    K(train, beta2, REAL, "0.95", 0, 1, "", FT_KEY_LT_MAX, "AdamW second-moment decay")          \
    K(train, eps, REAL, "1e-8", 0, 1, "", FT_KEY_GT_MIN, "AdamW epsilon")                        \
    K(train, grad_clip, REAL, "1.0", 0, 1e30, "", 0,                                             \
      "clip the global gradient norm to this; 0 = no clipping")                               \
    K(train, seq_len, INT, "0", 0, 1048576, "", 0,                                               \
      "training sequence length; 0 = model.seq_len (at most model.seq_len)")                     \
    K(train, ac, ENUM, "none", 0, 0, "none|full|every", 0,                                       \
      "activation checkpointing: none, each block (full), or train.ac_every blocks per segment")  \
    K(train, ac_every, INT, "2", 1, 4096, "", 0,                                                 \
      "blocks per checkpointed segment (train.ac = every)")                                      \
    K(train, val_every, INT, "10", 0, 1e15, "", 0,                                               \
      "steps between validation losses (and one at the end); 0 = only at the end")               \
    K(train, val_batches, INT, "4", 0, 1048576, "", 0,                                           \
      "micro-batches per validation loss; 0 = no validation")                                    \
    K(train, sample_tokens, INT, "64", 0, 1048576, "", 0,                                        \
      "tokens sampled at the end of training (0 = no sample)")                                   \
    K(train, rate_skip, INT, "1", 0, 1e15, "", 0,                                                \
      "first steps left out of the summary's rates (warm-up: page faults, cold caches)")

#define FT_KEYS_data(K)                                                                          \
    K(data, train, STR, "data/train_*.bin", 0, 0, "", 0,                                         \
      "glob of training token shards (llm.c format)")                                            \
    K(data, val, STR, "data/val_*.bin", 0, 0, "", 0,                                             \
      "glob of validation token shards; empty = see data.val_fraction")                          \
    K(data, shuffle, BOOL, "true", 0, 0, "", 0,                                                  \
      "shuffle the order of training sequences (seeded from run.seed)")                          \
    K(data, val_fraction, REAL, "0", 0, 1, "", FT_KEY_LT_MAX,                                    \
      "when data.val is empty: validate on this tail fraction of the training stream, held "     \
      "back from training; 0 = no validation")

#define FT_KEYS_dmr(K)                                                                           \
    K(dmr, mode, ENUM, "off", 0, 0, "off|naive|piggyback|planned", 0,                            \
      "how every op of a training step is executed twice and compared: naive = run again at "   \
      "once; piggyback = compare forward ops with their AC recomputation, the rest naive; "      \
      "planned = a plan for each op execution of a step, each micro-batch's apart "             \
      "(SpareTrain's three phases: piggyback, AGC segments and deferred checkers in "            \
      "communication windows, the rest naive) from dmr.plan or profiled")                       \
    K(dmr, phases, ENUM, "1,2,3", 0, 0, "1|1,2|1,2,3|paper", 0,                                  \
      "planner phases used by mode = planned (ablations): 1 piggyback, 2 AGC segments in PP "   \
      "windows, 3 deferred checkers in any window; paper = 1,2,3 with the paper's rules as "    \
      "published (Phase 3 also queues ops no window holds and demotes the shortest when over "  \
      "the budget; deferral bookkeeping not charged)")                                         \
    K(dmr, deferred_mb, REAL, "1024", 0, 1e9, "", 0,                                             \
      "memory budget for the tensors deferred checkers keep, MiB per rank (mode = planned)")     \
    K(dmr, profile_steps, INT, "3", 1, 1000, "", 0,                                              \
      "mode = planned without a plan file: steps profiled (checked naively) before planning; "  \
      "the first is left out of the measurements when there are several")                      \
    K(dmr, plan, STR, "", 0, 0, "", 0,                                                           \
      "plan file (mode = planned): loaded when it exists, else written after profiling; with "  \
      "several ranks one file per rank, FILE.rN; empty = profile, keep the plan in memory. A "   \
      "plan is for the parallel.microbatches it was made with (version 1 files, one strategy "   \
      "per op for every micro-batch, still load)")                                              \
    K(dmr, moe_dynamic, BOOL, "false", 0, 0, "", 0,                                              \
      "mode = planned: decide at run time, from the rows actually routed, whether each MoE "     \
      "expert op's check is deferred (its kept bytes fit what dmr.deferred_mb leaves after "     \
      "the static plan's reservations) or naive at once; piggyback and AGC choices stay")        \
    K(dmr, leftovers, ENUM, "naive", 0, 0, "naive|end", 0,                                       \
      "mode = planned: the checks no window holds: naive = run again at once (the paper); end = " \
      "deferred, their inputs kept within dmr.deferred_mb and replayed in any later wait or "    \
      "before the agreement: off the pipeline's critical path, at the price of the copies "     \
      "(decided at run time: plan files and ftllm plan still list them as naive)")              \
    K(dmr, chain, BOOL, "true", 0, 0, "", 0,                                                    \
      "mode = planned: a deferred check of a parameter gradient's micro-batch (which adds onto " \
      "the earlier micro-batches' sum) joins the previous micro-batch's deferred check and "   \
      "takes that sum from its replay; false = keeps a copy of the sum at the primary")         \
    K(dmr, refine, ENUM, "pipeline", 0, 0, "off|pipeline", 0,                                   \
      "mode = planned with phase 3, pp > 1: pipeline = once planned, the stages "                \
      "simulate their step together (each stage's profile: sends, receives, checks, replays "    \
      "in waits) and move single op executions between naive and deferred while the "           \
      "simulated step gets shorter (a check at once delays the neighbour waiting for the next " \
      "message; with tp or ep > 1 the pipeline of tp and ep rank 0 refines and each stage's "   \
      "peers run its choices); "                                                                \
      "off = each stage's own plan")                                                            \
    K(dmr, suspect_after, INT, "3", 0, 1000000000, "", 0,                                        \
      "a rank whose checks mismatch in this many steps is suspect: with SPARe (spare.r >= 1) "   \
      "its replica is retired before the next step, as a fail-stop; 0 = never")

#define FT_KEYS_spare(K)                                                                         \
    K(spare, r, INT, "0", 0, 1024, "", FT_KEY_AUTO,                                              \
      "redundancy: shards of the global batch each data-parallel replica stacks (at most "       \
      "parallel.dp), reduced in a fixed shard order with exactly-once counts; 0 = off (bucketed " \
      "all-reduce); auto = what `ftllm optimize` recommends for N = parallel.dp replicas of "  \
      "cluster.gpus_per_replica GPUs over train.steps steps with the [cluster] failure keys, "   \
      "decided before step 1 from cluster.step_s and cluster.checkpoint_s (1 when checkpoints "  \
      "alone win); a resumed run keeps its checkpoint's r when parallel.dp is the same")         \
    K(spare, spares, INT, "0", 0, 1024, "", 0,                                                   \
      "hot spare replicas (tp x pp x ep ranks each, beyond the layout's): they hold no shard and " \
      "idle; a failed replica's place is taken by one (state copied from a live replica), so " \
      "the redundancy is restored without a restart; needs spare.r >= 1 and parallel.dp >= 2")   \
    K(spare, wipeout, ENUM, "restart", 0, 0, "restart|requeue", 0,                               \
      "a wipe-out (a shard lost every live holder): restart = in-process from the newest "       \
      "verified checkpoint, every replica back (exit 5 when there is none); requeue = exit 5 " \
      "at once (the job script requeues it)")

#define FT_KEYS_checkpoint(K)                                                                    \
    K(checkpoint, dir, STR, "checkpoint", 0, 0, "", 0, "folder of the checkpoint files")         \
    K(checkpoint, interval, INT, "0", 0, 1e15, "", FT_KEY_AUTO,                                  \
      "steps between checkpoints (at multiples of it, and at the end); 0 = none; auto = the "   \
      "optimizer's choice from the measured step and write times and the [cluster] failure rates") \
    K(checkpoint, keep, INT, "2", 1, 1000000, "", 0, "checkpoints kept on disk (newest K)")    \
    K(checkpoint, every_s, REAL, "0", 0, 1e12, "", 0,                                            \
      "also checkpoint when this many seconds passed since the last one; 0 = no time trigger")   \
    K(checkpoint, async, BOOL, "false", 0, 0, "", 0,                                             \
      "write checkpoints from a background thread (the step pays only a copy to host memory)")   \
    K(checkpoint, resume, STR, "", 0, 0, "", 0,                                                  \
      "auto = the newest checkpoint of run.name in checkpoint.dir that verifies; a file name = " \
      "that checkpoint; empty = start fresh")                                                    \
    K(checkpoint, debug_delay_ms, INT, "0", 0, 600000, "", 0,                                    \
      "testing aid: pause this long before writing each dataset (widens a crash test's window)")

#define FT_KEYS_faults(K)                                                                        \
    K(faults, schedule, STR, "", 0, 0, "", 0,                                                    \
      "fault schedule file, one event per line: sdc (a bit flip), sdc-random (a seeded "       \
      "campaign), fail (fail-stop of a replica, masked by SPARe: needs spare.r); format: inputs/default.faults; empty = "   \
      "no faults")

#define FT_KEYS_cluster(K)                                                                       \
    K(cluster, gpus, INT, "16384", 1, 1e9, "", 0, "GPUs in the cluster")                         \
    K(cluster, gpus_per_replica, INT, "8", 1, 1e9, "", 0,                                        \
      "GPUs holding one model copy (tp x pp x ep); the cluster has gpus / this groups")          \
    K(cluster, gpu_mtbf_h, REAL, "50000", 0, 1e12, "", FT_KEY_GT_MIN,                            \
      "mean time between failures of one GPU, hours (system MTBF = this / gpus)")                \
    K(cluster, failure_law, ENUM, "exponential", 0, 0, "exponential|weibull", 0,                 \
      "law of each GPU's time to failure (same mean either way); in the sparing study, of each " \
      "tray's and rack's up time (Weibull: every part new at the start and after each repair)")  \
    K(cluster, weibull_shape, REAL, "0.8", 0.05, 20, "", 0,                                      \
      "Weibull shape k (k < 1: infant mortality); used with failure_law = weibull")              \
    K(cluster, restart_s, REAL, "3600", 0, 1e9, "", 0, "global restart after a wipe-out, seconds") \
    K(cluster, checkpoint_s, REAL, "60", 0, 1e9, "", 0, "time to write one checkpoint, seconds") \
    K(cluster, step_s, REAL, "10", 0, 1e9, "", FT_KEY_GT_MIN,                                    \
      "failure-free time of one training step, seconds")                                        \
    K(cluster, steps, INT, "777600", 1, 1e15, "", 0,                                             \
      "steps of the planned run (777600 x 10 s = 90 days)")                                      \
    K(cluster, detect_latency_s, REAL, "0", 0, 1e9, "", 0,                                       \
      "delay between a failure and its detection, seconds (DMR deferred checks)")                \
    K(cluster, policy, ENUM, "all", 0, 0, "ckpt|replication|spare|all", 0,                       \
      "what `simulate` runs: checkpoint only, replication r, SPARe r, or each at its best r")    \
    K(cluster, r, INT, "auto", 1, 1024, "", FT_KEY_AUTO,                                         \
      "redundancy `simulate` uses; auto = the optimizer's choice per policy")                    \
    K(cluster, interval, INT, "auto", 1, 1e15, "", FT_KEY_AUTO,                                  \
      "steps between checkpoints in `simulate`; auto = the optimizer's choice")                  \
    K(cluster, r_max, INT, "20", 1, 1024, "", 0, "largest redundancy the optimizer considers")   \
    K(cluster, trials, INT, "100", 1, 1000000, "", 0,                                            \
      "independent simulated runs (spread over MPI ranks)")                                      \
    K(cluster, verify, BOOL, "false", 0, 0, "", 0,                                               \
      "`optimize` simulates its recommendation and the neighbours (r -+ 1, interval x0.8 and "   \
      "x1.25; cluster.trials runs each) and says whether it is the simulated best (= --verify)") \
    K(cluster, event_log, STR, "", 0, 0, "", 0,                                                  \
      "CSV event log of the first simulated run of each alternative (prefix); empty = none")    \
    K(cluster, zones, INT, "0", 0, 1000000, "", 0,                                               \
      "sparing study (Meta): sparing zones B; 0 = no sparing study")                             \
    K(cluster, blocks_per_zone, INT, "256", 1, 1000000, "", 0,                                   \
      "compute blocks in use per zone (L)")                                                      \
    K(cluster, trays_per_block, INT, "18", 1, 100000, "", 0,                                     \
      "trays per block, its intra-block spares included")                                        \
    K(cluster, gpus_per_tray, INT, "4", 1, 1024, "", 0, "GPUs per tray")                         \
    K(cluster, spare_blocks, INT, "auto", 0, 1000000, "", FT_KEY_AUTO,                           \
      "inter-block spares per zone (R); auto = the best by CETT")                                \
    K(cluster, spare_trays, INT, "auto", 0, 100000, "", FT_KEY_AUTO,                             \
      "intra-block spare trays per block (I, out of trays_per_block); auto = the best")          \
    K(cluster, tray_mtbf_h, REAL, "20000", 0, 1e12, "", FT_KEY_GT_MIN, "MTBF of a tray, hours")  \
    K(cluster, tray_mttr_h, REAL, "72", 0, 1e9, "", 0, "repair time of a tray, hours")           \
    K(cluster, rack_mtbf_h, REAL, "100000", 0, 1e12, "", FT_KEY_GT_MIN,                          \
      "MTBF of a rack (a whole block), hours")                                                   \
    K(cluster, rack_mttr_h, REAL, "24", 0, 1e9, "", 0, "repair time of a rack, hours")           \
    K(cluster, sparing_horizon_h, REAL, "100000", 1, 1e12, "", 0,                                \
      "hours of hardware life each simulated sparing trial covers (Weibull: also the span from "  \
      "new over which the sparing model averages CETT)")                                         \
    K(cluster, gpu_tflops, REAL, "989", 0, 1e9, "", FT_KEY_GT_MIN,                               \
      "plan --predict: a GPU's peak dense bf16 TFLOP/s (H100/H200 SXM: 989)")                    \
    K(cluster, gpu_eff, REAL, "0.6", 0, 1, "", FT_KEY_GT_MIN,                                    \
      "plan --predict: the fraction of gpu_tflops a GEMM or attention kernel achieves")          \
    K(cluster, hbm_gbs, REAL, "4000", 0, 1e9, "", FT_KEY_GT_MIN,                                 \
      "plan --predict: achievable memory bandwidth of a GPU, GB/s (H200: 4.8 TB/s peak)")        \
    K(cluster, gpu_mem_gb, REAL, "141", 0, 1e9, "", FT_KEY_GT_MIN,                               \
      "plan --predict: memory per GPU, GB (H200 141, H100 80, H100 NVL 94)")                     \
    K(cluster, mem_reserve_gb, REAL, "4", 0, 1e9, "", 0,                                         \
      "plan --predict: GPU memory training cannot use, GB (CUDA context, NCCL buffers, "         \
      "allocator fragmentation)")                                                                \
    K(cluster, gpus_per_node, INT, "8", 1, 1048576, "", 0,                                       \
      "plan --predict: GPUs per node (tensor parallelism stays inside one)")                     \
    K(cluster, intra_gbs, REAL, "360", 0, 1e9, "", FT_KEY_GT_MIN,                                \
      "plan --predict: intra-node (NVLink) bandwidth per GPU a ring collective achieves, GB/s")  \
    K(cluster, intra_lat_us, REAL, "3", 0, 1e9, "", 0,                                           \
      "plan --predict: intra-node latency per message step, microseconds")                       \
    K(cluster, inter_gbs, REAL, "45", 0, 1e9, "", FT_KEY_GT_MIN,                                 \
      "plan --predict: inter-node (InfiniBand) bandwidth per GPU, GB/s (400 Gb/s NDR: 50)")      \
    K(cluster, inter_lat_us, REAL, "5", 0, 1e9, "", 0,                                           \
      "plan --predict: inter-node latency per message, microseconds")                            \
    K(cluster, dmr_keep, ENUM, "copy", 0, 0, "copy|free", 0,                                     \
      "plan --predict: what keeping a deferred check costs: copy = as ftllm's executor does it "  \
      "(its kept inputs copied, read and written, and its outputs fingerprinted, read once, at " \
      "hbm_gbs); free = the paper's model (inputs kept by reference: memory, no time)")

#define FT_KEYS_perf(K)                                                                          \
    K(perf, papi_events, STR, "", 0, 0, "", 0,                                                   \
      "comma-separated PAPI events (at most 16) counted per named region of the end-of-run "    \
      "table, e.g. perf::TASK-CLOCK,perf::PAGE-FAULTS; an event PAPI refuses is reported once "  \
      "and left out; empty = no counters")

/* C enums matching the ENUM keys' choices, in the same order. */
enum ft_schedule { FT_SCHED_CONSTANT, FT_SCHED_COSINE, FT_SCHED_LINEAR };
enum ft_ac_choice { FT_AC_CHOICE_NONE, FT_AC_CHOICE_FULL, FT_AC_CHOICE_EVERY };
enum ft_dmr_mode { FT_DMR_OFF, FT_DMR_NAIVE, FT_DMR_PIGGYBACK, FT_DMR_PLANNED };
enum ft_spare_wipeout { FT_WIPEOUT_RESTART, FT_WIPEOUT_REQUEUE };
enum ft_dmr_phases { FT_DMR_PHASES_1, FT_DMR_PHASES_12, FT_DMR_PHASES_123, FT_DMR_PHASES_PAPER };
enum ft_dmr_leftovers { FT_DMR_LEFT_NAIVE, FT_DMR_LEFT_END };
enum ft_dmr_keep { FT_DMR_KEEP_COPY, FT_DMR_KEEP_FREE };
enum ft_dmr_refine { FT_DMR_REFINE_OFF, FT_DMR_REFINE_PIPELINE };
enum ft_backend_choice { FT_BACKEND_CPU, FT_BACKEND_CUDA };
enum ft_device_comm_choice { FT_DEVCOMM_KEY_AUTO, FT_DEVCOMM_KEY_NCCL, FT_DEVCOMM_KEY_MPI };
enum ft_precision_choice { FT_PRECISION_FP32, FT_PRECISION_BF16 };
enum ft_progress_choice { FT_PROGRESS_AUTO, FT_PROGRESS_LIVE, FT_PROGRESS_LINES };
enum ft_mlp_choice { FT_MLP_GELU, FT_MLP_SWIGLU };
/* run.log_level uses enum ft_log_level from log.h (error|warn|info|debug). */

#endif
