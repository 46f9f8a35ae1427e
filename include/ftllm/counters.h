/* counters.h: event counts per named region (PAPI), the `[perf] papi_events` of a deck.
 *
 * One PAPI EventSet per rank, started once and read at each region boundary: a region's count
 * is the difference of two reads, so nested regions (forward inside step) each get their own
 * inclusive count, exactly as the region timers (timers.h) nest. The EventSet counts the calling
 * thread, PAPI's default scope: the rank's main thread (OpenMP and BLAS workers are not in the
 * counts; run.threads = 1 makes them whole-rank counts).
 *
 * PAPI decides which events exist: an event it refuses (on a virtual machine hardware events
 * give "Event does not exist") is left out on every rank and reported once on rank 0, naming
 * it and PAPI's reason; the run goes on with the others. When PAPI cannot count at all (its
 * library fails to initialise, or its perf_event component is disabled, e.g. a VM without a
 * CPU PMU, where libpfm4 finds "no default PMU") one warning says so and nothing is counted.
 * The list's syntax (names, no blanks, no repeats, at most FT_COUNTERS_MAX) is the deck's
 * business (deck_check). PAPI is used in this module only. */
#ifndef FTLLM_COUNTERS_H
#define FTLLM_COUNTERS_H

#include <mpi.h>
#include <stddef.h>

#define FT_COUNTERS_MAX 16      /* events per run */
#define FT_COUNTERS_NAME_MAX 128 /* longest event name + 1 */

typedef struct ft_counters FtCounters;

/* Opens the comma-separated PAPI events of `events` with nslots region slots, collectively over
 * comm (events and nslots equal on every rank). The events counted are those PAPI accepts on
 * every rank, in the list's order; the others are reported once on rank 0 (log_warn). Returns
 * NULL on every rank when events is empty or nothing can be counted (after one warning). */
FtCounters *counters_open_papi(const char *events, int nslots, MPI_Comm comm);

/* A counter source other than PAPI (tests): read(ctx, values) fills the n current values
 * (monotonic counts) and returns 0. Names are copied. Local (no MPI). */
FtCounters *counters_open_source(int n, const char *const *names, int nslots,
                                 int (*read)(void *ctx, long long *values), void *ctx);

void counters_close(FtCounters *c); /* NULL: nothing */

int counters_num(const FtCounters *c); /* 0 for NULL */
const char *counters_name(const FtCounters *c, int e);

/* Region slot boundaries (the timers' begin/end call these): the counts between a begin and
 * the next end of the same slot are added to the slot's totals. */
void counters_begin(FtCounters *c, int slot);
void counters_end(FtCounters *c, int slot);
/* Zeroes every slot's totals (warm-up steps left out). */
void counters_reset(FtCounters *c);
/* Event e's total in slot (this rank). */
long long counters_total(const FtCounters *c, int slot, int e);

#endif
