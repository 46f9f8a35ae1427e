/* ftllm.h: version and process exit codes shared by every verb.
 *
 * Exit codes are part of the user interface (sbatch scripts and tests branch on them), so they
 * are fixed here once: 0 success, 1 the run finished but its verdict failed, 2 bad input
 * (deck, command line, data file), 3 a verb that is not implemented yet, 4 a fatal internal or
 * library error (MPI_Abort). */
#ifndef FTLLM_FTLLM_H
#define FTLLM_FTLLM_H

#define FTLLM_VERSION "0.1.0"

enum ft_exit {
    FT_EXIT_OK = 0,
    FT_EXIT_FAILED = 1,
    FT_EXIT_USAGE = 2,
    FT_EXIT_NOTIMPL = 3,
    FT_EXIT_FATAL = 4,
    FT_EXIT_WIPEOUT = 5, /* SPARe: a shard type lost every holder; restart from a checkpoint */
};

#endif
