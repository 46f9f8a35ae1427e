/* counters.c: event counts per region (counters.h), read from PAPI or from a test's source.
 *
 * Opening is a small agreement: every rank builds and starts an EventSet of the candidate
 * events (first the whole list), the per-event outcomes are combined with one all-reduce (an
 * event stays only where every rank accepted it), and a rank whose set differs rebuilds with
 * the agreed candidates; the loop ends when no rank refuses any candidate (at most one round
 * per event). Only then are refusals reported, once, on rank 0. */
#include "ftllm/counters.h"

#include <papi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"

struct ft_counters {
    int n, nslots;
    char names[FT_COUNTERS_MAX][FT_COUNTERS_NAME_MAX];
    int (*read)(void *ctx, long long *values);
    void *ctx;
    int es;                /* PAPI EventSet, PAPI_NULL for a test's source */
    long long *start;      /* [nslots][n]: values at the slot's last begin */
    long long *total;      /* [nslots][n] */
    long long now[FT_COUNTERS_MAX];
};

static FtCounters *alloc_counters(int n, int nslots)
{
    FtCounters *c = calloc(1, sizeof *c);
    FT_ASSERT(c && n > 0 && n <= FT_COUNTERS_MAX && nslots > 0);
    c->n = n, c->nslots = nslots, c->es = PAPI_NULL;
    c->start = calloc((size_t)nslots * (size_t)n, sizeof *c->start);
    c->total = calloc((size_t)nslots * (size_t)n, sizeof *c->total);
    FT_ASSERT(c->start && c->total);
    return c;
}

FtCounters *counters_open_source(int n, const char *const *names, int nslots,
                                 int (*read)(void *ctx, long long *values), void *ctx)
{
    FtCounters *c = alloc_counters(n, nslots);
    for (int e = 0; e < n; e++) snprintf(c->names[e], sizeof c->names[e], "%s", names[e]);
    c->read = read, c->ctx = ctx;
    return c;
}

/* ---- PAPI -------------------------------------------------------------------------------- */

static int papi_read(void *ctx, long long *values)
{
    return PAPI_read(*(int *)ctx, values);
}

/* Splits a comma-separated list (blanks around names ignored; the deck checked its syntax). */
static int split_events(const char *list, char names[FT_COUNTERS_MAX][FT_COUNTERS_NAME_MAX])
{
    int n = 0;
    for (const char *p = list; *p && n < FT_COUNTERS_MAX;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        size_t len = strcspn(p, ", \t");
        if (len == 0) break;
        snprintf(names[n++], FT_COUNTERS_NAME_MAX, "%.*s", (int)len, p);
        p += len;
    }
    return n;
}

/* Why PAPI cannot count at all on this rank ("" when it can try). */
static void papi_unusable(char *why, size_t len)
{
    why[0] = 0;
    if (PAPI_is_initialized() == PAPI_NOT_INITED) {
        int rc = PAPI_library_init(PAPI_VER_CURRENT);
        if (rc != PAPI_VER_CURRENT) {
            snprintf(why, len, "PAPI_library_init failed: %s",
                     rc > 0 ? "version mismatch" : PAPI_strerror(rc));
            return;
        }
    }
    int cidx = PAPI_get_component_index("perf_event");
    const PAPI_component_info_t *ci = cidx >= 0 ? PAPI_get_component_info(cidx) : NULL;
    if (ci && ci->disabled)
        snprintf(why, len, "its perf_event component is disabled: %s", ci->disabled_reason);
}

/* Builds and starts *es with the candidate events (cand[e] != 0); ok[e] = 1 where PAPI took
 * event e, the reason of a refusal in err[e]. A failed start refuses every candidate. */
static void papi_build(int *es, int n, char names[][FT_COUNTERS_NAME_MAX], const int *cand,
                       int *ok, int *err)
{
    if (*es != PAPI_NULL) {
        PAPI_stop(*es, NULL);
        PAPI_cleanup_eventset(*es);
    } else if (PAPI_create_eventset(es) != PAPI_OK) {
        *es = PAPI_NULL;
        for (int e = 0; e < n; e++) ok[e] = 0, err[e] = PAPI_ENOMEM;
        return;
    }
    for (int e = 0; e < n; e++) {
        ok[e] = 0, err[e] = PAPI_OK;
        if (!cand[e]) continue;
        err[e] = PAPI_add_named_event(*es, names[e]);
        ok[e] = err[e] == PAPI_OK;
    }
    int any = 0;
    for (int e = 0; e < n; e++) any |= ok[e];
    int rc = any ? PAPI_start(*es) : PAPI_OK;
    if (rc != PAPI_OK)
        for (int e = 0; e < n; e++)
            if (ok[e]) ok[e] = 0, err[e] = rc;
}

FtCounters *counters_open_papi(const char *events, int nslots, MPI_Comm comm)
{
    char names[FT_COUNTERS_MAX][FT_COUNTERS_NAME_MAX];
    int n = split_events(events, names);
    if (n == 0) return NULL;
    int size = 1;
    FT_CHECK_MPI(MPI_Comm_size(comm, &size));
    char why[PAPI_HUGE_STR_LEN + 64];
    papi_unusable(why, sizeof why);
    int unusable = why[0] != 0, any_unusable = 0;
    FT_CHECK_MPI(MPI_Allreduce(&unusable, &any_unusable, 1, MPI_INT, MPI_MAX, comm));
    if (any_unusable) {
        log_warn("perf.papi_events: PAPI cannot count here (%s): no counter columns",
                 unusable ? why : "on another rank");
        return NULL;
    }
    int es = PAPI_NULL, cand[FT_COUNTERS_MAX], ok[FT_COUNTERS_MAX], first_err[FT_COUNTERS_MAX];
    int err[FT_COUNTERS_MAX], refused[FT_COUNTERS_MAX];
    for (int e = 0; e < n; e++) cand[e] = 1, first_err[e] = PAPI_OK;
    for (int round = 0;; round++) {
        papi_build(&es, n, names, cand, ok, err);
        for (int e = 0; e < n; e++)
            if (cand[e] && !ok[e] && first_err[e] == PAPI_OK) first_err[e] = err[e];
        int agreed[FT_COUNTERS_MAX];
        FT_CHECK_MPI(MPI_Allreduce(ok, agreed, n, MPI_INT, MPI_MIN, comm));
        int same = 1;
        for (int e = 0; e < n; e++) same &= agreed[e] == cand[e];
        if (same) break; /* every rank took every candidate */
        FT_ASSERT(round < FT_COUNTERS_MAX + 1);
        memcpy(cand, agreed, sizeof cand);
    }
    for (int e = 0; e < n; e++) refused[e] = first_err[e] != PAPI_OK;
    int nref[FT_COUNTERS_MAX];
    FT_CHECK_MPI(MPI_Allreduce(refused, nref, n, MPI_INT, MPI_SUM, comm));
    int kept = 0;
    for (int e = 0; e < n; e++) {
        if (cand[e]) {
            kept++;
            continue;
        }
        if (refused[e]) /* rank 0 knows the reason */
            log_warn("perf.papi_events: PAPI refused event '%s' (%s) on %d of %d rank%s: not "
                     "counted", names[e], PAPI_strerror(first_err[e]), nref[e], size,
                     size == 1 ? "" : "s");
        else
            log_warn("perf.papi_events: PAPI refused event '%s' on %d of %d ranks (not rank 0): "
                     "not counted", names[e], nref[e], size);
    }
    if (kept == 0) {
        if (es != PAPI_NULL) {
            PAPI_cleanup_eventset(es);
            PAPI_destroy_eventset(&es);
        }
        log_warn("perf.papi_events: no event left to count: no counter columns");
        return NULL;
    }
    FtCounters *c = alloc_counters(kept, nslots);
    for (int e = 0, k = 0; e < n; e++)
        if (cand[e]) memcpy(c->names[k++], names[e], FT_COUNTERS_NAME_MAX);
    c->es = es;
    c->read = papi_read;
    c->ctx = &c->es;
    return c;
}

/* ---- regions ----------------------------------------------------------------------------- */

void counters_close(FtCounters *c)
{
    if (!c) return;
    if (c->es != PAPI_NULL) {
        PAPI_stop(c->es, NULL);
        PAPI_cleanup_eventset(c->es);
        PAPI_destroy_eventset(&c->es);
    }
    free(c->start);
    free(c->total);
    free(c);
}

int counters_num(const FtCounters *c) { return c ? c->n : 0; }

const char *counters_name(const FtCounters *c, int e)
{
    FT_ASSERT(c && e >= 0 && e < c->n);
    return c->names[e];
}

static void read_now(FtCounters *c)
{
    int rc = c->read(c->ctx, c->now);
    if (rc != 0)
        FT_DIE("reading the counters failed: %s",
               c->es != PAPI_NULL ? PAPI_strerror(rc) : "the test's source");
}

void counters_begin(FtCounters *c, int slot)
{
    FT_ASSERT(slot >= 0 && slot < c->nslots);
    read_now(c);
    memcpy(c->start + (size_t)slot * c->n, c->now, sizeof(long long) * (size_t)c->n);
}

void counters_end(FtCounters *c, int slot)
{
    FT_ASSERT(slot >= 0 && slot < c->nslots);
    read_now(c);
    long long *t = c->total + (size_t)slot * c->n, *s = c->start + (size_t)slot * c->n;
    for (int e = 0; e < c->n; e++) t[e] += c->now[e] - s[e];
}

void counters_reset(FtCounters *c)
{
    if (c) memset(c->total, 0, sizeof(long long) * (size_t)c->nslots * (size_t)c->n);
}

long long counters_total(const FtCounters *c, int slot, int e)
{
    FT_ASSERT(c && slot >= 0 && slot < c->nslots && e >= 0 && e < c->n);
    return c->total[(size_t)slot * c->n + e];
}
