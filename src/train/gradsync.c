/* gradsync.c: gradient banks, data-parallel buckets, the tied embedding, norm and loss sums
 * (gradsync.h).
 *
 * Key decisions:
 *  - Banks: micro-batch mb writes bank (micro - 1 - mb) % 2 on top of the other one, so the
 *    last micro-batch always writes m->grads and a one-micro-batch step needs no second bank.
 *  - Buckets of whole layers, in backward order, at least bucket_mb each, packed into one
 *    buffer per bucket and summed with a non-blocking all-reduce started when the bucket's last
 *    layer is complete in the last micro-batch; all are completed (and unpacked) in
 *    gradsync_finish. The tied embedding is its own last bucket, after its two pipeline copies
 *    were summed. Each bucket has two parts: dense gradients (replicated over dp x ep, summed
 *    over dense_dp) and MoE expert gradients (split over ep, summed over dp only).
 *  - Sums of one double (norm, loss) are gathered and added in rank order, so every rank gets
 *    the same bits; every wait is the executor's.
 *  - The shard-keyed variant (SPARe) banks each computed shard's gradient whole (n floats per
 *    shard computed here in one step, allocated on first use: one bank with no failure, at most
 *    spare.r), and reduces at gradsync_finish: contributions all-gathered
 *    and counted, slices sent point to point from holders to owners, summed in shard order,
 *    all-gathered in equal (padded) slices. No bucket overlap with the backward yet: a shard's
 *    gradient is complete only after its last micro-batch, and the step's reduction needs every
 *    shard.
 *  - With expert parallelism a shard is one replica's ep ranks' micro-batches: each ep rank
 *    sums the shard's dense gradient with the others' (slices to owners, summed in ep-rank
 *    order, all-gathered: the shard-keyed pattern over c.ep) before banking, so a bank holds
 *    the shard's dense gradient whole beside this rank's experts' gradient, and the
 *    shard-keyed reduction runs over the replicas' ranks at this (tp, pp, ep) place. */
#include "ftllm/gradsync.h"

#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"

typedef struct slice {
    float *p;
    size_t n;
} Slice;

/* One half of a bucket: the slices reduced over one communicator. */
typedef struct part {
    Slice *sl;
    int nsl;
    float *buf;
    size_t n;
    FtReq req;
} Part;

typedef struct bucket {
    Part part[2]; /* 0: dense, 1: MoE experts */
    size_t n;     /* both parts */
    int last_item; /* the bucket starts when this item's gradients are complete */
    bool started;
} Bucket;

struct ft_gradsync {
    FtModel *m;
    FtGradSyncComms c;
    int micro;
    bool armed; /* the last micro-batch's backward is running: buckets may start */
    FtExec *ex; /* the executor running it */
    Bucket *b;
    int nb;
    int *item_bucket; /* item -> bucket; items: [head (last stage)], layers l1-1 .. l0, embed */
    int nitems, embed_item, nhead;
    /* shard-keyed variant (nshards > 0) */
    int nshards, max_local, nlocal, cur;
    float **bank;    /* [max_local] gradients of the shards computed here this step, n each */
    int *bank_shard; /* [max_local] their shard types */
    int *contrib;    /* [nshards] times this rank contributed each shard this step */
    int *all;        /* [P * nshards] every rank's contrib */
    int *holder;     /* [nshards] the dense rank contributing each shard */
    int bad_shard, bad_count;
    size_t L;        /* slice length: ceil(n / P) */
    float *rbuf;     /* [nshards * L] slices received from other holders */
    float *mine;     /* [L] this rank's summed slice */
    float *tmp;      /* [L] the other buffer of its sums (sum_in_order) */
    float *gath;     /* [P * L] the all-gathered slices */
    FtReq *reqs;     /* [max_local * P + nshards] */
    /* shard-keyed with expert parallelism (c.ep): a shard's dense gradient summed over the
     * replica's ep ranks in ep-rank order before it is banked */
    Part dense;      /* the dense (non-expert) tensors of m->grads, packed into dense.buf */
    size_t Le;       /* its slice length over ep: ceil(dense.n / ep) */
    float *ep_rbuf;  /* [ep * Le] the other ep ranks' copies of this rank's slice */
    float *ep_mine, *ep_tmp; /* [Le] this rank's summed slice, the other buffer of its sums */
    float *ep_gath;  /* [ep * Le] the all-gathered summed slices */
    FtReq *ep_reqs;  /* [2 * ep] */
};

static void part_add(Part *q, float *p, size_t n)
{
    q->sl = realloc(q->sl, sizeof *q->sl * (size_t)(q->nsl + 1));
    FT_ASSERT(q->sl);
    q->sl[q->nsl++] = (Slice){p, n};
    q->n += n;
}

static void bucket_add(Bucket *b, int part, float *p, size_t n)
{
    if (!n) return;
    part_add(&b->part[part], p, n);
    b->n += n;
}

/* Adds item `item`'s gradient slices (in m->grads) to bucket b. */
static void item_slices(const FtModel *m, int item, int nhead, Bucket *b)
{
    static const int head[] = {FT_P_LNFW, FT_P_LNFB};
    static const int embed[] = {FT_P_WTE, FT_P_WPE};
    if (item < nhead) {
        for (int j = 0; j < 2; j++)
            bucket_add(b, 0, m->grads + m->p[head[j]].offset, m->p[head[j]].size);
    } else if (item < nhead + m->nl) {
        int l = m->l0 + m->nl - 1 - (item - nhead);
        for (int i = 0; i < FT_NPARAM_TENSORS; i++)
            if (m->p[i].per_layer && m->p[i].size)
                bucket_add(b, m->p[i].expert, model_tensor(m, m->grads, i, l),
                           m->p[i].size / m->nl);
    } else {
        for (int j = 0; j < 2; j++)
            bucket_add(b, 0, m->grads + m->p[embed[j]].offset, m->p[embed[j]].size);
    }
}

FtGradSync *gradsync_create(FtModel *m, const FtGradSyncComms *c, int micro, double bucket_mb)
{
    FT_ASSERT(micro >= 1);
    FtGradSync *g = calloc(1, sizeof *g);
    FT_ASSERT(g);
    g->m = m;
    g->c = *c;
    g->micro = micro;
    if (!c->dense && !c->expert) return g; /* one data rank: no buckets */
    g->nhead = m->last ? 1 : 0;
    g->nitems = g->nhead + m->nl + 1;
    g->embed_item = g->nitems - 1;
    g->item_bucket = malloc(sizeof(int) * (size_t)g->nitems);
    g->b = calloc((size_t)g->nitems, sizeof *g->b);
    FT_ASSERT(g->item_bucket && g->b);
    size_t limit = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
    if (limit < 1) limit = 1;
    for (int it = 0; it < g->nitems; it++) {
        bool embed = it == g->embed_item;
        if (embed || g->nb == 0 || g->b[g->nb - 1].n >= limit) g->nb++;
        Bucket *b = &g->b[g->nb - 1];
        item_slices(m, it, g->nhead, b);
        b->last_item = it;
        g->item_bucket[it] = g->nb - 1;
    }
    for (int i = 0; i < g->nb; i++)
        for (int k = 0; k < 2; k++) {
            Part *q = &g->b[i].part[k];
            q->buf = backend_alloc(m->be, sizeof(float) * (q->n ? q->n : 1), "a gradient bucket");
        }
    return g;
}

FtGradSync *gradsync_create_shards(FtModel *m, const FtGradSyncComms *c, int micro, int nshards,
                                   int max_local)
{
    FT_ASSERT(nshards >= 1 && max_local >= 1 && max_local <= nshards && !c->expert);
    FtGradSyncComms cc = *c;
    cc.dense = NULL; /* no buckets */
    FtGradSync *g = gradsync_create(m, &cc, micro, 1.0);
    g->c.dense = c->dense;
    g->nshards = nshards, g->max_local = max_local, g->bad_shard = -1;
    int P = c->dense ? comm_size(c->dense) : 1;
    size_t n = m->nparams;
    g->L = (n + (size_t)P - 1) / (size_t)P;
    const FtBackend *be = m->be;
    g->bank = calloc((size_t)max_local, sizeof *g->bank);
    g->bank_shard = calloc((size_t)max_local, sizeof(int));
    g->contrib = calloc((size_t)nshards, sizeof(int));
    g->all = calloc((size_t)nshards * P, sizeof(int));
    g->holder = calloc((size_t)nshards, sizeof(int));
    g->reqs = calloc((size_t)max_local * P + nshards, sizeof *g->reqs);
    FT_ASSERT(g->bank && g->bank_shard && g->contrib && g->all && g->holder && g->reqs);
    g->rbuf = backend_alloc(be, sizeof(float) * g->L * (size_t)nshards + 1, "shard slices");
    g->mine = backend_alloc(be, sizeof(float) * g->L + 1, "a summed slice");
    g->tmp = backend_alloc(be, sizeof(float) * g->L + 1, "a summed slice");
    g->gath = backend_alloc(be, sizeof(float) * g->L * (size_t)P + 1, "gathered slices");
    if (c->ep) { /* the dense tensors, in tensor order, summed over ep before banking */
        for (int i = 0; i < FT_NPARAM_TENSORS; i++)
            if (!m->p[i].expert && m->p[i].size)
                part_add(&g->dense, m->grads + m->p[i].offset, m->p[i].size);
        int E = comm_size(c->ep);
        g->Le = (g->dense.n + (size_t)E - 1) / (size_t)E;
        size_t all = sizeof(float) * g->Le * (size_t)E + 1;
        g->dense.buf = backend_alloc(be, all, "a shard's dense gradient");
        g->ep_rbuf = backend_alloc(be, all, "dense slices from the ep ranks");
        g->ep_mine = backend_alloc(be, sizeof(float) * g->Le + 1, "a summed dense slice");
        g->ep_tmp = backend_alloc(be, sizeof(float) * g->Le + 1, "a summed dense slice");
        g->ep_gath = backend_alloc(be, all, "gathered dense slices");
        g->ep_reqs = calloc(2 * (size_t)E, sizeof *g->ep_reqs);
        FT_ASSERT(g->ep_reqs);
    }
    return g;
}

void gradsync_free(FtGradSync *g)
{
    if (!g) return;
    const FtBackend *be = g->m->be;
    if (g->nshards) {
        for (int k = 0; k < g->max_local; k++)
            if (g->bank[k]) be->release(be->ctx, g->bank[k]);
        be->release(be->ctx, g->rbuf), be->release(be->ctx, g->mine);
        be->release(be->ctx, g->tmp);
        be->release(be->ctx, g->gath);
        free(g->bank), free(g->bank_shard), free(g->contrib), free(g->all), free(g->holder);
        free(g->reqs);
        if (g->c.ep) {
            be->release(be->ctx, g->dense.buf), be->release(be->ctx, g->ep_rbuf);
            be->release(be->ctx, g->ep_mine), be->release(be->ctx, g->ep_tmp);
            be->release(be->ctx, g->ep_gath);
            free(g->dense.sl), free(g->ep_reqs);
        }
    }
    for (int i = 0; i < g->nb; i++)
        for (int k = 0; k < 2; k++) {
            free(g->b[i].part[k].sl);
            be->release(be->ctx, g->b[i].part[k].buf);
        }
    free(g->b);
    free(g->item_bucket);
    free(g);
}

int gradsync_buckets(const FtGradSync *g, size_t *sizes, int max)
{
    for (int i = 0; i < g->nb && i < max; i++) sizes[i] = g->b[i].n;
    return g->nb;
}

void gradsync_backward(FtGradSync *g, FtExec *ex, int mb, float **grads, const float **prev)
{
    g->ex = ex;
    FT_ASSERT(mb >= 0 && mb < g->micro);
    float *bank[2] = {g->m->grads, g->m->grads_alt};
    *grads = bank[(g->micro - 1 - mb) % 2];
    *prev = mb ? bank[(g->micro - mb) % 2] : NULL;
    g->armed = mb == g->micro - 1;
}

/* The communicator of part k (NULL: nothing to reduce). */
static FtComm *part_comm(const FtGradSync *g, int k) { return k == 0 ? g->c.dense : g->c.expert; }

static void bucket_start(FtGradSync *g, Bucket *b)
{
    FT_ASSERT(!b->started);
    b->started = true;
    for (int k = 0; k < 2; k++) {
        Part *q = &b->part[k];
        if (!q->n || !part_comm(g, k)) continue;
        size_t off = 0;
        const FtBackend *be = g->m->be;
        for (int i = 0; i < q->nsl; i++) {
            be->copy(be->ctx, q->buf + off, q->sl[i].p, sizeof(float) * q->sl[i].n);
            off += q->sl[i].n;
        }
        comm_iallreduce_sum(part_comm(g, k), FT_IN_PLACE, q->buf, q->n, FT_F32, &q->req);
        if (g->ex) exec_watch(g->ex, &q->req);
    }
}

void gradsync_layer_ready(void *arg, int layer)
{
    FtGradSync *g = arg;
    if (!g->armed || !g->b) return;
    const FtModel *m = g->m;
    int item = layer < 0 ? 0 : g->nhead + (m->l0 + m->nl - 1 - layer);
    FT_ASSERT(item >= 0 && item < g->embed_item);
    Bucket *b = &g->b[g->item_bucket[item]];
    if (b->last_item == item) bucket_start(g, b);
}

/* Slice j of n elements in slices of L: its length. */
static size_t slice_len(size_t n, size_t L, int j)
{
    size_t a = (size_t)j * L;
    return a >= n ? 0 : (n - a < L ? n - a : L);
}

/* An owner's sum of the slices src[0..N) (myl floats each) in their order into mine, its
 * padding to L zeroed. On the backend (a device model's slices are in device memory): its
 * RESIDUAL op (y = a + b, into another buffer) alternating between mine and tmp so that the
 * last sum lands in mine: each element is ((src0 + src1) + src2) + ..., the host loop's bits. */
static void sum_in_order(const FtBackend *be, const float *const *src, int N, size_t myl,
                         size_t L, float *mine, float *tmp)
{
    if (myl && N == 1) be->copy(be->ctx, mine, src[0], sizeof(float) * myl);
    for (int k = 1; myl && k < N; k++) {
        float *dst = (N - 1 - k) % 2 == 0 ? mine : tmp;
        const float *a = k == 1 ? src[0] : (N - k) % 2 == 0 ? mine : tmp;
        FtOpCall c = {.in = {a, src[k]}, .out = {dst}, .d = {(long long)myl}};
        exec_op_on(be, FT_OP_RESIDUAL, FT_FWD, &c, NULL);
    }
    if (myl < L) be->set(be->ctx, mine + myl, 0, sizeof(float) * (L - myl));
}

void gradsync_shard_begin(FtGradSync *g, int shard)
{
    FT_ASSERT(g->nshards && shard >= 0 && shard < g->nshards);
    g->cur = shard;
}

/* The tied embedding's two pipeline copies (first and last stage) summed in m->grads. */
static void emb_sum(FtGradSync *g, FtExec *ex)
{
    FtModel *m = g->m;
    if (!g->c.emb || !m->p[FT_P_WTE].size) return;
    FtReq r;
    comm_iallreduce_sum(g->c.emb, FT_IN_PLACE, m->grads + m->p[FT_P_WTE].offset,
                        m->p[FT_P_WTE].size, FT_F32, &r);
    exec_wait(ex, &r, 1, FT_TL_EMB);
}

/* SPARe with expert parallelism: the shard's dense gradient (the dense tensors of m->grads,
 * each ep rank's tokens' share) summed over the replica's ep ranks in ep-rank order, the same
 * bits on each of them and whichever replica computed the shard: packed, each ep rank's slice
 * sent to its owner, summed there in ep-rank order, the sums all-gathered and unpacked. The
 * expert tensors are this rank's own experts' whole gradient of the shard already. */
static void ep_sum(FtGradSync *g, FtExec *ex)
{
    FtComm *c = g->c.ep;
    Part *q = &g->dense;
    const FtBackend *be = g->m->be;
    int E = comm_size(c), me = comm_rank(c), nr = 0;
    size_t n = q->n, Le = g->Le, off = 0, myl = slice_len(n, Le, me);
    for (int i = 0; i < q->nsl; off += q->sl[i++].n)
        be->copy(be->ctx, q->buf + off, q->sl[i].p, sizeof(float) * q->sl[i].n);
    const float **src = calloc((size_t)E, sizeof *src);
    FT_ASSERT(src);
    for (int j = 0; j < E; j++) {
        src[j] = j == me ? q->buf + (size_t)me * Le : g->ep_rbuf + (size_t)j * Le;
        if (j == me) continue;
        if (myl) comm_irecv(c, g->ep_rbuf + (size_t)j * Le, myl, FT_F32, j, 0, &g->ep_reqs[nr++]);
        size_t len = slice_len(n, Le, j);
        if (len) comm_isend(c, q->buf + (size_t)j * Le, len, FT_F32, j, 0, &g->ep_reqs[nr++]);
    }
    if (nr) exec_wait(ex, g->ep_reqs, nr, FT_TL_DP);
    sum_in_order(be, src, E, myl, Le, g->ep_mine, g->ep_tmp);
    free(src);
    FtReq r;
    comm_iallgather(c, g->ep_mine, g->ep_gath, Le, FT_F32, &r);
    exec_wait(ex, &r, 1, FT_TL_DP);
    off = 0;
    for (int i = 0; i < q->nsl; off += q->sl[i++].n)
        be->copy(be->ctx, q->sl[i].p, g->ep_gath + off, sizeof(float) * q->sl[i].n);
}

void gradsync_shard_end(FtGradSync *g, FtExec *ex)
{
    FT_ASSERT(g->nshards);
    if (g->nlocal >= g->max_local)
        FT_DIE("gradsync: shard %d is the %d-th shard computed on this rank in one step; at most "
               "%d (spare.r) fit", g->cur, g->nlocal + 1, g->max_local);
    emb_sum(g, ex);
    if (g->c.ep) ep_sum(g, ex);
    const FtBackend *be = g->m->be;
    size_t bytes = sizeof(float) * g->m->nparams;
    if (!g->bank[g->nlocal]) /* on first use: with no failure one bank is all a step needs */
        g->bank[g->nlocal] = backend_alloc(be, bytes ? bytes : 4, "a shard gradient bank");
    be->copy(be->ctx, g->bank[g->nlocal], g->m->grads, bytes);
    g->bank_shard[g->nlocal++] = g->cur;
    g->contrib[g->cur]++;
}

int gradsync_shard_violation(const FtGradSync *g, int *count)
{
    if (count) *count = g->bad_count;
    return g->bad_shard;
}

/* The shard-keyed reduction (see gradsync.h). */
static void finish_shards(FtGradSync *g, FtExec *ex)
{
    FtModel *m = g->m;
    const FtBackend *be = m->be;
    int N = g->nshards, P = g->c.dense ? comm_size(g->c.dense) : 1;
    int me = g->c.dense ? comm_rank(g->c.dense) : 0;
    size_t n = m->nparams, L = g->L;
    /* exactly once: every rank's contributions, counted per shard */
    if (g->c.dense) {
        FtReq r;
        comm_iallgather(g->c.dense, g->contrib, g->all, (size_t)N, FT_I32, &r);
        exec_wait(ex, &r, 1, FT_TL_DP);
    } else {
        memcpy(g->all, g->contrib, sizeof(int) * (size_t)N);
    }
    g->bad_shard = -1, g->bad_count = 0;
    for (int s = 0; s < N; s++) {
        int cnt = 0;
        g->holder[s] = -1;
        for (int p = 0; p < P; p++)
            if (g->all[(size_t)p * N + s]) {
                cnt += g->all[(size_t)p * N + s];
                g->holder[s] = p;
            }
        if (cnt != 1 && g->bad_shard < 0) g->bad_shard = s, g->bad_count = cnt;
    }
    int nlocal = g->nlocal;
    g->nlocal = 0;
    memset(g->contrib, 0, sizeof(int) * (size_t)N);
    if (g->bad_shard >= 0) return; /* the caller stops the job; no data moves */
    /* holders send each shard's slices to their owners; this rank receives its slice */
    int nr = 0;
    size_t myl = slice_len(n, L, me);
    const float **src = calloc((size_t)N, sizeof *src);
    FT_ASSERT(src);
    for (int s = 0; s < N; s++) {
        src[s] = g->rbuf + (size_t)s * L;
        if (g->holder[s] != me && myl)
            comm_irecv(g->c.dense, g->rbuf + (size_t)s * L, myl, FT_F32, g->holder[s], s,
                       &g->reqs[nr++]);
    }
    for (int k = 0; k < nlocal; k++) {
        int s = g->bank_shard[k];
        src[s] = g->bank[k] + (size_t)me * L;
        for (int j = 0; j < P; j++)
            if (j != me && slice_len(n, L, j))
                comm_isend(g->c.dense, g->bank[k] + (size_t)j * L, slice_len(n, L, j), FT_F32,
                           j, s, &g->reqs[nr++]);
    }
    if (nr) exec_wait(ex, g->reqs, nr, FT_TL_DP);
    float *acc = g->mine;
    sum_in_order(be, src, N, myl, L, g->mine, g->tmp);
    free(src);
    if (!g->c.dense) {
        be->copy(be->ctx, m->grads, acc, sizeof(float) * n);
        return;
    }
    FtReq r;
    comm_iallgather(g->c.dense, acc, g->gath, L, FT_F32, &r);
    exec_wait(ex, &r, 1, FT_TL_DP);
    be->copy(be->ctx, m->grads, g->gath, sizeof(float) * n);
}

void gradsync_finish(FtGradSync *g, FtExec *ex)
{
    FtModel *m = g->m;
    g->armed = false;
    if (g->nshards) {
        finish_shards(g, ex);
        return;
    }
    emb_sum(g, ex);
    if (!g->b) return;
    bucket_start(g, &g->b[g->item_bucket[g->embed_item]]);
    for (int i = 0; i < g->nb; i++) {
        Bucket *b = &g->b[i];
        FT_ASSERT(b->started);
        b->started = false;
        for (int k = 0; k < 2; k++) {
            Part *q = &b->part[k];
            if (!q->n || !part_comm(g, k)) continue;
            exec_wait(ex, &q->req, 1, FT_TL_DP);
            size_t off = 0;
            const FtBackend *be = m->be;
            for (int j = 0; j < q->nsl; j++) {
                be->copy(be->ctx, q->sl[j].p, q->buf + off, sizeof(float) * q->sl[j].n);
                off += q->sl[j].n;
            }
        }
    }
}

/* Sum over c of one double per rank in rank order (comm_sum_f64_poll: the same bits on every
 * rank), waited for with the executor's poll hook and charged to its timeline. */
static double sum_ordered(FtComm *c, FtExec *ex, double v)
{
    if (!c) return v;
    double t0 = MPI_Wtime();
    double s = comm_sum_f64_poll(c, v, &ex->poll);
    if (ex->tl) timeline_add(ex->tl, FT_TL_OTHER, t0, MPI_Wtime());
    return s;
}

double gradsync_norm(FtGradSync *g, FtExec *ex, double local_sumsq)
{
    return sum_ordered(g->c.replica, ex, local_sumsq);
}

double gradsync_sum_last_stage(FtGradSync *g, FtExec *ex, double v, bool count_here)
{
    if (!g->c.world) return v;
    bool mine = g->m->last && g->m->sh.tp_rank == 0 && count_here;
    return sum_ordered(g->c.world, ex, mine ? v : 0.0);
}
