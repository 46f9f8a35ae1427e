/* plan_memory.h: the memory a DMR plan (planner.h) holds, recomputed from its strategies alone,
 * for test_planner.c and test_plan_predict.c: at every operator position x, the boundary of each
 * AGC segment from its first operator to its window's (seg_first .. win[seg_win].after) and the
 * kept tensors of each deferred operator from itself to its window's. The planner must keep the
 * largest such sum within its budget; this is the ground truth its own accounting
 * (planner_agc_held, win_qmem) is checked against. */
#ifndef FTLLM_TESTS_PLAN_MEMORY_H
#define FTLLM_TESTS_PLAN_MEMORY_H
#include <stdlib.h>

#include "ftllm/planner.h"

/* The largest memory held at any operator position; (size_t)-1 when out of memory. */
static inline size_t plan_peak_held(const FtPlanOp *ops, int nops, const FtPlanWindow *win,
                                    const FtDmrPlan *p)
{
    long long *d = calloc((size_t)nops + 2, sizeof *d); /* difference array over positions */
    if (!d) return (size_t)-1;
    for (int s = 0; s < p->nseg; s++) {
        int lo = p->seg_first[s], hi = p->seg_last[s], end = win[p->seg_win[s]].after;
        long long m = (long long)(ops[lo].mem + (hi > lo ? ops[hi].mem : 0));
        d[lo] += m, d[end + 1] -= m;
    }
    for (int i = 0; i < nops; i++)
        if (p->strategy[i] == PLAN_DEFERRED) {
            d[i] += (long long)ops[i].mem, d[win[p->window[i]].after + 1] -= (long long)ops[i].mem;
        }
    long long run = 0, peak = 0;
    for (int i = 0; i < nops; i++) {
        run += d[i];
        if (run > peak) peak = run;
    }
    free(d);
    return (size_t)peak;
}
#endif
