/* analytic_spare.c: the SPARe ring model exactly: mu(N, r), the depth oracle and S(N, r)
 * (definitions in analytic.h), and plain replication for comparison.
 *
 * Survival. k failed groups chosen uniformly at random (the failure order of iid lifetimes is a
 * uniformly random permutation). They contain no r consecutive (cyclically) iff the N - k alive
 * groups cut the ring into N - k gaps of at most r - 1 failed groups each. Counting pairs
 * (configuration, distinguished alive group) both ways gives
 *     #no-wipe-out(N, k) = N / (N - k) * A(N - k, k),
 * A(m, k) = compositions of k into m parts in [0, r-1] = r^m P(sum of m uniform{0..r-1} = k),
 * computed by an O(N^2) convolution in long double; P(T > k) = #no-wipe-out / C(N, k).
 *
 * Depth. Surviving groups with capacity d (d of their r shards) must cover every shard type: a
 * b-matching, feasible iff Hall holds: every shard set X has |X| <= d |nbr(X)|. Shard j's holders
 * are the groups j-r+1..j, an arc; two arcs of shards whose holder arcs overlap are dominated by
 * the single arc spanning both (the shards between add to |X| and nothing to nbr(X)), and arcs
 * whose holder arcs are disjoint give independent conditions. So only arcs matter: an arc of l
 * shards (l <= N - r + 1) has a holder window of w = l + r - 1 groups, and Hall reads
 * d * alive(w) >= w - r + 1, i.e. sum over the window of (+1 failed, -(d-1) alive) <= r - 1;
 * longer arcs have the whole ring as holders: d (N - k) >= N. Windows shorter than r pass
 * trivially, so the test is "max circular window sum <= r - 1", kept per threshold t in a
 * segment tree (sum, best prefix, best suffix, best subarray) with O(log N) point updates.
 * With total sum <= 0 (the whole-ring condition) the circular maximum is max(sub, pre + suf).
 * t = r passes iff there is no run of r failures, so "depth <= r" is "no wipe-out".
 *
 * S exactly. P(d_k <= t) = #circular strings with k failures passing threshold t / C(N, k).
 * For a circular string with negative total, the max-window-ending-here function W is the
 * unique fixed point of W_i = max(0, W_{i-1} + x_i) around the ring, so valid strings are in
 * one-to-one correspondence with closed walks of that automaton on states 0..r-1: the count is
 * [z^k] trace(M(z)^N), M = alive step + z * failed step (forbidden above r-1). With a zero total
 * (t (N-k) = N) every fixed point W* + delta is a closed walk, and the count is
 * F(r-1) - F(r-2) with F(h) the trace over states 0..h. Each step is scaled by 1/2, so the
 * trace is count / 2^N, safe in long double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/analytic.h"

#define MAX_EXACT_N 20000

double analytic_mu_closed(double N, int r)
{
    if (r < 1 || N < 1) return -1;
    return tgamma(1.0 / r) / r * pow(N, 1.0 - 1.0 / r);
}

int analytic_rstar_paper(double N)
{
    if (N < 1) return 1;
    int r = (int)floor(log2(N) + 0.833);
    return r < 1 ? 1 : r;
}

static long double lchoose(int n, int k) { return lgammal(n + 1.0L) - lgammal(k + 1.0L) - lgammal(n - k + 1.0L); }

int analytic_spare_survival(int N, int r, double *p)
{
    if (N < 1 || N > MAX_EXACT_N || r < 1 || r > N) return -1;
    /* P_m(s), s = 0..N-m, for m = 1..N; start with m = 0: P_0 = delta_0 */
    long double *cur = calloc((size_t)N + 2, sizeof *cur), *nxt = calloc((size_t)N + 2, sizeof *nxt);
    if (!cur || !nxt) {
        free(cur), free(nxt);
        return -1;
    }
    cur[0] = 1.0L;
    p[0] = 1.0;
    p[N] = 0.0;
    long double lr = logl((long double)r);
    for (int m = 1; m <= N - 1; m++) {
        int smax = N - m; /* we need P_m(N - m) and P_m at smaller s for later m */
        long double win = 0.0L;
        for (int s = 0; s <= smax; s++) {
            win += cur[s];
            if (s - r >= 0) win -= cur[s - r];
            nxt[s] = win / r;
        }
        long double *t = cur;
        cur = nxt, nxt = t;
        int k = N - m;
        long double pm = cur[k];
        if (pm <= 0.0L) {
            p[k] = 0.0;
            continue;
        }
        long double lp = logl((long double)N / m) + m * lr + logl(pm) - lchoose(N, k);
        long double v = expl(lp);
        p[k] = (double)(v > 1.0L ? 1.0L : v);
    }
    free(cur), free(nxt);
    return 0;
}

double analytic_mu_exact(int N, int r)
{
    double *p = malloc(((size_t)N + 1) * sizeof *p);
    if (!p || analytic_spare_survival(N, r, p)) {
        free(p);
        return -1;
    }
    long double mu = 0;
    for (int k = 0; k < N; k++) mu += p[k];
    free(p);
    return (double)mu;
}

/* Replication: n = floor(N/r) sets of r over M = n r groups; P(T > k) = [z^k] q(z)^n / C(M,k),
 * q(z) = (1+z)^r - z^r, computed as probabilities (q / 2^r) and rescaled in logs. */
int analytic_rep_survival(int N, int r, double *p)
{
    if (N < 1 || N > MAX_EXACT_N || r < 1 || r > N) return -1;
    int n = N / r, M = n * r;
    long double *q = calloc((size_t)r + 1, sizeof *q), *a = calloc((size_t)M + 1, sizeof *a),
                *b = calloc((size_t)M + 1, sizeof *b);
    if (!q || !a || !b) {
        free(q), free(a), free(b);
        return -1;
    }
    for (int j = 0; j < r; j++) q[j] = expl(lchoose(r, j) - r * logl(2.0L));
    a[0] = 1.0L;
    int deg = 0;
    for (int s = 0; s < n; s++) {
        memset(b, 0, ((size_t)M + 1) * sizeof *b);
        for (int i = 0; i <= deg; i++)
            if (a[i] != 0.0L)
                for (int j = 0; j < r; j++) b[i + j] += a[i] * q[j];
        deg += r - 1;
        long double *t = a;
        a = b, b = t;
    }
    for (int k = 0; k <= N; k++) {
        if (k > M || k > deg || a[k] <= 0.0L) {
            p[k] = 0.0;
            continue;
        }
        long double v = expl(logl(a[k]) + M * logl(2.0L) - lchoose(M, k));
        p[k] = (double)(v > 1.0L ? 1.0L : v);
    }
    free(q), free(a), free(b);
    return 0;
}

/* ---- depth oracle ------------------------------------------------------------------------- */

#define NODE(o, t, i) ((o)->node + ((size_t)((t) - 2) * 2 * (o)->ntree + (size_t)(i)) * 4)

static void leaf_set(FtDepthOracle *o, int t, int g, int dead)
{
    int32_t *x = NODE(o, t, o->ntree + g);
    if (dead) x[0] = x[1] = x[2] = x[3] = 1;
    else x[0] = -(t - 1), x[1] = x[2] = x[3] = 0;
}

static inline int32_t max2(int32_t a, int32_t b) { return a > b ? a : b; }

static void pull(FtDepthOracle *o, int t, int i)
{
    int32_t *x = NODE(o, t, i), *a = NODE(o, t, 2 * i), *b = NODE(o, t, 2 * i + 1);
    x[0] = a[0] + b[0];
    x[1] = max2(a[1], a[0] + b[1]);
    x[2] = max2(b[2], b[0] + a[2]);
    x[3] = max2(max2(a[3], b[3]), a[2] + b[1]);
}

static void tree_update(FtDepthOracle *o, int t, int g, int dead)
{
    leaf_set(o, t, g, dead);
    for (int i = (o->ntree + g) / 2; i >= 1; i /= 2) pull(o, t, i);
}

static int tree_ok(const FtDepthOracle *o, int t)
{
    if ((long long)t * (o->N - o->k) < o->N) return 0;
    const int32_t *x = NODE(o, t, 1);
    int32_t best = max2(x[3], x[1] + x[2]);
    return best <= o->r - 1;
}

int depth_oracle_init(FtDepthOracle *o, int N, int r)
{
    memset(o, 0, sizeof *o);
    if (N < 1 || r < 1 || r > N) return -1;
    o->N = N, o->r = r;
    o->ntree = 1;
    while (o->ntree < N) o->ntree *= 2;
    o->dead = calloc((size_t)N, 1);
    o->failed = malloc((size_t)N * sizeof *o->failed);
    o->applied = calloc((size_t)r + 1, sizeof *o->applied);
    size_t nt = r >= 2 ? (size_t)(r - 1) : 0;
    o->node = calloc(nt * 2 * (size_t)o->ntree * 4 + 4, sizeof *o->node);
    if (!o->dead || !o->failed || !o->applied || !o->node) {
        depth_oracle_free(o);
        return -1;
    }
    for (int t = 2; t <= r; t++) {
        for (int g = 0; g < N; g++) leaf_set(o, t, g, 0);
        /* padding leaves stay all-zero: neutral */
        for (int i = o->ntree - 1; i >= 1; i--) pull(o, t, i);
    }
    o->depth = 1;
    return 0;
}

void depth_oracle_free(FtDepthOracle *o)
{
    free(o->dead), free(o->failed), free(o->applied), free(o->node);
    memset(o, 0, sizeof *o);
}

void depth_oracle_reset(FtDepthOracle *o)
{
    for (int t = 2; t <= o->r; t++) {
        for (int i = 0; i < o->applied[t]; i++) tree_update(o, t, o->failed[i], 0);
        o->applied[t] = 0;
    }
    for (int i = 0; i < o->k; i++) o->dead[o->failed[i]] = 0;
    o->k = 0;
    o->depth = 1;
}

int depth_oracle_run_at(const FtDepthOracle *o, int g)
{
    int N = o->N, run = 1;
    for (int i = 1; i < o->r && run < o->r; i++) {
        if (!o->dead[(g - i + N) % N]) break;
        run++;
    }
    for (int i = 1; i < o->r && run < o->r; i++) {
        if (!o->dead[(g + i) % N]) break;
        run++;
    }
    return run >= o->r;
}

/* Brings tree t up to date with the failed list (trees are updated lazily: only those the
 * depth search reaches, so a failure costs O(log N) per tree actually queried). */
static void tree_catch_up(FtDepthOracle *o, int t)
{
    while (o->applied[t] < o->k) tree_update(o, t, o->failed[o->applied[t]++], 1);
}

int depth_oracle_fail(FtDepthOracle *o, int g)
{
    if (g < 0 || g >= o->N || o->dead[g]) return o->depth;
    o->dead[g] = 1;
    o->failed[o->k++] = g;
    if (o->depth > o->r) return o->depth;
    if (depth_oracle_run_at(o, g)) return o->depth = o->r + 1;
    int d = o->depth < 2 ? 2 : o->depth;
    for (;;) {
        tree_catch_up(o, d);
        if (tree_ok(o, d)) break;
        if (++d > o->r) break; /* cannot happen without a run of r; kept for safety */
    }
    return o->depth = d;
}

/* From scratch, by a circular Kadane per threshold (independent of the tree). */
int analytic_depth(const unsigned char *dead, int N, int r)
{
    int k = 0;
    for (int i = 0; i < N; i++) k += dead[i] != 0;
    if (k == 0) return 1;
    for (int t = 2; t <= r; t++) {
        if ((long long)t * (N - k) < N) continue;
        /* max over circular windows of length <= N: the sequence doubled, windows <= N long,
         * via prefix sums and a sliding minimum (O(N) amortized with a deque) */
        long long *pre = malloc((2 * (size_t)N + 1) * sizeof *pre);
        int *dq = malloc((2 * (size_t)N + 1) * sizeof *dq);
        if (!pre || !dq) {
            free(pre), free(dq);
            return -1;
        }
        pre[0] = 0;
        for (int i = 0; i < 2 * N; i++) pre[i + 1] = pre[i] + (dead[i % N] ? 1 : -(t - 1));
        long long best = 0;
        int h = 0, tl = 0;
        dq[tl++] = 0;
        for (int j = 1; j <= 2 * N; j++) {
            while (h < tl && dq[h] < j - N) h++;
            if (h < tl && pre[j] - pre[dq[h]] > best) best = pre[j] - pre[dq[h]];
            while (h < tl && pre[dq[tl - 1]] >= pre[j]) tl--;
            dq[tl++] = j;
        }
        free(pre), free(dq);
        if (best <= r - 1) return t;
    }
    return r + 1;
}

/* ---- exact epoch statistics ------------------------------------------------------------ */

/* tr[j] (j = 0..K) += [z^j] trace(M^N) / 2^N over states 0..h, threshold t. */
static int trace_count(int N, int h, int t, int K, long double *tr)
{
    int ns = h + 1;
    size_t stride = (size_t)K + 2;
    long double *v = calloc((size_t)ns * stride, sizeof *v), *w = calloc((size_t)ns * stride, sizeof *w);
    if (!v || !w) {
        free(v), free(w);
        return -1;
    }
    for (int w0 = 0; w0 < ns; w0++) {
        memset(v, 0, (size_t)ns * stride * sizeof *v);
        v[(size_t)w0 * stride] = 1.0L;
        for (int step = 1; step <= N; step++) {
            memset(w, 0, (size_t)ns * stride * sizeof *w);
            int jmax = step - 1 < K ? step - 1 : K;
            for (int s = 0; s < ns; s++) {
                long double *src = v + (size_t)s * stride;
                int sa = s - (t - 1) > 0 ? s - (t - 1) : 0;
                long double *dst_a = w + (size_t)sa * stride;
                for (int j = 0; j <= jmax; j++) dst_a[j] += 0.5L * src[j];
                if (s + 1 <= h) {
                    long double *dst_d = w + (size_t)(s + 1) * stride + 1;
                    int jm = jmax < K ? jmax : K - 1;
                    for (int j = 0; j <= jm; j++) dst_d[j] += 0.5L * src[j];
                }
            }
            long double *tmp = v;
            v = w, w = tmp;
        }
        for (int j = 0; j <= K; j++) tr[j] += v[(size_t)w0 * stride + j];
    }
    free(v), free(w);
    return 0;
}

/* The epoch statistics and, when stages is not NULL, the per-stage arrays. */
static int spare_epoch(int N, int r, double max_ops, FtSpareEpoch *out, FtEpochStages *stages)
{
    double *p = malloc(((size_t)N + 1) * sizeof *p);
    if (!p || analytic_spare_survival(N, r, p)) {
        free(p);
        return -1;
    }
    int K = 0;
    for (int k = 0; k < N; k++)
        if (p[k] > 1e-18) K = k;
    double ops = 2.0 * (r > 2 ? r - 2 : 0) * (double)r * r * N * (K + 1);
    if (ops > max_ops) {
        free(p);
        return -1;
    }
    /* q[t][k] = P(d_k <= t), t = 1..r */
    long double *q = calloc((size_t)(r + 1) * (K + 1), sizeof *q);
    long double *tr = calloc((size_t)K + 2, sizeof *tr), *tr2 = calloc((size_t)K + 2, sizeof *tr2);
    if (!q || !tr || !tr2) goto out_fail;
#define Q(t, k) q[(size_t)(t) * (K + 1) + (k)]
    for (int k = 0; k <= K; k++) {
        Q(1, k) = k == 0;
        Q(r, k) = p[k];
    }
    for (int t = 2; t <= r - 1; t++) {
        memset(tr, 0, ((size_t)K + 2) * sizeof *tr);
        if (trace_count(N, r - 1, t, K, tr)) goto out_fail;
        int k0 = (N % t == 0) ? N / t * (t - 1) : -1;
        if (k0 >= 0 && k0 <= K) {
            memset(tr2, 0, ((size_t)K + 2) * sizeof *tr2);
            if (r - 2 >= 0 && trace_count(N, r - 2, t, K, tr2)) goto out_fail;
            tr[k0] -= tr2[k0];
        }
        for (int k = 0; k <= K; k++) {
            long double c = tr[k];
            if ((long long)t * (N - k) < N || c <= 0.0L) {
                Q(t, k) = 0;
                continue;
            }
            long double v = expl(logl(c) + N * logl(2.0L) - lchoose(N, k));
            Q(t, k) = v;
        }
    }
    long double ET = 0, Sd = 0, up = 0, upd = 0, upinv = 0;
    for (int k = 0; k <= K; k++) {
        long double ed = 0, einv = 0, prev = 0;
        for (int t = 1; t <= r; t++) {
            long double cur = Q(t, k);
            if (cur < prev) cur = prev; /* monotone in t; guards rounding */
            ed += t * (cur - prev);
            einv += (cur - prev) / t;
            prev = cur;
        }
        ET += p[k];
        Sd += ed;
        up += p[k] / (long double)(N - k);
        upd += ed / (N - k);
        upinv += einv / (N - k);
        if (stages && p[k] > 0) stages->alive[k] = p[k], stages->inv_depth[k] = (double)(einv / p[k]);
    }
    if (stages) stages->M = N, stages->K = K;
#undef Q
    out->N = N, out->r = r;
    out->mu = (double)ET;
    out->S = (double)(Sd / ET);
    out->S_time = (double)(upd / up);
    out->thr_time = (double)(upinv / up);
    out->up_units = (double)up;
    out->exact = 1;
    free(q), free(tr), free(tr2), free(p);
    return 0;
out_fail:
    free(q), free(tr), free(tr2), free(p);
    return -1;
}

int analytic_spare_epoch(int N, int r, double max_ops, FtSpareEpoch *out)
{
    return spare_epoch(N, r, max_ops, out, NULL);
}

int epoch_stages_alloc(FtEpochStages *st, int M)
{
    memset(st, 0, sizeof *st);
    st->alive = calloc((size_t)M + 1, sizeof *st->alive);
    st->inv_depth = calloc((size_t)M + 1, sizeof *st->inv_depth);
    if (!st->alive || !st->inv_depth) {
        epoch_stages_free(st);
        return -1;
    }
    return 0;
}

void epoch_stages_free(FtEpochStages *st)
{
    free(st->alive), free(st->inv_depth);
    st->alive = st->inv_depth = NULL;
}

int analytic_spare_stages(int N, int r, double max_ops, FtSpareEpoch *out, FtEpochStages *st)
{
    if (N < 1 || r < 1 || r > N || epoch_stages_alloc(st, N)) return -1;
    if (spare_epoch(N, r, max_ops, out, st)) {
        epoch_stages_free(st);
        return -1;
    }
    return 0;
}

int analytic_rep_stages(int N, int r, FtSpareEpoch *out, FtEpochStages *st)
{
    if (N < 1 || r < 1 || r > N || analytic_rep_epoch(N, r, out) || epoch_stages_alloc(st, N)) return -1;
    double *p = malloc(((size_t)N + 1) * sizeof *p);
    if (!p || analytic_rep_survival(N, r, p)) {
        free(p);
        epoch_stages_free(st);
        return -1;
    }
    int M = (N / r) * r;
    st->M = M, st->K = 0;
    for (int k = 0; k < M; k++)
        if (p[k] > 1e-18) st->K = k, st->alive[k] = p[k], st->inv_depth[k] = out->thr_time;
    free(p);
    return 0;
}

int analytic_rep_epoch(int N, int r, FtSpareEpoch *out)
{
    double *p = malloc(((size_t)N + 1) * sizeof *p);
    if (!p || analytic_rep_survival(N, r, p)) {
        free(p);
        return -1;
    }
    int M = (N / r) * r;
    long double ET = 0, up = 0;
    for (int k = 0; k < M; k++) {
        ET += p[k];
        up += p[k] / (long double)(M - k);
    }
    out->N = N, out->r = r;
    out->mu = (double)ET;
    out->S = out->S_time = (double)N / (N / r); /* 1 / throughput */
    out->thr_time = (double)(N / r) / N;
    out->up_units = (double)up;
    out->exact = 1;
    free(p);
    return 0;
}
