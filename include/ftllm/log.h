/* log.h: the one error path and rank-0 logging.
 *
 * Two classes of error, never mixed (see STYLE.md): fatal errors (a library call failed, an
 * invariant broke) go through FT_DIE / FT_CHECK_MPI, which print rank, host, file:line and
 * function, then MPI_Abort every rank with FT_EXIT_FATAL. Recoverable errors (bad user input)
 * are returned as status codes by the module that found them and reported by the caller.
 *
 * Logging: ft_log() prints on rank 0 only, when the level is enabled; ft_log_rank() prints on
 * the calling rank with a "[r3]" prefix. Messages go to stderr for warnings and errors and to
 * stdout otherwise, each as one line.
 *
 * A status line (log_status: the live progress line of a run on a terminal) sits at the bottom
 * of rank 0's stdout, rewritten in place with '\r'; a message logged while it is shown clears
 * it, prints, and draws it again below, so messages and the status never share a line. */
#ifndef FTLLM_LOG_H
#define FTLLM_LOG_H

#include <stdarg.h>

enum ft_log_level { FT_LOG_ERROR = 0, FT_LOG_WARN = 1, FT_LOG_INFO = 2, FT_LOG_DEBUG = 3 };

/* Records this process's rank (for prefixes and for rank-0 filtering) and the level. Safe to
 * call again, e.g. after the deck sets run.log_level. */
void log_init(int rank, int level);
int log_rank(void);
int log_level(void);

void ft_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ft_log_rank(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Rank 0: shows text (one line, no newline) as the status line, replacing the previous one;
 * NULL ends it, leaving its last text as an ordinary line. Other ranks: nothing. */
void log_status(const char *text);

#define log_error(...) ft_log(FT_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) ft_log(FT_LOG_WARN, __VA_ARGS__)
#define log_info(...) ft_log(FT_LOG_INFO, __VA_ARGS__)
#define log_debug(...) ft_log(FT_LOG_DEBUG, __VA_ARGS__)

/* Prints "[r3 host] FATAL file:line func(): message" and aborts all ranks (MPI_Abort with
 * FT_EXIT_FATAL), or exits with FT_EXIT_FATAL when MPI is not initialized. */
_Noreturn void ft_die_at(const char *file, int line, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define FT_DIE(...) ft_die_at(__FILE__, __LINE__, __func__, __VA_ARGS__)

/* Aborts with the MPI error string when an MPI call does not return MPI_SUCCESS. */
#define FT_CHECK_MPI(call)                                                                     \
    do {                                                                                       \
        int ft_mpi_rc_ = (call);                                                               \
        if (ft_mpi_rc_ != 0) ft_die_mpi_at(__FILE__, __LINE__, __func__, #call, ft_mpi_rc_);   \
    } while (0)

_Noreturn void ft_die_mpi_at(const char *file, int line, const char *func, const char *expr,
                             int rc);

/* Checks an invariant; on failure dies naming the expression. Always on (not NDEBUG). */
#define FT_ASSERT(cond)                                                                        \
    do {                                                                                       \
        if (!(cond)) ft_die_at(__FILE__, __LINE__, __func__, "assertion failed: %s", #cond);   \
    } while (0)

#endif
