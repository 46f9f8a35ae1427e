/* dmr_plan_file.c: the DMR plan file (dmr_plan.h, "The file"): dmr_plan_write and
 * dmr_plan_read, versions 1 and 2.
 *
 * Key decisions:
 *  - The file is line-oriented text read with strtok_r over a copy of each line: every field is
 *    checked (names against the tape, numbers for range), so a hand-edited plan that would
 *    check an op wrongly is refused with its line number rather than trusted.
 *  - Version 2 lists op executions in time order and that order is the plan's (pos: memory in
 *    time is counted along it); what only the whole file can show (an execution without its
 *    line, a recomputation piggybacked apart from its forward, windows out of time order) is
 *    checked after the last line, naming the line at fault. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/dmr_plan.h"
#include "ftllm/log.h"
#include "ftllm/parse_int.h"
#include "dmr_plan_impl.h"

int dmr_plan_write(const FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt,
                   const char *path, const char *rank_line, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write the DMR plan: %s", path, strerror(errno));
        return -1;
    }
    int M = p->ninst > 1 ? p->ninst : 1;
    fprintf(f, "# ftllm DMR plan (dmr.mode = planned, dmr.plan): one 'op' line per op execution of a "
               "step, in time order: ENTRY of micro-batch MB\n# (micro-batch tape: entries 0..%d, "
               "once per micro-batch; optimizer tape: %d..%d, once a step, MB 0). Made by\n# "
               "`ftllm plan` or the first dmr.profile_steps steps of `ftllm train`; checked "
               "against the tapes when read.\n",
            p->nmicro - 1, p->nmicro, p->nmicro + p->nopt - 1);
    fprintf(f, "ftllm-dmr-plan 2\n%s\ntape %016llx entries %d optimizer %d micro_batches %d\n",
            rank_line, (unsigned long long)p->tape_hash, p->nmicro, p->nopt, M);
    fprintf(f, "budget_mb %.6g phases %s profile_steps %d step_ms %.6f overhead_ms %.6f "
               "prebwd_ms %.6f",
            p->budget_mb, dmr_phases_text(p->phases), p->profile_steps, 1e3 * p->step_s,
            1e3 * p->overhead, 1e3 * p->pre_bwd_s);
    if (p->has_order) fprintf(f, " order_ms %.6f", 1e3 * p->order_s);
    if (p->has_idle) fprintf(f, " idle_ms %.6f", 1e3 * p->idle_s);
    fprintf(f, "\n");
    fprintf(f, "# window W after ENTRY mb MB kind pp|intra len_ms X use -|agc|deferred used_ms X\n");
    for (int w = 0; w < p->nwin; w++) {
        int m = 0, i = p->win_after[w] >= 0 ? dmr_plan_entry(p, p->win_after[w], &m) : -1;
        fprintf(f, "window %d after %d mb %d kind %s len_ms %.6f use %s used_ms %.6f\n", w, i, m,
                dmr_kind_names[p->win_kind[w]], 1e3 * p->win_len[w], dmr_use_names[p->win_use[w]],
                1e3 * p->win_used[w]);
    }
    fprintf(f, "# op ENTRY MB KIND.DIR PHASE LAYER STRATEGY WINDOW SEGMENT TIME_MS KEPT_BYTES "
               "COST_MS\n");
    int *order, no = dmr_plan_time_order(p, &order);
    for (int k = 0; k < no; k++) {
        int s = order[k], m, i = dmr_plan_entry(p, s, &m);
        const FtTape *tp;
        int j;
        const FtTapeEntry *e = dmr_plan_entry_of(micro, opt, i, &tp, &j);
        char op[48], w[16] = "-", sg[16] = "-";
        if (p->window[s] >= 0) snprintf(w, sizeof w, "%d", p->window[s]);
        if (p->seg[s] >= 0) snprintf(sg, sizeof sg, "%d", p->seg[s]);
        fprintf(f, "op %d %d %s %s %d %s %s %s %.6f %zu %.6f\n", i, m, dmr_op_label(e, op, sizeof op),
                dmr_phase_label(tp, opt, e), e->layer, planner_strategy_name(p->strat[s]), w, sg,
                1e3 * p->time[s], p->kept[s], 1e3 * p->cost[s]);
    }
    free(order);
    if (fclose(f)) {
        snprintf(err, errlen, "%s: cannot write the DMR plan: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A line's tokens (at most 24). */
static int split(char *s, char **tok)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, " \t\r\n", &save); t && n < 24; t = strtok_r(NULL, " \t\r\n", &save))
        tok[n++] = t;
    return n;
}

static bool num(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return end != s && !*end && !errno && isfinite(*v) && *v >= 0;
}

static bool int_of(const char *s, long lo, long hi, int *v)
{
    long long x;
    if (ft_parse_int(s, lo, hi, &x) != FT_INT_OK) return false;
    *v = (int)x;
    return true;
}

/* The largest entry of the plan's entry space. */
static int i_max(const FtDmrEntryPlan *p) { return p->nmicro + p->nopt - 1; }

/* "-" or an integer in [0, hi]. */
static bool opt_int(const char *s, int hi, int *v)
{
    if (!strcmp(s, "-")) return *v = -1, true;
    return int_of(s, 0, hi, v);
}

static int strategy_of(const char *s)
{
    for (int k = 0; k < 4; k++)
        if (!strcmp(s, planner_strategy_name(k))) return k;
    return -1;
}

#define BAD(...) do { snprintf(msg, sizeof msg, __VA_ARGS__); goto bad; } while (0)

/* The slot of execution "ENTRY MB" (tokens te, tm) of an op entry; *mb_ok false when MB is not
 * one of the plan's (micro-batch entries: [0, ninst); optimizer: 0). Returns -1 when ENTRY is
 * not an op entry (message in msg). */
static int slot_of(const FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, const char *te,
                   const char *tm, char *msg, size_t len)
{
    int i, m, M = p->ninst > 1 ? p->ninst : 1, hi = i_max(p);
    if (!int_of(te, 0, hi, &i))
        return snprintf(msg, len, "entry '%s': expected an integer in [0..%d]", te, hi), -1;
    const FtTape *tp;
    int j;
    if (dmr_plan_entry_of(micro, opt, i, &tp, &j)->kind == FT_OP_MARK)
        return snprintf(msg, len, "entry %d is a communication marker, not an op", i), -1;
    int mhi = i < p->nmicro ? M - 1 : 0;
    if (!int_of(tm, 0, mhi, &m))
        return snprintf(msg, len, "micro-batch '%s' of entry %d: expected an integer in [0..%d]%s",
                        tm, i, mhi, i < p->nmicro ? "" : " (the optimizer runs once a step)"), -1;
    return dmr_plan_slot(p, i, m);
}

/* One 'op' line (tok[0] == "op") of a version v file; *nops: op lines so far (version 1: the
 * entry expected next, op entries in order; version 2: the line's place in the time order). */
static int read_op(FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, int v, char **tok,
                   int nt, int *nops, int *slot, char *msg, size_t len)
{
    int i, s, layer, win, seg, o = v == 2 ? 1 : 0;
    double t, c;
    if (nt != 11 + o)
        return snprintf(msg, len, "an op line has %d fields (op ENTRY %sKIND.DIR PHASE LAYER "
                        "STRATEGY WINDOW SEGMENT TIME_MS KEPT_BYTES COST_MS), not %d", 11 + o,
                        o ? "MB " : "", nt), -1;
    if (v == 2) {
        if ((s = slot_of(p, micro, opt, tok[1], tok[2], msg, len)) < 0) return -1;
        int m;
        i = dmr_plan_entry(p, s, &m);
        if (p->strat[s] >= 0)
            return snprintf(msg, len, "entry %d mb %d: a second line for the same execution", i,
                            m), -1;
        p->pos[s] = (*nops)++;
    } else {
        if (!int_of(tok[1], 0, p->n - 1, &i))
            return snprintf(msg, len, "entry '%s': expected an integer in [0..%d]", tok[1],
                            p->n - 1), -1;
        while (*nops < p->n) { /* the op entry expected next */
            int k;
            const FtTape *tp;
            if (dmr_plan_entry_of(micro, opt, *nops, &tp, &k)->kind != FT_OP_MARK) break;
            (*nops)++;
        }
        if (i != *nops)
            return snprintf(msg, len, "entry %d: expected the op entry %d next (one line per op "
                            "entry, in order)", i, *nops), -1;
        (*nops)++;
        s = i;
    }
    const FtTape *tp;
    int j;
    const FtTapeEntry *e = dmr_plan_entry_of(micro, opt, i, &tp, &j);
    char op[48];
    dmr_op_label(e, op, sizeof op);
    const char *ph = dmr_phase_label(tp, opt, e);
    if (strcmp(tok[2 + o], op) || strcmp(tok[3 + o], ph) || !int_of(tok[4 + o], -1, 1 << 20, &layer) ||
        layer != e->layer)
        return snprintf(msg, len, "entry %d is %s %s layer %d on this rank's tape, not '%s %s "
                        "%s' (the plan is for another model, layout or train.ac)", i, op, ph,
                        e->layer, tok[2 + o], tok[3 + o], tok[4 + o]), -1;
    int st = strategy_of(tok[5 + o]);
    if (st < 0)
        return snprintf(msg, len, "strategy '%s': expected piggyback, naive, deferred or agc",
                        tok[5 + o]), -1;
    if (st == PLAN_PIGGYBACK && !dmr_entry_piggyback(tp, e))
        return snprintf(msg, len, "entry %d (%s): piggyback needs an AC recomputation twin "
                        "writing floats; this entry has none", i, op), -1;
    if ((st == PLAN_DEFERRED || st == PLAN_AGC) && !dmr_entry_deferrable(tp, e))
        return snprintf(msg, len, "entry %d (%s) writes integers (addresses for later ops): it "
                        "cannot be deferred, only naive or piggyback", i, op), -1;
    if (!opt_int(tok[6 + o], p->nwin - 1, &win))
        return snprintf(msg, len, "window '%s': expected - or an integer in [0..%d]", tok[6 + o],
                        p->nwin - 1), -1;
    if (!opt_int(tok[7 + o], 1 << 20, &seg))
        return snprintf(msg, len, "segment '%s': expected - or an integer >= 0", tok[7 + o]), -1;
    if (st == PLAN_AGC && seg < 0)
        return snprintf(msg, len, "entry %d: strategy agc needs a segment", i), -1;
    if (seg >= 0 && st != PLAN_AGC && st != PLAN_PIGGYBACK)
        return snprintf(msg, len, "entry %d: only agc ops and piggyback ops replayed inside a "
                        "segment have one, not %s", i, tok[5 + o]), -1;
    if (!num(tok[8 + o], &t) || !num(tok[10 + o], &c))
        return snprintf(msg, len, "time_ms '%s' / cost_ms '%s': expected numbers >= 0", tok[8 + o],
                        tok[10 + o]), -1;
    char *end;
    errno = 0;
    unsigned long long kept = strtoull(tok[9 + o], &end, 10);
    if (end == tok[9 + o] || *end || errno || tok[9 + o][0] == '-')
        return snprintf(msg, len, "kept_bytes '%s': expected an integer >= 0", tok[9 + o]), -1;
    *slot = s;
    p->strat[s] = st, p->window[s] = win, p->seg[s] = seg;
    p->time[s] = t / 1e3, p->cost[s] = c / 1e3, p->kept[s] = (size_t)kept;
    if (seg + 1 > p->nseg) p->nseg = seg + 1;
    return 0;
}

/* One 'window' line (tok[0] == "window") of a version v file, appended to p's windows. */
static int read_window(FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, int v,
                       char **tok, int nt, char *msg, size_t len)
{
    int w, after, kind = -1, use = -1, o = v == 2 ? 2 : 0;
    double wl, used;
    if (nt != 12 + o || !int_of(tok[1], 0, 1 << 30, &w) || strcmp(tok[2], "after") ||
        !int_of(tok[3], -1, i_max(p), &after) || (o && strcmp(tok[4], "mb")) ||
        strcmp(tok[4 + o], "kind") || strcmp(tok[6 + o], "len_ms") || !num(tok[7 + o], &wl) ||
        strcmp(tok[8 + o], "use") || strcmp(tok[10 + o], "used_ms") || !num(tok[11 + o], &used))
        return snprintf(msg, len, "expected 'window %d after ENTRY%s kind pp|intra len_ms X use "
                        "-|agc|deferred used_ms X' (ENTRY in [-1..%d], times >= 0)", p->nwin,
                        o ? " mb MB" : "", i_max(p)), -1;
    if (w != p->nwin) return snprintf(msg, len, "window %d: expected window %d next", w, p->nwin), -1;
    if (o && after < 0 && strcmp(tok[5], "0"))
        return snprintf(msg, len, "window %d opens before any op: expected 'after -1 mb 0'", w), -1;
    if (o && after >= 0 && (after = slot_of(p, micro, opt, tok[3], tok[5], msg, len)) < 0) return -1;
    if (!o && p->nwin && after < p->win_after[p->nwin - 1])
        return snprintf(msg, len, "window %d opens after entry %d, before window %d (entry %d): "
                        "windows come in order", w, after, w - 1, p->win_after[w - 1]), -1;
    for (const FtTape *tp; !o && after >= 0;) { /* version 1: after a marker is after the op
                                                   before it (a window opens after an op) */
        int j;
        if (dmr_plan_entry_of(micro, opt, after, &tp, &j)->kind != FT_OP_MARK) break;
        after--;
    }
    for (int k = 0; k < 2; k++)
        if (!strcmp(tok[5 + o], dmr_kind_names[k])) kind = k;
    for (int k = 1; k < 4; k++)
        if (!strcmp(tok[9 + o], dmr_use_names[k])) use = k == 1 ? 0 : k;
    if (kind < 0) return snprintf(msg, len, "window kind '%s': expected pp or intra", tok[5 + o]), -1;
    if (use < 0)
        return snprintf(msg, len, "window use '%s': expected -, agc or deferred", tok[9 + o]), -1;
    size_t c = (size_t)p->nwin + 2;
    int *a = realloc(p->win_after, c * sizeof *a), *k = realloc(p->win_kind, c * sizeof *k);
    p->win_after = a ? a : p->win_after, p->win_kind = k ? k : p->win_kind;
    int *u = realloc(p->win_use, c * sizeof *u);
    p->win_use = u ? u : p->win_use;
    double *l = realloc(p->win_len, c * sizeof *l), *d = realloc(p->win_used, c * sizeof *d);
    p->win_len = l ? l : p->win_len, p->win_used = d ? d : p->win_used;
    FT_ASSERT(a && k && u && l && d);
    p->win_after[w] = after, p->win_kind[w] = kind, p->win_use[w] = use;
    p->win_len[w] = wl / 1e3, p->win_used[w] = used / 1e3;
    p->nwin++;
    return 0;
}

/* After the last line: every op slot has its line, a recomputation's piggyback matches its
 * twin's (the same micro-batch's forward), a version 2 file's windows come in time order.
 * Returns 0, or -1 with the message and *ln the line to name (unchanged: the file's last). */
static int read_done(FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, const int *line,
                     const int *winline, int *ln, char *msg, size_t len)
{
    for (int s = 0; s < p->n; s++) {
        int m, i = dmr_plan_entry(p, s, &m), j;
        const FtTape *tp;
        const FtTapeEntry *e = dmr_plan_entry_of(micro, opt, i, &tp, &j);
        if (e->kind == FT_OP_MARK) continue;
        if (p->strat[s] < 0) {
            char mb[32] = "";
            if (p->pos) snprintf(mb, sizeof mb, " mb %d", m);
            return snprintf(msg, len, "the file ends before the op line of entry %d%s (every "
                            "execution of an op entry has one)", i, mb), -1;
        }
    }
    for (int s = 0; s < p->n; s++) {
        int m, i = dmr_plan_entry(p, s, &m), j;
        const FtTape *tp;
        const FtTapeEntry *e = dmr_plan_entry_of(micro, opt, i, &tp, &j);
        if (tp != micro || e->kind == FT_OP_MARK || e->phase != FT_PH_RECOMPUTE || e->twin < 0)
            continue;
        int t = dmr_plan_slot(p, e->twin, m);
        if ((p->strat[s] == PLAN_PIGGYBACK) != (p->strat[t] == PLAN_PIGGYBACK)) {
            *ln = line[s];
            return snprintf(msg, len, "entry %d recomputes entry %d: piggyback is for both or "
                            "neither (the recomputation is the forward's checker)", i, e->twin), -1;
        }
    }
    for (int w = 1; w < p->nwin && p->pos; w++)
        if (dmr_plan_pos(p, p->win_after[w]) < dmr_plan_pos(p, p->win_after[w - 1])) {
            *ln = winline[w];
            return snprintf(msg, len, "window %d opens before window %d in the op lines' time "
                            "order: windows come in order", w, w - 1), -1;
        }
    return 0;
}

int dmr_plan_read(FtDmrEntryPlan *p, const FtTape *micro, const FtTape *opt, const char *path,
                  const char *rank_line, int micro_batches, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the DMR plan: %s (dmr.plan)", path, strerror(errno));
        return -1;
    }
    char line[1024], copy[1024], msg[512] = "", *tok[24];
    int ln = 0, state = 0, nops = 0, v = 0, *lineof = NULL, *winline = NULL, capwin = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f)) BAD("line longer than %zu characters", sizeof line - 2);
        snprintf(copy, sizeof copy, "%s", line);
        int nt = split(copy, tok);
        if (nt == 0 || tok[0][0] == '#') continue;
        if (state == 0) {
            if (nt != 2 || strcmp(tok[0], "ftllm-dmr-plan") || (strcmp(tok[1], "1") && strcmp(tok[1], "2")))
                BAD("expected 'ftllm-dmr-plan 2' (or 1: not a DMR plan file, or another version)");
            v = tok[1][0] - '0';
        } else if (state == 1) {
            line[strcspn(line, "\r\n")] = 0;
            if (strcmp(line, rank_line))
                BAD("'%.120s': this plan is for another rank or layout (expected '%.120s')", line,
                    rank_line);
        } else if (state == 2) {
            int nm, no, M = 1;
            unsigned long long h = 0;
            if (nt != (v == 2 ? 8 : 6) || strcmp(tok[0], "tape") || sscanf(tok[1], "%llx", &h) != 1 ||
                strcmp(tok[2], "entries") || !int_of(tok[3], 0, 1 << 30, &nm) ||
                strcmp(tok[4], "optimizer") || !int_of(tok[5], 0, 1 << 30, &no) ||
                (v == 2 && (strcmp(tok[6], "micro_batches") || !int_of(tok[7], 1, 1 << 16, &M))))
                BAD("expected 'tape HASH entries N optimizer N%s'",
                    v == 2 ? " micro_batches M (M >= 1)" : "");
            if (h != dmr_tape_hash(micro, opt) || nm != micro->ne || no != opt->ne)
                BAD("the plan was made for other tapes (hash %016llx, %d + %d entries; this "
                    "rank's: %016llx, %d + %d): model, layout or train.ac differ (HINT: make it "
                    "again with ftllm plan)", h, nm, no,
                    (unsigned long long)dmr_tape_hash(micro, opt), micro->ne, opt->ne);
            if (M > 1 && micro_batches > 0 && M != micro_batches)
                BAD("the plan was made for %d micro-batches per step; this run has %d "
                    "(parallel.microbatches; HINT: make it again with ftllm plan)", M,
                    micro_batches);
            if ((long long)M * nm + no > (1 << 30)) BAD("micro_batches %d: too many slots", M);
            dmr_plan_alloc(p, nm, no, M, v == 2, 0);
            p->tape_hash = h, p->fwd_end = micro->fwd_end;
            lineof = calloc((size_t)p->n + 1, sizeof *lineof);
            FT_ASSERT(lineof);
        } else if (state == 3) {
            double mb, st, ov, pb = 0, ob = -1, ib = -1;
            int ps;
            /* [prebwd_ms X] [order_ms X] [idle_ms X] */
            bool opt_ok = nt >= 10 && nt <= 16 && nt % 2 == 0;
            for (int k = 10; opt_ok && k < nt; k += 2)
                opt_ok = k == 10 && !strcmp(tok[k], "prebwd_ms") ? num(tok[k + 1], &pb) && pb >= 0
                         : !strcmp(tok[k], "order_ms") && ob < 0 ? num(tok[k + 1], &ob) && ob >= 0
                         : !strcmp(tok[k], "idle_ms") && ib < 0  ? num(tok[k + 1], &ib) && ib >= 0
                                                                 : false;
            if (!opt_ok || strcmp(tok[0], "budget_mb") || !num(tok[1], &mb) ||
                strcmp(tok[2], "phases") || strcmp(tok[4], "profile_steps") ||
                !int_of(tok[5], 0, 1000000, &ps) || strcmp(tok[6], "step_ms") ||
                !num(tok[7], &st) || strcmp(tok[8], "overhead_ms") || !num(tok[9], &ov))
                BAD("expected 'budget_mb X phases P profile_steps N step_ms X overhead_ms X "
                    "[prebwd_ms X] [order_ms X] [idle_ms X]'");
            p->pre_bwd_s = pb / 1e3, p->has_order = ob >= 0, p->order_s = ob >= 0 ? ob / 1e3 : 0;
            p->has_idle = ib >= 0, p->idle_s = ib >= 0 ? ib / 1e3 : 0;
            p->phases = !strcmp(tok[3], "1")       ? PLAN_PHASE1
                        : !strcmp(tok[3], "1,2")   ? PLAN_PHASE1 | PLAN_PHASE2
                        : !strcmp(tok[3], "1,2,3") ? PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3
                        : !strcmp(tok[3], "paper")
                            ? PLAN_PHASE1 | PLAN_PHASE2 | PLAN_PHASE3 | PLAN_PAPER
                            : 0;
            if (!p->phases) BAD("phases '%s': expected 1, 1,2, 1,2,3 or paper", tok[3]);
            p->budget_mb = mb, p->profile_steps = ps, p->step_s = st / 1e3, p->overhead = ov / 1e3;
        } else if (!strcmp(tok[0], "window")) {
            if (nops > 0) BAD("window lines come before the op lines");
            if (read_window(p, micro, opt, v, tok, nt, msg, sizeof msg)) goto bad;
            if (p->nwin > capwin) {
                capwin = 2 * p->nwin;
                int *wl = realloc(winline, (size_t)capwin * sizeof *wl);
                FT_ASSERT(wl);
                winline = wl;
            }
            winline[p->nwin - 1] = ln;
        } else if (!strcmp(tok[0], "op")) {
            int s;
            if (read_op(p, micro, opt, v, tok, nt, &nops, &s, msg, sizeof msg)) goto bad;
            lineof[s] = ln;
        } else {
            BAD("'%s': expected a window or op line", tok[0]);
        }
        if (state < 4) state++;
    }
    if (ferror(f)) BAD("read error: %s", strerror(errno));
    if (state < 4) BAD("the file ends before its header is complete");
    if (read_done(p, micro, opt, lineof, winline, &ln, msg, sizeof msg)) goto bad;
    free(lineof), free(winline);
    fclose(f);
    return 0;
bad:
    fclose(f);
    free(lineof), free(winline);
    snprintf(err, errlen, "%s:%d: %s", path, ln, msg);
    dmr_plan_free(p);
    return -1;
}
