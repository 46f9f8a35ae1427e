/* deck.c: parsing, validation and printing of input decks (no MPI here; see deck_load.c).
 *
 * Lines are fed to libinih through our own reader, which counts lines (so every message carries
 * FILE:LINE), checks section headers itself (inih only reports keys, so an empty misspelled
 * section would otherwise pass silently) and rejects lines inih would truncate. Values are
 * converted and range-checked by one function per type, driven by the table in deck_keys.h.
 * Only the first error is kept: one line, the cause, and a suggestion when the user can fix it.
 */
#include "ftllm/deck.h"
#include "ftllm/parse_int.h"

#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define KEY_ENTRY_(sec, nm, type, def, lo, hi, choices, flags, help)                             \
    {#sec, #nm, FT_T_##type, def, lo, hi, choices, flags, help, offsetof(FtConfig, sec.nm)},
#define SECTION_ENTRIES_(sec, help) FT_KEYS_##sec(KEY_ENTRY_)
static const FtDeckKey g_keys[FT_NKEYS] = {FT_DECK_SECTIONS(SECTION_ENTRIES_)};

#define SECTION_NAME_(sec, help) {#sec, help},
static const struct {
    const char *name, *help;
} g_sections[] = {FT_DECK_SECTIONS(SECTION_NAME_)};
#define NSECTIONS ((int)(sizeof g_sections / sizeof g_sections[0]))

const FtDeckKey *deck_keys(int *nkeys)
{
    if (nkeys) *nkeys = FT_NKEYS;
    return g_keys;
}

const FtDeckKey *deck_find_key(const char *section, const char *name)
{
    for (int i = 0; i < FT_NKEYS; i++)
        if (!strcmp(g_keys[i].section, section) && !strcmp(g_keys[i].name, name)) return &g_keys[i];
    return NULL;
}

static int find_section(const char *name)
{
    for (int i = 0; i < NSECTIONS; i++)
        if (!strcmp(g_sections[i].name, name)) return i;
    return -1;
}

static void *value_ptr(FtConfig *cfg, const FtDeckKey *k) { return (char *)cfg + k->offset; }
static const void *cvalue_ptr(const FtConfig *cfg, const FtDeckKey *k)
{
    return (const char *)cfg + k->offset;
}

/* ---- suggestions ------------------------------------------------------------------------ */

/* Edit distance with adjacent transpositions (optimal string alignment), case-insensitive:
 * "modle" is one edit from "model". */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    int d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* Close enough to be a likely misspelling: at most a third of the longer name, at least 1. */
static int near_enough(const char *a, const char *b, int d)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t l = la > lb ? la : lb;
    int limit = (int)(l / 3);
    if (limit < 1) limit = 1;
    if (limit > 3) limit = 3;
    return d <= limit;
}

static const char *closest_section(const char *name)
{
    const char *best = NULL;
    int bestd = 99;
    for (int i = 0; i < NSECTIONS; i++) {
        int d = edit_distance(name, g_sections[i].name);
        if (d < bestd) bestd = d, best = g_sections[i].name;
    }
    return best && near_enough(name, best, bestd) ? best : NULL;
}

/* Closest key: same section first, then any section (a key put in the wrong section). */
static const FtDeckKey *closest_key(const char *section, const char *name)
{
    const FtDeckKey *best = NULL;
    int bestd = 99;
    for (int pass = 0; pass < 2 && !best; pass++) {
        for (int i = 0; i < FT_NKEYS; i++) {
            if ((pass == 0) != (strcmp(g_keys[i].section, section) == 0)) continue;
            int d = edit_distance(name, g_keys[i].name);
            if (d < bestd && near_enough(name, g_keys[i].name, d)) bestd = d, best = &g_keys[i];
        }
    }
    return best;
}

/* Makes a message one printable line: control characters (a newline inside a command-line
 * argument, a stray carriage return or escape byte in a deck) become '?'. */
static int one_line(char *msg)
{
    for (char *q = msg; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
    return -1;
}

/* ---- values ----------------------------------------------------------------------------- */

static void trim_copy(char *dst, size_t cap, const char *src)
{
    while (isspace((unsigned char)*src)) src++;
    size_t n = strlen(src);
    while (n > 0 && isspace((unsigned char)src[n - 1])) n--;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Prints at most 40 characters of a user's value, so a message stays one readable line. */
static const char *shorten(const char *v, char *buf, size_t cap)
{
    size_t n = strlen(v);
    if (n <= 40 || cap < 48) return v;
    snprintf(buf, cap, "%.37s...", v);
    return buf;
}

static void fmt_bound(double x, char *buf, size_t len)
{
    if (fabs(x) >= 1e15 && fabs(x) < 1e300)
        snprintf(buf, len, "%g", x);
    else if (x == floor(x) && fabs(x) < 1e15)
        snprintf(buf, len, "%.0f", x);
    else
        snprintf(buf, len, "%g", x);
}

static void range_text(const FtDeckKey *k, char *buf, size_t len)
{
    char lo[32], hi[32];
    fmt_bound(k->min, lo, sizeof lo);
    fmt_bound(k->max, hi, sizeof hi);
    snprintf(buf, len, "%s%s..%s%s", (k->flags & FT_KEY_GT_MIN) ? "(" : "[", lo, hi,
             (k->flags & FT_KEY_LT_MAX) ? ")" : "]");
}

static int in_range(const FtDeckKey *k, double x)
{
    if ((k->flags & FT_KEY_GT_MIN) ? !(x > k->min) : !(x >= k->min)) return 0;
    if ((k->flags & FT_KEY_LT_MAX) ? !(x < k->max) : !(x <= k->max)) return 0;
    return 1;
}

/* Index of word in a '|'-separated list (case-insensitive), or -1. */
static int choice_index(const char *choices, const char *word)
{
    size_t wl = strlen(word);
    int idx = 0;
    for (const char *p = choices; *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == wl && !strncasecmp(p, word, n)) return idx;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

static void choice_name(const char *choices, int idx, char *buf, size_t len)
{
    const char *p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) {
        snprintf(buf, len, "?");
        return;
    }
    const char *bar = strchr(p, '|');
    int n = bar ? (int)(bar - p) : (int)strlen(p);
    snprintf(buf, len, "%.*s", n, p);
}

/* Converts text to key k's type and checks its range; writes into cfg on success. The message
 * (without location) goes to err. */
static int set_value(FtConfig *cfg, const FtDeckKey *k, const char *raw, char *err, size_t errlen)
{
    char v[FT_DECK_STR_MAX + 2], sb[64];
    if (k->type == FT_T_STR) {
        trim_copy(v, sizeof v, raw);
        if (strlen(v) >= FT_DECK_STR_MAX) { /* v has room to show the excess */
            snprintf(err, errlen, "%s.%s: value is longer than %d characters", k->section, k->name,
                     FT_DECK_STR_MAX - 1);
            return -1;
        }
        memcpy(value_ptr(cfg, k), v, strlen(v) + 1);
        return 0;
    }
    trim_copy(v, sizeof v, raw);
    const char *shown = shorten(v, sb, sizeof sb);
    if (v[0] == '\0') {
        snprintf(err, errlen, "%s.%s: empty value", k->section, k->name);
        return -1;
    }
    if ((k->flags & FT_KEY_AUTO) && !strcasecmp(v, "auto")) {
        if (k->type == FT_T_INT) *(long long *)value_ptr(cfg, k) = FT_AUTO;
        else *(double *)value_ptr(cfg, k) = FT_AUTO;
        return 0;
    }
    char rb[80];
    range_text(k, rb, sizeof rb);
    const char *autohint = (k->flags & FT_KEY_AUTO) ? " or auto" : "";
    switch (k->type) {
    case FT_T_INT: {
        long long x = 0;
        FtIntParse r = ft_parse_int(v, LLONG_MIN, LLONG_MAX, &x);
        if (r == FT_INT_NOT_INT) {
            snprintf(err, errlen, "%s.%s: expected an integer%s, got '%s'", k->section, k->name,
                     autohint, shown);
            return -1;
        }
        if (r == FT_INT_RANGE || !in_range(k, (double)x)) {
            snprintf(err, errlen, "%s.%s = %s is out of range: expected an integer in %s%s",
                     k->section, k->name, shown, rb, autohint);
            return -1;
        }
        *(long long *)value_ptr(cfg, k) = x;
        return 0;
    }
    case FT_T_REAL: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        int hexlike = strchr(v, 'x') || strchr(v, 'X');
        if (end == v || *end != '\0' || hexlike || isnan(x)) {
            snprintf(err, errlen, "%s.%s: expected a real number%s, got '%s'", k->section, k->name,
                     autohint, shown);
            return -1;
        }
        if (errno == ERANGE && fabs(x) > 1.0) x = INFINITY; /* overflow: report as out of range */
        if (!isfinite(x) || !in_range(k, x)) {
            snprintf(err, errlen, "%s.%s = %s is out of range: expected a number in %s%s",
                     k->section, k->name, shown, rb, autohint);
            return -1;
        }
        if (errno == ERANGE) x = 0.0; /* underflow to a denormal or zero */
        *(double *)value_ptr(cfg, k) = x;
        return 0;
    }
    case FT_T_BOOL: {
        static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
        for (int i = 0; i < 4; i++) {
            if (!strcasecmp(v, yes[i])) return *(bool *)value_ptr(cfg, k) = true, 0;
            if (!strcasecmp(v, no[i])) return *(bool *)value_ptr(cfg, k) = false, 0;
        }
        snprintf(err, errlen, "%s.%s: expected true or false, got '%s'", k->section, k->name,
                 shown);
        return -1;
    }
    case FT_T_ENUM: {
        int idx = choice_index(k->choices, v);
        if (idx < 0) {
            snprintf(err, errlen, "%s.%s: expected one of %s, got '%s'", k->section, k->name,
                     k->choices, shown);
            return -1;
        }
        *(int *)value_ptr(cfg, k) = idx;
        return 0;
    }
    case FT_T_STR: break;
    }
    return -1;
}

void deck_format_value(const FtConfig *cfg, const FtDeckKey *k, char *buf, size_t len)
{
    const void *p = cvalue_ptr(cfg, k);
    switch (k->type) {
    case FT_T_INT: {
        long long x = *(const long long *)p;
        if ((k->flags & FT_KEY_AUTO) && x == FT_AUTO) snprintf(buf, len, "auto");
        else snprintf(buf, len, "%lld", x);
        break;
    }
    case FT_T_REAL: {
        double x = *(const double *)p;
        if ((k->flags & FT_KEY_AUTO) && x == FT_AUTO) {
            snprintf(buf, len, "auto");
            break;
        }
        /* the shortest text that reads back to the same double */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, len, "%.*g", prec, x);
            if (strtod(buf, NULL) == x) break;
        }
        break;
    }
    case FT_T_BOOL: snprintf(buf, len, "%s", *(const bool *)p ? "true" : "false"); break;
    case FT_T_ENUM: choice_name(k->choices, *(const int *)p, buf, len); break;
    case FT_T_STR: snprintf(buf, len, "%s", (const char *)p); break;
    }
}

/* ---- defaults --------------------------------------------------------------------------- */

int deck_defaults(FtConfig *cfg, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < FT_NKEYS; i++) {
        char e[FT_DECK_ERR_MAX];
        if (set_value(cfg, &g_keys[i], g_keys[i].def, e, sizeof e)) {
            snprintf(err, errlen, "internal: default of %s", e);
            return -1;
        }
    }
    return 0;
}

/* ---- locations -------------------------------------------------------------------------- */

static void where_set(const FtConfig *cfg, int id, char *buf, size_t len)
{
    const struct ft_key_src *s = &cfg->src[id];
    if (s->kind == FT_SRC_DECK) snprintf(buf, len, "%s:%d", cfg->path, s->line);
    else if (s->kind == FT_SRC_CMDLINE) snprintf(buf, len, "command line override %d", s->line);
    else snprintf(buf, len, "default");
}

/* Prefix of an error about key id: "deck.ini:12: " / "command line override 2: " /
 * "deck.ini: " (a default). */
static void error_prefix(const FtConfig *cfg, int id, char *buf, size_t len)
{
    const struct ft_key_src *s = &cfg->src[id];
    if (s->kind == FT_SRC_DECK) snprintf(buf, len, "%s:%d: ", cfg->path, s->line);
    else if (s->kind == FT_SRC_CMDLINE) snprintf(buf, len, "command line override %d: ", s->line);
    else snprintf(buf, len, "%s: ", cfg->path[0] ? cfg->path : "deck");
}

void deck_error_prefix(const FtConfig *cfg, int id, char *buf, size_t len)
{
    error_prefix(cfg, id, buf, len);
}

/* Rejects a non-default value of a key whose feature is not built yet. */
static int check_reserved(const FtConfig *cfg, const FtDeckKey *k, char *err, size_t errlen)
{
    if (!(k->flags & FT_KEY_RESERVED)) return 0;
    FtConfig *def = malloc(sizeof *def);
    if (!def) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char e[FT_DECK_ERR_MAX], a[FT_DECK_STR_MAX], b[FT_DECK_STR_MAX];
    int rc = 0;
    memset(def, 0, sizeof *def);
    set_value(def, k, k->def, e, sizeof e);
    deck_format_value(cfg, k, a, sizeof a);
    deck_format_value(def, k, b, sizeof b);
    if (strcmp(a, b)) {
        snprintf(err, errlen, "%s.%s = %s: not implemented yet (only the default '%s' is accepted)",
                 k->section, k->name, a, b);
        rc = -1;
    }
    free(def);
    return rc;
}

/* ---- parsing ---------------------------------------------------------------------------- */

struct parse_ctx {
    FtConfig *cfg;
    const char *p, *end;
    int line;
    int failed;
    char *err;
    size_t errlen;
    int seen_line[FT_NKEYS];
};

static void fail(struct parse_ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct parse_ctx *c, int line, const char *fmt, ...)
{
    if (c->failed) return;
    c->failed = line > 0 ? line : 1;
    int n = snprintf(c->err, c->errlen, "%s:%d: ", c->cfg->path, c->failed);
    if (n < 0 || (size_t)n >= c->errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* A "[name]" line: check the name against the known sections. */
static void check_section_line(struct parse_ctx *c, const char *s, size_t n)
{
    const char *close = memchr(s, ']', n);
    if (!close) {
        fail(c, c->line, "expected ']' to close the section name");
        return;
    }
    char name[64];
    size_t nl = (size_t)(close - s - 1);
    char raw[FT_DECK_STR_MAX];
    snprintf(raw, sizeof raw, "%.*s", (int)nl, s + 1);
    trim_copy(name, sizeof name, raw);
    for (const char *q = close + 1; q < s + n; q++) {
        if (*q == ';' || *q == '#') break;
        if (!isspace((unsigned char)*q)) {
            fail(c, c->line, "unexpected text after [%s]", name);
            return;
        }
    }
    if (find_section(name) >= 0) return;
    const char *best = closest_section(name);
    if (best)
        fail(c, c->line, "unknown section [%s] (did you mean [%s]?)", name, best);
    else
        fail(c, c->line, "unknown section [%s]; sections are: run model parallel train data dmr "
                         "spare checkpoint faults cluster perf",
             name);
}

/* libinih's line reader: one whole line per call, counted, checked for NUL bytes and length. */
static char *reader(char *str, int num, void *stream)
{
    struct parse_ctx *c = stream;
    if (c->p >= c->end) return NULL;
    const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
    size_t n = nl ? (size_t)(nl - c->p) + 1 : (size_t)(c->end - c->p);
    const char *s = c->p;
    c->p += n;
    c->line++;
    if (memchr(s, '\0', n)) {
        fail(c, c->line, "NUL byte in the deck (is this a text file?)");
        str[0] = '\n', str[1] = '\0';
        return str;
    }
    if (n - (nl ? 1 : 0) > (size_t)num - 2) { /* its characters, the newline not counted */
        fail(c, c->line, "line is longer than %d characters", num - 2);
        str[0] = '\n', str[1] = '\0';
        return str;
    }
    /* Leading blanks (and a UTF-8 byte-order mark) are dropped, so an indented key is a key:
     * inih would otherwise read an indented line as the continuation of the previous value. */
    if (c->line == 1 && n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) s += 3, n -= 3;
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    memcpy(str, s, n);
    str[n] = '\0';
    /* a section header: validate it here (inih reports only keys) */
    if (str[0] == '[') check_section_line(c, str, n);
    return str;
}

/* Applies name = value to section; shared by deck lines and command-line overrides. The
 * message (no location) goes to err. Returns the key id or -1. */
static int apply(FtConfig *cfg, const char *section, const char *name, const char *value,
                 char *err, size_t errlen)
{
    if (!section[0]) {
        const FtDeckKey *k = closest_key("", name);
        if (k && !strcmp(k->name, name))
            snprintf(err, errlen, "'%s' is outside any section; put it under [%s]", name,
                     k->section);
        else
            snprintf(err, errlen, "'%s' is outside any section; keys go under a [section]", name);
        return -1;
    }
    if (find_section(section) < 0) {
        const char *best = closest_section(section);
        if (best) snprintf(err, errlen, "unknown section [%s] (did you mean [%s]?)", section, best);
        else snprintf(err, errlen, "unknown section [%s]", section);
        return -1;
    }
    const FtDeckKey *k = deck_find_key(section, name);
    if (!k) {
        const FtDeckKey *best = closest_key(section, name);
        if (best && !strcmp(best->section, section))
            snprintf(err, errlen, "unknown key '%s' in [%s] (did you mean '%s'?)", name, section,
                     best->name);
        else if (best)
            snprintf(err, errlen, "unknown key '%s' in [%s] (did you mean [%s] %s?)", name,
                     section, best->section, best->name);
        else
            snprintf(err, errlen, "unknown key '%s' in [%s]; 'ftllm help deck' lists the keys",
                     name, section);
        return -1;
    }
    if (set_value(cfg, k, value, err, errlen)) return -1;
    if (check_reserved(cfg, k, err, errlen)) return -1;
    return (int)(k - g_keys);
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct parse_ctx *c = user;
    if (c->failed) return 1;
    char e[FT_DECK_ERR_MAX];
    char sec[64];
    trim_copy(sec, sizeof sec, section);
    int id = apply(c->cfg, sec, name, value, e, sizeof e);
    if (id < 0) {
        fail(c, c->line, "%s", e);
        return 1;
    }
    if (c->seen_line[id]) {
        fail(c, c->line, "%s.%s is set twice (first at line %d)", sec, name, c->seen_line[id]);
        return 1;
    }
    c->seen_line[id] = c->line;
    c->cfg->src[id] = (struct ft_key_src){FT_SRC_DECK, c->line};
    return 1;
}

/* Text of line n (1-based) of the deck, trimmed, for syntax messages. */
static void line_text(const char *text, size_t len, int n, char *buf, size_t cap)
{
    const char *p = text, *end = text + len;
    for (int i = 1; i < n && p < end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t m = nl ? (size_t)(nl - p) : (size_t)(end - p);
    char raw[FT_DECK_STR_MAX];
    snprintf(raw, sizeof raw, "%.*s", (int)(m < 200 ? m : 200), p);
    trim_copy(buf, cap, raw);
}

int deck_parse(FtConfig *cfg, const char *path, const char *text, size_t len, char *err,
               size_t errlen)
{
    if (deck_defaults(cfg, err, errlen)) return -1;
    snprintf(cfg->path, sizeof cfg->path, "%s", path);
    struct parse_ctx c = {.cfg = cfg, .p = text, .end = text + len, .err = err, .errlen = errlen};
    int rc = ini_parse_stream(reader, &c, handler, &c);
    if (c.failed) return one_line(err);
    if (rc == -2) {
        snprintf(err, errlen, "%s: out of memory while parsing", path);
        return -1;
    }
    if (rc != 0) {
        char lt[FT_DECK_STR_MAX], sb[64];
        line_text(text, len, rc, lt, sizeof lt);
        fail(&c, rc, "expected 'key = value', '[section]' or a comment, got '%s'",
             shorten(lt, sb, sizeof sb));
        return one_line(err);
    }
    return 0;
}

int deck_override(FtConfig *cfg, const char *arg, int index, char *err, size_t errlen)
{
    char sb[64];
    const char *shown = shorten(arg, sb, sizeof sb);
    const char *eq = strchr(arg, '=');
    const char *dot = strchr(arg, '.');
    if (!eq || !dot || dot > eq) {
        snprintf(err, errlen, "command line override %d: expected section.key=value, got '%s'",
                 index, shown);
        return one_line(err);
    }
    char section[64], name[64], raw[64];
    snprintf(raw, sizeof raw, "%.*s", (int)(dot - arg < 63 ? dot - arg : 63), arg);
    trim_copy(section, sizeof section, raw);
    snprintf(raw, sizeof raw, "%.*s", (int)(eq - dot - 1 < 63 ? eq - dot - 1 : 63), dot + 1);
    trim_copy(name, sizeof name, raw);
    char e[FT_DECK_ERR_MAX];
    int id = apply(cfg, section, name, eq + 1, e, sizeof e);
    if (id < 0) {
        snprintf(err, errlen, "command line override %d '%s': %s", index, shown, e);
        return one_line(err);
    }
    cfg->src[id] = (struct ft_key_src){FT_SRC_CMDLINE, index};
    return 0;
}

/* ---- cross-key checks ------------------------------------------------------------------- */

/* Reports at whichever of the two keys was set last by the user (the likelier culprit). */
static int cross_fail(const FtConfig *cfg, int a, int b, char *err, size_t errlen,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int cross_fail(const FtConfig *cfg, int a, int b, char *err, size_t errlen,
                      const char *fmt, ...)
{
    int at = a;
    const struct ft_key_src *sa = &cfg->src[a], *sb = &cfg->src[b];
    if (sb->kind > sa->kind || (sb->kind == sa->kind && sb->line > sa->line)) at = b;
    char pre[FT_DECK_STR_MAX + 64], other[FT_DECK_STR_MAX + 64], msg[FT_DECK_ERR_MAX];
    error_prefix(cfg, at, pre, sizeof pre);
    where_set(cfg, at == a ? b : a, other, sizeof other);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s%s (%s.%s: %s)", pre, msg, g_keys[at == a ? b : a].section,
             g_keys[at == a ? b : a].name, other);
    return one_line(err);
}

#define KID(sec, name) FT_KEY_##sec##_##name

/* perf.papi_events: NAME,NAME,... with no blank inside a name, no empty or repeated name, at
 * most FT_DECK_EVENTS_MAX (counters.h's FT_COUNTERS_MAX); which names exist is PAPI's call. */
#define FT_DECK_EVENTS_MAX 16
static int check_papi_events(const FtConfig *cfg, char *err, size_t errlen)
{
    const char *list = cfg->perf.papi_events;
    char names[FT_DECK_EVENTS_MAX][FT_DECK_STR_MAX], pre[FT_DECK_STR_MAX + 64];
    char msg[FT_DECK_ERR_MAX];
    int n = 0;
    msg[0] = 0;
    if (!list[0]) return 0;
    for (const char *p = list;; p++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char raw[FT_DECK_STR_MAX], name[FT_DECK_STR_MAX];
        snprintf(raw, sizeof raw, "%.*s", (int)len, p);
        trim_copy(name, sizeof name, raw);
        if (!name[0]) {
            snprintf(msg, sizeof msg, "perf.papi_events: empty event name in '%s' (expected "
                     "NAME,NAME,..., e.g. perf::TASK-CLOCK,perf::PAGE-FAULTS)", list);
            break;
        }
        if (strcspn(name, " \t") != strlen(name)) {
            snprintf(msg, sizeof msg, "perf.papi_events: '%s' is not one event name (names are "
                     "separated by commas)", name);
            break;
        }
        for (int k = 0; k < n && !msg[0]; k++)
            if (!strcmp(names[k], name))
                snprintf(msg, sizeof msg, "perf.papi_events: event '%s' is listed twice", name);
        if (msg[0]) break;
        if (n == FT_DECK_EVENTS_MAX) {
            snprintf(msg, sizeof msg, "perf.papi_events: more than %d events", FT_DECK_EVENTS_MAX);
            break;
        }
        snprintf(names[n++], sizeof names[0], "%s", name);
        if (!end) break;
        p = end;
    }
    if (!msg[0]) return 0;
    error_prefix(cfg, KID(perf, papi_events), pre, sizeof pre);
    snprintf(err, errlen, "%s%s", pre, msg);
    return one_line(err);
}

bool deck_spare_on(const FtConfig *cfg)
{
    return cfg->spare.r > 0 || cfg->spare.r == FT_AUTO || cfg->spare.spares > 0;
}

int deck_check(const FtConfig *cfg, int nranks, char *err, size_t errlen)
{
    const struct ft_cfg_model *m = &cfg->model;
    const struct ft_cfg_parallel *p = &cfg->parallel;
    if (m->channels % m->heads)
        return cross_fail(cfg, KID(model, channels), KID(model, heads), err, errlen,
                          "model.channels = %lld is not a multiple of model.heads = %lld",
                          m->channels, m->heads);
    if (m->kv_heads && m->heads % m->kv_heads)
        return cross_fail(cfg, KID(model, kv_heads), KID(model, heads), err, errlen,
                          "model.heads = %lld is not a multiple of model.kv_heads = %lld (each "
                          "key/value head serves a group of query heads)", m->heads,
                          m->kv_heads);
    if (m->heads % p->tp)
        return cross_fail(cfg, KID(parallel, tp), KID(model, heads), err, errlen,
                          "model.heads = %lld cannot be split over parallel.tp = %lld ranks",
                          m->heads, p->tp);
    if (m->layers % p->pp)
        return cross_fail(cfg, KID(parallel, pp), KID(model, layers), err, errlen,
                          "model.layers = %lld cannot be split over parallel.pp = %lld stages",
                          m->layers, p->pp);
    if (cfg->train.warmup > cfg->train.steps && cfg->train.steps > 0)
        return cross_fail(cfg, KID(train, warmup), KID(train, steps), err, errlen,
                          "train.warmup = %lld is longer than the run (train.steps = %lld)",
                          cfg->train.warmup, cfg->train.steps);
    /* ---- training engine ---- */
    if (cfg->run.precision == FT_PRECISION_BF16 && cfg->run.backend != FT_BACKEND_CUDA)
        return cross_fail(cfg, KID(run, precision), KID(run, backend), err, errlen,
                          "run.precision = bf16 needs run.backend = cuda (the CPU backend "
                          "computes in fp32 only)");
    if (p->warmup_extra > 0 && p->schedule != 0 /* 1f1b: deck order, pipeline.h FT_PIPE_1F1B */)
        return cross_fail(cfg, KID(parallel, warmup_extra), KID(parallel, schedule), err, errlen,
                          "parallel.warmup_extra = %lld needs parallel.schedule = 1f1b (GPipe runs "
                          "every forward first anyway)", (long long)p->warmup_extra);
    if (p->device_comm == FT_DEVCOMM_KEY_NCCL && cfg->run.backend != FT_BACKEND_CUDA)
        return cross_fail(cfg, KID(parallel, device_comm), KID(run, backend), err, errlen,
                          "parallel.device_comm = nccl needs run.backend = cuda (NCCL moves "
                          "device buffers; the CPU backend's go over MPI)");
    if (cfg->dmr.moe_dynamic && cfg->dmr.mode != FT_DMR_PLANNED)
        return cross_fail(cfg, KID(dmr, moe_dynamic), KID(dmr, mode), err, errlen,
                          "dmr.moe_dynamic = true needs dmr.mode = planned (it decides the "
                          "expert ops' deferred checks beside the plan's)");
    if (cfg->dmr.leftovers != FT_DMR_LEFT_NAIVE && cfg->dmr.mode != FT_DMR_PLANNED)
        return cross_fail(cfg, KID(dmr, leftovers), KID(dmr, mode), err, errlen,
                          "dmr.leftovers = end needs dmr.mode = planned (leftovers are the "
                          "checks a plan's windows do not hold)");
    if (!cfg->dmr.chain && cfg->dmr.mode != FT_DMR_PLANNED)
        return cross_fail(cfg, KID(dmr, chain), KID(dmr, mode), err, errlen,
                          "dmr.chain = false needs dmr.mode = planned (chains are of deferred "
                          "checks)");
    if (cfg->train.seq_len > m->seq_len)
        return cross_fail(cfg, KID(train, seq_len), KID(model, seq_len), err, errlen,
                          "train.seq_len = %lld exceeds model.seq_len = %lld (the size of the "
                          "position table)", cfg->train.seq_len, m->seq_len);
    /* ---- mixture of experts ---- */
    if (p->ep > 1 && m->experts == 0)
        return cross_fail(cfg, KID(parallel, ep), KID(model, experts), err, errlen,
                          "parallel.ep = %lld splits experts over ranks, but the model is dense "
                          "(model.experts = 0)", p->ep);
    if (m->experts > 0 && m->experts % p->ep)
        return cross_fail(cfg, KID(parallel, ep), KID(model, experts), err, errlen,
                          "model.experts = %lld cannot be split over parallel.ep = %lld ranks",
                          m->experts, p->ep);
    if (m->experts > 0 && m->top_k > m->experts)
        return cross_fail(cfg, KID(model, top_k), KID(model, experts), err, errlen,
                          "model.top_k = %lld exceeds model.experts = %lld", m->top_k,
                          m->experts);
    if (m->experts > 0 && m->init[0])
        return cross_fail(cfg, KID(model, init), KID(model, experts), err, errlen,
                          "model.init is an llm.c GPT-2 file (a dense model); a mixture-of-"
                          "experts model (model.experts = %lld) starts from random weights or "
                          "a checkpoint", m->experts);
    if (m->experts > 0 && cfg->run.save_model[0])
        return cross_fail(cfg, KID(run, save_model), KID(model, experts), err, errlen,
                          "run.save_model writes an llm.c GPT-2 file (a dense model); a mixture-"
                          "of-experts model (model.experts = %lld) is saved by checkpoints",
                          m->experts);
    /* ---- end of mixture of experts ---- */
    /* ---- SPARe ---- */
    const struct ft_cfg_spare *sp = &cfg->spare;
    /* spare.r = auto: a number from 1 to dp before the grid (train_spare_auto) */
    bool spare_on = sp->r > 0 || sp->r == FT_AUTO; /* deck_spare_on, less the spares */
    char rbuf[32];
    if (sp->r == FT_AUTO) snprintf(rbuf, sizeof rbuf, "auto");
    else snprintf(rbuf, sizeof rbuf, "%lld", sp->r);
    if (sp->r > p->dp)
        return cross_fail(cfg, KID(spare, r), KID(parallel, dp), err, errlen,
                          "spare.r = %lld exceeds parallel.dp = %lld (a replica stacks at most "
                          "one shard of each replica)", sp->r, p->dp);
    if (sp->spares > 0 && (!spare_on || p->dp < 2))
        return cross_fail(cfg, KID(spare, spares), !spare_on ? KID(spare, r) : KID(parallel, dp),
                          err, errlen, "spare.spares = %lld needs SPARe (spare.r >= 1 or auto, "
                          "here %s) and parallel.dp >= 2 (here %lld): a spare copies its state "
                          "from a live replica", sp->spares, rbuf, p->dp);
    /* ---- end of SPARe ---- */
    /* ---- end of training engine ---- */
    /* ---- dmr ---- */
    /* ---- end of dmr ---- */
    /* ---- cluster: `optimize` / `simulate` (analytic, sim) ---- */
    const struct ft_cfg_cluster *cl = &cfg->cluster;
    if (cl->gpus_per_replica > cl->gpus)
        return cross_fail(cfg, KID(cluster, gpus_per_replica), KID(cluster, gpus), err, errlen,
                          "cluster.gpus_per_replica = %lld exceeds cluster.gpus = %lld",
                          cl->gpus_per_replica, cl->gpus);
    if (cl->gpus % cl->gpus_per_replica)
        return cross_fail(cfg, KID(cluster, gpus), KID(cluster, gpus_per_replica), err, errlen,
                          "cluster.gpus = %lld is not a multiple of cluster.gpus_per_replica = "
                          "%lld (the cluster is made of whole replicas)",
                          cl->gpus, cl->gpus_per_replica);
    if (cl->r != FT_AUTO && cl->r > cl->gpus / cl->gpus_per_replica)
        return cross_fail(cfg, KID(cluster, r), KID(cluster, gpus), err, errlen,
                          "cluster.r = %lld exceeds the %lld replicas (cluster.gpus / "
                          "cluster.gpus_per_replica)", cl->r, cl->gpus / cl->gpus_per_replica);
    if (cl->interval != FT_AUTO && cl->interval > cl->steps)
        return cross_fail(cfg, KID(cluster, interval), KID(cluster, steps), err, errlen,
                          "cluster.interval = %lld steps is longer than the run (cluster.steps "
                          "= %lld)", cl->interval, cl->steps);
    if (cl->spare_blocks != FT_AUTO && cl->spare_blocks > cl->blocks_per_zone)
        return cross_fail(cfg, KID(cluster, spare_blocks), KID(cluster, blocks_per_zone), err,
                          errlen, "cluster.spare_blocks = %lld is more spares than blocks "
                          "(cluster.blocks_per_zone = %lld)", cl->spare_blocks,
                          cl->blocks_per_zone);
    if (cl->spare_trays != FT_AUTO && cl->spare_trays >= cl->trays_per_block)
        return cross_fail(cfg, KID(cluster, spare_trays), KID(cluster, trays_per_block), err,
                          errlen, "cluster.spare_trays = %lld leaves no tray in use "
                          "(cluster.trays_per_block = %lld)", cl->spare_trays,
                          cl->trays_per_block);
    /* ---- end of cluster ---- */
    if (check_papi_events(cfg, err, errlen)) return -1;
    if (nranks > 0) {
        long double world = (long double)p->tp * p->pp * (p->dp + cfg->spare.spares) * p->ep;
        if (world != nranks) {
            /* blame the last-set of the four widths */
            int ids[4] = {KID(parallel, tp), KID(parallel, pp), KID(parallel, dp),
                          KID(parallel, ep)};
            int at = ids[0];
            for (int i = 1; i < 4; i++) {
                const struct ft_key_src *s = &cfg->src[ids[i]], *b = &cfg->src[at];
                if (s->kind > b->kind || (s->kind == b->kind && s->line > b->line)) at = ids[i];
            }
            char pre[FT_DECK_STR_MAX + 64];
            error_prefix(cfg, at, pre, sizeof pre);
            if (cfg->spare.spares > 0)
                snprintf(err, errlen,
                         "%sthe layout (dp + spare.spares) x pp x ep x tp = (%lld + %lld) x %lld "
                         "x %lld x %lld = %.0Lf rank%s, but the job has %d (HINT: change "
                         "parallel.dp, spare.spares or mpiexec -n)", pre, p->dp,
                         cfg->spare.spares, p->pp, p->ep, p->tp, world, world == 1 ? "" : "s",
                         nranks);
            else
                snprintf(err, errlen,
                         "%sthe layout dp x pp x ep x tp = %lld x %lld x %lld x %lld = %.0Lf "
                         "rank%s, but the job has %d (HINT: change parallel.dp or mpiexec -n)",
                         pre, p->dp, p->pp, p->ep, p->tp, world, world == 1 ? "" : "s", nranks);
            return one_line(err);
        }
    }
    return 0;
}

int deck_check_trainable(const FtConfig *cfg, char *err, size_t errlen)
{
    const struct ft_cfg_model *m = &cfg->model;
    int id = -1;
    char val[64] = "";
    if (m->ffn && m->ffn != 4 * m->channels)
        id = KID(model, ffn), snprintf(val, sizeof val, "%lld", m->ffn);
    else if (m->kv_heads && m->kv_heads != m->heads)
        id = KID(model, kv_heads), snprintf(val, sizeof val, "%lld", m->kv_heads);
    else if (m->mlp != FT_MLP_GELU)
        id = KID(model, mlp), snprintf(val, sizeof val, "swiglu");
    if (id < 0) return 0;
    char pre[FT_DECK_STR_MAX + 64];
    error_prefix(cfg, id, pre, sizeof pre);
    snprintf(err, errlen, "%s%s.%s = %s: the trainer builds the GPT-2 block (MLP 4 x "
             "model.channels with GELU, one key/value head per head); this shape is for "
             "`ftllm plan --predict` (HINT: remove the key to train)", pre, g_keys[id].section,
             g_keys[id].name, val);
    return one_line(err);
}

/* ---- printing and help ------------------------------------------------------------------ */

/* The keys of cfg (those whose value differs from def's when def is given), by section, each
 * commented with where its value came from. */
static void print_keys(FILE *out, const FtConfig *cfg, const FtConfig *def)
{
    const char *cur = "";
    for (int i = 0; i < FT_NKEYS; i++) {
        const FtDeckKey *k = &g_keys[i];
        char v[FT_DECK_STR_MAX], w[FT_DECK_STR_MAX + 64], line[FT_DECK_STR_MAX * 2];
        deck_format_value(cfg, k, v, sizeof v);
        if (def) {
            char d[FT_DECK_STR_MAX];
            deck_format_value(def, k, d, sizeof d);
            if (!strcmp(v, d)) continue;
        }
        if (strcmp(cur, k->section)) {
            fprintf(out, "\n[%s]\n", k->section);
            cur = k->section;
        }
        where_set(cfg, i, w, sizeof w);
        snprintf(line, sizeof line, "%s = %s", k->name, v);
        fprintf(out, "%-36s ; %s\n", line, w);
    }
}

void deck_print(FILE *out, const FtConfig *cfg)
{
    fprintf(out, "; resolved configuration of %s\n", cfg->path[0] ? cfg->path : "(defaults)");
    print_keys(out, cfg, NULL);
}

void deck_print_changed(FILE *out, const FtConfig *cfg)
{
    FtConfig *def = malloc(sizeof *def);
    char e[FT_DECK_ERR_MAX];
    if (!def || deck_defaults(def, e, sizeof e)) { /* the tests keep the defaults valid */
        free(def);
        deck_print(out, cfg);
        return;
    }
    fprintf(out, "; resolved configuration of %s: the keys that differ from the defaults\n",
            cfg->path[0] ? cfg->path : "(defaults)");
    print_keys(out, cfg, def);
    fprintf(out, "; end of the keys that differ from the defaults\n");
    free(def);
}

int deck_save(const FtConfig *cfg, const char *path, char *err, size_t errlen)
{
    char tmp[FT_DECK_STR_MAX * 2 + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write the resolved deck: %s", path, strerror(errno));
        return -1;
    }
    deck_print(f, cfg);
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {
        snprintf(err, errlen, "%s: cannot write the resolved deck: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

static const char *type_name(const FtDeckKey *k)
{
    switch (k->type) {
    case FT_T_INT: return "integer";
    case FT_T_REAL: return "real";
    case FT_T_BOOL: return "bool";
    case FT_T_STR: return "string";
    case FT_T_ENUM: return "choice";
    }
    return "?";
}

static void allowed_text(const FtDeckKey *k, char *buf, size_t len)
{
    char rb[80];
    switch (k->type) {
    case FT_T_INT:
    case FT_T_REAL:
        range_text(k, rb, sizeof rb);
        snprintf(buf, len, "%s%s", rb, (k->flags & FT_KEY_AUTO) ? " or auto" : "");
        break;
    case FT_T_BOOL: snprintf(buf, len, "true|false"); break;
    case FT_T_ENUM: snprintf(buf, len, "%s", k->choices); break;
    case FT_T_STR: snprintf(buf, len, "up to %d chars", FT_DECK_STR_MAX - 1); break;
    }
}

void deck_help(FILE *out, bool markdown)
{
    if (markdown) {
        fprintf(out, "# Input deck keys\n\n"
                     "Generated by `ftllm help deck --markdown` from `include/ftllm/deck_keys.h`; "
                     "`make test` checks that it is current.\n\n"
                     "A deck is an INI file: `[section]` headers, `key = value` lines, comments "
                     "starting with `;` or `#`. Any key can be overridden after the deck on the "
                     "command line: `ftllm train DECK section.key=value ...`. Unknown keys, wrong "
                     "types and out-of-range values are errors (`FILE:LINE: message`). Keys marked "
                     "*reserved* belong to features not built yet: only their default is "
                     "accepted.\n");
    } else {
        fprintf(out, "Input deck keys (INI: [section] then key = value; override with "
                     "section.key=value after the deck)\n");
    }
    const char *cur = "";
    for (int i = 0; i < FT_NKEYS; i++) {
        const FtDeckKey *k = &g_keys[i];
        if (strcmp(cur, k->section)) {
            cur = k->section;
            int s = find_section(cur);
            if (markdown)
                fprintf(out, "\n## [%s]\n\n%s.\n\n| key | type | default | allowed | meaning |\n"
                             "|---|---|---|---|---|\n",
                        cur, g_sections[s].help);
            else
                fprintf(out, "\n[%s]  %s\n", cur, g_sections[s].help);
        }
        char allowed[128];
        allowed_text(k, allowed, sizeof allowed);
        const char *res = (k->flags & FT_KEY_RESERVED) ? " (reserved: not implemented yet)" : "";
        if (markdown)
            fprintf(out, "| `%s` | %s | `%s` | %s | %s%s |\n", k->name, type_name(k), k->def,
                    allowed, k->help, res);
        else
            fprintf(out, "  %-18s %-8s default %-18s %s\n  %-18s %s%s\n", k->name, type_name(k),
                    k->def[0] ? k->def : "\"\"", allowed, "", k->help, res);
    }
}

void deck_free(FtConfig *cfg)
{
    free(cfg->text);
    cfg->text = NULL;
    cfg->text_len = 0;
}
