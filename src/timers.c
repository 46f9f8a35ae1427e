/* timers.c: named regions (timers.h). Wall time from MPI_Wtime; the table is gathered to rank
 * 0 in one MPI_Gather of (seconds, calls) per region. */
#include "ftllm/timers.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftllm/log.h"

static const char *const g_names[FT_NREGIONS] = {
#define FT_REGION_NAME(name, text, help) text,
    FT_REGION_LIST(FT_REGION_NAME)
#undef FT_REGION_NAME
};

double timers_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void timers_reset(FtTimers *t)
{
    memset(t->t0, 0, sizeof t->t0);
    memset(t->total, 0, sizeof t->total);
    memset(t->calls, 0, sizeof t->calls);
}

int timers_region_of(const char *name)
{
    for (int r = 0; r < FT_NREGIONS; r++)
        if (strcmp(name, g_names[r]) == 0) return r;
    return -1;
}

void timers_kill_at(FtTimers *t, FtRegion r, long long nth)
{
    t->kill_region = (int)r;
    t->kill_left = nth;
}

void timers_begin(FtTimers *t, FtRegion r)
{
    if (t->kill_left > 0 && (int)r == t->kill_region && --t->kill_left == 0) {
        ft_log_rank(FT_LOG_INFO, "test kill: raising SIGKILL on entering region %s (wall %.6f)",
                    g_names[r], timers_wall());
        raise(SIGKILL);
    }
    t->t0[r] = MPI_Wtime();
}

void timers_end(FtTimers *t, FtRegion r)
{
    t->total[r] += MPI_Wtime() - t->t0[r];
    t->calls[r]++;
}

void timers_report(const FtTimers *t, MPI_Comm comm, FILE *out)
{
    int rank = 0, size = 1;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &size));
    enum { W = 2 * FT_NREGIONS };
    double mine[W];
    for (int r = 0; r < FT_NREGIONS; r++) mine[2 * r] = t->total[r], mine[2 * r + 1] = (double)t->calls[r];
    double *all = rank == 0 ? malloc(sizeof(double) * W * (size_t)size) : NULL;
    if (rank == 0 && !all) FT_DIE("out of memory");
    FT_CHECK_MPI(MPI_Gather(mine, W, MPI_DOUBLE, all, W, MPI_DOUBLE, 0, comm));
    if (rank == 0 && out) {
        fprintf(out, "%-11s %9s %27s %23s\n", "region", "calls", "seconds min / avg / max",
                "% of step min/avg/max");
        for (int r = 0; r < FT_NREGIONS; r++) {
            double mn = 1e300, mx = -1, sum = 0, calls = 0, pmn = 1e300, pmx = -1, psum = 0;
            for (int k = 0; k < size; k++) {
                const double *a = all + (size_t)k * W;
                double s = a[2 * r], step = a[2 * FT_REGION_STEP], p = step > 0 ? 100 * s / step : 0;
                mn = s < mn ? s : mn, mx = s > mx ? s : mx, sum += s, calls += a[2 * r + 1];
                pmn = p < pmn ? p : pmn, pmx = p > pmx ? p : pmx, psum += p;
            }
            if (calls == 0) continue;
            fprintf(out, "%-11s %9.0f %8.3f / %7.3f / %7.3f %6.1f / %5.1f / %5.1f\n", g_names[r],
                    calls / size, mn, sum / size, mx, pmn, psum / size, pmx);
        }
        fflush(out);
    }
    free(all);
}
