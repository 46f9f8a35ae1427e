/* fault.c: the fault schedule (fault.h): parsing, loading, checking against the job, and the
 * resolution of sdc / sdc-random lines into concrete bit flips.
 *
 * Key decisions:
 *  - A hand-written line parser (the format is one event per line of key=value words, not INI):
 *    every field is checked as it is read and the first problem is reported as FILE:LINE with
 *    the closest known word when the user misspelled one.
 *  - Two stages of checks: fault_parse knows only the text (syntax, ranges, names); fault_plan
 *    knows the job (ranks, replicas, steps, and per rank what op kinds run how often in a
 *    step), so "op=matmul:500" on a rank that runs 136 matmuls a step is an error before the
 *    run starts, not a flip that silently never fires.
 *  - sdc-random is resolved here, once, from its seed, into the same list on every rank, so
 *    a campaign is reproducible and every rank agrees on it without a message. */
#include "ftllm/fault.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/log.h"
#include "ftllm/parse_int.h"

#define MAX_FILE (16 << 20) /* largest schedule accepted, bytes */
#define MAX_LIST 4096       /* entries of a ranks= list */
#define MAX_RANDOM 1000000  /* count= of one sdc-random line */

uint64_t fault_rng(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int fault_op_kind(const char *name)
{
    if (!strcmp(name, "crossent")) return FT_OP_CROSSENT;
    for (int k = 0; k < FT_OP_NKINDS; k++)
        if (k != FT_OP_MARK && !strcmp(ops_desc(k)->name, name)) return k;
    return -1;
}

/* ---- messages ----------------------------------------------------------------------------- */

typedef struct parse {
    const char *path;
    int line;
    char *err;
    size_t errlen;
} Parse;

static int fail(const Parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const Parse *p, const char *fmt, ...)
{
    int n = snprintf(p->err, p->errlen, "%s:%d: ", p->path, p->line);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Edit distance (optimal string alignment) for "did you mean" suggestions. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32) return 99;
    int d[33][33];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The closest of words[0..n) to w (at most 2 edits, and fewer than w's length), or NULL. */
static const char *closest(const char *w, const char *const *words, int n)
{
    const char *best = NULL;
    int bd = 3;
    for (int i = 0; i < n; i++) {
        int d = edit_distance(w, words[i]);
        if (d < bd && d < (int)strlen(w)) bd = d, best = words[i];
    }
    return best;
}

/* "unknown op kind 'matmull' (did you mean 'matmul'?)" */
static int bad_op(const Parse *p, const char *field, const char *name)
{
    const char *names[FT_OP_NKINDS + 1];
    int n = 0;
    for (int k = 0; k < FT_OP_NKINDS; k++)
        if (k != FT_OP_MARK) names[n++] = ops_desc(k)->name;
    names[n++] = "crossent";
    const char *best = closest(name, names, n);
    if (best) return fail(p, "%s: unknown op kind '%s' (did you mean '%s'?)", field, name, best);
    return fail(p, "%s: unknown op kind '%s'; op kinds: encoder layernorm matmul attention gelu "
                   "residual crossentropy lossmean gradnorm adamw moe_route moe_dispatch "
                   "moe_expert moe_combine", field, name);
}

/* ---- values ------------------------------------------------------------------------------- */

/* A decimal integer in [lo, hi], the whole of s. */
static int parse_int(const Parse *p, const char *key, const char *s, long long lo, long long hi,
                     long long *out)
{
    long long v;
    FtIntParse r = ft_parse_int(s, lo, hi, &v);
    if (r == FT_INT_NOT_INT) return fail(p, "%s=%s: expected an integer", key, s);
    if (r == FT_INT_RANGE) {
        if (hi >= (long long)1e15)
            return fail(p, "%s=%s is out of range: expected an integer >= %lld", key, s, lo);
        return fail(p, "%s=%s is out of range: expected an integer in [%lld..%lld]", key, s, lo, hi);
    }
    *out = v;
    return 0;
}

/* op=NAME[:N] */
static int parse_op(const Parse *p, const char *s, FtFaultEvent *e)
{
    char name[64];
    const char *colon = strchr(s, ':');
    size_t nl = colon ? (size_t)(colon - s) : strlen(s);
    if (nl == 0 || nl >= sizeof name) return fail(p, "op=%s: expected NAME or NAME:N", s);
    memcpy(name, s, nl);
    name[nl] = '\0';
    int k = fault_op_kind(name);
    if (k < 0) {
        char f[80];
        snprintf(f, sizeof f, "op=%s", s);
        return bad_op(p, f, name);
    }
    e->op = k;
    e->nth = 0;
    if (colon) {
        if (!colon[1]) return fail(p, "op=%s: expected NAME:N with N an execution number from 0", s);
        if (parse_int(p, "op", colon + 1, 0, (long long)1e15, &e->nth))
            return fail(p, "op=%s: N must be an integer >= 0 (the N-th execution of %s in the "
                           "step, from 0)", s, name);
    }
    return 0;
}

/* steps=A-B (or a single step A) */
static int parse_range(const Parse *p, const char *s, FtFaultEvent *e)
{
    char a[64], b[64];
    const char *dash = strchr(s, '-');
    if (!dash) {
        if (parse_int(p, "steps", s, 1, (long long)1e15, &e->step_lo)) return -1;
        e->step_hi = e->step_lo;
        return 0;
    }
    size_t la = (size_t)(dash - s);
    if (la == 0 || la >= sizeof a || strlen(dash + 1) >= sizeof b || !dash[1])
        return fail(p, "steps=%s: expected A-B (first and last step, from 1)", s);
    memcpy(a, s, la);
    a[la] = '\0';
    snprintf(b, sizeof b, "%s", dash + 1);
    if (parse_int(p, "steps", a, 1, (long long)1e15, &e->step_lo) ||
        parse_int(p, "steps", b, 1, (long long)1e15, &e->step_hi))
        return fail(p, "steps=%s: expected A-B with 1 <= A <= B", s);
    if (e->step_lo > e->step_hi) return fail(p, "steps=%s: the first step is after the last", s);
    return 0;
}

/* ranks=R1,R2,... */
static int parse_ranks(const Parse *p, const char *s, FtFaultEvent *e)
{
    int cap = 8, n = 0;
    int *r = malloc(sizeof(int) * (size_t)cap);
    FT_ASSERT(r);
    const char *q = s;
    for (;;) {
        const char *comma = strchr(q, ',');
        size_t l = comma ? (size_t)(comma - q) : strlen(q);
        char item[32];
        if (l == 0 || l >= sizeof item) {
            free(r);
            return fail(p, "ranks=%s: expected a comma-separated list of ranks", s);
        }
        memcpy(item, q, l);
        item[l] = '\0';
        long long v;
        if (parse_int(p, "ranks", item, 0, 2147483647LL, &v)) {
            free(r);
            return fail(p, "ranks=%s: '%s' is not a rank (an integer >= 0)", s, item);
        }
        for (int i = 0; i < n; i++)
            if (r[i] == (int)v) {
                free(r);
                return fail(p, "ranks=%s: rank %lld is listed twice", s, v);
            }
        if (n == MAX_LIST) {
            free(r);
            return fail(p, "ranks=%s: more than %d ranks", s, MAX_LIST);
        }
        if (n == cap) {
            cap *= 2;
            int *nr = realloc(r, sizeof(int) * (size_t)cap);
            FT_ASSERT(nr);
            r = nr;
        }
        r[n++] = (int)v;
        if (!comma) break;
        q = comma + 1;
    }
    e->ranks = r;
    e->nranks = n;
    return 0;
}

/* ops=NAME,NAME,... */
static int parse_ops(const Parse *p, const char *s, FtFaultEvent *e)
{
    const char *q = s;
    for (;;) {
        const char *comma = strchr(q, ',');
        size_t l = comma ? (size_t)(comma - q) : strlen(q);
        char item[64];
        if (l == 0 || l >= sizeof item)
            return fail(p, "ops=%s: expected a comma-separated list of op kinds", s);
        memcpy(item, q, l);
        item[l] = '\0';
        int k = fault_op_kind(item);
        if (k < 0) {
            char f[80];
            snprintf(f, sizeof f, "ops=%s", s);
            return bad_op(p, f, item);
        }
        if (e->ops & (1u << k)) return fail(p, "ops=%s: '%s' is listed twice", s, item);
        e->ops |= 1u << k;
        if (!comma) break;
        q = comma + 1;
    }
    return 0;
}

static int parse_target(const Parse *p, const char *s, bool random, FtFaultEvent *e)
{
    if (!strcmp(s, "primary")) e->target = FT_TARGET_PRIMARY;
    else if (!strcmp(s, "checker")) e->target = FT_TARGET_CHECKER;
    else if (random && !strcmp(s, "both")) e->target = FT_TARGET_BOTH;
    else
        return fail(p, "target=%s: expected %s", s, random ? "primary, checker or both"
                                                            : "primary or checker");
    return 0;
}

/* ---- lines -------------------------------------------------------------------------------- */

static const char *const g_kinds[] = {"sdc", "sdc-random", "fail"};
static const char *const g_fields[3][6] = {
    {"step", "rank", "op", "bit", "elem", "target"},
    {"count", "seed", "steps", "ranks", "ops", "target"},
    {"step", "replica", "rank", NULL, NULL, NULL},
};
static const char *const g_usage[3] = {
    "sdc step=S rank=R op=NAME[:N] bit=B [elem=I] [target=primary|checker]",
    "sdc-random count=K seed=X [steps=A-B] [ranks=R1,R2] [ops=NAME,NAME] "
    "[target=primary|checker|both]",
    "fail step=S replica=I, or fail step=S rank=R",
};

static int field_index(int kind, const char *key)
{
    for (int i = 0; i < 6 && g_fields[kind][i]; i++)
        if (!strcmp(g_fields[kind][i], key)) return i;
    return -1;
}

static int parse_field(const Parse *p, int kind, const char *key, const char *val, FtFaultEvent *e)
{
    long long v;
    if (!strcmp(key, "step")) {
        return parse_int(p, key, val, 1, (long long)1e15, &e->step);
    }
    if (!strcmp(key, "rank") || !strcmp(key, "replica")) {
        if (parse_int(p, key, val, 0, 2147483647LL, &v)) return -1;
        if (key[1] == 'a') e->rank = (int)v;
        else e->replica = (int)v;
        return 0;
    }
    if (!strcmp(key, "op")) return parse_op(p, val, e);
    if (!strcmp(key, "bit")) {
        if (parse_int(p, key, val, 0, 63, &v)) return -1;
        e->bit = (int)v;
        return 0;
    }
    if (!strcmp(key, "elem")) return parse_int(p, key, val, 0, (long long)4e18, &e->elem);
    if (!strcmp(key, "target")) return parse_target(p, val, kind == FT_FAULT_SDC_RANDOM, e);
    if (!strcmp(key, "count")) return parse_int(p, key, val, 1, MAX_RANDOM, &e->count);
    if (!strcmp(key, "seed")) {
        if (parse_int(p, key, val, 0, (long long)9.2e18, &v)) return -1;
        e->seed = (uint64_t)v;
        return 0;
    }
    if (!strcmp(key, "steps")) return parse_range(p, val, e);
    if (!strcmp(key, "ranks")) return parse_ranks(p, val, e);
    if (!strcmp(key, "ops")) return parse_ops(p, val, e);
    return fail(p, "internal: field %s", key);
}

static void event_free(FtFaultEvent *e)
{
    free(e->ranks);
    e->ranks = NULL;
}

/* One line (comment already cut, NUL-terminated, writable). Returns 0 (blank or an event in
 * *e, with *has set), or -1. */
static int parse_line(const Parse *p, char *s, FtFaultEvent *e, bool *has)
{
    *has = false;
    char *save = NULL;
    char *word = strtok_r(s, " \t\r\v\f", &save);
    if (!word) return 0;
    int kind = -1;
    for (int k = 0; k < 3; k++)
        if (!strcmp(word, g_kinds[k])) kind = k;
    if (kind < 0) {
        const char *best = closest(word, g_kinds, 3);
        if (best) return fail(p, "unknown event '%s' (did you mean '%s'?)", word, best);
        return fail(p, "unknown event '%s': expected sdc, sdc-random or fail", word);
    }
    *e = (FtFaultEvent){.kind = kind, .line = p->line, .step = -1, .rank = -1, .replica = -1,
                        .op = -1, .nth = 0, .bit = -1, .elem = -1, .target = FT_TARGET_PRIMARY};
    bool seen[6] = {false};
    while ((word = strtok_r(NULL, " \t\r\v\f", &save))) {
        char *eq = strchr(word, '=');
        if (!eq) {
            event_free(e);
            return fail(p, "expected key=value, got '%s' (%s)", word, g_usage[kind]);
        }
        *eq = '\0';
        const char *key = word, *val = eq + 1;
        int fi = field_index(kind, key);
        if (fi < 0) {
            const char *best = closest(key, g_fields[kind], kind == FT_FAULT_FAIL ? 3 : 6);
            event_free(e);
            if (best) return fail(p, "unknown field '%s' in a %s line (did you mean '%s'?)", key,
                                  g_kinds[kind], best);
            return fail(p, "unknown field '%s' in a %s line (%s)", key, g_kinds[kind], g_usage[kind]);
        }
        if (seen[fi]) {
            event_free(e);
            return fail(p, "%s= is given twice", key);
        }
        seen[fi] = true;
        if (!*val) {
            event_free(e);
            return fail(p, "%s=: empty value", key);
        }
        if (parse_field(p, kind, key, val, e)) {
            event_free(e);
            return -1;
        }
    }
    const char *missing = NULL;
    if (kind == FT_FAULT_SDC) {
        for (int i = 0; i < 4 && !missing; i++)
            if (!seen[i]) missing = g_fields[kind][i];
    } else if (kind == FT_FAULT_SDC_RANDOM) {
        for (int i = 0; i < 2 && !missing; i++)
            if (!seen[i]) missing = g_fields[kind][i];
    } else {
        if (!seen[0]) missing = "step";
        else if (seen[1] && seen[2]) {
            event_free(e);
            return fail(p, "a fail line names replica= or rank=, not both");
        } else if (!seen[1] && !seen[2]) {
            return fail(p, "a fail line needs replica=I (a whole replica) or rank=R (one rank)");
        }
    }
    if (missing) {
        event_free(e);
        return fail(p, "a %s line needs %s= (%s)", g_kinds[kind], missing, g_usage[kind]);
    }
    *has = true;
    return 0;
}

/* The same explicit flip twice cancels out: refuse it. */
static int same_flip(const FtFaultEvent *a, const FtFaultEvent *b)
{
    return a->kind == FT_FAULT_SDC && b->kind == FT_FAULT_SDC && a->elem >= 0 &&
           a->step == b->step && a->rank == b->rank && a->op == b->op && a->nth == b->nth &&
           a->bit == b->bit && a->elem == b->elem && a->target == b->target;
}

int fault_parse(FtFaultSchedule *s, const char *path, const char *text, size_t len, char *err,
                size_t errlen)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    Parse p = {.path = s->path, .line = 0, .err = err, .errlen = errlen};
    int cap = 0;
    const char *q = text, *end = text + len;
    char buf[FT_FAULT_MAX_LINE + 2];
    while (q < end) {
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        size_t n = nl ? (size_t)(nl - q) : (size_t)(end - q);
        const char *ln = q;
        q += n + (nl ? 1 : 0);
        p.line++;
        if (memchr(ln, '\0', n)) {
            fault_free(s);
            return fail(&p, "NUL byte in the fault schedule (is this a text file?)");
        }
        if (n > FT_FAULT_MAX_LINE) {
            fault_free(s);
            return fail(&p, "line is longer than %d characters", FT_FAULT_MAX_LINE);
        }
        memcpy(buf, ln, n);
        buf[n] = '\0';
        char *c = strpbrk(buf, ";#");
        if (c) *c = '\0';
        FtFaultEvent e;
        bool has;
        if (parse_line(&p, buf, &e, &has)) {
            fault_free(s);
            return -1;
        }
        if (!has) continue;
        for (int i = 0; i < s->nev; i++)
            if (same_flip(&s->ev[i], &e)) {
                int first = s->ev[i].line;
                event_free(&e);
                fault_free(s);
                return fail(&p, "the same flip as line %d (a bit flipped twice is unchanged)",
                            first);
            }
        if (s->nev == cap) {
            cap = cap ? 2 * cap : 16;
            FtFaultEvent *ne = realloc(s->ev, sizeof *ne * (size_t)cap);
            FT_ASSERT(ne);
            s->ev = ne;
        }
        s->ev[s->nev++] = e;
    }
    return 0;
}

void fault_free(FtFaultSchedule *s)
{
    for (int i = 0; i < s->nev; i++) event_free(&s->ev[i]);
    free(s->ev);
    s->ev = NULL;
    s->nev = 0;
}

int fault_count(const FtFaultSchedule *s, FtFaultKind kind)
{
    int n = 0;
    for (int i = 0; i < s->nev; i++) n += s->ev[i].kind == kind;
    return n;
}

/* ---- loading ------------------------------------------------------------------------------ */

/* Rank 0's read: the file's bytes, or a message (*bad set). */
static char *read_file(const char *path, long long *len, bool *bad)
{
    *bad = true;
    char *msg = malloc(FT_FAULT_MAX_LINE);
    FT_ASSERT(msg);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, FT_FAULT_MAX_LINE, "%s: cannot open the fault schedule: %s (faults.schedule)",
                 path, strerror(errno));
        *len = (long long)strlen(msg);
        return msg;
    }
    char *text = malloc(MAX_FILE + 1);
    FT_ASSERT(text);
    size_t n = fread(text, 1, MAX_FILE + 1, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr || n > MAX_FILE) {
        snprintf(msg, FT_FAULT_MAX_LINE, "%s: %s", path,
                 rerr ? "cannot read the fault schedule (is it a directory?)"
                      : "the fault schedule is larger than 16 MiB");
        free(text);
        *len = (long long)strlen(msg);
        return msg;
    }
    free(msg);
    *bad = false;
    *len = (long long)n;
    return text;
}

int fault_load(FtFaultSchedule *s, const char *path, FtComm *world, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    int rank = world ? comm_rank(world) : 0;
    long long hdr[2] = {0, 0}; /* bytes, bad */
    char *text = NULL;
    if (rank == 0) {
        bool bad;
        text = read_file(path, &hdr[0], &bad);
        hdr[1] = bad;
    }
    if (world && comm_size(world) > 1) {
        comm_bcast(world, hdr, 2, FT_I64, 0);
        if (rank != 0) {
            text = malloc((size_t)hdr[0] + 1);
            FT_ASSERT(text);
        }
        if (hdr[0] > 0) comm_bcast(world, text, (size_t)hdr[0], FT_U8, 0);
    }
    int rc;
    if (hdr[1]) {
        snprintf(err, errlen, "%.*s", (int)hdr[0], text);
        rc = -1;
    } else {
        rc = fault_parse(s, path, text, (size_t)hdr[0], err, errlen);
    }
    free(text);
    return rc;
}

/* ---- the job ------------------------------------------------------------------------------ */

void fault_ops_of(const FtTape *tape, int micro, const FtTape *opt, FtFaultOps *o)
{
    memset(o, 0, sizeof *o);
    const FtTape *tapes[2] = {tape, opt};
    int reps[2] = {micro, 1};
    for (int t = 0; t < 2; t++) {
        const FtTape *tp = tapes[t];
        if (!tp) continue;
        for (int i = 0; i < tp->ne; i++) {
            const FtTapeEntry *e = &tp->e[i];
            if (e->kind == FT_OP_MARK) continue;
            long long elems = 0;
            int bits = 0;
            for (int k = 0; k < FT_OP_MAX_OUT; k++) {
                if (e->out[k] < 0 || tp->t[e->out[k]].n == 0) continue;
                elems += (long long)tp->t[e->out[k]].n;
                int b = 8 * (int)ft_dtype_size(tp->t[e->out[k]].dtype);
                if (!bits || b < bits) bits = b;
            }
            o->count[e->kind] += reps[t];
            if (elems > o->max_elems[e->kind]) o->max_elems[e->kind] = elems;
            if (bits && (!o->bits[e->kind] || bits < o->bits[e->kind])) o->bits[e->kind] = bits;
        }
    }
}

/* A set of executions (step, rank, kind, nth) already taken, open addressing. */
typedef struct taken {
    uint64_t *k;
    size_t cap, n;
} Taken;

static uint64_t exec_key(long long step, int rank, int kind, long long nth)
{
    uint64_t s = (uint64_t)step * 0x9E3779B97F4A7C15ull ^ (uint64_t)rank * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)kind * 0x165667B19E3779F9ull ^ (uint64_t)nth * 0xD6E8FEB86659FD93ull;
    uint64_t z = fault_rng(&s);
    return z ? z : 1;
}

/* Inserts key; returns false when it was there already. */
static bool taken_add(Taken *t, uint64_t key)
{
    if (2 * (t->n + 1) > t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 1024;
        uint64_t *nk = calloc(nc, sizeof *nk);
        FT_ASSERT(nk);
        for (size_t i = 0; i < t->cap; i++)
            if (t->k[i]) {
                size_t j = t->k[i] & (nc - 1);
                while (nk[j]) j = (j + 1) & (nc - 1);
                nk[j] = t->k[i];
            }
        free(t->k);
        t->k = nk, t->cap = nc;
    }
    size_t j = key & (t->cap - 1);
    while (t->k[j]) {
        if (t->k[j] == key) return false;
        j = (j + 1) & (t->cap - 1);
    }
    t->k[j] = key;
    t->n++;
    return true;
}

typedef struct flips {
    FtFlip *f;
    int n, cap;
} Flips;

static void flips_push(Flips *fl, const FtFlip *f)
{
    if (fl->n == fl->cap) {
        fl->cap = fl->cap ? 2 * fl->cap : 64;
        FtFlip *nf = realloc(fl->f, sizeof *nf * (size_t)fl->cap);
        FT_ASSERT(nf);
        fl->f = nf;
    }
    fl->f[fl->n++] = *f;
}

/* A step after the run's end is not an error (a schedule outlives a shorter run, e.g. the
 * default deck's with train.steps=2): the event is left out and the first one reported. */
static bool after_end(const Parse *p, const FtFaultJob *job, long long step, int *nlate,
                      char *warn, size_t warnlen)
{
    if (step <= job->steps) return false;
    if (!(*nlate)++ && warn)
        snprintf(warn, warnlen, "%s:%d: step=%lld is after the run's last step (train.steps = "
                 "%lld): left out", p->path, p->line, step, job->steps);
    return true;
}

static int check_rank(const Parse *p, const FtFaultJob *job, const char *key, long long r)
{
    if (r >= job->nranks)
        return fail(p, "%s=%lld is outside the job (%d rank%s: 0..%d)", key, r, job->nranks,
                    job->nranks == 1 ? "" : "s", job->nranks - 1);
    return 0;
}

static int plan_sdc(const Parse *p, const FtFaultEvent *e, const FtFaultJob *job, Taken *tk,
                    Flips *fl, bool late)
{
    if (check_rank(p, job, "rank", e->rank)) return -1;
    const FtFaultOps *o = &job->ops[e->rank];
    const char *name = ops_desc(e->op)->name;
    if (o->count[e->op] == 0 || o->max_elems[e->op] == 0)
        return fail(p, "op=%s: rank %d runs no %s in a training step of this model and layout",
                    name, e->rank, name);
    if (e->nth >= o->count[e->op])
        return fail(p, "op=%s:%lld: rank %d runs %s %lld time%s a step (N = 0..%lld)", name,
                    e->nth, e->rank, name, o->count[e->op], o->count[e->op] == 1 ? "" : "s",
                    o->count[e->op] - 1);
    if (e->bit >= o->bits[e->op])
        return fail(p, "bit=%d: %s outputs on rank %d are %d-bit elements (bit 0..%d)", e->bit,
                    name, e->rank, o->bits[e->op], o->bits[e->op] - 1);
    if (e->elem >= o->max_elems[e->op])
        return fail(p, "elem=%lld: no %s execution on rank %d has that many output elements "
                       "(at most %lld)", e->elem, name, e->rank, o->max_elems[e->op]);
    uint64_t st = job->seed * 0x2545F4914F6CDD1Dull ^ (uint64_t)e->line;
    FtFlip f = {.line = e->line, .step = e->step, .rank = e->rank, .op = e->op, .nth = e->nth,
                .bit = e->bit, .elem = e->elem, .elem_draw = fault_rng(&st), .target = e->target};
    if (late) return 0;
    taken_add(tk, exec_key(f.step, f.rank, f.op, f.nth));
    flips_push(fl, &f);
    return 0;
}

/* The kinds of mask (0: any) that run on rank r, as a list; returns how many. */
static int kinds_on(const FtFaultOps *o, uint32_t mask, int *kinds)
{
    int n = 0;
    for (int k = 0; k < FT_OP_NKINDS; k++)
        if ((!mask || (mask & (1u << k))) && o->count[k] > 0 && o->max_elems[k] > 0) kinds[n++] = k;
    return n;
}

static int plan_random(const Parse *p, const FtFaultEvent *e, const FtFaultJob *job, Taken *tk,
                       Flips *fl)
{
    long long lo = e->step_lo ? e->step_lo : 1, hi = e->step_hi ? e->step_hi : job->steps;
    if (job->steps < 1) return fail(p, "sdc-random: the run has no steps (train.steps = 0)");
    if (hi > job->steps)
        return fail(p, "steps=%lld-%lld: the run's last step is %lld (train.steps)", lo, hi,
                    job->steps);
    int nr = e->ranks ? e->nranks : job->nranks;
    double room = 0; /* executions to place flips in */
    for (int i = 0; i < nr; i++) {
        int r = e->ranks ? e->ranks[i] : i;
        if (check_rank(p, job, "ranks", r)) return -1;
        int kinds[FT_OP_NKINDS];
        int nk = kinds_on(&job->ops[r], e->ops, kinds);
        if (nk == 0) return fail(p, "ops=: none of the listed op kinds runs on rank %d", r);
        for (int j = 0; j < nk; j++) room += (double)job->ops[r].count[kinds[j]];
    }
    room *= (double)(hi - lo + 1);
    if ((double)e->count > room / 2)
        return fail(p, "count=%lld: too many flips for the %.0f op executions they may land on "
                       "(at most half of them)", e->count, room);
    uint64_t st = e->seed;
    for (long long c = 0; c < e->count; c++) {
        FtFlip f;
        for (int tries = 0;; tries++) {
            if (tries == 1000)
                return fail(p, "count=%lld: could not place flip %lld in a free op execution",
                            e->count, c + 1);
            int r = e->ranks ? e->ranks[fault_rng(&st) % (uint64_t)nr]
                             : (int)(fault_rng(&st) % (uint64_t)nr);
            int kinds[FT_OP_NKINDS];
            int nk = kinds_on(&job->ops[r], e->ops, kinds);
            int k = kinds[fault_rng(&st) % (uint64_t)nk];
            const FtFaultOps *o = &job->ops[r];
            f = (FtFlip){.line = e->line, .rank = r, .op = k, .elem = -1};
            f.step = lo + (long long)(fault_rng(&st) % (uint64_t)(hi - lo + 1));
            f.nth = (long long)(fault_rng(&st) % (uint64_t)o->count[k]);
            f.bit = (int)(fault_rng(&st) % (uint64_t)o->bits[k]);
            f.target = e->target == FT_TARGET_BOTH
                           ? (fault_rng(&st) & 1 ? FT_TARGET_CHECKER : FT_TARGET_PRIMARY)
                           : e->target;
            f.elem_draw = fault_rng(&st);
            if (taken_add(tk, exec_key(f.step, f.rank, f.op, f.nth))) break;
        }
        flips_push(fl, &f);
    }
    return 0;
}

int fault_plan(const FtFaultSchedule *s, const FtFaultJob *job, FtFlip **flips, int *n,
               char *err, size_t errlen, char *warn, size_t warnlen)
{
    Parse p = {.path = s->path, .err = err, .errlen = errlen};
    Flips fl = {0};
    Taken tk = {0};
    int rc = 0, nlate = 0;
    if (warn && warnlen) warn[0] = '\0';
    for (int i = 0; i < s->nev && !rc; i++) {
        const FtFaultEvent *e = &s->ev[i];
        p.line = e->line;
        bool late = e->kind != FT_FAULT_SDC_RANDOM && after_end(&p, job, e->step, &nlate, warn, warnlen);
        switch (e->kind) {
        case FT_FAULT_SDC: rc = plan_sdc(&p, e, job, &tk, &fl, late); break;
        case FT_FAULT_SDC_RANDOM: rc = plan_random(&p, e, job, &tk, &fl); break;
        case FT_FAULT_FAIL:
            if (e->rank >= 0) rc = check_rank(&p, job, "rank", e->rank);
            if (!rc && e->replica >= job->dp)
                rc = fail(&p, "replica=%d is outside the job (parallel.dp = %d: replicas 0..%d)",
                          e->replica, job->dp, job->dp - 1);
            break;
        }
    }
    free(tk.k);
    if (rc) {
        free(fl.f);
        *flips = NULL, *n = 0;
        if (warn && warnlen) warn[0] = '\0';
        return -1;
    }
    if (nlate > 1 && warn) {
        size_t l = strlen(warn);
        snprintf(warn + l, warnlen - l, ", and %d more line%s", nlate - 1, nlate > 2 ? "s" : "");
    }
    *flips = fl.f;
    *n = fl.n;
    return 0;
}
