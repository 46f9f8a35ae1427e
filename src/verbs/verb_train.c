/* verb_train.c: `ftllm train DECK [section.key=value ...]`.
 *
 * Loads and checks the deck collectively, echoes the keys that differ from the defaults (every
 * key at log_level = debug; every key always into <checkpoint.dir>/<run.name>.deck.ini), builds
 * the model (random initialization, or model.init, an llm.c model file), opens the token shards
 * (data.h), opens the PAPI counters of perf.papi_events (counters.h) on the region timers, runs
 * the one training loop (train.h), optionally writes the weights (run.save_model) and a sample,
 * then prints the end-of-run block (waiting, regions with their counters, SPARe, faults and DMR,
 * checkpoints, summary) and ends with a verdict line. Exit codes: 0 trained with
 * finite losses, 1 a loss was NaN/inf (or the weights could not be written), 2 bad input.
 * A multi-rank job is decomposed by the deck's [parallel] layout (grid.h): each rank builds its
 * shard of the model (model.h) and the one training loop runs the layout (train.h); at the end
 * rank 0 prints every rank's fraction of step time spent waiting on messages.
 * run.backend picks where ops run (backend.h). A device model is staged through the host: the
 * model is initialized (or read) in host memory and copied to the device before training, and
 * copied back before run.save_model writes it (model_copy_state); checkpoints stage it through
 * host memory too (train_ckpt.c).
 * With SPARe (spare.r > 0) the run ends with a `spare:` line (failures masked, wipe-outs, shards
 * computed vs needed, spares used, restarts, time lost); a replica that failed (from the faults
 * hook) leaves the training communicators: its ranks wait inside train_run (job channel,
 * train_spare_attach) and skip the reports of the grid they left. spare.spares hot spares are
 * the ranks after the layout's: they idle in train_run until one takes a failed replica's place.
 * A wipe-out restarts in-process from the newest verified checkpoint (every replica back); with
 * none (or spare.wipeout = requeue) the run ends with FT_EXIT_WIPEOUT. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ftllm/cli.h"
#include "ftllm/comm.h"
#include "ftllm/counters.h"
#include "ftllm/data.h"
#include "ftllm/deck.h"
#include "ftllm/dmr_plan.h"
#include "ftllm/ftllm.h"
#include "ftllm/llmc.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/sample.h"
#include "ftllm/threads.h"
#include "ftllm/train.h"
#include "ftllm/train_ckpt.h" /* checkpoint hook */
#include "ftllm/train_dmr.h"  /* DMR hook */

/* Agrees on a status over comm: the worst (largest) rc of any rank. */
static int agree(int rc, MPI_Comm comm)
{
    int all = rc;
    FT_CHECK_MPI(MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, comm));
    return all;
}

/* A batch source over token shards; `what` names it in the debug log ("train", "val"). */
typedef struct fetch_ctx {
    FtData *d;
    const char *what;
} FetchCtx;

/* " t0 t1 ..." of a row of T tokens (the first 64, then " ..."), into buf; where buf is full,
 * " ..." after the last whole token (never a token cut short) */
static void tokens_text(char *buf, size_t len, const int *row, int T)
{
    size_t k = 0;
    buf[0] = 0;
    int t = 0;
    for (; t < T && t < 64; t++) {
        int w = snprintf(buf + k, len - k, " %d", row[t]);
        if (w < 0 || (size_t)w + 5 > len - k) break; /* room for it and " ..." */
        k += (size_t)w;
    }
    buf[k] = 0;
    if (t < T) snprintf(buf + k, len - k, " ...");
}

/* run.log_level = debug: every sequence handed to the model, one line per sequence on the rank
 * that fetched it: its number, where it starts (stream token and file), its input and target
 * tokens (the first 64 of each), so a user (and tests/e2e/data.sh) can see which tokens were
 * trained on. */
static void log_batch(const FetchCtx *f, uint64_t first, int B, const int *inputs,
                      const int *targets)
{
    int T = data_seq_len(f->d);
    for (int b = 0; b < B; b++) {
        char where[600], in[600], tg[600];
        uint64_t idx = first + (uint64_t)b;
        data_locate(f->d, idx, where, sizeof where);
        tokens_text(in, sizeof in, inputs + (size_t)b * T, T);
        tokens_text(tg, sizeof tg, targets + (size_t)b * T, T);
        ft_log_rank(FT_LOG_DEBUG,
                    "batch: %s sequence %llu at stream token %llu (%s): inputs%s | targets%s",
                    f->what, (unsigned long long)idx,
                    (unsigned long long)data_stream_offset(f->d, idx), where, in, tg);
    }
}

static void data_fetch(void *ctx, uint64_t first, int B, int *inputs, int *targets)
{
    const FetchCtx *f = ctx;
    data_batch(f->d, first, B, inputs, targets);
    if (log_level() >= FT_LOG_DEBUG) log_batch(f, first, B, inputs, targets);
}

/* The model the deck asks for (this rank's shard sh; NULL: the whole model): model.init, or
 * GPT-2 initialization from run.seed. Returns 0 or -1 with err set (m freed and zeroed, so
 * freeing it again is harmless). Shared with `ftllm sample`. */
static int model_from_deck(const FtConfig *cfg, const FtShard *sh, FtModel *m, char *err,
                           size_t errlen)
{
    FtGpt2Config mc;
    model_config_from_deck(cfg, &mc);
    model_create_sharded(m, &mc, sh);
    if (!cfg->model.init[0]) {
        model_init_random(m, (uint64_t)cfg->run.seed);
        return 0;
    }
    bool whole = !sh || (sh->tp == 1 && sh->pp == 1);
    FtModel full;
    if (!whole) model_create(&full, &mc);
    int rc = llmc_read_model(cfg->model.init, whole ? m : &full, err, errlen);
    if (!whole) {
        if (!rc) model_copy_from_full(m, &full);
        model_free(&full);
    }
    if (rc) model_free(m);
    return rc ? -1 : 0;
}

/* Loads the deck collectively and sets up logging and threads; shared with `ftllm sample`. */
static int load_deck(const char *verb, int argc, char **argv, MPI_Comm comm, FtConfig *cfg)
{
    if (argc < 2 || argv[1][0] == '-' || strchr(argv[1], '=')) {
        char msg[256];
        snprintf(msg, sizeof msg, "usage: ftllm %s DECK [section.key=value ...]  (a deck file "
                                  "first; see ftllm help deck)", verb);
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    char err[FT_DECK_ERR_MAX];
    if (deck_load(cfg, argv[1], argc - 2, argv + 2, comm, err, sizeof err) ||
        deck_check_trainable(cfg, err, sizeof err)) {
        cli_error(comm, err);
        deck_free(cfg);
        return FT_EXIT_USAGE;
    }
    log_init(rank, cfg->run.log_level);
    threads_setup(comm, cfg->run.threads);
    return FT_EXIT_OK;
}

/* Over comm: the text of the first rank whose bad is set, with " (rank R)" when that is not rank
 * 0 of several, into out; -1 when no rank's is set. Collective. */
static int first_reason(MPI_Comm comm, int bad, const char *text, char *out, size_t outlen)
{
    int rank = 0, nranks = 1;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &nranks));
    int *all = malloc(sizeof(int) * (size_t)nranks), src = -1;
    if (!all) FT_DIE("out of memory");
    FT_CHECK_MPI(MPI_Allgather(&bad, 1, MPI_INT, all, 1, MPI_INT, comm));
    for (int q = 0; q < nranks && src < 0; q++)
        if (all[q]) src = q;
    free(all);
    if (src < 0) return -1;
    char buf[640];
    snprintf(buf, sizeof buf, "%s", text);
    FT_CHECK_MPI(MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, src, comm));
    buf[sizeof buf - 1] = '\0';
    if (nranks > 1 && src > 0)
        snprintf(out, outlen, "%.600s (rank %d)", buf, src);
    else
        snprintf(out, outlen, "%s", buf);
    return src;
}

/* parallel.device_comm for a CUDA job on backend b, resolved to nccl or mpi in cfg, the same on
 * every rank (comm_device_pick); node: this rank's node. Returns FT_EXIT_OK, or FT_EXIT_USAGE
 * after one error line when nccl was asked for and cannot be had. Collective. */
static int pick_device_comm(FtConfig *cfg, MPI_Comm comm, MPI_Comm node, const FtBackend *b)
{
    if (cfg->parallel.device_comm == FT_DEVCOMM_KEY_MPI) return FT_EXIT_OK;
    int nranks = 1, local = 0, local_size = 1;
    FT_CHECK_MPI(MPI_Comm_size(comm, &nranks));
    FT_CHECK_MPI(MPI_Comm_rank(node, &local));
    FT_CHECK_MPI(MPI_Comm_size(node, &local_size));
    unsigned char *uuid = malloc(16 * (size_t)local_size);
    if (!uuid) FT_DIE("out of memory");
    FT_CHECK_MPI(MPI_Allgather(b->uuid, 16, MPI_BYTE, uuid, 16, MPI_BYTE, node));
    char why[256] = "", nwhy[256] = "", first[640] = "", msg[1024];
    bool nccl_ok = comm_nccl_available(nwhy, sizeof nwhy);
    int mine = comm_device_choice(uuid, local, local_size, nccl_ok, why, sizeof why);
    free(uuid);
    if (!nccl_ok && strstr(why, "NCCL is not available")) /* the loader's own reason */
        snprintf(why, sizeof why, "%s", nwhy);
    int src = first_reason(comm, mine != FT_DEVCOMM_NCCL, why, first, sizeof first);
    bool spare = deck_spare_on(cfg); /* spare.r = auto is on: resolved after the backend */
    int pick = comm_device_pick((int)cfg->parallel.device_comm, nranks, comm_ft_enabled(), spare,
                                src < 0 ? FT_DEVCOMM_NCCL : FT_DEVCOMM_MPI_STAGED, first, msg,
                                sizeof msg);
    if (pick < 0) {
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    cfg->parallel.device_comm = pick == FT_DEVCOMM_NCCL ? FT_DEVCOMM_KEY_NCCL : FT_DEVCOMM_KEY_MPI;
    log_info("comm: %s", msg);
    return FT_EXIT_OK;
}

/* The backend run.backend asks for (the GPU of a CUDA run), and for a CUDA run how its device
 * buffers travel (parallel.device_comm, resolved in cfg). Returns FT_EXIT_OK, or FT_EXIT_USAGE
 * after one error line (agreed over comm) when it cannot be had here. */
static int open_backend(FtConfig *cfg, MPI_Comm comm, const FtBackend **be)
{
    *be = backend_cpu();
    if (cfg->run.backend == FT_BACKEND_CPU) return FT_EXIT_OK;
    int rank = 0, local = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    MPI_Comm node; /* this rank's place on its node picks its GPU (backend_open) */
    FT_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    FT_CHECK_MPI(MPI_Comm_rank(node, &local));
    char why[512] = "", err[640], first[640];
    const FtBackend *b = NULL;
    if (!(b = backend_open("cuda", local, why, sizeof why)) && !why[0])
        snprintf(why, sizeof why, "not available");
    snprintf(err, sizeof err, "run.backend = cuda: %s", why);
    /* every rank's verdict; the message of the first rank that has none */
    int rc = FT_EXIT_OK;
    if (first_reason(comm, b ? 0 : 1, err, first, sizeof first) >= 0) {
        cli_error(comm, first);
        rc = FT_EXIT_USAGE;
    } else {
        rc = pick_device_comm(cfg, comm, node, b);
    }
    FT_CHECK_MPI(MPI_Comm_free(&node));
    if (rc) return rc;
    if (b->set_precision) {
        b->set_precision(b->ctx, (int)cfg->run.precision);
    } else if (cfg->run.precision != FT_PRECISION_FP32) { /* the same backend on every rank */
        snprintf(err, sizeof err, "run.precision = bf16: the %s backend computes in fp32 only",
                 b->name);
        cli_error(comm, err);
        return FT_EXIT_USAGE;
    }
    if (b->about) log_info("backend: %s: %s", b->name, b->about);
    if (b == backend_standin())
        log_warn("FTLLM_TEST_DEVICE=standin: run.backend = cuda runs on the stand-in device (the "
                 "CPU backend posing as a GPU: a testing aid)");
    *be = b;
    return FT_EXIT_OK;
}

/* Moves the host model *m onto backend be (nothing to do on the CPU). */
static void stage_to_backend(FtModel *m, const FtBackend *be)
{
    if (backend_is_host(be)) return;
    FtModel dev;
    model_create_on(&dev, &m->cfg, &m->sh, be);
    model_copy_state(&dev, m);
    model_free(m);
    *m = dev;
}

/* run.save_model: writes the weights from host memory (a device model is copied back first). */
static int save_weights(const char *path, const FtModel *m, char *err, size_t errlen)
{
    if (backend_is_host(m->be)) return llmc_write_model(path, m, err, errlen);
    FtModel host;
    model_create_sharded(&host, &m->cfg, &m->sh);
    model_copy_state(&host, m);
    int rc = llmc_write_model(path, &host, err, errlen);
    model_free(&host);
    return rc;
}

/* Testing aid for real process failures (tests/e2e/ulfm.sh): FTLLM_TEST_KILL=RANK:REGION:N
 * (a comma-separated list of them, one per rank) makes world rank RANK raise SIGKILL on its
 * N-th entry into the named region (timers.h: step, data, forward, backward, gradsync,
 * optimizer, ...) or its N-th pass of the kill point `agreed` (just after a step attempt's DMR
 * agreement, before the trainer's agreement on process failures), `idle` (a rank that does not
 * train, a hot spare, starting to wait for the job's next event), `regrid` or `write` (before
 * each checkpoint dataset the rank writes; timers.h). Returns 0, or FT_EXIT_USAGE
 * with one line on stderr for a malformed value (the same on every rank: every rank reads the
 * same environment). */
static int test_kill_setup(FtTrainer *tr, MPI_Comm comm)
{
    const char *v = getenv("FTLLM_TEST_KILL");
    if (!v || !v[0]) return 0;
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    for (const char *p = v; *p;) {
        int who = -1, n = 0, r = -1;
        long long nth = 0;
        char region[32] = "";
        if (sscanf(p, "%d:%31[a-z]:%lld%n", &who, region, &nth, &n) != 3 ||
            (p[n] != '\0' && p[n] != ',') || who < 0 || nth < 1 ||
            (r = timers_kill_point_of(region)) < 0) {
            char msg[400];
            snprintf(msg, sizeof msg, "FTLLM_TEST_KILL=%s: expected RANK:REGION:N[,...] (e.g. "
                     "2:backward:3; REGION a region of the end-of-run table, or agreed: just "
                     "after a step's DMR agreement, or idle: a waiting spare's wait, or regrid: "
                     "a new grid split out of a job with spares, or write: a checkpoint "
                     "dataset's write; N >= 1)", v);
            cli_error(comm, msg);
            return FT_EXIT_USAGE;
        }
        if (who == rank) timers_kill_at(&tr->regions, r, nth);
        log_warn("FTLLM_TEST_KILL: rank %d raises SIGKILL on its entry %lld into region %s "
                 "(a testing aid)", who, nth, region);
        p += n + (p[n] == ',');
    }
    return 0;
}


/* `ftllm plan`: the deck's run cut down to the DMR profile (verb_plan.c). */
static void plan_only(FtConfig *cfg, char *plan_path, size_t len)
{
    snprintf(plan_path, len, "%s", cfg->dmr.plan);
    cfg->dmr.plan[0] = '\0'; /* profile even where the files exist: verb_plan writes them */
    cfg->dmr.mode = FT_DMR_PLANNED;
    cfg->train.steps = cfg->dmr.profile_steps;
    cfg->train.val_batches = 0, cfg->train.sample_tokens = 0;
    cfg->run.save_model[0] = cfg->faults.schedule[0] = '\0';
    cfg->checkpoint.interval = 0, cfg->checkpoint.every_s = 0, cfg->checkpoint.resume[0] = '\0';
}

/* What a finished run leaves besides its checkpoints, on a whole (unsharded) model with finite
 * losses: run.save_model's weights (collective over job, every rank of the run: the outcome is
 * agreed) and the sample of train.sample_tokens tokens, both from the writer (the first rank
 * that still trains: rank 0 unless its replica failed). Returns nonzero when the weights could
 * not be written. */
static int write_outputs(const FtConfig *cfg, const FtModel *model, FtComm *job, bool writer)
{
    int failed = 0;
    if (cfg->run.save_model[0]) {
        char err[1024] = "";
        int bad = writer && save_weights(cfg->run.save_model, model, err, sizeof err) ? 1 : 0;
        if (bad) { /* one line, as cli_error prints it (the writer may not be world rank 0) */
            fprintf(stderr, "%s\n", err);
            fflush(stderr);
        }
        failed = comm_max_i64_poll(job, bad, NULL) > 0;
        if (!failed) log_info("saved the weights to %s (llm.c format, fp32)", cfg->run.save_model);
    }
    if (cfg->train.sample_tokens > 0 && writer && log_level() >= FT_LOG_INFO) {
        int n = (int)cfg->train.sample_tokens, prompt = sample_default_prompt(model->cfg.V);
        int *out = malloc(sizeof(int) * (size_t)n);
        FT_ASSERT(out);
        sample_generate(model, (uint64_t)cfg->run.seed, &prompt, 1, n, out);
        printf("sample (%d tokens):\n", n);
        sample_print(stdout, out, n, model->cfg.V);
        fflush(stdout);
        free(out);
    }
    return failed;
}

/* The end-of-run block, on the ranks still training (a rank whose replica left prints nothing
 * and skips the reports that are collective over the grid it left): a header, each rank's time
 * waiting on messages, the regions (with the PAPI columns), the `spare:`, `faults:` and `dmr:`
 * lines (DMR's counts summed over job, every rank of it, so the flips and checks of a rank that
 * left count too), the checkpoints and the summary. The verdict line follows it (the caller's). */
static void report_end_of_run(const FtConfig *cfg, FtTrainer *tr, const FtTrainSummary *s,
                              FtTrainDmr *tdm, const FtTrainCkpt *tck, int nranks, FtComm *job)
{
    FILE *rep = log_level() >= FT_LOG_INFO && !s->left ? stdout : NULL;
    if (!s->left) { /* collective over the grid this rank still trains on */
        log_info("---- end of run %s: %lld steps on %d rank%s ----", cfg->run.name, s->steps,
                 nranks, nranks == 1 ? "" : "s");
        if (log_level() >= FT_LOG_DEBUG && log_rank() == 0) exec_stats_print(stdout, &tr->stats);
        log_info("waiting on communication, per rank (steps after the first %lld):",
                 cfg->train.rate_skip);
        train_report_waiting(tr, rep);
        log_info("time per region, over the ranks (steps after the first %lld):",
                 cfg->train.rate_skip);
        train_report_regions(tr, rep);
        train_report_spare(tr, rep);
    }
    train_dmr_report(tdm, job, !s->left, rep); /* DMR hook: its counts over the whole job */
    train_ckpt_report(tck, rep);
    char vl[32] = "none";
    if (!isnan(s->val_loss)) snprintf(vl, sizeof vl, "%.4f", s->val_loss);
    log_info("summary: %lld steps, loss %.4f -> %.4f, val loss %s, %.1f ms/step, %.0f tok/s, "
             "%.2f GFLOP/s model FLOPs (steps after the first %lld)",
             s->steps, s->first_loss, s->last_loss, vl, s->mean_ms, s->tokens_per_s, s->gflops,
             cfg->train.rate_skip);
}

/* Rank 0: every key of the resolved configuration into <checkpoint.dir>/<run.name>.deck.ini,
 * beside the run's checkpoints (the folder is made when missing). Not writing it is a warning:
 * the run itself does not need it. */
static void save_resolved_deck(const FtConfig *cfg)
{
    char path[2 * FT_DECK_STR_MAX + 16], err[FT_DECK_ERR_MAX];
    snprintf(path, sizeof path, "%s/%s.deck.ini", cfg->checkpoint.dir, cfg->run.name);
    if (mkdir(cfg->checkpoint.dir, 0777) && errno != EEXIST)
        log_warn("%s: cannot make the folder for the resolved deck: %s (checkpoint.dir)",
                 cfg->checkpoint.dir, strerror(errno));
    else if (deck_save(cfg, path, err, sizeof err))
        log_warn("%s (checkpoint.dir, run.name)", err);
    else
        log_info("deck: every key of the resolved configuration is in %s", path);
}

/* `ftllm train`, or with plan `ftllm plan` (the profile steps, then the plan's report). */
static int train_or_plan(int argc, char **argv, MPI_Comm comm, bool plan)
{
    FtConfig cfg;
    int rc = load_deck(plan ? "plan" : "train", argc, argv, comm, &cfg);
    if (rc) return rc;
    char plan_path[FT_DECK_STR_MAX] = "";
    if (plan) plan_only(&cfg, plan_path, sizeof plan_path);
    const FtBackend *be;
    if ((rc = open_backend(&cfg, comm, &be))) {
        deck_free(&cfg);
        return rc;
    }
    int rank = 0, nranks = 1;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &nranks));
    log_info("ftllm %s %s: deck %s, %d rank%s, layout dp %lld x pp %lld x ep %lld x tp %lld, "
             "%d thread%s per rank, backend %s",
             FTLLM_VERSION, plan ? "plan" : "train", cfg.path, nranks, nranks == 1 ? "" : "s", cfg.parallel.dp,
             cfg.parallel.pp, cfg.parallel.ep, cfg.parallel.tp, omp_get_max_threads(),
             omp_get_max_threads() == 1 ? "" : "s", be->name);
    char err[1024] = "";
    if (train_spare_auto(&cfg, comm, err, sizeof err)) { /* spare.r = auto: before the grid */
        cli_error(comm, err);
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    if (rank == 0 && log_level() >= FT_LOG_INFO) { /* every key at debug */
        if (log_level() >= FT_LOG_DEBUG) deck_print(stdout, &cfg);
        else deck_print_changed(stdout, &cfg);
        fflush(stdout);
    }
    FtGrid grid;
    /* SPARe's hot spares: the ranks after the layout's, tp x pp x ep per spare replica */
    int W = (int)(cfg.parallel.tp * cfg.parallel.pp * cfg.parallel.ep);
    bool spare_rank = rank >= W * cfg.parallel.dp;
    if (grid_create_sub(&grid, comm, !spare_rank, rank, (int)cfg.parallel.tp, (int)cfg.parallel.pp,
                        (int)cfg.parallel.dp, (int)cfg.parallel.ep, err, sizeof err) < 0) {
        cli_error(comm, err); /* deck_check agreed already */
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    FtShard shard = {.tp = grid.tp, .tp_rank = grid.tp_rank, .pp = grid.pp, .pp_rank = grid.pp_rank,
                     .ep = grid.ep, .ep_rank = grid.ep_rank};
    if (spare_rank) { /* its place in the replica it may replace */
        shard = (FtShard){.tp = (int)cfg.parallel.tp, .pp = (int)cfg.parallel.pp,
                          .ep = (int)cfg.parallel.ep};
        grid_place(rank % W, shard.tp, shard.ep, &shard.tp_rank, &shard.pp_rank, &shard.ep_rank);
    }
    /* from the deck, so a spare (no grid) takes the same collective branches at the end */
    bool sharded = cfg.parallel.tp > 1 || cfg.parallel.pp > 1 || cfg.parallel.ep > 1;
    FtModel model;
    FtData *train = NULL, *val = NULL;
    int T = train_seq_len(&cfg);
    int bad = model_from_deck(&cfg, &shard, &model, err, sizeof err) ? 1 : 0;
    if (agree(bad, comm)) {
        cli_error(comm, err[0] ? err : "model.init: could not be read on some rank");
        rc = FT_EXIT_USAGE;
        goto out_model;
    }
    stage_to_backend(&model, be);
    bad = data_open_deck(&cfg, T, &train, &val, err, sizeof err) ? 1 : 0;
    if (agree(bad, comm)) {
        cli_error(comm, err[0] ? err : "data: could not be opened on some rank");
        rc = FT_EXIT_USAGE;
        goto out_model;
    }
    log_info("data: %s: %llu tokens, %llu sequences of %d%s; validation: %s", cfg.data.train,
             (unsigned long long)data_num_tokens(train),
             (unsigned long long)data_num_sequences(train), T,
             cfg.data.shuffle ? ", shuffled" : "",
             val ? (cfg.data.val[0] ? cfg.data.val : "tail of the training data") : "none");
    log_info("init: %s", cfg.model.init[0] ? cfg.model.init : "random (GPT-2 scheme, run.seed)");

    FetchCtx tctx = {train, "train"}, vctx = {val, "val"};
    FtBatchSource tsrc = {data_fetch, &tctx}, vsrc = {data_fetch, &vctx};
    FtTrainer tr;
    if (spare_rank) train_init_spare(&tr, &cfg, &model, &tsrc, val ? &vsrc : NULL);
    else train_init_grid(&tr, &cfg, &model, &grid, &tsrc, val ? &vsrc : NULL);
    tr.stats.sync = log_level() >= FT_LOG_DEBUG; /* the op table below times kernels, not launches */
    if (log_level() >= FT_LOG_DEBUG && rank == 0) {
        printf("tape (one micro-batch; fwd / bwd / rec = AC recomputation):\n");
        tape_print(stdout, &tr.tape);
        fflush(stdout);
    }
    /* checkpoint hook: resume, then checkpoints on schedule; written by the training ranks (a
     * spare's writer is its own until it joins them) */
    FtTrainCkpt *tck = NULL;
    MPI_Comm writers = spare_rank ? MPI_COMM_SELF : grid.world;
    bad = train_ckpt_setup(&tck, &tr, &cfg, writers, err, sizeof err) ? 1 : 0;
    if (agree(bad, comm)) { /* checkpoint hook */
        cli_error(comm, err[0] ? err : "checkpoint: resume failed on a spare's rank");
        train_ckpt_destroy(tck);
        rc = FT_EXIT_USAGE;
        goto out_train;
    }
    if (rank == 0 && !plan) save_resolved_deck(&cfg); /* after the checkpoint hook made its folder */
    FtTrainDmr *tdm = NULL; /* DMR hook: checks, injected faults, agreement before commit */
    bad = train_dmr_setup(&tdm, &tr, &cfg, err, sizeof err) ? 1 : 0;
    if (agree(bad, comm)) { /* DMR hook */
        cli_error(comm, err[0] ? err : "faults: the schedule failed on a spare's rank");
        train_dmr_destroy(tdm);
        train_ckpt_destroy(tck);
        rc = FT_EXIT_USAGE;
        goto out_train;
    }
    long long left = cfg.train.steps - tr.model->step; /* the steps this run computes */
    if (!plan && cfg.dmr.mode == FT_DMR_PLANNED && !dmr_plan(train_dmr_get(tdm)) &&
        cfg.dmr.profile_steps >= left)
        log_warn("dmr.profile_steps = %lld: this run computes %lld step%s (train.steps = %lld%s), "
                 "so it ends before a plan exists: every check is naive (HINT: fewer profile "
                 "steps, or a plan file from `ftllm plan` in dmr.plan)", cfg.dmr.profile_steps,
                 left, left == 1 ? "" : "s", cfg.train.steps,
                 tr.model->step ? ", resumed after its checkpoint's step" : "");
    if ((rc = test_kill_setup(&tr, comm))) {
        train_dmr_destroy(tdm);
        train_ckpt_destroy(tck);
        goto out_train;
    }
    train_spare_attach(&tr, comm); /* SPARe: spares, restarts (nothing when SPARe is off) */
    FtCounters *ctr = counters_open_papi(cfg.perf.papi_events, FT_NREGIONS, comm);
    timers_attach(&tr.regions, ctr); /* perf.papi_events: counts per region */
    FtComm *job = comm_create_mpi_dup(comm, "job"); /* the end-of-run agreements */
    FtTrainSummary s;
    train_run(&tr, &s);
    train_ckpt_finish(tck); /* checkpoint hook: waits for the last write */
    if (!s.left && !s.wipeout) (void)train_ckpt_flush(tck, &tr); /* ULFM: the last one again */
    if (plan) { /* ftllm plan: the plan's report instead of the run's */
        comm_destroy(job);
        rc = verb_plan_report(&tr, tdm, &cfg, plan_path, comm);
        train_ckpt_destroy(tck);
        train_dmr_destroy(tdm);
        timers_attach(&tr.regions, NULL);
        counters_close(ctr);
        goto out_train;
    }
    int dead = comm_ft_repair(job); /* ULFM: processes died: agree on the survivors */
    if (dead) log_info("ulfm: %d process%s died during the run; the survivors end it", dead,
                       dead == 1 ? "" : "es");
    /* SPARe: did the run end in a wipe-out, did every rank end well (waiting ranks: ok) */
    bool wipeout = comm_max_i64_poll(job, s.wipeout ? 1 : 0, NULL) > 0;
    /* ULFM: a checkpoint that a death made the survivors abandon and that none wrote again
     * (a second death at the end): the requeued job resumes from the one before and writes it */
    long long lost = comm_max_i64_poll(job, train_ckpt_lost_step(tck), NULL);
    long long newest = comm_max_i64_poll(job, train_ckpt_last_step(tck), NULL);
    if (lost > newest && !wipeout) { /* the grid lost a rank after its last rebuild (in the
                                      * last checkpoint's second write): no reports on it; the
                                      * survivors' first speaks (the grid's may have died) */
        if (comm_rank(job) == 0) {
            ft_log_rank(FT_LOG_ERROR, "checkpoint of step %lld: abandoned (a process died during "
                        "its write) and not written again (another death): the run stops as "
                        "after a wipe-out (HINT: the job script requeues exit 5; "
                        "checkpoint.resume = auto resumes from %s)", lost,
                        newest < 0 ? "the start" : "the newest checkpoint");
            ft_log_rank(FT_LOG_INFO, "verdict: FAILED (the last checkpoint lost after step %lld: "
                        "restart from a checkpoint)", s.steps);
        }
        comm_ft_exit(FT_EXIT_WIPEOUT);
    }
    bool all_ok = comm_max_i64_poll(job, !s.ok && !s.left, NULL) == 0;
    rc = s.ok ? FT_EXIT_OK : FT_EXIT_FAILED;
    if (wipeout) rc = FT_EXIT_WIPEOUT;
    if (sharded && (cfg.run.save_model[0] || cfg.train.sample_tokens > 0))
        log_warn("run.save_model and the end-of-run sample need the whole model on one rank; "
                 "not done for a tp/pp/ep-sharded layout (use checkpoints)");
    /* the whole model is on every rank that still trains: the first of them writes */
    bool writer = !s.left && tr.grid->rank == 0;
    if (all_ok && !sharded && write_outputs(&cfg, &model, job, writer)) rc = FT_EXIT_FAILED;
    report_end_of_run(&cfg, &tr, &s, tdm, tck, nranks, job); /* the block before the verdict */
    comm_destroy(job);
    train_ckpt_destroy(tck);
    train_dmr_destroy(tdm);
    timers_attach(&tr.regions, NULL);
    counters_close(ctr);
    if (rc == FT_EXIT_OK)
        log_info("verdict: OK (trained %lld steps, final loss %.4f)", s.steps, s.last_loss);
    else if (wipeout) log_info("verdict: FAILED (SPARe wipe-out after step %lld: restart from a "
                               "checkpoint)", s.steps);
    else if (!s.ok) log_info("verdict: FAILED (the loss was not finite at step %lld)", s.steps);
    else log_info("verdict: FAILED (the weights could not be written)");
out_train: /* checkpoint hook */
    train_free(&tr);
    data_close(train);
    if (val) data_close(val);
out_model:
    model_free(&model);
    grid_destroy(&grid);
    deck_free(&cfg);
    return rc;
}

int verb_train(int argc, char **argv, MPI_Comm comm) { return train_or_plan(argc, argv, comm, false); }

int verb_plan(int argc, char **argv, MPI_Comm comm) { return train_or_plan(argc, argv, comm, true); }

/* `ftllm sample DECK [overrides]`: train.sample_tokens tokens from the model in model.init. */
int verb_sample(int argc, char **argv, MPI_Comm comm)
{
    FtConfig cfg;
    int rc = load_deck("sample", argc, argv, comm, &cfg);
    if (rc) return rc;
    if (!cfg.model.init[0]) {
        cli_error(comm, "ftllm sample: model.init is empty: give an llm.c model file, e.g. "
                        "model.init=out.bin (HINT: ftllm train DECK run.save_model=out.bin)");
        deck_free(&cfg);
        return FT_EXIT_USAGE;
    }
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    char err[1024] = "";
    FtModel model;
    if (agree(model_from_deck(&cfg, NULL, &model, err, sizeof err) ? 1 : 0, comm)) {
        cli_error(comm, err[0] ? err : "model.init: could not be read on some rank");
        rc = FT_EXIT_USAGE;
        goto out;
    }
    int n = (int)cfg.train.sample_tokens, prompt = sample_default_prompt(model.cfg.V);
    if (rank == 0 && n > 0) {
        int *out = malloc(sizeof(int) * (size_t)n);
        FT_ASSERT(out);
        sample_generate(&model, (uint64_t)cfg.run.seed, &prompt, 1, n, out);
        sample_print(stdout, out, n, model.cfg.V);
        fflush(stdout);
        free(out);
    }
out:
    model_free(&model);
    deck_free(&cfg);
    return rc;
}
