/* log.c: rank-0 logging and the fatal error path (FT_DIE, FT_CHECK_MPI).
 *
 * The rank and level are this module's own state, set by log_init(); nothing else in the program
 * keeps logging state. A fatal error never calls exit() once MPI is up: it calls MPI_Abort so
 * that every rank stops, which is what an HPC user expects of a failed job step. */
#include "ftllm/log.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftllm/ftllm.h"

static int g_rank = 0;
static int g_level = FT_LOG_INFO;
static char g_status[512]; /* the status line shown on stdout ("" = none) */

void log_init(int rank, int level)
{
    g_rank = rank;
    g_level = level;
}

int log_rank(void) { return g_rank; }
int log_level(void) { return g_level; }

static const char *level_tag(int level)
{
    switch (level) {
    case FT_LOG_ERROR: return "error: ";
    case FT_LOG_WARN: return "warning: ";
    default: return "";
    }
}

/* "\r" + erase to the end of the line (ANSI): the status line's place, blank */
static void status_clear(void)
{
    if (!g_status[0]) return;
    fputs("\r\033[K", stdout);
    fflush(stdout);
}

static void status_draw(void)
{
    if (!g_status[0]) return;
    fputs(g_status, stdout);
    fflush(stdout);
}

void log_status(const char *text)
{
    if (g_rank != 0) return;
    if (!text) {
        if (g_status[0]) fputs("\n", stdout), fflush(stdout);
        g_status[0] = 0;
        return;
    }
    status_clear();
    snprintf(g_status, sizeof g_status, "%s", text);
    for (char *q = g_status; *q; q++)
        if (*q == '\n' || *q == '\r') *q = ' ';
    if (!g_status[0]) snprintf(g_status, sizeof g_status, " ");
    status_draw();
}

static void vlog(int level, int with_rank, const char *fmt, va_list ap)
{
    FILE *out = level <= FT_LOG_WARN ? stderr : stdout;
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    status_clear();
    if (with_rank)
        fprintf(out, "[r%d] %s%s\n", g_rank, level_tag(level), buf);
    else
        fprintf(out, "%s%s\n", level_tag(level), buf);
    fflush(out);
    status_draw();
}

void ft_log(int level, const char *fmt, ...)
{
    if (g_rank != 0 || level > g_level) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, 0, fmt, ap);
    va_end(ap);
}

void ft_log_rank(int level, const char *fmt, ...)
{
    if (level > g_level) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, 1, fmt, ap);
    va_end(ap);
}

static _Noreturn void abort_all(void)
{
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) MPI_Abort(MPI_COMM_WORLD, FT_EXIT_FATAL);
    exit(FT_EXIT_FATAL);
}

void ft_die_at(const char *file, int line, const char *func, const char *fmt, ...)
{
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    status_clear();
    fprintf(stderr, "[r%d %s] FATAL %s:%d %s(): %s\n", g_rank, host, file, line, func, msg);
    fflush(stderr);
    abort_all();
}

void ft_die_mpi_at(const char *file, int line, const char *func, const char *expr, int rc)
{
    char err[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, err, &len);
    ft_die_at(file, line, func, "%s failed: %s", expr, err);
}
