/* cli.h: the command line. `ftllm VERB [args]`; each verb is one function with this signature,
 * listed in the table in cli.c. Verbs are collective over comm: every rank runs the same verb
 * with the same arguments and returns the same exit code (enum ft_exit). */
#ifndef FTLLM_CLI_H
#define FTLLM_CLI_H

#include <mpi.h>

typedef int (*FtVerbFn)(int argc, char **argv, MPI_Comm comm);

/* Runs the verb named by argv[1]; returns the process exit code. */
int cli_main(int argc, char **argv, MPI_Comm comm);

/* Verbs (argv[0] is the verb's name). */
int verb_train(int argc, char **argv, MPI_Comm comm);
int verb_optimize(int argc, char **argv, MPI_Comm comm);
int verb_simulate(int argc, char **argv, MPI_Comm comm);
int verb_sample(int argc, char **argv, MPI_Comm comm);
int verb_inspect(int argc, char **argv, MPI_Comm comm);
int verb_tokenize(int argc, char **argv, MPI_Comm comm);
/* `ftllm plan --predict DECK [overrides]` (argv[0] is "--predict"). */
int verb_plan_predict(int argc, char **argv, MPI_Comm comm);
/* `ftllm plan DECK [overrides]`: the deck's training run for dmr.profile_steps steps with
 * dmr.mode = planned (verb_train.c), then verb_plan_report. */
int verb_plan(int argc, char **argv, MPI_Comm comm);

struct ft_trainer;
struct ft_train_dmr;
struct ft_config;
/* After the profile (verb_plan.c): writes each rank's plan to path (FILE.rN with several ranks;
 * "" = not written) and rank 0 prints its table, then every rank's totals. Collective over
 * comm; returns the exit code (FT_EXIT_FAILED when a file could not be written). */
int verb_plan_report(struct ft_trainer *tr, struct ft_train_dmr *td, const struct ft_config *cfg,
                     const char *path, MPI_Comm comm);

/* Prints a one-line user error on rank 0 (stderr), exactly as given. */
void cli_error(MPI_Comm comm, const char *msg);

#endif
