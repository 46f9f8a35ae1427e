/* test_data.c: llm.c token shards: round trips, sequence numbering, shuffling, the validation
 * split, the deck's data, and every class of bad file (each a one-line error naming the file).
 * ft-test: ranks 1 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/data.h"
#include "ftllm/deck.h"

static char g_dir[64];
static char g_err[1024];

/* A fresh folder per test, removed afterwards. */
static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ft_data_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    g_err[0] = '\0';
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char pat[128];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/*", g_dir);
    if (glob(pat, GLOB_PERIOD, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (unlink(g.gl_pathv[i])) rmdir(g.gl_pathv[i]);
        globfree(&g);
    }
    rmdir(g_dir);
    return 0;
}

static const char *path_of(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* Writes a shard by hand: header (magic, version, count), then ntok tokens, then extra bytes. */
static const char *write_raw(const char *name, int magic, int version, int count,
                             const uint16_t *tok, size_t ntok, size_t extra)
{
    const char *p = path_of(name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    int32_t hdr[FT_DATA_HEADER_INTS] = {magic, version, count};
    assert_int_equal(fwrite(hdr, sizeof hdr, 1, f), 1);
    if (ntok) assert_int_equal(fwrite(tok, 2, ntok, f), ntok);
    for (size_t i = 0; i < extra; i++) fputc(0, f);
    fclose(f);
    return p;
}

/* n tokens whose value encodes the position: tok[i] = (i * 7 + 3) % mod. */
static uint16_t *make_tokens(size_t n, int mod)
{
    uint16_t *t = malloc(n * sizeof *t);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)((i * 7 + 3) % (size_t)mod);
    return t;
}

/* Opening glob must fail with one line containing every non-NULL string given. */
static void expect_open_error(const char *glob_pat, int T, int vocab, const char *want1,
                              const char *want2)
{
    g_err[0] = '\0';
    FtData *d = data_open(glob_pat, T, vocab, true, 1, g_err, sizeof g_err);
    int ok = !d && (!want1 || strstr(g_err, want1)) && (!want2 || strstr(g_err, want2)) &&
             !strchr(g_err, '\n');
    if (!ok) fprintf(stderr, "glob %s: got '%s', want '%s' and '%s'\n", glob_pat, g_err,
                     want1 ? want1 : "", want2 ? want2 : "");
    data_close(d);
    assert_true(ok);
}

static void test_round_trip(void **state)
{
    (void)state;
    const size_t n = 1001;
    const int T = 8;
    uint16_t *tok = make_tokens(n, 50257);
    const char *p = path_of("one.bin");
    assert_int_equal(data_write_shard(p, tok, n, g_err, sizeof g_err), 0);
    /* the file is exactly header + tokens, and the header is llm.c's */
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 1024 + 2 * n);
    FtData *d = data_open(p, T, 50257, false, 7, g_err, sizeof g_err);
    assert_non_null(d);
    assert_int_equal(data_num_tokens(d), n);
    assert_int_equal(data_num_sequences(d), (n - 1) / T);
    assert_int_equal(data_seq_len(d), T);
    assert_int_equal(data_num_files(d), 1);
    int seq[9], next[9];
    for (uint64_t i = 0; i < data_num_sequences(d); i++) {
        data_sequence(d, i, seq);
        for (int t = 0; t <= T; t++) assert_int_equal(seq[t], tok[i * T + t]);
        if (i + 1 < data_num_sequences(d)) {
            data_sequence(d, i + 1, next);
            assert_int_equal(seq[T], next[0]); /* consecutive sequences overlap by one token */
        }
    }
    /* without shuffle, epoch 2 repeats epoch 0 */
    uint64_t ns = data_num_sequences(d);
    data_sequence(d, 2 * ns + 5, next);
    data_sequence(d, 5, seq);
    assert_memory_equal(seq, next, sizeof seq);
    /* a batch: inputs are tokens [0, T), targets [1, T] of each sequence */
    int in[3 * 8], tg[3 * 8];
    data_batch(d, 10, 3, in, tg);
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < T; t++) {
            assert_int_equal(in[b * T + t], tok[(10 + b) * T + t]);
            assert_int_equal(tg[b * T + t], tok[(10 + b) * T + t + 1]);
        }
    char loc[512];
    data_locate(d, 3, loc, sizeof loc);
    assert_non_null(strstr(loc, "one.bin:token 24"));
    data_close(d);
    free(tok);
}

static void test_bytes_shard(void **state)
{
    (void)state;
    unsigned char text[200000]; /* more than one conversion chunk */
    for (size_t i = 0; i < sizeof text; i++) text[i] = (unsigned char)(i * 31 + (i >> 8));
    const char *p = path_of("bytes.bin");
    assert_int_equal(data_write_bytes_shard(p, text, sizeof text, g_err, sizeof g_err), 0);
    FtData *d = data_open(p, 1000, 256, false, 1, g_err, sizeof g_err);
    assert_non_null(d);
    assert_int_equal(data_num_tokens(d), sizeof text);
    int seq[1001];
    assert_int_equal(data_num_sequences(d), 199);
    data_sequence(d, 198, seq);
    for (int t = 0; t <= 1000; t++) assert_int_equal(seq[t], text[198 * 1000 + t]);
    data_close(d);
    /* no temporary file is left behind */
    char pat[128];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/*tmp*", g_dir);
    assert_int_equal(glob(pat, 0, NULL, &g), GLOB_NOMATCH);
}

/* Several files, one of them empty, make one stream; sequences run across file boundaries. */
static void test_multi_file_stream(void **state)
{
    (void)state;
    const size_t n = 500;
    uint16_t *tok = make_tokens(n, 1000);
    /* written out of name order: the glob's order is by name */
    assert_int_equal(data_write_shard(path_of("s_002.bin"), tok + 300, 200, g_err, sizeof g_err), 0);
    assert_int_equal(data_write_shard(path_of("s_000.bin"), tok, 123, g_err, sizeof g_err), 0);
    assert_int_equal(data_write_shard(path_of("s_001a.bin"), tok, 0, g_err, sizeof g_err), 0);
    assert_int_equal(data_write_shard(path_of("s_001b.bin"), tok + 123, 177, g_err, sizeof g_err), 0);
    char pat[128];
    snprintf(pat, sizeof pat, "%s/s_*.bin", g_dir);
    const int T = 16;
    FtData *d = data_open(pat, T, 1000, false, 1, g_err, sizeof g_err);
    assert_non_null(d);
    assert_int_equal(data_num_files(d), 4);
    assert_int_equal(data_num_tokens(d), n);
    assert_int_equal(data_num_sequences(d), (n - 1) / T);
    int seq[17];
    for (uint64_t i = 0; i < data_num_sequences(d); i++) {
        data_sequence(d, i, seq);
        for (int t = 0; t <= T; t++) assert_int_equal(seq[t], tok[i * T + t]);
    }
    char loc[512];
    /* shuffled batches are the shuffled sequences, split into inputs and targets */
    FtData *sd = data_open(pat, T, 1000, true, 42, g_err, sizeof g_err);
    assert_non_null(sd);
    int in[5 * 16], tg[5 * 16];
    data_batch(sd, 27, 5, in, tg); /* runs over the epoch boundary (29 sequences) */
    for (int b = 0; b < 5; b++) {
        data_sequence(sd, 27 + (uint64_t)b, seq);
        assert_memory_equal(in + b * T, seq, T * sizeof(int));
        assert_memory_equal(tg + b * T, seq + 1, T * sizeof(int));
    }
    data_close(sd);
    data_locate(d, 19, loc, sizeof loc); /* token 304 = s_002.bin token 4 */
    assert_non_null(strstr(loc, "s_002.bin:token 4"));
    data_locate(d, 8, loc, sizeof loc); /* token 128 = s_001b.bin token 5 (s_001a is empty) */
    assert_non_null(strstr(loc, "s_001b.bin:token 5"));
    data_close(d);
    /* a sequence that starts on a file's first token is located in that file, not at the end
     * of the one before (nor in the empty one) */
    d = data_open(pat, 100, 1000, false, 1, g_err, sizeof g_err);
    assert_non_null(d);
    data_locate(d, 3, loc, sizeof loc); /* token 300 = s_002.bin token 0 */
    assert_non_null(strstr(loc, "s_002.bin:token 0"));
    assert_null(strstr(loc, "s_001b.bin"));
    data_close(d);
    d = data_open(pat, 123, 1000, false, 1, g_err, sizeof g_err);
    assert_non_null(d);
    data_locate(d, 1, loc, sizeof loc); /* token 123 = s_001b.bin token 0 */
    assert_non_null(strstr(loc, "s_001b.bin:token 0"));
    data_close(d);
    free(tok);
}

/* The sequence numbers of epoch e, as stream positions r in [0, n). */
static void epoch_order(const FtData *d, uint64_t e, uint64_t *r)
{
    uint64_t n = data_num_sequences(d);
    for (uint64_t i = 0; i < n; i++) r[i] = data_stream_offset(d, e * n + i); /* T = 1 */
}

static void test_shuffle(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, 2, 3, 7, 64, 1000, 4097, 65536};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint64_t n = sizes[k];
        uint16_t *tok = make_tokens(n + 1, 65536);
        const char *p = path_of("shuf.bin");
        assert_int_equal(data_write_shard(p, tok, n + 1, g_err, sizeof g_err), 0);
        FtData *a = data_open(p, 1, 65536, true, 1337, g_err, sizeof g_err);
        FtData *b = data_open(p, 1, 65536, true, 1337, g_err, sizeof g_err);
        FtData *c = data_open(p, 1, 65536, true, 1338, g_err, sizeof g_err);
        assert_non_null(a);
        assert_non_null(b);
        assert_non_null(c);
        assert_int_equal(data_num_sequences(a), n);
        uint64_t *e0 = malloc(n * 8), *e1 = malloc(n * 8), *b0 = malloc(n * 8), *c0 = malloc(n * 8);
        unsigned char *seen = calloc(n, 1);
        epoch_order(a, 0, e0);
        epoch_order(a, 1, e1);
        epoch_order(b, 0, b0);
        epoch_order(c, 0, c0);
        /* each epoch is a permutation of [0, n) */
        for (int e = 0; e < 2; e++) {
            memset(seen, 0, n);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t r = e ? e1[i] : e0[i];
                assert_true(r < n);
                assert_int_equal(seen[r], 0);
                seen[r] = 1;
            }
        }
        /* identical across two opens, bitwise */
        assert_memory_equal(e0, b0, n * 8);
        /* the content is the stream at that position */
        int seq[2];
        for (uint64_t i = 0; i < n; i += 1 + n / 50) {
            data_sequence(a, n + i, seq);
            assert_int_equal(seq[0], tok[e1[i]]);
            assert_int_equal(seq[1], tok[e1[i] + 1]);
        }
        if (n >= 7) {
            /* epochs and seeds give different orders; a shuffle moves most sequences (a random
             * permutation has 1 fixed point on average; n/4 leaves a wide margin) */
            uint64_t same_e = 0, same_s = 0, fixed = 0;
            for (uint64_t i = 0; i < n; i++) {
                same_e += e0[i] == e1[i];
                same_s += e0[i] == c0[i];
                fixed += e0[i] == i;
            }
            assert_true(same_e < n);
            assert_true(same_s < n);
            if (n >= 64) {
                /* no visible structure: neighbours in the order are rarely neighbours in the
                 * stream (a random order has about 2 such pairs) */
                uint64_t adjacent = 0;
                for (uint64_t i = 0; i + 1 < n; i++)
                    adjacent += e0[i + 1] == e0[i] + 1 || e0[i] == e0[i + 1] + 1;
                assert_true(adjacent < n / 16);
                assert_true(fixed < n / 4);
                assert_true(same_e < n / 4);
                assert_true(same_s < n / 4);
            }
        }
        free(e0), free(e1), free(b0), free(c0), free(seen), free(tok);
        data_close(a), data_close(b), data_close(c);
    }
}

/* Shuffled order is a pure function of idx: any access order gives the same sequences. */
static void test_random_access(void **state)
{
    (void)state;
    const size_t n = 3001;
    const int T = 10;
    uint16_t *tok = make_tokens(n, 5000);
    const char *p = path_of("ra.bin");
    assert_int_equal(data_write_shard(p, tok, n, g_err, sizeof g_err), 0);
    FtData *d = data_open(p, T, 5000, true, 99, g_err, sizeof g_err);
    assert_non_null(d);
    uint64_t ns = data_num_sequences(d);
    int fwd[11], back[11];
    uint64_t total = 3 * ns;
    uint64_t *h = calloc(total, sizeof *h);
    for (uint64_t i = 0; i < total; i++) {
        data_sequence(d, i, fwd);
        for (int t = 0; t <= T; t++) h[i] = h[i] * 1000003u + (uint64_t)fwd[t];
    }
    for (uint64_t i = total; i-- > 0;) {
        data_sequence(d, i, back);
        uint64_t x = 0;
        for (int t = 0; t <= T; t++) x = x * 1000003u + (uint64_t)back[t];
        assert_true(x == h[i]);
    }
    free(h);
    free(tok);
    data_close(d);
}

static void test_split_tail(void **state)
{
    (void)state;
    const size_t n = 1000;
    const int T = 9;
    uint16_t *tok = make_tokens(n, 3000);
    const char *p = path_of("split.bin");
    assert_int_equal(data_write_shard(p, tok, n, g_err, sizeof g_err), 0);
    FtData *d = data_open(p, T, 3000, true, 5, g_err, sizeof g_err);
    assert_non_null(d);
    uint64_t all = data_num_sequences(d); /* 111 */
    FtData *v = NULL;
    assert_int_equal(data_split_tail(d, 0.1, &v, g_err, sizeof g_err), 0);
    assert_non_null(v);
    uint64_t keep = all - 12; /* ceil(11.1) held back */
    assert_int_equal(data_num_sequences(d), keep);
    /* training stays inside tokens [0, keep*T], validation starts after it, unshuffled */
    uint64_t last_train = 0;
    for (uint64_t i = 0; i < 3 * keep; i++) {
        uint64_t o = data_stream_offset(d, i);
        if (o > last_train) last_train = o;
    }
    assert_int_equal(last_train + T, keep * T);
    assert_int_equal(data_stream_offset(v, 0), keep * T + 1);
    assert_int_equal(data_num_sequences(v), (n - (keep * T + 1) - 1) / T);
    int seq[10];
    data_sequence(v, 1, seq);
    for (int t = 0; t <= T; t++) assert_int_equal(seq[t], tok[keep * T + 1 + T + t]);
    /* both views share the files; closing the parent first is fine */
    data_close(d);
    data_sequence(v, 0, seq);
    assert_int_equal(seq[0], tok[keep * T + 1]);
    data_close(v);
    /* too little data for a split */
    d = data_open(p, 333, 3000, false, 5, g_err, sizeof g_err); /* 3 sequences, no spare token */
    assert_non_null(d);
    assert_int_equal(data_split_tail(d, 0.3, &v, g_err, sizeof g_err), -1); /* 1 - the gap */
    assert_null(v);
    assert_non_null(strstr(g_err, "split.bin"));
    assert_non_null(strstr(g_err, "both need at least one"));
    assert_int_equal(data_num_sequences(d), 3); /* unchanged */
    for (int i = 0; i < 2; i++) { /* the fraction is inside (0, 1) */
        assert_int_equal(data_split_tail(d, i ? 1.0 : 0.0, &v, g_err, sizeof g_err), -1);
        assert_null(v);
        assert_non_null(strstr(g_err, i ? "validation fraction 1 is outside (0, 1)"
                                        : "validation fraction 0 is outside (0, 1)"));
    }
    /* a fraction that holds back every sequence leaves none to train on */
    assert_int_equal(data_split_tail(d, 0.9, &v, g_err, sizeof g_err), -1);
    assert_null(v);
    assert_non_null(strstr(g_err, "leaves 0 for training"));
    assert_int_equal(data_num_sequences(d), 3);
    data_close(d);
    d = data_open(p, 9, 3000, true, 5, g_err, sizeof g_err); /* 111 sequences */
    assert_non_null(d);
    assert_int_equal(data_split_tail(d, 0.999, &v, g_err, sizeof g_err), -1);
    assert_null(v);
    assert_non_null(strstr(g_err, "holding back 0.999 of 111 sequences of 10 tokens leaves 0 for "
                              "training and "));
    assert_int_equal(data_num_sequences(d), 111);
    data_close(d);
    d = data_open(p, 333, 3000, false, 5, g_err, sizeof g_err);
    assert_non_null(d);
    assert_int_equal(data_split_tail(d, 0.5, &v, g_err, sizeof g_err), 0); /* 2 held back: 1 left */
    assert_int_equal(data_num_sequences(d), 1);
    assert_int_equal(data_num_sequences(v), 1);
    data_close(v);
    data_close(d);
    free(tok);
}

static void test_open_deck(void **state)
{
    (void)state;
    FtConfig cfg;
    assert_int_equal(deck_defaults(&cfg, g_err, sizeof g_err), 0);
    uint16_t *tok = make_tokens(2000, 256);
    assert_int_equal(data_write_shard(path_of("tr_0.bin"), tok, 1500, g_err, sizeof g_err), 0);
    assert_int_equal(data_write_shard(path_of("va_0.bin"), tok + 1500, 500, g_err, sizeof g_err), 0);
    snprintf(cfg.data.train, sizeof cfg.data.train, "%s/tr_*.bin", g_dir);
    snprintf(cfg.data.val, sizeof cfg.data.val, "%s/va_*.bin", g_dir);
    FtData *tr = NULL, *va = NULL;
    assert_int_equal(data_open_deck(&cfg, 32, &tr, &va, g_err, sizeof g_err), 0);
    assert_non_null(tr);
    assert_non_null(va);
    assert_int_equal(data_num_sequences(tr), 1499 / 32);
    assert_int_equal(data_num_sequences(va), 499 / 32);
    assert_int_equal(data_stream_offset(va, 3), 3 * 32); /* validation is not shuffled */
    data_close(tr), data_close(va);
    /* no val glob, a fraction */
    cfg.data.val[0] = '\0';
    cfg.data.val_fraction = 0.25;
    assert_int_equal(data_open_deck(&cfg, 32, &tr, &va, g_err, sizeof g_err), 0);
    assert_non_null(va);
    uint64_t keep = 1499 / 32 - 12; /* ceil(46 * 0.25) = 12 sequences held back */
    assert_int_equal(data_num_sequences(tr), keep);
    assert_int_equal(data_num_sequences(va), (1500 - (keep * 32 + 1) - 1) / 32);
    data_close(tr), data_close(va);
    /* neither: no validation */
    cfg.data.val_fraction = 0;
    assert_int_equal(data_open_deck(&cfg, 32, &tr, &va, g_err, sizeof g_err), 0);
    assert_null(va);
    data_close(tr);
    /* both: an error naming the keys */
    snprintf(cfg.data.val, sizeof cfg.data.val, "%s/va_*.bin", g_dir);
    cfg.data.val_fraction = 0.1;
    assert_int_equal(data_open_deck(&cfg, 32, &tr, &va, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "data.val_fraction"));
    assert_null(tr);
    /* a bad vocab from the deck reaches the token check, the message names the key */
    cfg.data.val_fraction = 0;
    cfg.model.vocab = 100;
    assert_int_equal(data_open_deck(&cfg, 32, &tr, &va, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "data.train: "));
    assert_non_null(strstr(g_err, "tr_0.bin: token id"));
    /* the default glob, missing: the message says how to make it */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_dir), 0);
    assert_int_equal(deck_defaults(&cfg, g_err, sizeof g_err), 0);
    int rc = data_open_deck(&cfg, 32, &tr, &va, g_err, sizeof g_err);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(g_err, "data/train_*.bin: no file matches"));
    assert_non_null(strstr(g_err, "make data"));
    free(tok);
}

static void test_bad_files(void **state)
{
    (void)state;
    uint16_t tok[100];
    for (int i = 0; i < 100; i++) tok[i] = (uint16_t)i;
    const char *p;
    p = write_raw("magic.bin", 1234, 1, 100, tok, 100, 0);
    expect_open_error(p, 8, 256, p, "bad magic 1234, expected 20240520");
    p = write_raw("model.bin", FT_DATA_MODEL_MAGIC, 3, 100, tok, 100, 0);
    expect_open_error(p, 8, 256, p, "llm.c model file");
    p = write_raw("version.bin", FT_DATA_MAGIC, 2, 100, tok, 100, 0);
    expect_open_error(p, 8, 256, p, "unsupported token shard version 2, expected 1");
    p = write_raw("negative.bin", FT_DATA_MAGIC, 1, -5, tok, 100, 0);
    expect_open_error(p, 8, 256, p, "negative token count -5");
    p = write_raw("minus1.bin", FT_DATA_MAGIC, 1, -1, tok, 100, 0);
    expect_open_error(p, 8, 256, p, "negative token count -1");
    p = write_raw("trunc_tokens.bin", FT_DATA_MAGIC, 1, 100, tok, 50, 0);
    expect_open_error(p, 8, 256, p, "says 100 tokens (1224 bytes) but the file has 1124 bytes (truncated)");
    p = write_raw("count_large.bin", FT_DATA_MAGIC, 1, 101, tok, 100, 0);
    expect_open_error(p, 8, 256, p, "(truncated)");
    p = write_raw("count_small.bin", FT_DATA_MAGIC, 1, 60, tok, 100, 0);
    expect_open_error(p, 8, 256, p, "trailing bytes");
    p = write_raw("odd.bin", FT_DATA_MAGIC, 1, 100, tok, 100, 1);
    expect_open_error(p, 8, 256, p, "1225 bytes (trailing bytes");
    tok[37] = 300;
    p = write_raw("vocab.bin", FT_DATA_MAGIC, 1, 100, tok, 100, 0);
    expect_open_error(p, 8, 256, p, "token id 300 at token offset 37 (byte 1098)");
    tok[37] = 37;
    p = write_raw("vocab2.bin", FT_DATA_MAGIC, 1, 100, tok, 100, 0);
    expect_open_error(p, 8, 99, p, "token id 99 at token offset 99 (byte 1222) is out of range");
    FtData *ok = data_open(p, 8, 100, false, 0, g_err, sizeof g_err); /* vocab 100: all valid */
    assert_non_null(ok);
    data_close(ok);
    /* a bad token is found wherever it is: at each edge of the scan's 4096-token blocks and
     * last in the file */
    {
        const size_t nb = 9000;
        const size_t at[] = {0, 4095, 4096, 8191, 8192, nb - 1};
        uint16_t *big = make_tokens(nb, 256);
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
            big[at[i]] = 256;
            p = write_raw("block.bin", FT_DATA_MAGIC, 1, (int)nb, big, nb, 0);
            char want[96];
            snprintf(want, sizeof want, "token id 256 at token offset %zu (byte %zu)", at[i],
                     1024 + 2 * at[i]);
            expect_open_error(p, 8, 256, p, want);
            big[at[i]] = 0;
        }
        p = write_raw("block.bin", FT_DATA_MAGIC, 1, (int)nb, big, nb, 0);
        ok = data_open(p, 8, 256, false, 0, g_err, sizeof g_err);
        assert_non_null(ok);
        data_close(ok);
        free(big);
    }
    /* the largest token id a shard can hold, against a vocab one short of it and one enough */
    tok[5] = 65535;
    p = write_raw("vocab_top.bin", FT_DATA_MAGIC, 1, 100, tok, 100, 0);
    expect_open_error(p, 8, 65535, p, "token id 65535 at token offset 5 (byte 1034) is out of range: expected < vocab 65535");
    ok = data_open(p, 8, 65536, false, 0, g_err, sizeof g_err);
    assert_non_null(ok);
    data_close(ok);
    tok[5] = 5;
    p = write_raw("short.bin", FT_DATA_MAGIC, 1, 8, tok, 8, 0);
    expect_open_error(p, 8, 256, p, "8 tokens in 1 file, fewer than one sequence of T+1 = 9");
    p = write_raw("one_seq.bin", FT_DATA_MAGIC, 1, 9, tok, 9, 0); /* exactly one sequence */
    FtData *one = data_open(p, 8, 256, true, 3, g_err, sizeof g_err);
    assert_non_null(one);
    assert_int_equal(data_num_sequences(one), 1);
    data_close(one);
    /* a truncated header */
    p = path_of("hdr.bin");
    FILE *f = fopen(p, "wb");
    int32_t h3[3] = {FT_DATA_MAGIC, 1, 0};
    fwrite(h3, sizeof h3, 1, f);
    fclose(f);
    expect_open_error(p, 8, 256, p, "truncated header: the file has 12 bytes");
    p = path_of("empty.bin");
    fclose(fopen(p, "wb"));
    expect_open_error(p, 8, 256, p, "truncated header: the file has 0 bytes");
    /* no file */
    char pat[128];
    snprintf(pat, sizeof pat, "%s/nothing_*.bin", g_dir);
    expect_open_error(pat, 8, 256, pat, "no file matches this glob");
    expect_open_error("", 8, 256, "glob is empty", NULL);
    /* a file that cannot be opened: a dangling link (root reads any mode), or mode 000 */
    p = path_of("dangling.bin");
    assert_int_equal(symlink("/nonexistent/ftllm/shard.bin", p), 0);
    expect_open_error(p, 8, 256, p, "cannot open the token shard: No such file or directory");
    if (geteuid() != 0) {
        p = write_raw("noperm.bin", FT_DATA_MAGIC, 1, 100, tok, 100, 0);
        assert_int_equal(chmod(p, 0), 0);
        expect_open_error(p, 8, 256, p, "Permission denied");
    }
    /* a directory, a FIFO (must not block) */
    p = path_of("dir.bin");
    assert_int_equal(mkdir(p, 0755), 0);
    expect_open_error(p, 8, 256, p, "is a directory");
    p = path_of("fifo.bin");
    assert_int_equal(mkfifo(p, 0644), 0);
    expect_open_error(p, 8, 256, p, "not a regular file");
    /* the bad file is named even when good files come first in the glob */
    assert_int_equal(data_write_shard(path_of("g_0.bin"), tok, 100, g_err, sizeof g_err), 0);
    write_raw("g_1.bin", FT_DATA_MAGIC, 7, 100, tok, 100, 0);
    snprintf(pat, sizeof pat, "%s/g_*.bin", g_dir);
    expect_open_error(pat, 8, 256, "g_1.bin: unsupported token shard version 7", NULL);
}

static void test_write_errors(void **state)
{
    (void)state;
    uint16_t tok[4] = {1, 2, 3, 4};
    assert_int_equal(data_write_shard("/nonexistent/ftllm/x.bin", tok, 4, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "/nonexistent/ftllm/x.bin: cannot create the token shard"));
    assert_int_equal(data_write_shard(g_dir, tok, 4, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "is a directory"));
    /* a failed write leaves the previous file in place */
    const char *p = path_of("keep.bin");
    assert_int_equal(data_write_shard(p, tok, 4, g_err, sizeof g_err), 0);
    assert_int_equal(data_write_shard(p, tok, (size_t)INT32_MAX + 1, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "do not fit one shard"));
    FtData *d = data_open(p, 3, 5, false, 0, g_err, sizeof g_err);
    assert_non_null(d);
    assert_int_equal(data_num_tokens(d), 4);
    data_close(d);
    /* a write that fails midway (a file size limit stands in for a full disk): an error naming
     * the shard, the previous file unchanged, no temporary file left behind */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    uint16_t *many = calloc(100000, sizeof *many);
    assert_non_null(many);
    int rc = data_write_shard(p, many, 100000, g_err, sizeof g_err);
    int rcb = data_write_bytes_shard(p, (const unsigned char *)many, 100000, g_err, sizeof g_err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    free(many);
    assert_int_equal(rc, -1);
    assert_int_equal(rcb, -1);
    assert_non_null(strstr(g_err, "keep.bin: cannot write: "));
    d = data_open(p, 3, 5, false, 0, g_err, sizeof g_err);
    assert_non_null(d);
    assert_int_equal(data_num_tokens(d), 4);
    data_close(d);
    char pat[128];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/*tmp*", g_dir);
    assert_int_equal(glob(pat, 0, NULL, &g), GLOB_NOMATCH);
}

/* The default shards (make data), when present, are valid byte-level data. */
static void test_default_data(void **state)
{
    (void)state;
    FtData *tr = data_open("data/train_*.bin", 64, 256, true, 1337, g_err, sizeof g_err);
    FtData *va = data_open("data/val_*.bin", 64, 256, false, 1337, g_err, sizeof g_err);
    if (!tr || !va) {
        data_close(tr), data_close(va);
        skip();
    }
    assert_true(data_num_tokens(tr) > 1000000);
    assert_true(data_num_tokens(va) > 50000);
    int seq[65];
    data_sequence(va, 0, seq);
    int letters = 0;
    for (int t = 0; t < 65; t++) letters += (seq[t] >= 'a' && seq[t] <= 'z') || seq[t] == ' ';
    assert_true(letters > 40); /* English text: mostly lower-case letters and spaces */
    data_close(tr), data_close(va);
}

#define T_(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
FT_TEST_MAIN(T_(test_round_trip), T_(test_bytes_shard), T_(test_multi_file_stream),
             T_(test_shuffle), T_(test_random_access), T_(test_split_tail), T_(test_open_deck),
             T_(test_bad_files), T_(test_write_errors), T_(test_default_data))
