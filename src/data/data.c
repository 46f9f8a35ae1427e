/* data.c: reading llm.c token shards and serving numbered sequences (see data.h).
 *
 * Key decisions:
 *  - Files are mmapped read-only, never copied: a dataset of billions of tokens costs address
 *    space, and the page cache is shared by the ranks of a node. Every file is validated at open
 *    (header, size against the token count, every token < vocab), so a bad byte is reported
 *    once, naming the file and the token offset, and never surfaces as a crash mid-run.
 *  - The files (sorted by name with strcmp, so every rank and every locale sees one order) form
 *    one token stream; sequence r of an epoch starts at stream token base + r*T and may run on
 *    into the next file.
 *  - Shuffling is a keyed pseudo-random permutation of [0, n) per epoch: a 6-round Feistel
 *    network on the smallest even bit width covering n, with cycle walking to stay inside
 *    [0, n); the round function is splitmix64's finalizer keyed from (seed, epoch, round).
 *    Unlike a stored Fisher-Yates table it needs no memory and no per-epoch setup, so
 *    data_sequence stays a const, thread-safe, O(1) pure function of idx: any SPARe replica,
 *    any restarted job, can ask for any sequence of any epoch directly. Cycle walking takes
 *    fewer than 4 Feistel evaluations on average (the domain is < 4n).
 *  - A FtData is a view (base token, number of sequences, end token) on a reference-counted
 *    set of mapped files, so a validation tail (data_split_tail) shares the mapping.
 *  - Tokens are stored little-endian (llm.c writes host order on x86); this file assumes a
 *    little-endian host. A file changed or truncated under a running job is not detected
 *    (reading a vanished page raises SIGBUS): shards are inputs, not scratch files. */
#include "ftllm/data.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftllm/deck.h"
#include "ftllm/log.h"

#define HEADER_BYTES ((size_t)FT_DATA_HEADER_INTS * sizeof(int32_t))
#define FEISTEL_ROUNDS 6

struct shard {
    char *path;
    const uint16_t *tok; /* ntok tokens, inside the mapping */
    uint64_t ntok;
    void *map;
    size_t maplen;
};

/* The mapped files, shared by the views on them. */
struct shards {
    int refs;
    int n;
    struct shard *s;
    uint64_t *start; /* n+1 prefix sums: file i holds stream tokens [start[i], start[i+1]) */
    uint64_t ntok;
    char glob[FT_DECK_STR_MAX];
};

struct ft_data {
    struct shards *sh;
    int T;
    bool shuffle;
    uint64_t key;  /* data-order key derived from the seed */
    uint64_t base; /* stream token where sequence 0 starts */
    uint64_t nseq; /* sequences per epoch */
    uint64_t end;  /* stream tokens [base, end) belong to this view */
    int half;      /* Feistel half width in bits */
    uint64_t mask; /* (1 << half) - 1 */
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    for (char *p = err; *p; p++) /* messages stay one line */
        if (*p == '\n' || *p == '\r') *p = ' ';
}

/* splitmix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer. */
static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Sets the Feistel width for the view's nseq. */
static void view_set_nseq(FtData *d, uint64_t nseq)
{
    d->nseq = nseq;
    int bits = 0;
    while (bits < 64 && (1ull << bits) < nseq) bits++;
    if (bits & 1) bits++;
    if (bits < 2) bits = 2;
    d->half = bits / 2;
    d->mask = (d->half >= 64) ? ~0ull : ((1ull << d->half) - 1);
}

/* The epoch's permutation of [0, nseq) at r. */
static uint64_t permute(const FtData *d, uint64_t epoch, uint64_t r)
{
    if (d->nseq <= 1) return 0;
    uint64_t ek = mix64(d->key ^ mix64(epoch));
    uint64_t rk[FEISTEL_ROUNDS];
    for (int i = 0; i < FEISTEL_ROUNDS; i++) rk[i] = mix64(ek + (uint64_t)(i + 1) * 0xd1b54a32d192ed03ull);
    uint64_t x = r;
    do { /* cycle walking: r < nseq lies on a cycle of the domain permutation, so this ends */
        uint64_t L = (x >> d->half) & d->mask, R = x & d->mask;
        for (int i = 0; i < FEISTEL_ROUNDS; i++) {
            uint64_t t = L ^ (mix64(R ^ rk[i]) & d->mask);
            L = R;
            R = t;
        }
        x = (L << d->half) | R;
    } while (x >= d->nseq);
    return x;
}

uint64_t data_stream_offset(const FtData *d, uint64_t idx)
{
    uint64_t epoch = idx / d->nseq, r = idx % d->nseq;
    if (d->shuffle) r = permute(d, epoch, r);
    return d->base + r * (uint64_t)d->T;
}

/* File holding stream token p (< ntok): the last i with start[i] <= p (never an empty file). */
static int shard_of(const struct shards *sh, uint64_t p)
{
    int lo = 0, hi = sh->n; /* start[lo] <= p < start[hi] */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (sh->start[mid] <= p) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Copies n stream tokens starting at p (p + n <= ntok) into out, across files. */
static void copy_stream(const struct shards *sh, uint64_t p, size_t n, int *out)
{
    int f = shard_of(sh, p);
    while (n > 0) {
        const struct shard *s = &sh->s[f];
        uint64_t off = p - sh->start[f];
        size_t take = (size_t)(s->ntok - off < n ? s->ntok - off : n);
        const uint16_t *src = s->tok + off;
        for (size_t i = 0; i < take; i++) out[i] = src[i];
        out += take;
        n -= take;
        p += take;
        f++;
    }
}

void data_sequence(const FtData *d, uint64_t idx, int *tokens)
{
    uint64_t p = data_stream_offset(d, idx);
    FT_ASSERT(p + (uint64_t)d->T + 1 <= d->end);
    copy_stream(d->sh, p, (size_t)d->T + 1, tokens);
}

void data_batch(const FtData *d, uint64_t first, int B, int *inputs, int *targets)
{
    size_t T = (size_t)d->T;
    for (int b = 0; b < B; b++) {
        uint64_t p = data_stream_offset(d, first + (uint64_t)b);
        FT_ASSERT(p + T + 1 <= d->end);
        copy_stream(d->sh, p, T, inputs + (size_t)b * T);
        copy_stream(d->sh, p + 1, T, targets + (size_t)b * T);
    }
}

uint64_t data_num_sequences(const FtData *d) { return d->nseq; }
uint64_t data_num_tokens(const FtData *d) { return d->sh->ntok; }
int data_seq_len(const FtData *d) { return d->T; }
int data_num_files(const FtData *d) { return d->sh->n; }

void data_locate(const FtData *d, uint64_t idx, char *buf, size_t len)
{
    uint64_t p = data_stream_offset(d, idx);
    int f = shard_of(d->sh, p);
    snprintf(buf, len, "%s:token %llu", d->sh->s[f].path,
             (unsigned long long)(p - d->sh->start[f]));
}

static void shards_release(struct shards *sh)
{
    if (!sh || --sh->refs > 0) return;
    for (int i = 0; i < sh->n; i++) {
        if (sh->s[i].map) munmap(sh->s[i].map, sh->s[i].maplen);
        free(sh->s[i].path);
    }
    free(sh->s);
    free(sh->start);
    free(sh);
}

void data_close(FtData *d)
{
    if (!d) return;
    shards_release(d->sh);
    free(d);
}

/* First token >= vocab in tok[0..n), or n. Block maxima keep the common path vectorizable. */
static uint64_t first_bad_token(const uint16_t *tok, uint64_t n, int vocab)
{
    if (vocab > 65535) return n;
    const uint64_t blk = 4096;
    for (uint64_t b = 0; b < n; b += blk) {
        uint64_t e = b + blk < n ? b + blk : n;
        uint16_t mx = 0;
        for (uint64_t i = b; i < e; i++) mx = tok[i] > mx ? tok[i] : mx;
        if (mx < vocab) continue;
        for (uint64_t i = b; i < e; i++)
            if (tok[i] >= vocab) return i;
    }
    return n;
}

/* Opens, checks and maps one file into s. Returns 0, or -1 with err set. */
static int shard_open(struct shard *s, const char *path, int vocab, char *err, size_t errlen)
{
    int rc = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* O_NONBLOCK: a FIFO must not hang */
    if (fd < 0) {
        seterr(err, errlen, "%s: cannot open the token shard: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        seterr(err, errlen, "%s: cannot stat the token shard: %s", path, strerror(errno));
        goto out_close;
    }
    if (S_ISDIR(st.st_mode)) {
        seterr(err, errlen, "%s: is a directory, expected a token shard (llm.c .bin file)", path);
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        seterr(err, errlen, "%s: not a regular file, expected a token shard (llm.c .bin file)",
               path);
        goto out_close;
    }
    size_t size = (size_t)st.st_size;
    int32_t hdr[FT_DATA_HEADER_INTS];
    ssize_t got = size >= HEADER_BYTES ? pread(fd, hdr, HEADER_BYTES, 0) : 0;
    if (got < 0) {
        seterr(err, errlen, "%s: cannot read the header: %s", path, strerror(errno));
        goto out_close;
    }
    if (size < HEADER_BYTES || (size_t)got != HEADER_BYTES) {
        seterr(err, errlen,
               "%s: truncated header: the file has %zu bytes, a token shard starts with a "
               "header of %zu bytes (256 int32)",
               path, size, HEADER_BYTES);
        goto out_close;
    }
    if (hdr[0] != FT_DATA_MAGIC) {
        seterr(err, errlen, "%s: bad magic %d, expected %d (an llm.c token shard)%s", path,
               (int)hdr[0], FT_DATA_MAGIC,
               hdr[0] == FT_DATA_MODEL_MAGIC ? "; this is an llm.c model file" : "");
        goto out_close;
    }
    if (hdr[1] != FT_DATA_VERSION) {
        seterr(err, errlen, "%s: unsupported token shard version %d, expected %d", path,
               (int)hdr[1], FT_DATA_VERSION);
        goto out_close;
    }
    if (hdr[2] < 0) {
        seterr(err, errlen, "%s: negative token count %d in the header", path, (int)hdr[2]);
        goto out_close;
    }
    uint64_t ntok = (uint64_t)hdr[2];
    uint64_t want = HEADER_BYTES + 2 * ntok;
    if ((uint64_t)size != want) {
        seterr(err, errlen,
               "%s: the header says %llu tokens (%llu bytes) but the file has %zu bytes (%s)",
               path, (unsigned long long)ntok, (unsigned long long)want, size,
               (uint64_t)size < want ? "truncated" : "trailing bytes after the tokens");
        goto out_close;
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        seterr(err, errlen, "%s: cannot map the token shard: %s", path, strerror(errno));
        goto out_close;
    }
    const uint16_t *tok = (const uint16_t *)((const char *)map + HEADER_BYTES);
    uint64_t bad = first_bad_token(tok, ntok, vocab);
    if (bad < ntok) {
        seterr(err, errlen,
               "%s: token id %u at token offset %llu (byte %llu) is out of range: expected "
               "< vocab %d",
               path, (unsigned)tok[bad], (unsigned long long)bad,
               (unsigned long long)(HEADER_BYTES + 2 * bad), vocab);
        munmap(map, size);
        goto out_close;
    }
    s->map = map;
    s->maplen = size;
    s->tok = tok;
    s->ntok = ntok;
    rc = 0;
out_close:
    close(fd);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

FtData *data_open(const char *glob_pat, int T, int vocab, bool shuffle, uint64_t seed, char *err,
                  size_t errlen)
{
    FtData *d = NULL;
    struct shards *sh = NULL;
    glob_t g;
    memset(&g, 0, sizeof g);
    if (T < 1 || vocab < 1) {
        seterr(err, errlen, "%s: bad sequence length %d or vocab %d", glob_pat, T, vocab);
        return NULL;
    }
    if (!glob_pat || !*glob_pat) {
        seterr(err, errlen, "token shard glob is empty");
        return NULL;
    }
    int grc = glob(glob_pat, GLOB_NOSORT, NULL, &g);
    if (grc == GLOB_NOMATCH || (grc == 0 && g.gl_pathc == 0)) {
        seterr(err, errlen, "%s: no file matches this glob of token shards", glob_pat);
        goto out_glob;
    }
    if (grc == GLOB_NOSPACE) FT_DIE("glob(%s): out of memory", glob_pat);
    if (grc != 0) {
        seterr(err, errlen, "%s: cannot read the folders of this glob", glob_pat);
        goto out_glob;
    }
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str);
    if (g.gl_pathc > (size_t)1 << 30) {
        seterr(err, errlen, "%s: too many files (%zu)", glob_pat, (size_t)g.gl_pathc);
        goto out_glob;
    }
    sh = calloc(1, sizeof *sh);
    if (!sh) FT_DIE("out of memory");
    sh->refs = 1;
    snprintf(sh->glob, sizeof sh->glob, "%s", glob_pat);
    sh->s = calloc(g.gl_pathc, sizeof *sh->s);
    sh->start = calloc(g.gl_pathc + 1, sizeof *sh->start);
    if (!sh->s || !sh->start) FT_DIE("out of memory (%zu files)", (size_t)g.gl_pathc);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct shard *s = &sh->s[i];
        s->path = strdup(g.gl_pathv[i]);
        if (!s->path) FT_DIE("out of memory");
        sh->n = (int)i + 1; /* so a failure below releases what is mapped */
        if (shard_open(s, s->path, vocab, err, errlen)) goto out_shards;
        sh->start[i] = sh->ntok;
        sh->ntok += s->ntok;
    }
    sh->start[sh->n] = sh->ntok;
    if (sh->ntok < (uint64_t)T + 1) {
        seterr(err, errlen,
               "%s: %llu tokens in %d file%s, fewer than one sequence of T+1 = %d tokens",
               glob_pat, (unsigned long long)sh->ntok, sh->n, sh->n == 1 ? "" : "s", T + 1);
        goto out_shards;
    }
    d = calloc(1, sizeof *d);
    if (!d) FT_DIE("out of memory");
    d->sh = sh;
    d->T = T;
    d->shuffle = shuffle;
    d->key = mix64(seed ^ 0x6461746173657121ull); /* the data stream's own key ("dataseq!") */
    d->base = 0;
    d->end = sh->ntok;
    view_set_nseq(d, (sh->ntok - 1) / (uint64_t)T);
    sh = NULL;
out_shards:
    shards_release(sh);
out_glob:
    globfree(&g);
    return d;
}

int data_split_tail(FtData *d, double fraction, FtData **val, char *err, size_t errlen)
{
    *val = NULL;
    const char *name = d->sh->glob;
    if (!(fraction > 0 && fraction < 1)) {
        seterr(err, errlen, "%s: validation fraction %g is outside (0, 1)", name, fraction);
        return -1;
    }
    uint64_t n = d->nseq;
    uint64_t hold = (uint64_t)ceil((double)n * fraction);
    if (hold < 1) hold = 1;
    uint64_t T = (uint64_t)d->T;
    uint64_t keep = hold < n ? n - hold : 0;
    uint64_t vbase = d->base + keep * T + 1; /* one past the last training target */
    uint64_t vseq = d->end > vbase ? (d->end - vbase - 1) / T : 0;
    if (keep < 1 || vseq < 1) {
        seterr(err, errlen,
               "%s: holding back %g of %llu sequences of %llu tokens leaves %llu for training "
               "and %llu for validation; both need at least one",
               name, fraction, (unsigned long long)n, (unsigned long long)T + 1,
               (unsigned long long)keep, (unsigned long long)vseq);
        return -1;
    }
    FtData *v = calloc(1, sizeof *v);
    if (!v) FT_DIE("out of memory");
    *v = *d;
    v->shuffle = false;
    v->base = vbase;
    view_set_nseq(v, vseq);
    d->sh->refs++;
    d->end = d->base + keep * T + 1;
    view_set_nseq(d, keep);
    *val = v;
    return 0;
}

/* Prefixes err with the deck key and, for the default glob, says how to make the data. */
static void deck_err(char *err, size_t errlen, const char *key, const char *glob_pat,
                     const char *def)
{
    char msg[FT_DECK_ERR_MAX];
    snprintf(msg, sizeof msg, "%s", err);
    seterr(err, errlen, "data.%s: %s%s", key, msg,
           strcmp(glob_pat, def) ? "" : " (`make data` builds the default shards)");
}

int data_open_deck(const struct ft_config *cfg, int T, FtData **train, FtData **val, char *err,
                   size_t errlen)
{
    *train = *val = NULL;
    if (cfg->data.val[0] && cfg->data.val_fraction > 0) {
        seterr(err, errlen,
               "data.val_fraction = %g holds back part of data.train, but data.val = '%s' is "
               "set too: choose one (data.val= empty to use the fraction)",
               cfg->data.val_fraction, cfg->data.val);
        return -1;
    }
    const FtDeckKey *ktrain = deck_find_key("data", "train"), *kval = deck_find_key("data", "val");
    FtData *tr = data_open(cfg->data.train, T, (int)cfg->model.vocab, cfg->data.shuffle,
                           (uint64_t)cfg->run.seed, err, errlen);
    if (!tr) {
        deck_err(err, errlen, "train", cfg->data.train, ktrain ? ktrain->def : "");
        return -1;
    }
    FtData *va = NULL;
    if (cfg->data.val[0]) {
        va = data_open(cfg->data.val, T, (int)cfg->model.vocab, false, (uint64_t)cfg->run.seed,
                       err, errlen);
        if (!va) {
            deck_err(err, errlen, "val", cfg->data.val, kval ? kval->def : "");
            data_close(tr);
            return -1;
        }
    } else if (cfg->data.val_fraction > 0) {
        if (data_split_tail(tr, cfg->data.val_fraction, &va, err, errlen)) {
            deck_err(err, errlen, "val_fraction", "", "-");
            data_close(tr);
            return -1;
        }
    }
    *train = tr;
    *val = va;
    return 0;
}
