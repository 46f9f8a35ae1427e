/* verb_plan.c: `ftllm plan DECK [section.key=value ...]`: the measured DMR plan.
 *
 * The deck's own training run (verb_train.c: same model, layout, AC and data) is cut to
 * dmr.profile_steps steps with dmr.mode = planned, no faults, no checkpoints, no validation:
 * those steps are the profile (checked naively, dmr_plan.h) and the plan is made at the end of
 * the last. Here each rank writes its plan (dmr.plan: FILE, or FILE.rN with several ranks: the
 * profiles, so the plans, differ per rank) and rank 0 prints its own table (op, strategy,
 * window, predicted cost) and every rank's totals (per phase, windows, predicted overhead
 * against the profiled step, and the lower bound). `ftllm train` with the same dmr.plan then
 * loads the files instead of profiling. (`ftllm plan --predict`, a plan for clusters this
 * machine cannot run, lives in verb_plan_predict.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/cli.h"
#include "ftllm/deck.h"
#include "ftllm/dmr_plan.h"
#include "ftllm/ftllm.h"
#include "ftllm/log.h"
#include "ftllm/train.h"
#include "ftllm/dmr_pipesim.h"
#include "ftllm/train_dmr.h"

enum { SUMMARY_MAX = 1536 };

int verb_plan_report(FtTrainer *tr, FtTrainDmr *td, const FtConfig *cfg, const char *path,
                     MPI_Comm comm)
{
    int rank = 0, nranks = 1, rc = FT_EXIT_OK;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &nranks));
    const FtDmrEntryPlan *p = dmr_plan(train_dmr_get(td));
    FT_ASSERT(p); /* the last profiled step made it */
    char file[FT_DECK_STR_MAX + 16] = "", err[1024];
    if (path[0] && train_dmr_write_plan(td, path, file, sizeof file, err, sizeof err)) {
        cli_error(comm, err);
        rc = FT_EXIT_FAILED;
    }
    if (rank == 0) {
        printf("DMR plan of rank 0 (%s; one row per op execution in the step's time order: entry "
               "(the micro-batch tape's, then the optimizer's) and mb (its micro-batch); time: "
               "checker ms per step, cost: predicted overhead ms per step):\n",
               cfg->path);
        dmr_plan_print_table(stdout, p, &tr->tape, &tr->opt_tape);
        fflush(stdout);
    }
    /* every rank's totals (rank 0's too), printed by rank 0 in rank order */
    char mine[SUMMARY_MAX] = "";
    char *buf = NULL;
    size_t len = 0;
    FILE *ms = open_memstream(&buf, &len);
    FT_ASSERT(ms);
    dmr_plan_print(ms, p, &tr->tape, &tr->opt_tape, false);
    fclose(ms);
    snprintf(mine, sizeof mine, "%s", buf);
    free(buf);
    char *all = calloc((size_t)nranks, SUMMARY_MAX);
    FT_ASSERT(all);
    FT_CHECK_MPI(MPI_Allgather(mine, SUMMARY_MAX, MPI_CHAR, all, SUMMARY_MAX, MPI_CHAR, comm));
    if (rank == 0) {
        for (int q = 0; q < nranks; q++) {
            char *line, *save = NULL;
            for (line = strtok_r(all + (size_t)q * SUMMARY_MAX, "\n", &save); line;
                 line = strtok_r(NULL, "\n", &save))
                printf("[r%d] %s\n", q, line);
        }
        const FtPipeRefine *rf = train_dmr_refined(td);
        if (rf) /* the same on every stage */
            printf("plan: the pipeline's stages refined their plans together (dmr.refine = "
                   "pipeline): simulated step %.3f ms without checks, %.3f ms with every check "
                   "at once, %.3f ms under the stages' own plans, %.3f ms refined (%d op "
                   "executions moved between naive and deferred); the pipeline's lower bound "
                   "%.3f ms (+%.1f%% over the step without checks, refined +%.1f%%)\n",
                   1e3 * rf->off.step, 1e3 * rf->naive.step, 1e3 * rf->start.step,
                   1e3 * rf->best.step, rf->flips, 1e3 * rf->bound,
                   100 * (rf->bound / rf->off.step - 1), 100 * (rf->best.step / rf->off.step - 1));
        if (!path[0])
            printf("plan: not written (dmr.plan is empty; HINT: dmr.plan=FILE keeps it for "
                   "ftllm train)\n");
        if (path[0] && rc == FT_EXIT_OK)
            printf("plan: written to %s%s; `ftllm train DECK dmr.mode=planned dmr.plan=%s` "
                   "loads it\n", path, nranks > 1 ? ".rN (one file per rank)" : "", path);
        fflush(stdout);
    }
    free(all);
    return rc;
}
