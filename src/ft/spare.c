/* spare.c: SPARe's controller: cyclic shard stacks, RECTLR after each failure, wipe-out, and the
 * per-step plan with one counted copy of every shard (definitions in spare.h).
 *
 * A wipe-out is found before RECTLR runs, from a count of live holders per shard type (O(r) per
 * failure): a shard with no live holder makes every depth infeasible, which is what phase 1 would
 * say at a higher price. */
#include <stdlib.h>
#include <string.h>

#include "ftllm/spare.h"

FtSpare *spare_create(int N, int r)
{
    if (N < 1 || r < 1 || r > N) return NULL;
    FtSpare *sp = calloc(1, sizeof *sp);
    if (!sp) return NULL;
    sp->N = N, sp->r = r;
    sp->st.N = N, sp->st.M = N, sp->st.r = r;
    sp->st.order = malloc((size_t)N * r * sizeof *sp->st.order);
    sp->st.alive = malloc((size_t)N);
    sp->holders = malloc((size_t)N * sizeof *sp->holders);
    if (!sp->st.order || !sp->st.alive || !sp->holders) {
        spare_destroy(sp);
        return NULL;
    }
    spare_reset(sp);
    return sp;
}

void spare_destroy(FtSpare *sp)
{
    if (!sp) return;
    free(sp->st.order), free(sp->st.alive), free(sp->holders);
    free(sp);
}

void spare_reset(FtSpare *sp)
{
    int N = sp->N, r = sp->r;
    for (int i = 0; i < N; i++) {
        for (int l = 0; l < r; l++) sp->st.order[(size_t)i * r + l] = (i + l) % N;
        sp->st.alive[i] = 1;
        sp->holders[i] = r;
    }
    sp->depth = 1, sp->nlive = N, sp->failures = 0, sp->moved = 0;
}

/* Marks replica i failed (alive = 0) or live again (alive = 1, to undo); returns 1 when some
 * shard type it holds is left without a live holder. */
static int set_alive(FtSpare *sp, int i, int alive)
{
    int lost = 0;
    sp->st.alive[i] = (unsigned char)alive;
    sp->nlive += alive ? 1 : -1;
    sp->failures += alive ? -1 : 1;
    for (int l = 0; l < sp->r; l++) {
        int *h = &sp->holders[sp->st.order[(size_t)i * sp->r + l]];
        *h += alive ? 1 : -1;
        lost |= *h == 0;
    }
    return lost;
}

int spare_fail(FtSpare *sp, int i, FtSpareEvent *ev)
{
    if (i < 0 || i >= sp->N || !sp->st.alive[i] || sp->depth > sp->r) return -1;
    FtSpareEvent e = {.depth_before = sp->depth};
    if (set_alive(sp, i, 0)) {
        sp->depth = sp->r + 1;
        e.outcome = SPARE_WIPEOUT, e.depth = sp->depth, e.phase = 1;
    } else {
        FtRectlrResult res;
        if (rectlr_run(&sp->st, sp->depth, &res)) {
            set_alive(sp, i, 1); /* out of memory: the orders were not touched */
            return -1;
        }
        e.outcome = res.depth > sp->depth ? SPARE_DEEPER : SPARE_MASKED;
        e.depth = res.depth, e.phase = res.phase, e.moved = res.moved;
        sp->depth = res.depth;
        sp->moved += res.moved;
    }
    if (ev) *ev = e;
    return e.outcome;
}

int spare_plan_init(FtSparePlan *p, int N, int r)
{
    memset(p, 0, sizeof *p);
    if (N < 1 || r < 1 || r > N) return -1;
    size_t slots = (size_t)N * r;
    p->N = N, p->r = r;
    p->shard = malloc(slots * sizeof *p->shard);
    p->counted = malloc(slots);
    p->owner = malloc((size_t)N * sizeof *p->owner);
    p->owner_level = malloc((size_t)N * sizeof *p->owner_level);
    p->count = malloc((size_t)N * sizeof *p->count);
    if (!p->shard || !p->counted || !p->owner || !p->owner_level || !p->count) {
        spare_plan_free(p);
        return -1;
    }
    return 0;
}

void spare_plan_free(FtSparePlan *p)
{
    free(p->shard), free(p->counted), free(p->owner), free(p->owner_level), free(p->count);
    memset(p, 0, sizeof *p);
}

int spare_plan(const FtSpare *sp, FtSparePlan *p)
{
    int N = sp->N, r = sp->r, d = sp->depth;
    if (p->N != N || p->r != r || d > r) return -1;
    p->depth = d;
    for (int s = 0; s < N; s++) p->owner[s] = p->owner_level[s] = -1, p->count[s] = 0;
    /* level by level, replicas in index order: the first copy of a shard found is counted */
    for (int l = 0; l < d; l++)
        for (int i = 0; i < N; i++) {
            size_t k = (size_t)i * d + l;
            p->counted[k] = 0;
            if (!sp->st.alive[i]) {
                p->shard[k] = -1;
                continue;
            }
            int s = sp->st.order[(size_t)i * r + l];
            p->shard[k] = s;
            if (p->owner[s] < 0) {
                p->owner[s] = i, p->owner_level[s] = l;
                p->counted[k] = 1;
            }
        }
    for (size_t k = 0; k < (size_t)N * d; k++)
        if (p->counted[k]) p->count[p->shard[k]]++;
    for (int s = 0; s < N; s++)
        if (p->count[s] != 1) return -1; /* uncovered: cannot happen below a wipe-out */
    return 0;
}
