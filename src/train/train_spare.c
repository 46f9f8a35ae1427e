/* train_spare.c: SPARe's failures in the training run (train.h, train_spare.h): a failed
 * replica masked by the controller (the survivors regrid), or replaced by a hot spare (state
 * copied from a live replica), a wipe-out answered by an in-process restart from the newest
 * verified checkpoint with every replica back, and the end-of-run `spare:` line.
 *
 * Key decisions:
 *  - The job channel: every rank of the job, training or not (a failed replica's ranks, the
 *    hot spares), meets in one sum over the whole job at each job-wide event (a spare joins, a
 *    restart, the end of the run). The training grid's rank 0 contributes the message, every
 *    other rank zeros, so the sum is the message. Ranks that do not train wait for it testing
 *    once a millisecond (they must not take the cores the training ranks need). A failure that
 *    no spare answers is not job-wide: its ranks just join the waiting ones.
 *  - A spare takes the failed replica's place in the grid and in the controller (its index,
 *    its stack), so the controller does not change and the redundancy is back without RECTLR.
 *    Spares are used in order and before any failure is left to the controller.
 *  - The faults hook hands a step's fail-stops over at once (train_fail_replicas) and a join's
 *    message carries the rest of them, so a spare that joins takes part in the rest of the
 *    step's failures.
 *  - A restart rebuilds the first grid (the layout's ranks, the failed ones back: an injected
 *    fail-stop on MPICH is not a dead process), resets the controller, and the checkpoint hook
 *    restores the newest verified checkpoint on it. The steps after that checkpoint are computed
 *    again (counted), bitwise as before: the fixed-order reduction does not care which replica
 *    computed a shard. The counters of a rank that trained through the wipe-out go to every
 *    rank of the job over the job channel (those ranks may all be spares going back to wait).
 *  - Real process death (ULFM, train_spare_recover): the step's agreement finds it on the
 *    training ranks; the failure revoked the job channel, so the waiting ranks leave their wait
 *    too, and every survivor of the job shrinks the channel (ranks keep their job ids: ids[]).
 *    The dead ranks' replicas then go the same way as a batch of injected fail-stops (spares
 *    first, in order, skipping a spare with a dead rank; the rest to the controller), decided
 *    on the training ranks and sent as one event, but in one grid rebuild out of the survivors
 *    (a dead rank can take part in no split). A wipe-out after a real death is not restarted
 *    in-process (the dead process cannot come back: exit 5, the requeue path).
 *  - A second death while the job handles one (ULFM): every job event ends in an agreement on
 *    the channel, so all survivors see the same outcome (a death during the sum can fail it on
 *    some ranks and not others); a failed event or grid split shrinks the channel and is done
 *    again, and a spare that dies before or as it joins hands its place to the next live spare
 *    (the decision is made again). The training ranks' recovery revokes the channel and agrees
 *    on it before it shrinks: that is the agreement a waiting rank's interrupted event ends in.
 *    A training rank that dies while the grid is rebuilt after a death (ULFM) fails its
 *    replica too: the survivors of the training ranks shrink again, the batch grows by that
 *    replica, and it is decided and split again (M_RETRY in the event; elsewhere, a join or a
 *    restart, such a death ends the run with exit 5). */
#include "train_spare.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftllm/ftllm.h"
#include "ftllm/log.h"
#include "ftllm/timers.h"

enum { EV_END = 1, EV_RESTART = 2, EV_JOIN = 3, EV_ULFM = 4 };
/* the message: kind, then per kind (JOIN: replica, spare, its place in the current grid, the
 * current grid's dp, the step about to run, the rest of the batch; RESTART: the checkpoint's
 * step, the step the wipe-out came before; ULFM: the grid's dp before, the step, the count, the
 * spares used after it, whether the controller wiped out (M_CKPT), then per dead replica its
 * first-grid index, its place in the current grid and the spare taking it, -1: masked) */
enum { M_KIND, M_REPLICA, M_SPARE, M_LEAVE, M_DP, M_STEP, M_CKPT, M_RETRY, M_N, M_BATCH };
#define MSG_LEN (M_BATCH + FT_SPARE_BATCH_MAX)
#define ULFM_MAX (FT_SPARE_BATCH_MAX / 3) /* dead replicas one ULFM event carries */

struct ft_spare_job {
    MPI_Comm all;  /* every rank of the job (the caller's; it outlives the trainer) */
    FtComm *ctl;   /* a duplicate of all: the events */
    int rank;      /* in all */
    int tp, pp, ep, W, dp, spares; /* the layout; W = tp pp ep ranks per replica */
    int used;      /* spares that took a place since the start or the last restart */
    int *ids;      /* ULFM: the job id (rank in the caller's all) of each rank of all */
    bool own_all;  /* all is the survivors' communicator (ULFM), freed with the job */
    unsigned char *spare_dead; /* [spares] ULFM: a rank of that spare died */
};

void train_spare_attach(FtTrainer *tr, MPI_Comm all)
{
    if (!tr->sp) return;
    const FtConfig *cfg = tr->cfg;
    FtSpareJob *j = calloc(1, sizeof *j);
    FT_ASSERT(j);
    j->all = all;
    j->ctl = comm_create_mpi_dup(all, "spare.job");
    j->rank = comm_rank(j->ctl);
    j->tp = (int)cfg->parallel.tp, j->pp = (int)cfg->parallel.pp, j->ep = (int)cfg->parallel.ep;
    j->W = j->tp * j->pp * j->ep;
    j->dp = (int)cfg->parallel.dp, j->spares = (int)cfg->spare.spares;
    if (comm_size(j->ctl) != (j->dp + j->spares) * j->W)
        FT_DIE("spare: the job has %d ranks, the layout with spare.spares = %d needs %d "
               "(deck_check)", comm_size(j->ctl), j->spares, (j->dp + j->spares) * j->W);
    j->ids = malloc(sizeof(int) * (size_t)comm_size(j->ctl));
    j->spare_dead = calloc((size_t)j->spares + 1, 1);
    FT_ASSERT(j->ids && j->spare_dead);
    for (int i = 0; i < comm_size(j->ctl); i++) j->ids[i] = i;
    tr->job = j;
}

void train_spare_detach(FtTrainer *tr)
{
    if (!tr->job) return;
    comm_destroy(tr->job->ctl);
    if (tr->job->own_all) MPI_Comm_free(&tr->job->all);
    free(tr->job->ids);
    free(tr->job->spare_dead);
    free(tr->job);
    tr->job = NULL;
}

/* ---- events ------------------------------------------------------------------------------- */

/* One event over the whole job: msg in on the grid's rank 0 (ignored elsewhere), out on every
 * rank. A rank that does not train waits in a sleep-and-test loop. Returns true when every
 * rank of the job has the message; false (ULFM) when a process of the job died: the same
 * answer on every survivor (an agreement: a death during the sum may fail it on some ranks
 * and not others), and msg is then not to be read. */
static bool job_event_from(FtTrainer *tr, long long msg[MSG_LEN], bool speaker)
{
    long long send[MSG_LEN] = {0};
    if (speaker) memcpy(send, msg, sizeof send);
    FtReq req;
    comm_iallreduce_sum(tr->job->ctl, send, msg, MSG_LEN, FT_I64, &req);
    if (!tr->left) {
        comm_wait(&req, NULL);
    } else {
        struct timespec ms = {0, 1000000};
        while (!comm_test(&req)) nanosleep(&ms, NULL);
    }
    return !comm_ft_enabled() || comm_ft_agree(tr->job->ctl, 1);
}

static bool job_event(FtTrainer *tr, long long msg[MSG_LEN])
{
    return job_event_from(tr, msg, !tr->left && tr->grid->rank == 0);
}

/* ULFM: every survivor of the job (training or waiting) moves the channel onto the survivors
 * of all; a spare with a dead rank is not used. Collective over the survivors of the channel. */
static void job_shrink(FtSpareJob *j)
{
    int n = comm_size(j->ctl), ndead = 0, *dead = malloc(sizeof(int) * (size_t)n);
    FT_ASSERT(dead);
    MPI_Comm live;
    comm_ft_shrink(j->ctl, &live, dead, &ndead);
    for (int k = 0, w = 0, r = 0; r < n; r++) { /* dead[] is ascending */
        if (k < ndead && dead[k] == r) {
            int id = j->ids[r];
            if (id >= j->dp * j->W) j->spare_dead[(id - j->dp * j->W) / j->W] = 1;
            ft_log_rank(FT_LOG_DEBUG, "spare: job rank %d died (ULFM)", id);
            k++;
        } else {
            j->ids[w++] = j->ids[r];
        }
    }
    free(dead);
    comm_destroy(j->ctl);
    if (j->own_all) MPI_Comm_free(&j->all);
    j->all = live;
    j->own_all = true;
    j->ctl = comm_create_mpi_dup(live, "spare.job");
    comm_ft_clear();
}

/* The training grid of a job event (join, restart, rebuild after a death), split out of the
 * job channel: every rank of the job calls it, the new grid's ranks with member set and their
 * place as key, joiner set on the hot spares that join (joining ranks of them in all); as
 * grid_create_sub. ULFM: a rank of the job that dies in the split fails it; the survivors
 * agree on that and shrink the channel. A rank the event leaves waiting: the split again. A
 * joining spare's: -2 on every survivor (the caller decides again, that spare dead; the
 * failure revoked the old grid's communicators). Another member's: -3 on every survivor when
 * retry is set (ulfm_recover fails its replica too and splits again), else every survivor
 * exits 5 (the requeue path, as a wipe-out after a real death). */
static int job_grid(FtTrainer *tr, FtGrid *ng, int member, int joiner, int joining, int key,
                    int dp, bool retry, char *err, size_t errlen)
{
    FtSpareJob *j = tr->job;
    for (;;) {
        timers_point(&tr->regions, FT_KILL_REGRID); /* a testing aid (FTLLM_TEST_KILL) */
        MPI_Comm sub = MPI_COMM_NULL;
        int failed = comm_ft_split(j->ctl, member ? 0 : MPI_UNDEFINED, key, &sub);
        if (comm_ft_enabled() && !comm_ft_agree(j->ctl, !failed)) {
            if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
            job_shrink(j);
            double want = (double)j->W * dp;
            double have = comm_sum_f64(j->ctl, member);
            double stay = comm_sum_f64(j->ctl, !joiner && member);
            if (stay < want - joining) { /* the same on every survivor (the sums) */
                if (retry) {
                    log_info("spare: a training process died as the job rebuilt the training "
                             "grid (ULFM): its replica fails too, and the grid is rebuilt again");
                    snprintf(err, errlen, "a training process died in the grid's split (ULFM)");
                    return -3;
                }
                if (comm_rank(j->ctl) == 0)
                    ft_log_rank(FT_LOG_ERROR, "spare: a training process died as the job rebuilt "
                                "the training grid (ULFM): not survived in-process: the run "
                                "stops (HINT: the job script requeues exit 5; "
                                "checkpoint.resume = auto resumes)");
                comm_ft_exit(FT_EXIT_WIPEOUT);
            }
            if (have < want) {
                log_info("spare: a hot spare died as it joined the training grid (ULFM): its "
                         "place goes to the next live spare, or to the controller");
                snprintf(err, errlen, "a joining hot spare died in the grid's split (ULFM)");
                return -2;
            }
            log_info("spare: a waiting process of the job died as the training grid was rebuilt "
                     "(ULFM): rebuilt without it");
            continue;
        }
        return grid_create_split(ng, sub, j->tp, j->pp, dp, j->ep, err, errlen);
    }
}

/* Who speaks (log.h): the training grid's rank 0. */
static void speak(const FtTrainer *tr)
{
    int job_rank = tr->job ? tr->job->rank : log_rank();
    if (!tr->left && tr->grid->rank == 0) log_init(0, log_level());
    else if (log_rank() == 0) log_init(job_rank ? job_rank : -1, log_level());
}

/* This rank stops training (its replica failed, or a spare goes back to waiting): the
 * checkpoint writer leaves the grid with it. Collective with the rest of the old grid. */
static void leave_run(FtTrainer *tr, const char *why)
{
    if (tr->ckpt_regrid) tr->ckpt_regrid(tr->on_step_ctx, tr, MPI_COMM_NULL);
    tr->left = true;
    ft_log_rank(FT_LOG_INFO, "spare: after step %lld this rank %s", tr->model->step, why);
    speak(tr);
}

/* The trainer moves onto ng (owned from now on; the grid it leaves is freed if it owned it). */
static void adopt_grid(FtTrainer *tr, FtGrid *ng)
{
    if (tr->ckpt_regrid) tr->ckpt_regrid(tr->on_step_ctx, tr, ng->world);
    FtGrid *old = tr->own_grid;
    tr->own_grid = NULL; /* kept alive until the trainer moved off it */
    train_regrid(tr, ng);
    tr->own_grid = ng;
    if (old) {
        grid_destroy(old);
        free(old);
    }
}

/* ---- a hot spare takes a failed replica's place --------------------------------------------- */

/* The SPARe counters from rank root of c (collective over c); this rank keeps its own
 * rank-local ones (its computed shards and times). */
static void take_counters(FtTrainer *tr, FtComm *c, int root)
{
    FtSpareStats mine = tr->spare;
    comm_bcast(c, &tr->spare, sizeof tr->spare, FT_U8, root);
    tr->spare.mine = mine.mine, tr->spare.mine_deep = mine.mine_deep;
    tr->spare.deep_s = mine.deep_s, tr->spare.regrid_s = mine.regrid_s;
    tr->spare.restart_s = mine.restart_s, tr->spare.join_s = mine.join_s;
    tr->spare.ulfm_s = mine.ulfm_s, tr->spare.ulfm_detect_s = mine.ulfm_detect_s;
    if (tr->take_state) tr->take_state(tr->take_state_ctx, tr, c, root); /* the DMR counters */
}

/* The job's state from replica place `root` of the grid to the others (a joining spare), over
 * the ranks of this (tp, pp, ep) place (so each ep rank gets its own experts): parameters,
 * moments, step, cursor, the controller and the counters (rank-local times kept). */
static void copy_state(FtTrainer *tr, int root)
{
    FtModel *m = tr->model;
    FtComm *c = tr->c_shards;
    FtSpare *sp = tr->sp;
    comm_bcast(c, m->params, m->nparams, FT_F32, root);
    comm_bcast(c, m->m, m->nparams, FT_F32, root);
    comm_bcast(c, m->v, m->nparams, FT_F32, root);
    long long hdr[6] = {m->step, (long long)tr->cursor, sp->depth, sp->nlive, sp->failures,
                        sp->moved};
    comm_bcast(c, hdr, 6, FT_I64, root);
    m->step = hdr[0], tr->cursor = (uint64_t)hdr[1];
    sp->depth = (int)hdr[2], sp->nlive = (int)hdr[3], sp->failures = (int)hdr[4];
    sp->moved = (int)hdr[5];
    comm_bcast(c, sp->st.order, (size_t)sp->N * sp->r, FT_I32, root);
    comm_bcast(c, sp->st.alive, (size_t)sp->N, FT_U8, root);
    comm_bcast(c, sp->holders, (size_t)sp->N, FT_I32, root);
    take_counters(tr, c, root);
}

static int fail_batch(FtTrainer *tr, const int *replicas, int n);

/* EV_JOIN on every rank of the job: spare msg[M_SPARE] takes replica msg[M_REPLICA]'s place,
 * place msg[M_LEAVE] of the current grid of msg[M_DP] replicas. False on every rank when that
 * spare died in the grid's split (ULFM; nothing changed, the training grid to rebuild). */
static bool join(FtTrainer *tr, const long long *msg)
{
    FtSpareJob *j = tr->job;
    double t0 = MPI_Wtime();
    int replica = (int)msg[M_REPLICA], spare = (int)msg[M_SPARE], leave = (int)msg[M_LEAVE];
    int dp = (int)msg[M_DP];
    int base = (j->dp + spare) * j->W;
    bool joiner = j->rank >= base && j->rank < base + j->W;
    bool live = !tr->left, failing = live && tr->grid->dp_rank == leave;
    int member = joiner || (live && !failing);
    int key = joiner ? leave * j->W + (j->rank - base) : live ? tr->grid->rank : 0;
    FtGrid *ng = malloc(sizeof *ng);
    FT_ASSERT(ng && dp >= 2);
    char err[256];
    int g = job_grid(tr, ng, member, joiner, j->W, key, dp, false, err, sizeof err);
    j->used = spare + 1;
    if (g == -2) {
        free(ng);
        return false;
    }
    if (g < 0) FT_DIE("spare: %s", err);
    if (g == 1) {
        free(ng);
        if (failing) {
            char why[96];
            snprintf(why, sizeof why, "failed (replica %d, injected fail-stop): hot spare %d "
                     "takes its place", replica, spare);
            leave_run(tr, why);
        }
        return true;
    }
    if (joiner) tr->replica = replica;
    adopt_grid(tr, ng);
    tr->left = false;
    speak(tr);
    copy_state(tr, leave == 0 ? 1 : 0);
    tr->spare.masked++;
    tr->spare.spares_used++;
    tr->spare.join_s += MPI_Wtime() - t0;
    log_info("spare: replica %d failed before step %lld: hot spare %d (%d of %d) took its place "
             "and stack (state copied from a live replica); %d of %d replicas live, depth %d",
             replica, msg[M_STEP], spare, spare + 1, j->spares, tr->sp->nlive, tr->sp->N,
             tr->sp->depth);
    return true;
}

/* ---- a failure the controller masks (no spare left) ------------------------------------------ */

static int fail_masked(FtTrainer *tr, int replica)
{
    double t0 = MPI_Wtime();
    long long step = tr->model->step;
    FtSpareEvent ev;
    int rc = spare_fail(tr->sp, replica, &ev);
    if (rc < 0) return -1;
    if (rc == SPARE_WIPEOUT) {
        tr->spare.wipeouts++;
        log_error("spare: replica %d failed after step %lld: wipe-out (a shard type it held has "
                  "no live holder left; %d of %d replicas live, r %d)", replica, step,
                  tr->sp->nlive, tr->sp->N, tr->sp->r);
        return rc;
    }
    /* its place in the current grid: the survivors keep their order */
    int leave = 0;
    for (int i = 0; i < replica; i++) leave += spare_alive(tr->sp, i);
    FtGrid *ng = malloc(sizeof *ng);
    FT_ASSERT(ng);
    char err[256];
    int g = grid_shrink_dp(tr->grid, leave, ng, err, sizeof err);
    if (g < 0) FT_DIE("spare: %s", err);
    if (g == 1) { /* this rank's replica failed: a fail-stop, it computes nothing more */
        free(ng);
        char why[96];
        snprintf(why, sizeof why, "failed (replica %d, injected fail-stop): it left the training "
                 "communicators", replica);
        leave_run(tr, why);
        return rc;
    }
    adopt_grid(tr, ng);
    speak(tr);
    tr->spare.masked++;
    tr->spare.regrid_s += MPI_Wtime() - t0;
    log_info("spare: replica %d failed after step %lld: %s (depth %d -> %d, RECTLR phase %d, "
             "%d stack positions moved); %d of %d replicas live", replica, step,
             rc == SPARE_MASKED ? "masked" : "masked deeper", ev.depth_before, ev.depth, ev.phase,
             ev.moved, tr->sp->nlive, tr->sp->N);
    return rc;
}

static void waiting_rank_died(FtTrainer *tr, bool shrunk);

/* One failure of the batch (replicas[0]; the rest follow). */
static int fail_one(FtTrainer *tr, const int *replicas, int n)
{
    int replica = replicas[0];
    if (replica < 0 || replica >= tr->sp->N || !spare_alive(tr->sp, replica) ||
        tr->sp->depth > tr->sp->r)
        return -1;
    FtSpareJob *j = tr->job;
    if (!j || j->used >= j->spares || tr->grid->dp < 2) return fail_masked(tr, replica);
    long long msg[MSG_LEN] = {0};
    msg[M_KIND] = EV_JOIN, msg[M_REPLICA] = replica, msg[M_SPARE] = j->used;
    for (int i = 0; i < replica; i++) msg[M_LEAVE] += spare_alive(tr->sp, i);
    msg[M_DP] = tr->grid->dp, msg[M_STEP] = tr->model->step + 1, msg[M_N] = n - 1;
    for (int k = 1; k < n; k++) msg[M_BATCH + k - 1] = replicas[k];
    bool sent = job_event(tr, msg);
    if (!sent || !join(tr, msg)) { /* ULFM: a waiting rank died (in the event, or the joining
                                      spare in its split); the join again (a dead spare
                                      skipped) once the grid is rebuilt */
        waiting_rank_died(tr, sent);
        return fail_one(tr, replicas, n);
    }
    return SPARE_MASKED;
}

static int fail_batch(FtTrainer *tr, const int *replicas, int n)
{
    int rc = -1;
    for (int k = 0; k < n && !tr->left; k++) {
        int one = fail_one(tr, replicas + k, n - k);
        if (one >= 0) rc = one;
        if (one == SPARE_WIPEOUT) break;
    }
    return rc;
}

int train_fail_replicas(FtTrainer *tr, const int *replicas, int n)
{
    if (!tr->sp || tr->left || n < 1 || n > FT_SPARE_BATCH_MAX) return -1;
    return fail_batch(tr, replicas, n);
}

int train_fail_replica(FtTrainer *tr, int replica)
{
    return train_fail_replicas(tr, &replica, 1);
}

/* ---- a wipe-out: restart from the newest verified checkpoint --------------------------------- */

/* EV_RESTART on every rank of the job: the first grid again, the checkpoint of step
 * msg[M_CKPT] restored on it. */
static void restart_all(FtTrainer *tr, const long long *msg)
{
    FtSpareJob *j = tr->job;
    double t0 = MPI_Wtime();
    bool was_live = !tr->left;
    int member = j->rank < j->dp * j->W;
    FtGrid *ng = malloc(sizeof *ng);
    FT_ASSERT(ng);
    char err[256];
    int g = job_grid(tr, ng, member, 0, 0, j->rank, j->dp, false, err, sizeof err);
    if (g < 0) FT_DIE("spare: %s", err);
    /* the counters of a rank that trained through the wipe-out (the lowest in the job; the
     * wiping replica's ranks did) go to every rank of the job: all of them may be spares that
     * go back to waiting now (each failure of the first grid answered by a spare) */
    int root = (int)-comm_max_i64_poll(j->ctl, was_live ? -j->rank
                                                         : -(long long)comm_size(j->ctl), NULL);
    take_counters(tr, j->ctl, root);
    j->used = 0;
    spare_reset(tr->sp);
    if (g == 1) { /* a spare: waits again */
        free(ng);
        tr->replica = -1;
        if (was_live) leave_run(tr, "is a hot spare again (the restart brought the layout back)");
        return;
    }
    tr->replica = j->rank / j->W;
    adopt_grid(tr, ng);
    tr->left = false;
    speak(tr);
    tr->ckpt_restore(tr->on_step_ctx, tr, msg[M_CKPT]);
    long long lost = msg[M_STEP] - 1 - msg[M_CKPT];
    tr->spare.restarts++;
    tr->spare.recomputed += lost;
    tr->spare.restart_s += MPI_Wtime() - t0;
    log_info("spare: restarted in-process from the checkpoint of step %lld after the wipe-out "
             "before step %lld: every replica back (%d live, depth 1), %lld step%s to compute "
             "again", msg[M_CKPT], msg[M_STEP], tr->sp->nlive, lost, lost == 1 ? "" : "s");
}

/* On the live ranks after a wipe-out: true when the job restarted (every rank is back at the
 * checkpoint's step), false when it cannot (the run stops with exit 5). */
static bool restart(FtTrainer *tr)
{
    const char *why = NULL;
    if (!tr->job) why = "no job channel (train_spare_attach)";
    else if (tr->cfg->spare.wipeout == FT_WIPEOUT_REQUEUE) why = "spare.wipeout = requeue";
    else if (!tr->ckpt_newest) why = "checkpoints are off";
    else if (comm_ft_survived()) why = "a process of the job died: ULFM cannot bring it back";
    long long step = -1;
    if (!why && (step = tr->ckpt_newest(tr->on_step_ctx, tr)) < 0)
        why = "no verified checkpoint of this run";
    if (why) {
        log_error("spare: wipe-out before step %lld: no in-process restart (%s): the run stops "
                  "(HINT: the job script requeues exit 5; checkpoint.resume = auto resumes)",
                  tr->model->step + 1, why);
        return false;
    }
    long long msg[MSG_LEN] = {0};
    msg[M_KIND] = EV_RESTART, msg[M_CKPT] = step, msg[M_STEP] = tr->model->step + 1;
    if (!job_event(tr, msg)) { /* ULFM: a waiting rank died: it cannot come back to restart */
        waiting_rank_died(tr, false);
        log_error("spare: wipe-out before step %lld: no in-process restart (a waiting process of "
                  "the job died: ULFM cannot bring it back): the run stops (HINT: the job "
                  "script requeues exit 5; checkpoint.resume = auto resumes)", msg[M_STEP]);
        return false;
    }
    restart_all(tr, msg);
    return true;
}

/* ---- a real process death (ULFM) --------------------------------------------------------- */

/* EV_ULFM on every survivor of the job: the dead replicas leave the grid in one rebuild out of
 * the survivors, a spare taking the place of each that msg gives one, the others masked (their
 * controller step was taken on the training ranks before the event). Returns 1; 0 on every rank
 * when a spare it gives a place died in the grid's split (nothing changed: decide again); -1 on
 * every rank when a training rank died there and msg says M_RETRY (its replica fails too:
 * ulfm_recover decides again). */
static int ulfm_regrid(FtTrainer *tr, const long long *msg, MPI_Comm from)
{
    FtSpareJob *j = tr->job;
    const FtConfig *cfg = tr->cfg;
    int tp = (int)cfg->parallel.tp, pp = (int)cfg->parallel.pp, ep = (int)cfg->parallel.ep;
    int W = tp * pp * ep, n = (int)msg[M_N], dp = (int)msg[M_DP], masked = 0, joins = 0;
    const long long *gone = msg + M_BATCH, *place = gone + ULFM_MAX, *spare = place + ULFM_MAX;
    for (int k = 0; k < n; k++) masked += spare[k] < 0, joins += spare[k] >= 0;
    if (j) j->used = (int)msg[M_SPARE];
    /* a place's index once the masked replicas below it are gone */
#define NEW_PLACE(p, out)                                                                          \
    do {                                                                                           \
        out = (p);                                                                                 \
        for (int q = 0; q < n; q++) out -= spare[q] < 0 && place[q] < (p);                         \
    } while (0)
    if (dp - masked <= 0) { /* every replica lost a process: nobody trains, nobody speaks
                             * for the job (the same msg on every survivor, waiting or not) */
        if (!j || comm_rank(j->ctl) == 0) {
            log_init(0, log_level()); /* the job's first survivor speaks (it exits next) */
            log_error("spare: every replica lost a process in step %lld (ULFM): a wipe-out with "
                      "no replica left to end the run: it stops (HINT: the job script requeues "
                      "exit 5; checkpoint.resume = auto resumes)", msg[M_STEP]);
        }
        comm_ft_exit(FT_EXIT_WIPEOUT);
    }
    bool live = !tr->left, failing = false;
    int member = 0, key = 0, joined = -1;
    if (live) {
        int d = tr->grid->dp_rank, np;
        for (int k = 0; k < n; k++) failing |= place[k] == d;
        NEW_PLACE(d, np);
        member = !failing, key = np * W + tr->grid->rank % W;
    } else if (j && j->rank >= j->dp * W) {
        for (int k = 0; k < n; k++) {
            int base = (j->dp + (int)spare[k]) * W;
            if (spare[k] < 0 || j->rank < base || j->rank >= base + W) continue;
            int np;
            NEW_PLACE((int)place[k], np);
            member = 1, key = np * W + (j->rank - base), joined = k;
        }
    }
    FtGrid *ng = malloc(sizeof *ng);
    FT_ASSERT(ng);
    char err[256];
    int g = j ? job_grid(tr, ng, member, joined >= 0, joins * W, key, dp - masked,
                         msg[M_RETRY] != 0, err, sizeof err)
              : grid_create_sub(ng, from, member, key, tp, pp, dp - masked, ep, err, sizeof err);
    if (g == -2 || g == -3) {
        free(ng);
        return g == -2 ? 0 : -1;
    }
    if (g < 0) FT_DIE("spare: %s", err);
    if (g == 1) {
        free(ng);
        if (failing) {
            char why[128];
            snprintf(why, sizeof why, "failed (replica %d: a process of it died, ULFM)%s",
                     tr->replica, joins ? "; hot spares take the dead replicas' places" : "");
            leave_run(tr, why);
        }
        return 1;
    }
    if (joined >= 0) tr->replica = (int)gone[joined];
    adopt_grid(tr, ng);
    tr->left = false;
    speak(tr);
    if (joins) { /* the state from the lowest place no spare took */
        int root = 0;
        for (bool taken = true; taken; root += taken) {
            taken = false;
            for (int k = 0; k < n; k++) {
                int np;
                NEW_PLACE((int)place[k], np);
                taken |= spare[k] >= 0 && np == root;
            }
        }
        copy_state(tr, root);
    }
#undef NEW_PLACE
    tr->spare.masked += joins + (msg[M_CKPT] ? 0 : masked);
    tr->spare.spares_used += joins;
    for (int k = 0; k < n; k++)
        log_info("spare: replica %d failed in step %lld (process failure, ULFM): %s; %d of %d "
                 "replicas live, depth %d", (int)gone[k], msg[M_STEP], spare[k] >= 0 ?
                 "a hot spare took its place and stack (state copied from a live replica)" :
                 msg[M_CKPT] ? "part of a wipe-out" : "masked by the controller",
                 tr->sp->nlive, tr->sp->N, tr->sp->depth);
    return 1;
}

/* ULFM: a job event of the training ranks (all of them in it) failed: a waiting rank died
 * (nothing trains on it). That failure revoked every communicator of each process that saw it
 * (comm_ft.c), the training grid's too, so the survivors shrink the channel (a spare with a
 * dead rank is marked, and skipped from then on) and the training ranks build their grid again
 * on themselves: an EV_ULFM that loses no replica, which the waiting ranks (in idle) take part
 * in as non-members. */
static void waiting_rank_died(FtTrainer *tr, bool shrunk)
{
    FtSpareJob *j = tr->job;
    for (;; shrunk = false) {
        if (!shrunk) job_shrink(j);
        while (j->used < j->spares && j->spare_dead[j->used]) j->used++;
        long long msg[MSG_LEN] = {0};
        msg[M_KIND] = EV_ULFM, msg[M_DP] = tr->grid->dp, msg[M_STEP] = tr->model->step;
        msg[M_SPARE] = j->used;
        if (!job_event(tr, msg)) continue; /* another one: shrink again */
        if (ulfm_regrid(tr, msg, MPI_COMM_NULL) > 0) return;
    }
}

/* train_spare_recover's decision for msg's ngone dead replicas (gone and place set, spare -2
 * where not decided): spares first, in order (a spare with a dead rank skipped), the rest to
 * the controller (once: its step is taken). A spare decided before that has died since gives
 * its place to the next live spare, or to the controller. Sets M_SPARE (the spares used after
 * it) and M_CKPT; returns whether the controller wiped out (then no spare joins, for good). */
static int ulfm_decide(FtTrainer *tr, long long *msg, int ngone, long long step)
{
    FtSpareJob *j = tr->job;
    long long *gone = msg + M_BATCH, *spare = gone + 2 * ULFM_MAX;
    if (msg[M_CKPT]) return 1;
    int used = (int)msg[M_SPARE], wiped = 0;
    for (int k = 0; k < ngone; k++)
        if (j && spare[k] >= 0 && j->spare_dead[spare[k]]) spare[k] = -2;
    for (int k = 0; k < ngone; k++) {
        if (spare[k] != -2) continue;
        while (j && used < j->spares && j->spare_dead[used]) used++;
        if (j && used < j->spares) spare[k] = used++;
    }
    for (int k = 0; k < ngone && !wiped; k++) {
        if (spare[k] != -2) continue;
        spare[k] = -1;
        FtSpareEvent ev;
        int rc = spare_fail(tr->sp, (int)gone[k], &ev);
        if (rc < 0)
            FT_DIE("step %lld: a process failed in replica %lld, which SPARe has already failed",
                   step, gone[k]);
        if (rc == SPARE_WIPEOUT) {
            tr->spare.wipeouts++;
            wiped = 1;
            log_error("spare: replica %lld failed in step %lld (process failure, ULFM): wipe-out "
                      "(a shard type it held has no live holder left; %d of %d replicas live, r "
                      "%d): no in-process restart (the dead process cannot come back): the run "
                      "stops (HINT: the job script requeues exit 5; checkpoint.resume = auto "
                      "resumes)", gone[k], step, tr->sp->nlive, tr->sp->N, tr->sp->r);
        }
    }
    if (wiped) { /* the run stops: no spare joins, the survivors' grid is for the reports */
        used = j ? j->used : 0;
        for (int k = 0; k < ngone; k++) spare[k] = -1;
    }
    msg[M_SPARE] = used, msg[M_CKPT] = wiped;
    return wiped;
}

/* The replicas of the dead ranks dead[0 .. ndead-1] of the grid (ascending) not in msg's batch
 * yet (its first ngone), added as not decided (place -> first-grid replica: rep_at). Returns
 * the batch's new count. */
static int ulfm_add_gone(long long *msg, int ngone, const int *dead, int ndead, int width,
                         const int *rep_at, long long step)
{
    long long *gone = msg + M_BATCH, *place = gone + ULFM_MAX, *spare = place + ULFM_MAX;
    for (int k = 0; k < ndead; k++) {
        int d = dead[k] / width, have = 0;
        for (int q = 0; q < ngone; q++) have |= place[q] == d;
        if (have) continue;
        if (ngone == ULFM_MAX)
            FT_DIE("step %lld: more than %d replicas lost a process at once", step, ULFM_MAX);
        gone[ngone] = rep_at[d], place[ngone] = d, spare[ngone] = -2; /* not decided */
        ngone++;
    }
    return ngone;
}

/* train_spare_recover after its agreement found a death; ended: at the run's end, where the
 * job's end event failed on every survivor already (its agreement is the one the waiting ranks'
 * interrupted event ended in: no revoke and agreement on the channel again) */
static int ulfm_recover(FtTrainer *tr, long long step, bool ended)
{
    double t0 = MPI_Wtime(), agreed = timers_wall(), seen = comm_ft_failed_at();
    if (!tr->sp)
        FT_DIE("step %lld: a process failed; surviving it needs SPARe (spare.r >= 1)", step);
    FtSpareJob *j = tr->job;
    int n = comm_size(tr->c_world), width = tr->grid->tp * tr->grid->pp * tr->grid->ep;
    int *dead = malloc(sizeof(int) * (size_t)n), ndead = 0;
    FT_ASSERT(dead);
    MPI_Comm live;
    comm_ft_shrink(tr->c_world, &live, dead, &ndead);
    if (j) { /* the waiting ranks take part: the revoke ends their wait, which then ends in an
              * agreement on the channel (job_event_from), this one */
        if (!ended) {
            comm_ft_revoke(j->ctl);
            (void)comm_ft_agree(j->ctl, 0);
        }
        job_shrink(j);
    }
    /* the first-grid replica at each place of the grid (before any decision changes what
     * spare_alive says) */
    int dp = tr->grid->dp, *rep_at = malloc(sizeof(int) * (size_t)dp);
    FT_ASSERT(rep_at);
    for (int d = 0, i = -1; d < dp; d++) {
        do i++;
        while (!spare_alive(tr->sp, i));
        rep_at[d] = i;
    }
    long long msg[MSG_LEN] = {0};
    int ngone = ulfm_add_gone(msg, 0, dead, ndead, width, rep_at, step);
    msg[M_KIND] = EV_ULFM, msg[M_DP] = dp, msg[M_STEP] = step;
    msg[M_SPARE] = j ? j->used : 0;
    msg[M_RETRY] = j != NULL; /* a training rank's death in the split: decided again */
    int live_rank = 0, wiped = 0;
    FT_CHECK_MPI(MPI_Comm_rank(live, &live_rank));
    for (long long sent[MSG_LEN];;) {
        msg[M_N] = ngone;
        wiped = ulfm_decide(tr, msg, ngone, step);
        memcpy(sent, msg, sizeof sent);
        if (j && !job_event_from(tr, sent, live_rank == 0)) {
            /* a waiting rank died too: the channel shrinks, a spare of the decision that died
             * gives its place up, and the event goes again (a training rank's death there is
             * found by the split) */
            job_shrink(j);
            continue;
        }
        int g = ulfm_regrid(tr, msg, live);
        if (g > 0) break;
        if (g < 0) { /* a training rank died in the split: the survivors of live shrink it
                      * again, and its replica joins the batch (decided in the next turn) */
            comm_ft_shrink_again(tr->c_world, &live, dead, &ndead);
            ngone = ulfm_add_gone(msg, ngone, dead, ndead, width, rep_at, step);
            FT_CHECK_MPI(MPI_Comm_rank(live, &live_rank));
        } /* else a joining spare died in the split: decided again */
    }
    free(dead);
    free(rep_at);
    FT_CHECK_MPI(MPI_Comm_free(&live));
    comm_ft_clear();
    tr->spare.ulfm_s += MPI_Wtime() - t0;
    tr->spare.ulfm_detect_s += seen > 0 ? agreed - seen : 0.0;
    if (tr->left || wiped) return -1;
    if (ended) {
        log_info("ulfm: after the last step (%lld): recovered on %d ranks in %.4f s (shrink, "
                 "controller, regrid)", step, comm_size(tr->c_world), MPI_Wtime() - t0);
        return 1;
    }
    log_info("ulfm: step %lld: recovered on %d ranks in %.4f s (shrink, controller or spare, "
             "regrid); this rank saw the failure at wall %.6f, %.4f s before the agreement "
             "ended; the step is computed again from wall %.6f", step, comm_size(tr->c_world),
             MPI_Wtime() - t0, seen, seen > 0 ? agreed - seen : 0.0, timers_wall());
    return 1;
}

int train_spare_recover(FtTrainer *tr, long long step)
{
    if (!tr->c_world || !comm_ft_enabled()) return 0;
    if (comm_ft_agree(tr->c_world, 1)) return 0;
    return ulfm_recover(tr, step, false);
}

/* ---- what train_run asks ----------------------------------------------------------------------- */

/* After failures on a training rank (wipes: the wipe-out count before them). */
static int after_failures(FtTrainer *tr, long long wipes)
{
    if (tr->left) return FT_SPARE_AGAIN; /* waits at the next call */
    if (tr->spare.wipeouts > wipes) return restart(tr) ? FT_SPARE_AGAIN : FT_SPARE_WIPEOUT;
    return FT_SPARE_GO;
}

/* A rank that does not train: waits for the job's events until it trains again or the run
 * ends. */
static int idle(FtTrainer *tr)
{
    for (;;) {
        long long msg[MSG_LEN] = {0};
        timers_point(&tr->regions, FT_KILL_IDLE); /* a testing aid (FTLLM_TEST_KILL) */
        if (!job_event(tr, msg)) { /* ULFM: a process died; the event comes again on the
                                      survivors */
            job_shrink(tr->job);
            continue;
        }
        switch (msg[M_KIND]) {
        case EV_END: return FT_SPARE_LEFT;
        case EV_ULFM: /* not 1: a rank died in the split; the event comes again */
            if (ulfm_regrid(tr, msg, MPI_COMM_NULL) > 0 && !tr->left)
                return FT_SPARE_AGAIN; /* a spare that joined: the step again */
            break;
        case EV_RESTART:
            restart_all(tr, msg);
            if (!tr->left) return FT_SPARE_AGAIN;
            break;
        case EV_JOIN:
            if (!join(tr, msg)) break; /* the spare died: the job's next event */
            if (!tr->left) { /* joined: the rest of the step's failures, then the step */
                long long wipes = tr->spare.wipeouts;
                int rest[FT_SPARE_BATCH_MAX];
                int n = (int)msg[M_N];
                for (int k = 0; k < n; k++) rest[k] = (int)msg[M_BATCH + k];
                if (n) fail_batch(tr, rest, n);
                int next = after_failures(tr, wipes);
                if (next != FT_SPARE_AGAIN || !tr->left) return next;
            }
            break;
        default: FT_DIE("spare: job event %lld is not one this version sends", msg[M_KIND]);
        }
    }
}

int train_spare_before_step(FtTrainer *tr)
{
    if (tr->left) return tr->job ? idle(tr) : FT_SPARE_LEFT;
    long long wipes = tr->spare.wipeouts;
    if (tr->before_step) tr->before_step(tr->before_step_ctx, tr, tr->model->step + 1);
    if (tr->left && !tr->job) return FT_SPARE_LEFT;
    return after_failures(tr, wipes);
}

int train_spare_end(FtTrainer *tr)
{
    if (!tr->job || tr->left) return 0;
    int rc = 0;
    for (;;) {
        long long msg[MSG_LEN] = {0};
        msg[M_KIND] = EV_END;
        if (job_event(tr, msg)) return rc;
        /* a process died (then the end again on the survivors): a waiting rank, or a training
         * rank after the last step's agreement (in the last checkpoint, say): its replica
         * fails as in a step, and the survivors' grid can write that checkpoint again */
        if (comm_ft_agree(tr->c_world, 1)) {
            waiting_rank_died(tr, false);
            continue;
        }
        if (ulfm_recover(tr, tr->model->step, true) < 0) {
            if (tr->left) { /* its replica failed: it waits for the end, as a spare does */
                (void)idle(tr);
                return 0;
            }
            rc = -1; /* a wipe-out: the run's state is not whole on the survivors */
        }
    }
}

/* ---- the report --------------------------------------------------------------------------------- */

void train_report_spare(const FtTrainer *tr, FILE *out)
{
    if (!tr->sp || tr->left) return;
    const FtSpareStats *c = &tr->spare;
    double t[4] = {c->deep_s, c->regrid_s, c->join_s, c->restart_s};
    if (tr->c_world) /* the slowest rank's times */
        for (int k = 0; k < 4; k++) t[k] = comm_max_f64_poll(tr->c_world, t[k], NULL);
    double u[2] = {c->ulfm_detect_s, c->ulfm_s}; /* ULFM: real failures (0 elsewhere) */
    if (tr->c_world && comm_ft_enabled())
        for (int k = 0; k < 2; k++) u[k] = comm_max_f64_poll(tr->c_world, u[k], NULL);
    if (!out || (tr->grid && tr->grid->rank != 0)) return;
    if (u[1] > 0)
        fprintf(out, "ulfm: process failures survived; slowest rank: %.4f s from its first failed "
                "operation to the agreement, %.4f s recovering (shrink, controller or spare, "
                "regrid)\n", u[0], u[1]);
    int spares = tr->job ? tr->job->spares : 0;
    fprintf(out, "spare: r %d, %d replicas, live %d, depth %d; failures masked %lld, wipe-outs "
            "%lld; shards computed %lld vs needed %lld (%lld stack slots within the depth "
            "skipped: counted on another replica); levels computed %lld over %lld steps "
            "(+%.1f%%); spares used %lld of %d; restarts %lld (%lld steps recomputed); time "
            "lost: deeper levels %.3f s, regrid %.3f s, spare joins %.3f s, restarts %.3f s\n",
            tr->sp->r, tr->sp->N, tr->sp->nlive, tr->sp->depth, c->masked, c->wipeouts,
            c->computed, c->needed, c->skipped, c->levels, c->steps,
            c->steps ? 100.0 * (double)(c->levels - c->steps) / (double)c->steps : 0.0,
            c->spares_used, spares, c->restarts, c->recomputed, t[0], t[1], t[2], t[3]);
    fflush(out);
}
