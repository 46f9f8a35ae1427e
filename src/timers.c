/* timers.c: named regions (timers.h). Wall time from MPI_Wtime; the table is gathered to rank
 * 0 in one MPI_Gather of (seconds, calls, each counter's total) per region. Counts print in a
 * compact form (12345678 -> 12.3M) so a column of min / avg / max stays narrow. In the CUDA
 * build each region is also an NVTX range of the same name (nvtx3, header-only: it costs a
 * branch until a tool such as Nsight Systems attaches), so `nsys profile` timelines show
 * step / forward / backward / gradsync / optimizer / checkpoint. */
#include "ftllm/timers.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftllm/log.h"

#ifdef FTLLM_CUDA
#include <nvtx3/nvToolsExt.h>
#define REGION_PUSH(name) nvtxRangePushA(name)
#define REGION_POP() nvtxRangePop()
#else
#define REGION_PUSH(name) ((void)0)
#define REGION_POP() ((void)0)
#endif

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
    FtCounters *ctr = t->ctr;
    int kill_region = t->kill_region;
    long long kill_left = t->kill_left;
    memset(t, 0, sizeof *t);
    t->ctr = ctr;
    t->kill_region = kill_region;
    t->kill_left = kill_left;
    counters_reset(ctr);
}

void timers_attach(FtTimers *t, FtCounters *ctr)
{
    t->ctr = ctr;
    counters_reset(ctr);
}

int timers_region_of(const char *name)
{
    for (int r = 0; r < FT_NREGIONS; r++)
        if (strcmp(name, g_names[r]) == 0) return r;
    return -1;
}

void timers_kill_at(FtTimers *t, int r, long long nth)
{
    t->kill_region = r;
    t->kill_left = nth;
}

/* the kill points that are not regions (timers.h), from FT_KILL_AGREED on */
static const char *const g_points[] = {"agreed", "idle", "regrid", "write"};

int timers_kill_point_of(const char *name)
{
    for (int p = 0; p < (int)(sizeof g_points / sizeof g_points[0]); p++)
        if (strcmp(name, g_points[p]) == 0) return FT_KILL_AGREED + p;
    return timers_region_of(name);
}

static void kill_check(FtTimers *t, int r)
{
    if (t->kill_left > 0 && r == t->kill_region && --t->kill_left == 0) {
        ft_log_rank(FT_LOG_INFO, "test kill: raising SIGKILL on entering %s (wall %.6f)",
                    r < FT_NREGIONS ? g_names[r] : g_points[r - FT_KILL_AGREED], timers_wall());
        raise(SIGKILL);
    }
}

void timers_point(FtTimers *t, int p) { kill_check(t, p); }

void timers_begin(FtTimers *t, FtRegion r)
{
    kill_check(t, (int)r);
    REGION_PUSH(g_names[r]);
    t->t0[r] = MPI_Wtime();
    if (t->ctr) counters_begin(t->ctr, r);
}

void timers_end(FtTimers *t, FtRegion r)
{
    if (t->ctr) counters_end(t->ctr, r);
    t->total[r] += MPI_Wtime() - t->t0[r];
    t->calls[r]++;
    REGION_POP();
}

/* A count in at most 5 characters: 9999 as is, then 3 significant digits and k M G T P E. */
static void fmt_count(double x, char *buf, size_t len)
{
    static const char suffix[] = " kMGTPE";
    int k = 0;
    while (x >= (k ? 999.5 : 9999.5) && k < 6) x /= 1000, k++; /* k > 0: x in [0.9995, 999.5) */
    if (k == 0) snprintf(buf, len, "%.0f", x);
    else snprintf(buf, len, x < 9.995 ? "%.2f%c" : x < 99.95 ? "%.1f%c" : "%.0f%c", x, suffix[k]);
}

/* min / avg / max over the ranks of value v of region r; rows of w doubles per rank */
static void over_ranks(const double *all, int size, int w, int v, double *mn, double *avg,
                       double *mx)
{
    *mn = 1e300, *mx = -1e300;
    double sum = 0;
    for (int k = 0; k < size; k++) {
        double x = all[(size_t)k * w + v];
        *mn = x < *mn ? x : *mn, *mx = x > *mx ? x : *mx, sum += x;
    }
    *avg = sum / size;
}

#define COUNT_W 19 /* "12.3M / 12.3M / 12.3M" */

static void print_header(FILE *out, const FtCounters *ctr)
{
    int nev = counters_num(ctr);
    if (nev)
        fprintf(out, "(the last %d column%s: PAPI event counts of the region, min / avg / max over "
                     "the ranks)\n", nev, nev == 1 ? "" : "s");
    fprintf(out, "%-11s %9s %27s %23s", "region", "calls", "seconds min / avg / max",
            "% of step min/avg/max");
    for (int e = 0; e < nev; e++) fprintf(out, "  %*s", COUNT_W, counters_name(ctr, e));
    fprintf(out, "\n");
}

void timers_report(const FtTimers *t, MPI_Comm comm, FILE *out)
{
    int rank = 0, size = 1;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &size));
    int nev = counters_num(t->ctr), per = 2 + nev, w = per * FT_NREGIONS;
    double *mine = malloc(sizeof(double) * (size_t)w);
    double *all = rank == 0 ? malloc(sizeof(double) * (size_t)w * (size_t)size) : NULL;
    if (!mine || (rank == 0 && !all)) FT_DIE("out of memory");
    for (int r = 0; r < FT_NREGIONS; r++) {
        mine[per * r] = t->total[r], mine[per * r + 1] = (double)t->calls[r];
        for (int e = 0; e < nev; e++) mine[per * r + 2 + e] = (double)counters_total(t->ctr, r, e);
    }
    FT_CHECK_MPI(MPI_Gather(mine, w, MPI_DOUBLE, all, w, MPI_DOUBLE, 0, comm));
    if (rank == 0 && out) {
        print_header(out, t->ctr);
        for (int r = 0; r < FT_NREGIONS; r++) {
            double mn, avg, mx, calls, pmn = 1e300, pmx = -1, psum = 0;
            over_ranks(all, size, w, per * r + 1, &mn, &calls, &mx);
            if (calls == 0) continue;
            for (int k = 0; k < size; k++) {
                const double *a = all + (size_t)k * w;
                double s = a[per * r], step = a[per * FT_REGION_STEP];
                double p = step > 0 ? 100 * s / step : 0;
                pmn = p < pmn ? p : pmn, pmx = p > pmx ? p : pmx, psum += p;
            }
            over_ranks(all, size, w, per * r, &mn, &avg, &mx);
            fprintf(out, "%-11s %9.0f %8.3f / %7.3f / %7.3f %6.1f / %5.1f / %5.1f", g_names[r],
                    calls, mn, avg, mx, pmn, psum / size, pmx);
            for (int e = 0; e < nev; e++) {
                char a[16], b[16], c[16], cell[64];
                over_ranks(all, size, w, per * r + 2 + e, &mn, &avg, &mx);
                fmt_count(mn, a, sizeof a), fmt_count(avg, b, sizeof b), fmt_count(mx, c, sizeof c);
                snprintf(cell, sizeof cell, "%s / %s / %s", a, b, c);
                fprintf(out, "  %*s", COUNT_W, cell);
            }
            fprintf(out, "\n");
        }
        double between = 0; /* regions that run between steps, not inside one */
        for (int k = 0; k < size; k++)
            between += all[(size_t)k * w + per * FT_REGION_EVAL + 1] +
                       all[(size_t)k * w + per * FT_REGION_CHECKPOINT + 1];
        if (between > 0)
            fprintf(out, "(eval and checkpoint run between steps: their %% of step compares them "
                         "with the steps' time and can pass 100)\n");
        fflush(out);
    }
    free(mine);
    free(all);
}
