/* verb_plan_predict.c: `ftllm plan --predict DECK [section.key=value ...]`: a what-if DMR plan
 * for a cluster this job does not run on. The deck's model, layout and [cluster] hardware give
 * the predicted operators, windows, step time and memory of the slowest pipeline stage
 * (plan_predict.h); the three-phase planner runs for phases 1, 1+2 and 1+2+3 (the paper's
 * ablation), and each gets a table: operator groups by strategy, windows used, predicted
 * overhead and throughput against naive DMR. With pipeline stages, every stage is then built,
 * planned and simulated together (plan_predict.h, "The pipeline"): a line under each table, and
 * the stages' plans refined together under phases 1,2,3 (unless dmr.refine = off). The line
 * `overhead: naive ...` sums up the slowest stage's tables, `pipeline: naive ...` the
 * simulation. Nothing runs on the modelled cluster: every rank computes the same stage tables,
 * rank 0 alone the simulation; rank 0 prints. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ftllm/cli.h"
#include "ftllm/deck.h"
#include "ftllm/ftllm.h"
#include "ftllm/log.h"
#include "ftllm/plan_predict.h"

#define P0(...)                                                                                \
    do {                                                                                       \
        if (rank == 0) printf(__VA_ARGS__);                                                    \
    } while (0)

static const int g_phase_sets[3] = {PLAN_PHASE1, PLAN_PHASE1 | PLAN_PHASE2,
                                    PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3};
static const char *const g_phase_names[3] = {"1", "1,2", "1,2,3"};

static void print_setup(int rank, const FtConfig *cfg, const FtPredict *p)
{
    const struct ft_cfg_model *m = &cfg->model;
    const struct ft_cfg_parallel *l = &cfg->parallel;
    const struct ft_cfg_cluster *c = &cfg->cluster;
    long long gpus = l->tp * l->pp * l->dp;
    long long T = cfg->train.seq_len ? cfg->train.seq_len : m->seq_len;
    static const char *const ac[] = {"none", "full", "every"};
    P0("model: %lld blocks, width %lld, %lld heads (%lld kv), MLP %lld %s, vocab %lld; sequences "
       "of %lld, %lld per micro-batch, %lld micro-batches per data-parallel rank (global batch "
       "%lld), AC %s\n",
       m->layers, m->channels, m->heads, m->kv_heads ? m->kv_heads : m->heads,
       m->ffn ? m->ffn : 4 * m->channels, m->mlp == FT_MLP_SWIGLU ? "swiglu" : "gelu", m->vocab,
       T, cfg->train.batch, l->microbatches, cfg->train.batch * l->microbatches * l->dp,
       ac[cfg->train.ac]);
    P0("layout: tp %lld x pp %lld x dp %lld = %lld GPUs (%lld node%s of %lld), TP in a node, PP "
       "hops %s-node\n",
       l->tp, l->pp, l->dp, gpus, (gpus + c->gpus_per_node - 1) / c->gpus_per_node,
       gpus > c->gpus_per_node ? "s" : "", c->gpus_per_node, p->pp_inter ? "inter" : "intra");
    P0("hardware: %g TFLOP/s x %g, HBM %g GB/s, %g GB per GPU; intra-node %g GB/s %g us, "
       "inter-node %g GB/s %g us; a deferred check's keeping %s\n",
       c->gpu_tflops, c->gpu_eff, c->hbm_gbs, c->gpu_mem_gb, c->intra_gbs, c->intra_lat_us,
       c->inter_gbs, c->inter_lat_us,
       c->dmr_keep == FT_DMR_KEEP_COPY
           ? "copies its inputs and fingerprints its outputs at HBM speed (cluster.dmr_keep = "
             "copy, as ftllm does)"
           : "is free (cluster.dmr_keep = free: inputs kept by reference, the paper's model)");
}

static void print_stage(int rank, const FtConfig *cfg, const FtPredict *p)
{
    int ntp = 0, npp = 0;
    for (int w = 0; w < p->nwin; w++)
        ntp += p->win_class[w] == PRED_W_TP, npp += p->win_class[w] == PRED_W_PP;
    P0("stage: the last of %lld (%d blocks + head), per micro-batch: forward %.1f ms, recompute "
       "%.1f ms, backward %.1f ms, TP all-reduces %d x %.3f ms, PP hops 2 x %.3f ms: a cycle of "
       "%.1f ms\n",
       cfg->parallel.pp, p->Ls, 1e3 * p->t_fwd, 1e3 * p->t_recompute, 1e3 * p->t_bwd,
       ntp / (p->m ? p->m : 1), 1e3 * p->t_tp_one, 1e3 * p->t_pp_hop, 1e3 * p->t_cycle);
    P0("step: %.3f s = %d cycles + bubble %.3f s (idle, not used as a window, as in the paper) + "
       "DP reduce-scatter %.3f s + optimizer %.3f s; idle in windows %.1f%% of the step, in the "
       "bubble %.1f%%\n",
       p->t_step, p->m, p->t_bubble, p->t_dp, p->t_opt,
       100 * (p->m * (p->t_tp + p->t_pp) + p->t_dp) / p->t_step, 100 * p->t_bubble / p->t_step);
    P0("memory per GPU: parameters and optimizer %.1f GB, activations %.1f GB, reserve %.1f GB: "
       "%.1f of %.0f GB (the first stage: %.1f GB); deferred-check budget %.1f GB\n",
       p->mem_state / 1e9, p->mem_act / 1e9, p->mem_reserve / 1e9, p->footprint / 1e9,
       p->gpu_mem / 1e9, p->footprint0 / 1e9, (double)p->budget / 1e9);
    P0("checks per step: %d operators (%d micro-batches + optimizer), windows TP %d, PP %d, DP "
       "%d; naive DMR checker time %.3f s = %.1f%% of the step\n",
       p->nops, p->m, ntp, npp, p->nwin - ntp - npp, p->t_naive,
       predict_overhead_pct(p, NULL));
}

/* One phase set's table: operator groups by strategy, then windows and the overhead. */
static void print_plan(int rank, const FtPredict *p, const FtDmrPlan *plan, const char *name)
{
    int cnt[PRED_NGROUPS][4] = {{0}};
    double tn[PRED_NGROUPS] = {0}, tall[PRED_NGROUPS] = {0};
    for (int i = 0; i < p->nops; i++) {
        int g = p->group[i];
        cnt[g][plan->strategy[i]]++;
        tall[g] += p->ops[i].time;
        if (plan->strategy[i] == PLAN_NAIVE) tn[g] += p->ops[i].time;
    }
    P0("\nphases %s:\n  %-8s %7s %9s %7s %8s %7s %10s %9s\n", name, "group", "ops", "piggyback",
       "naive", "deferred", "agc", "checker s", "naive s");
    for (int g = 0; g < PRED_NGROUPS; g++) {
        int n = cnt[g][0] + cnt[g][1] + cnt[g][2] + cnt[g][3];
        if (!n) continue;
        P0("  %-8s %7d %9d %7d %8d %7d %10.3f %9.3f\n", predict_group_name(g), n,
           cnt[g][PLAN_PIGGYBACK], cnt[g][PLAN_NAIVE], cnt[g][PLAN_DEFERRED], cnt[g][PLAN_AGC],
           tall[g], tn[g]);
    }
    int used[PRED_NWIN] = {0}, all[PRED_NWIN] = {0};
    double tu[PRED_NWIN] = {0}, tl[PRED_NWIN] = {0};
    for (int w = 0; w < p->nwin; w++) {
        int c = p->win_class[w];
        all[c]++, tl[c] += p->win[w].len;
        if (plan->win_time[w] > 0) used[c]++, tu[c] += plan->win_time[w];
    }
    P0("  windows used:");
    for (int c = 0; c < PRED_NWIN; c++)
        if (all[c])
            P0(" %s %d of %d (%.3f of %.3f s)", predict_win_name(c), used[c], all[c], tu[c],
               tl[c]);
    P0("%s; AGC segments %d (extra %.3f s); checks kept at most %.1f GB at once (budget %.1f "
       "GB)\n", p->nwin ? "" : " none", plan->nseg, plan->agc_extra,
       (double)planner_peak_held(plan, p->ops, p->win) / 1e9, (double)p->budget / 1e9);
    double ovh = predict_overhead_pct(p, plan);
    double gain = 100 * ((p->t_step + p->t_naive) / (p->t_step + plan->overhead) - 1);
    P0("  predicted overhead: %.1f%% (%.3f s per step); throughput %+.1f%% against naive DMR\n",
       ovh, plan->overhead, gain);
}

/* The search's budget in the pipeline's refinement (a quarter of dmr.refine's in a run, at
 * least 1000 simulations: on the paper's decks 1000-2000, about a second; 4x that found the
 * same plans, 2026-12-02) */
#define PREDICT_REFINE_WORK 50000000LL

/* One phase set on every stage, simulated: the stages' own plans, and refined (refined). */
static void print_pipe(int rank, const FtPredictPipe *pipe, const FtPipeRefine *rf, bool refined)
{
    P0("  every stage (%d), simulated: no DMR %.3f s a step, naive %+.1f%%, the stages' own plans "
       "%+.1f%%", pipe->P, rf->off.step, predict_pipe_pct(rf, rf->naive.step),
       predict_pipe_pct(rf, rf->start.step));
    if (refined)
        P0(", refined together %+.1f%% (%d checks moved, %lld simulations); the pipeline's "
           "bound %+.1f%%", predict_pipe_pct(rf, rf->best.step), rf->flips, rf->evals,
           predict_pipe_pct(rf, rf->bound));
    P0("\n");
}

int verb_plan_predict(int argc, char **argv, MPI_Comm comm)
{
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    if (argc < 2 || argv[1][0] == '-' || strchr(argv[1], '=')) {
        cli_error(comm, "usage: ftllm plan --predict DECK [section.key=value ...]  (a deck with "
                        "[model], [parallel], [train] and [cluster]; see ftllm help deck)");
        return FT_EXIT_USAGE;
    }
    FtConfig cfg;
    char err[FT_DECK_ERR_MAX];
    if (deck_load_any_layout(&cfg, argv[1], argc - 2, argv + 2, comm, err, sizeof err)) {
        cli_error(comm, err);
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    FtPredict p;
    if (predict_build(&cfg, &p, err, sizeof err)) { /* the same verdict on every rank */
        cli_error(comm, err);
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    P0("ftllm %s plan --predict: %s (a what-if: nothing runs on that cluster)\n", FTLLM_VERSION,
       cfg.path);
    print_setup(rank, &cfg, &p);
    print_stage(rank, &cfg, &p);
    FtPredictPipe pipe = {0}; /* rank 0's alone: what it prints (a few seconds of search) */
    char pipe_err[FT_DECK_ERR_MAX] = "";
    if (rank == 0 && cfg.parallel.pp > 1)
        predict_pipe_build(&cfg, &pipe, pipe_err, sizeof pipe_err); /* pipe.P 0: not built */
    double pct[3];
    FtPipeRefine rf[3], hops = {0};
    for (int k = 0; k < 3; k++) {
        FtDmrPlan plan;
        if (predict_plan(&p, g_phase_sets[k], &plan))
            FT_DIE("plan --predict: the planner refused the predicted stage (out of memory?)");
        print_plan(rank, &p, &plan, g_phase_names[k]);
        pct[k] = predict_overhead_pct(&p, &plan);
        planner_free(&plan);
        if (pipe.P > 1) {
            bool refine = k == 2 && cfg.dmr.refine == FT_DMR_REFINE_PIPELINE;
            long long work = refine ? PREDICT_REFINE_WORK : 0;
            if (predict_pipe_run(&pipe, g_phase_sets[k], work, false, &rf[k]) ||
                (k == 2 && predict_pipe_run(&pipe, g_phase_sets[k], work, true, &hops)))
                FT_DIE("plan --predict: the planner refused a predicted stage (out of memory?)");
            print_pipe(rank, &pipe, &rf[k], refine);
            if (k == 2) { /* refined, or (refine off) the stages' own plans */
                P0("  deferred checks replayed in the PP hops alone (the paper's PP windows, no "
                   "bubble, no wait on a slower stage): the stages' own plans %+.1f%%",
                   predict_pipe_pct(&hops, hops.start.step));
                if (refine) P0(", refined %+.1f%%", predict_pipe_pct(&hops, hops.best.step));
                P0(": the pipeline's waits give %.1f points\n",
                   predict_pipe_pct(&hops, hops.best.step) -
                       predict_pipe_pct(&rf[k], rf[k].best.step));
            }
        }
    }
    P0("\noverhead: naive %.1f%%, phases 1 %.1f%%, 1,2 %.1f%%, 1,2,3 %.1f%% of a %.3f s step "
       "(predicted, %s)\n",
       predict_overhead_pct(&p, NULL), pct[0], pct[1], pct[2], p.t_step, cfg.path);
    if (rank == 0 && cfg.parallel.pp > 1 && pipe.P == 0)
        printf("pipeline: %s\n", pipe_err);
    if (pipe.P > 1)
        printf("pipeline: naive %.1f%%, phases 1 %.1f%%, 1,2 %.1f%%, 1,2,3 %.1f%%, refined %.1f%%, "
               "bound %.1f%%, refined in the hops alone %.1f%% of a %.3f s step (simulated, every "
               "stage, %s)\n",
               predict_pipe_pct(&rf[0], rf[0].naive.step),
               predict_pipe_pct(&rf[0], rf[0].start.step),
               predict_pipe_pct(&rf[1], rf[1].start.step),
               predict_pipe_pct(&rf[2], rf[2].start.step), predict_pipe_pct(&rf[2], rf[2].best.step),
               predict_pipe_pct(&rf[2], rf[2].bound), predict_pipe_pct(&hops, hops.best.step),
               rf[0].off.step, cfg.path);
    predict_pipe_free(&pipe);
    if (rank == 0) fflush(stdout);
    predict_free(&p);
    deck_free(&cfg);
    return FT_EXIT_OK;
}
