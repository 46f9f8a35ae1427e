/* progress.c: the per-step line or the live status line (progress.h). */
#include "ftllm/progress.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "ftllm/log.h"

void progress_start(FtProgress *p, int mode, long long total)
{
    *p = (FtProgress){.total = total};
    bool tty = log_rank() == 0 && isatty(STDOUT_FILENO);
    p->live = log_level() >= FT_LOG_INFO &&
              (mode == FT_PROGRESS_LIVE || (mode == FT_PROGRESS_AUTO && tty));
}

void progress_format_eta(double s, char *buf, size_t len)
{
    if (!isfinite(s) || s < 0 || s > 1e9) {
        snprintf(buf, len, "?");
        return;
    }
    long long t = llround(s), h = t / 3600, m = t / 60 % 60, sec = t % 60;
    if (h) snprintf(buf, len, "%lld:%02lld:%02lld", h, m, sec);
    else snprintf(buf, len, "%lld:%02lld", m, sec);
}

void progress_step(FtProgress *p, const FtStepInfo *st, double tok_per_s, const char *extra)
{
    if (!p->live) {
        log_info("step %5lld/%lld | loss %.4f | lr %.3e | norm %.4f | %8.1f ms | %9.0f tok/s%s",
                 st->step, p->total, st->loss, st->lr, st->grad_norm, 1e3 * st->seconds,
                 tok_per_s, extra);
        return;
    }
    double now = MPI_Wtime(), per_step = st->seconds;
    if (p->done++ == 0) p->t_first = now;
    else per_step = (now - p->t_first) / (double)(p->done - 1);
    char eta[32], line[256];
    progress_format_eta(per_step * (double)(p->total - st->step), eta, sizeof eta);
    snprintf(line, sizeof line, "step %lld/%lld (%.0f%%) | loss %.4f | %.0f tok/s | ETA %s%s",
             st->step, p->total, p->total > 0 ? 100.0 * (double)st->step / (double)p->total : 0.0,
             st->loss, tok_per_s, eta, extra);
    log_status(line);
}

void progress_end(FtProgress *p)
{
    if (p->live) log_status(NULL);
    p->live = false;
}
