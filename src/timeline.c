/* timeline.c: per-rank compute vs. communication-wait timeline (timeline.h). Intervals are
 * appended to a preallocated array (no allocation on the training path); the report gathers
 * totals with one MPI_Gather (end of run only, not the training path). */
#include "ftllm/timeline.h"

#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"

static const char *const g_kind[FT_TL_NKINDS] = {
#define FT_TL_NAME(name, text, help) text,
    FT_TL_LIST(FT_TL_NAME)
#undef FT_TL_NAME
};


void timeline_init(FtTimeline *tl, size_t cap)
{
    memset(tl, 0, sizeof *tl);
    if (cap) {
        tl->ev = malloc(sizeof *tl->ev * cap);
        if (!tl->ev) FT_DIE("out of memory: timeline of %zu events", cap);
        tl->cap = cap;
    }
}

void timeline_free(FtTimeline *tl)
{
    free(tl->ev);
    memset(tl, 0, sizeof *tl);
}

void timeline_reset(FtTimeline *tl)
{
    memset(tl->total, 0, sizeof tl->total);
    memset(tl->count, 0, sizeof tl->count);
    tl->nev = 0;
}

void timeline_add(FtTimeline *tl, FtTlKind kind, double t0, double t1)
{
    tl->total[kind] += t1 - t0;
    tl->count[kind]++;
    if (tl->nev < tl->cap) tl->ev[tl->nev++] = (FtTlEvent){t0, t1, (int)kind};
}

double timeline_wait(const FtTimeline *tl)
{
    double w = 0;
    for (int k = FT_TL_TP; k < FT_TL_NKINDS; k++) w += tl->total[k];
    return w;
}

double timeline_report(const FtTimeline *tl, MPI_Comm comm, const char *label, FILE *out)
{
    int rank = 0, size = 1;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &size));
    enum { LAB = 48 };
    double mine[FT_TL_NKINDS + 1];
    memcpy(mine, tl->total, sizeof tl->total);
    mine[FT_TL_NKINDS] = (double)tl->count[FT_TL_STEP];
    char lab[LAB] = "";
    if (label) snprintf(lab, sizeof lab, "%s", label);
    double *all = rank == 0 ? malloc(sizeof(double) * (FT_TL_NKINDS + 1) * (size_t)size) : NULL;
    char *labs = rank == 0 ? malloc((size_t)LAB * (size_t)size) : NULL;
    if (rank == 0 && (!all || !labs)) FT_DIE("out of memory");
    FT_CHECK_MPI(MPI_Gather(mine, FT_TL_NKINDS + 1, MPI_DOUBLE, all, FT_TL_NKINDS + 1, MPI_DOUBLE,
                            0, comm));
    FT_CHECK_MPI(MPI_Gather(lab, LAB, MPI_CHAR, labs, LAB, MPI_CHAR, 0, comm));
    if (rank == 0 && out) {
        for (int r = 0; r < size; r++) {
            const double *t = all + (size_t)r * (FT_TL_NKINDS + 1);
            double step = t[FT_TL_STEP], steps = t[FT_TL_NKINDS], w = 0;
            for (int k = FT_TL_TP; k < FT_TL_NKINDS; k++) w += t[k];
            fprintf(out, "[r%d] %-22s %8.2f ms/step, waiting %5.1f%%", r, labs + (size_t)r * LAB,
                    steps > 0 ? 1e3 * step / steps : 0.0, step > 0 ? 100 * w / step : 0.0);
            int any = 0;
            for (int k = FT_TL_TP; k < FT_TL_NKINDS; k++) {
                if (t[k] <= 0) continue;
                fprintf(out, "%s%s %.1f%%", any ? ", " : " (", g_kind[k],
                        step > 0 ? 100 * t[k] / step : 0.0);
                any = 1;
            }
            fprintf(out, "%s\n", any ? ")" : "");
        }
        fflush(out);
    }
    free(all);
    free(labs);
    double step = tl->total[FT_TL_STEP];
    return step > 0 ? timeline_wait(tl) / step : 0.0;
}
