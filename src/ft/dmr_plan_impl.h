/* dmr_plan_impl.h: what dmr_plan.c (profile, build, totals, table) and dmr_plan_file.c (the
 * plan file) share. Not a public header: only src/ft/dmr_plan*.c include it. */
#ifndef FTLLM_DMR_PLAN_IMPL_H
#define FTLLM_DMR_PLAN_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "ftllm/dmr_plan.h"

extern const char *const dmr_phase_names[3]; /* forward, backward, recompute */
extern const char *const dmr_kind_names[2];  /* pp, intra (enum ft_plan_window_kind) */
extern const char *const dmr_use_names[4];   /* -, -, agc, deferred (FtDmrEntryPlan.win_use) */

/* Entry i of the entry space: its tape and index there. */
const FtTapeEntry *dmr_plan_entry_of(const FtTape *micro, const FtTape *opt, int i,
                                     const FtTape **tp, int *k);
/* An empty plan of ninst x nmicro + nopt slots (every one a marker until set), with pos (-1)
 * when `order`, and nwin windows. */
void dmr_plan_alloc(FtDmrEntryPlan *p, int nmicro, int nopt, int ninst, bool order, int nwin);
/* The op slots in the plan's time order (those that never ran, by index, after). Returns how
 * many; *order is malloc'd. */
int dmr_plan_time_order(const FtDmrEntryPlan *p, int **order);
/* The names the table and the plan file give an entry: its op and direction ("matmul.fwd",
 * written into buf), and its phase ("optimizer" for an entry of the optimizer tape opt). */
const char *dmr_op_label(const FtTapeEntry *e, char *buf, size_t len);
const char *dmr_phase_label(const FtTape *tp, const FtTape *opt, const FtTapeEntry *e);
/* "1", "1,2", "1,2,3" or "paper" for an enum ft_plan_phase mask ("?" otherwise). */
const char *dmr_phases_text(int phases);

#endif
