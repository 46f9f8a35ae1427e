/* test_deck.c: the deck parser and validator, every class of bad input.
 * ft-test: ranks 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/deck.h"

static FtConfig g_cfg;
static char g_err[FT_DECK_ERR_MAX];

/* Parses text as t.ini; returns the status and leaves the message in g_err. */
static int parse(const char *text)
{
    g_err[0] = '\0';
    return deck_parse(&g_cfg, "t.ini", text, strlen(text), g_err, sizeof g_err);
}

/* Asserts the deck fails and its one-line message contains want. */
static void expect_error(const char *text, const char *want)
{
    int rc = parse(text);
    if (rc == 0 || !strstr(g_err, want) || strchr(g_err, '\n'))
        fprintf(stderr, "deck:\n%s\n  got rc=%d err='%s'\n  want '%s'\n", text, rc, g_err, want);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(g_err, want));
    assert_null(strchr(g_err, '\n'));
}

static void expect_check_error(const char *text, int nranks, const char *want)
{
    assert_int_equal(parse(text), 0);
    int rc = deck_check(&g_cfg, nranks, g_err, sizeof g_err);
    if (rc == 0 || !strstr(g_err, want))
        fprintf(stderr, "deck:\n%s\n  got rc=%d err='%s'\n  want '%s'\n", text, rc, g_err, want);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(g_err, want));
}

static void test_defaults_valid(void **state)
{
    (void)state;
    assert_int_equal(deck_defaults(&g_cfg, g_err, sizeof g_err), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
    assert_int_equal(g_cfg.model.layers, 4);
    assert_int_equal(g_cfg.parallel.tp, 1);
    assert_string_equal(g_cfg.run.name, "ftllm");
    assert_int_equal(g_cfg.train.schedule, FT_SCHED_COSINE);
    assert_int_equal(g_cfg.src[FT_KEY_model_layers].kind, FT_SRC_DEFAULT);
}

static void test_parse_good(void **state)
{
    (void)state;
    const char *deck = "\xEF\xBB\xBF; a comment\n"
                       "# another comment\n"
                       "[run]\n"
                       "name = my run   \n"
                       "log_level = DEBUG\n"
                       "\n"
                       "[model]\r\n"
                       "  layers=6 ; inline comment\r\n"
                       "heads = 3\n"
                       "channels = 96\n"
                       "[train]\n"
                       "lr = 3e-4\n"
                       "beta2 = 0.999\n"
                       "schedule = linear\n"
                       "[model]\n"
                       "seq_len = 32\n";
    assert_int_equal(parse(deck), 0);
    assert_string_equal(g_cfg.run.name, "my run");
    assert_int_equal(g_cfg.run.log_level, 3);
    assert_int_equal(g_cfg.model.layers, 6);
    assert_int_equal(g_cfg.model.heads, 3);
    assert_int_equal(g_cfg.model.seq_len, 32);
    assert_true(g_cfg.train.lr == 3e-4);
    assert_true(g_cfg.train.beta2 == 0.999);
    assert_int_equal(g_cfg.train.schedule, FT_SCHED_LINEAR);
    assert_int_equal(g_cfg.src[FT_KEY_model_layers].kind, FT_SRC_DECK);
    assert_int_equal(g_cfg.src[FT_KEY_model_layers].line, 8);
    assert_int_equal(g_cfg.src[FT_KEY_model_seq_len].line, 16);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
}

static void test_empty_and_comments_only(void **state)
{
    (void)state;
    assert_int_equal(parse(""), 0);
    assert_int_equal(parse("; nothing\n\n# here\n"), 0);
    assert_int_equal(g_cfg.model.layers, 4);
}

static void test_unknown_section(void **state)
{
    (void)state;
    expect_error("[model]\nlayers = 2\n[modle]\n", "t.ini:3: unknown section [modle] (did you mean [model]?)");
    expect_error("[zzzzzz]\n", "t.ini:1: unknown section [zzzzzz]; sections are:");
    expect_error("[model\nlayers=2\n", "t.ini:1: expected ']'");
    expect_error("[model] junk\n", "t.ini:1: unexpected text after [model]");
    assert_int_equal(parse("[model] ; the model\nlayers = 2\n[train]\t# training\nlr = 0.5\n"), 0);
    assert_true(g_cfg.model.layers == 2 && g_cfg.train.lr == 0.5);
    expect_error("[]\n", "t.ini:1: unknown section []");
}

static void test_unknown_key(void **state)
{
    (void)state;
    expect_error("[model]\nlayres = 2\n", "t.ini:2: unknown key 'layres' in [model] (did you mean 'layers'?)");
    expect_error("[model]\nlr = 0.1\n", "t.ini:2: unknown key 'lr' in [model] (did you mean [train] lr?)");
    expect_error("[model]\nqqqqqqqqqq = 1\n", "t.ini:2: unknown key 'qqqqqqqqqq' in [model];");
    expect_error("layers = 2\n", "t.ini:1: 'layers' is outside any section; put it under [model]");
    expect_error("wibble = 2\n", "t.ini:1: 'wibble' is outside any section");
}

static void test_wrong_types(void **state)
{
    (void)state;
    expect_error("[model]\nlayers = abc\n", "t.ini:2: model.layers: expected an integer, got 'abc'");
    expect_error("[model]\nlayers = 1.5\n", "model.layers: expected an integer, got '1.5'");
    expect_error("[model]\nlayers = 0x10\n", "expected an integer");
    expect_error("[model]\nlayers = 4 # c\n", "expected an integer, got '4 # c'");
    expect_error("[model]\nlayers =\n", "t.ini:2: model.layers: empty value");
    expect_error("[train]\nlr = fast\n", "train.lr: expected a real number, got 'fast'");
    expect_error("[train]\nlr = nan\n", "train.lr: expected a real number");
    expect_error("[train]\nlr = 0x1p-3\n", "train.lr: expected a real number");
    expect_error("[train]\nlr = inf\n", "train.lr = inf is out of range");
    expect_error("[train]\nschedule = fast\n", "train.schedule: expected one of constant|cosine|linear, got 'fast'");
    expect_error("[run]\nlog_level = 3\n", "run.log_level: expected one of error|warn|info|debug");
    /* a choice is the whole word: a known choice with more after it is not that choice */
    expect_error("[train]\nschedule = cosinex\n", "train.schedule: expected one of constant|cosine|linear, got 'cosinex'");
    /* `auto` is a value only of the keys that say so (spare.r, checkpoint.interval, ...) */
    expect_error("[model]\nlayers = auto\n", "t.ini:2: model.layers: expected an integer, got 'auto'");
    expect_error("[train]\nlr = auto\n", "t.ini:2: train.lr: expected a real number, got 'auto'");
    assert_int_equal(parse("[checkpoint]\ninterval = AUTO\n"), 0);
    assert_true(g_cfg.checkpoint.interval == FT_AUTO);
    /* a long bad value is shortened in the message */
    expect_error("[model]\nlayers = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "...'");
}

static void test_bool_values(void **state)
{
    (void)state;
    const char *yes[] = {"true", "YES", "on", "1"}, *no[] = {"false", "No", "OFF", "0"};
    char deck[64];
    for (int i = 0; i < 4; i++) {
        snprintf(deck, sizeof deck, "[data]\nshuffle = %s\n", no[i]);
        assert_int_equal(parse(deck), 0);
        assert_false(g_cfg.data.shuffle);
        snprintf(deck, sizeof deck, "[data]\nshuffle = %s\n", yes[i]);
        assert_int_equal(parse(deck), 0);
        assert_true(g_cfg.data.shuffle);
    }
    expect_error("[data]\nshuffle = maybe\n", "t.ini:2: data.shuffle: expected true or false, got 'maybe'");
}

static void test_out_of_range(void **state)
{
    (void)state;
    expect_error("[model]\nlayers = 0\n", "t.ini:2: model.layers = 0 is out of range: expected an integer in [1..4096]");
    expect_error("[model]\nlayers = -3\n", "out of range");
    expect_error("[model]\nlayers = 99999999999999999999999\n", "out of range");
    expect_error("[train]\nlr = -1\n", "train.lr = -1 is out of range: expected a number in [0..10]");
    expect_error("[train]\nlr = 1e400\n", "train.lr = 1e400 is out of range");
    expect_error("[train]\nbeta1 = 1\n", "train.beta1 = 1 is out of range: expected a number in [0..1)");
    expect_error("[train]\neps = 0\n", "train.eps = 0 is out of range: expected a number in (0..1]");
    /* bounds are written out whole up to 1e15, in %g from there (random mutant R07 of seed 6,
     * tests/mutants/random_sample.md: every bound in %g, 1048576 as 1.04858e+06) */
    expect_error("[model]\nchannels = 0\n",
                 "model.channels = 0 is out of range: expected an integer in [1..1048576]");
    expect_error("[run]\nseed = -1\n",
                 "run.seed = -1 is out of range: expected an integer in [0..2147483647]");
    expect_error("[train]\nsteps = -1\n",
                 "train.steps = -1 is out of range: expected an integer in [0..1e+15]");
    assert_int_equal(parse("[train]\nlr = 1e-400\n"), 0); /* underflow is zero, in range */
    assert_true(g_cfg.train.lr == 0.0);
    /* inclusive bounds take their end points; exclusive ones stop just inside */
    assert_int_equal(parse("[model]\nlayers = 4096\ntop_k = 1\n[train]\nlr = 10\nlr_min_frac = 1\n"
                           "beta1 = 0\nbeta2 = 0.99999999\neps = 1\n"), 0);
    assert_int_equal(g_cfg.model.layers, 4096);
    assert_true(g_cfg.train.lr == 10.0 && g_cfg.train.lr_min_frac == 1.0 && g_cfg.train.eps == 1.0);
    assert_true(g_cfg.train.beta1 == 0.0 && g_cfg.train.beta2 == 0.99999999);
    expect_error("[model]\nlayers = 4097\n", "t.ini:2: model.layers = 4097 is out of range: expected an integer in [1..4096]");
    expect_error("[train]\nlr = 10.000001\n", "train.lr = 10.000001 is out of range");
}

static void test_duplicates_and_syntax(void **state)
{
    (void)state;
    expect_error("[model]\nlayers = 2\nheads = 2\nlayers = 3\n", "t.ini:4: model.layers is set twice (first at line 2");
    /* an indented line is a key of its own, not a continuation of the previous value */
    assert_int_equal(parse("[model]\nlayers = 2\n  heads = 2\n\t[train]\n  lr = 0.5\n"), 0);
    assert_int_equal(g_cfg.model.layers, 2);
    assert_int_equal(g_cfg.model.heads, 2);
    assert_true(g_cfg.train.lr == 0.5);
    expect_error("[model]\nlayers\n", "t.ini:2: expected 'key = value', '[section]' or a comment, got 'layers'");
    expect_error("[model]\n= 3\n", "t.ini:2:");
    /* a UTF-8 byte-order mark is skipped at the start of the file only */
    expect_error("[model]\n\xEF\xBB\xBFlayers = 2\n", "t.ini:2: unknown key");
}

static void test_line_limits_and_binary(void **state)
{
    (void)state;
    char big[400];
    memset(big, 'a', sizeof big);
    memcpy(big, "[run]\nname = ", 13);
    big[sizeof big - 2] = '\n';
    big[sizeof big - 1] = '\0';
    expect_error(big, "t.ini:2: line is longer than");
    /* the longest line accepted (198 characters), with its newline or last in the file */
    char edge[256];
    for (int len = 198; len <= 199; len++)
        for (int nl = 0; nl < 2; nl++) {
            int k = snprintf(edge, sizeof edge, "[run]\nname = ");
            memset(edge + k, 'e', (size_t)len - 7);
            snprintf(edge + k + len - 7, sizeof edge - (size_t)(k + len - 7), "%s", nl ? "\n" : "");
            if (len == 198) {
                assert_int_equal(parse(edge), 0);
                assert_int_equal(strlen(g_cfg.run.name), 191);
            } else {
                expect_error(edge, "t.ini:2: line is longer than 198 characters");
            }
        }
    static const char nul[] = "[model]\nlayers = 2\0junk\n";
    g_err[0] = '\0';
    assert_int_equal(deck_parse(&g_cfg, "t.ini", nul, sizeof nul - 1, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "t.ini:2: NUL byte"));
    /* random binary bytes: an error, never a crash */
    char bin[512];
    unsigned s = 12345;
    for (size_t i = 0; i < sizeof bin; i++) s = s * 1103515245u + 12345u, bin[i] = (char)(s >> 16);
    g_err[0] = '\0';
    assert_int_equal(deck_parse(&g_cfg, "t.ini", bin, sizeof bin, g_err, sizeof g_err), -1);
    assert_true(strncmp(g_err, "t.ini:", 6) == 0);
}

static void test_reserved_and_auto(void **state)
{
    (void)state;
    assert_int_equal(parse("[dmr]\nphases = 1,2\ndeferred_mb = 512\n"), 0); /* built */
    assert_int_equal(g_cfg.dmr.phases, FT_DMR_PHASES_12);
    expect_error("[dmr]\ndeferred_mb = -1\n", "t.ini:2: dmr.deferred_mb = -1 is out of range");
    expect_error("[dmr]\nprofile_steps = 0\n", "t.ini:2: dmr.profile_steps = 0 is out of range");
    assert_int_equal(parse("[dmr]\nmode = OFF\n"), 0);
    expect_error("[spare]\nr = -2\n", "spare.r = -2 is out of range: expected an integer in [0..1024] or auto");
    assert_int_equal(parse("[dmr]\nmode = naive\nsuspect_after = 0\n"), 0); /* built */
    assert_int_equal(g_cfg.dmr.mode, FT_DMR_NAIVE);
    assert_int_equal(parse("[dmr]\nmode = planned\nplan = p.txt\n"), 0); /* built */
    expect_error("[dmr]\nsuspect_after = -1\n", "t.ini:2: dmr.suspect_after = -1 is out of range");
    expect_error("[dmr]\nmode = pigyback\n", "t.ini:2: dmr.mode");
    assert_int_equal(parse("[checkpoint]\ninterval = auto\n"), 0); /* built: the train loop resolves it */
    assert_int_equal(parse("[faults]\nschedule = f.txt\n"), 0); /* built: read by train */
    /* SPARe is on for spare.r = auto too (resolved after the backend picks its transport) */
    assert_int_equal(parse("[spare]\nr = auto\n"), 0);
    assert_true(deck_spare_on(&g_cfg));
    assert_int_equal(parse("[spare]\nr = 1\n"), 0);
    assert_true(deck_spare_on(&g_cfg));
    assert_int_equal(parse("[spare]\nr = 0\n"), 0);
    assert_false(deck_spare_on(&g_cfg));
    assert_int_equal(parse("[spare]\nspares = 1\n"), 0);
    assert_true(deck_spare_on(&g_cfg));
}

static void test_cross_checks(void **state)
{
    (void)state;
    expect_check_error("[model]\nheads = 4\nchannels = 130\n", 1,
                       "t.ini:3: model.channels = 130 is not a multiple of model.heads = 4 (model.heads: t.ini:2)");
    expect_check_error("[model]\nchannels = 130\n", 1, "t.ini:2: model.channels = 130 is not a multiple of model.heads = 4 (model.heads: default)");
    expect_check_error("[parallel]\ntp = 3\n", 0, "t.ini:2: model.heads = 4 cannot be split over parallel.tp = 3");
    expect_check_error("[model]\nlayers=3\n[parallel]\npp = 2\n", 0, "t.ini:4: model.layers = 3 cannot be split over parallel.pp = 2 stages");
}

/* Each cross-key limit at its edge: the largest allowed value passes, one more fails. */
static void test_cross_edges(void **state)
{
    (void)state;
    assert_int_equal(parse("[train]\nsteps = 10\nwarmup = 10\nseq_len = 64\n[model]\nseq_len = 64\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0); /* warm-up over the whole run */
    expect_check_error("[train]\nsteps = 10\nwarmup = 11\n", 1, "t.ini:3: train.warmup = 11 is longer than the run");
    expect_check_error("[model]\nseq_len = 64\n[train]\nseq_len = 65\n", 1,
                       "t.ini:4: train.seq_len = 65 exceeds model.seq_len = 64");
    assert_int_equal(parse("[model]\nexperts = 2\ntop_k = 2\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0); /* every token to every expert */
    expect_check_error("[model]\nexperts = 2\ntop_k = 3\n", 1, "t.ini:3: model.top_k = 3 exceeds model.experts = 2");
    /* [cluster]: 16 GPUs in 2 replicas of 8 */
    const char *cl = "[cluster]\ngpus = 16\ngpus_per_replica = 8\nsteps = 100\n";
    char deck[512];
    snprintf(deck, sizeof deck, "%sgpus_per_replica = 16\n", "[cluster]\ngpus = 16\n");
    assert_int_equal(parse(deck), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0); /* one replica: the whole cluster */
    snprintf(deck, sizeof deck, "%sr = 2\ninterval = 100\nblocks_per_zone = 4\nspare_blocks = 4\n"
             "trays_per_block = 18\nspare_trays = 17\n", cl);
    assert_int_equal(parse(deck), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
    snprintf(deck, sizeof deck, "%sr = 3\n", cl);
    expect_check_error(deck, 1, "t.ini:5: cluster.r = 3 exceeds the 2 replicas");
    snprintf(deck, sizeof deck, "%sinterval = 101\n", cl);
    expect_check_error(deck, 1, "t.ini:5: cluster.interval = 101 steps is longer than the run");
    snprintf(deck, sizeof deck, "%sblocks_per_zone = 4\nspare_blocks = 5\n", cl);
    expect_check_error(deck, 1, "t.ini:6: cluster.spare_blocks = 5 is more spares than blocks");
    snprintf(deck, sizeof deck, "%strays_per_block = 18\nspare_trays = 18\n", cl);
    expect_check_error(deck, 1, "t.ini:6: cluster.spare_trays = 18 leaves no tray in use");
}

/* The engine's and the mixture of experts' cross-key rules, each refused and its valid
 * neighbour accepted. */
static void test_cross_engine(void **state)
{
    (void)state;
    assert_int_equal(parse("[model]\nheads = 4\nkv_heads = 2\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0); /* two query heads a group */
    expect_check_error("[model]\nheads = 4\nkv_heads = 8\n", 1,
                       "t.ini:3: model.heads = 4 is not a multiple of model.kv_heads = 8");
    expect_check_error("[run]\nprecision = bf16\n", 1,
                       "t.ini:2: run.precision = bf16 needs run.backend = cuda");
    expect_check_error("[parallel]\nwarmup_extra = 2\nschedule = gpipe\n", 1,
                       "t.ini:3: parallel.warmup_extra = 2 needs parallel.schedule = 1f1b");
    assert_int_equal(parse("[parallel]\nwarmup_extra = 2\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
    assert_int_equal(parse("[run]\nprecision = bf16\nbackend = cuda\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
    assert_int_equal(parse("[run]\nbackend = cuda\n[dmr]\nmode = planned\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0); /* planned on a GPU */
    assert_int_equal(parse("[run]\nbackend = cuda\n[dmr]\nmode = planned\nmoe_dynamic = true\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0); /* the dynamic planner too */
    expect_check_error("[dmr]\nmoe_dynamic = true\nmode = naive\n", 1,
                       "t.ini:3: dmr.moe_dynamic = true needs dmr.mode = planned");
    assert_int_equal(parse("[dmr]\nmoe_dynamic = true\nmode = planned\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
    expect_check_error("[parallel]\nep = 2\n", 2,
                       "t.ini:2: parallel.ep = 2 splits experts over ranks, but the model is dense");
    expect_check_error("[model]\nexperts = 3\n[parallel]\nep = 2\n", 2,
                       "t.ini:4: model.experts = 3 cannot be split over parallel.ep = 2 ranks");
    assert_int_equal(parse("[model]\nexperts = 4\n[parallel]\nep = 2\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 2, g_err, sizeof g_err), 0);
    expect_check_error("[model]\nexperts = 1\ninit = gpt2.bin\n", 1, /* one expert is MoE too */
                       "t.ini:3: model.init is an llm.c GPT-2 file (a dense model)");
    expect_check_error("[model]\nexperts = 2\n[run]\nsave_model = out.bin\n", 1,
                       "t.ini:4: run.save_model writes an llm.c GPT-2 file (a dense model)");
    /* what only `plan --predict` builds */
    assert_int_equal(parse("[model]\nchannels = 64\nffn = 256\nkv_heads = 4\nmlp = gelu\n"), 0);
    assert_int_equal(deck_check_trainable(&g_cfg, g_err, sizeof g_err), 0);
    assert_int_equal(parse("[model]\nmlp = swiglu\n"), 0);
    assert_int_equal(deck_check_trainable(&g_cfg, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "t.ini:2: model.mlp = swiglu: the trainer builds the GPT-2 block"));
    assert_int_equal(parse("[model]\nkv_heads = 2\n"), 0);
    assert_int_equal(deck_check_trainable(&g_cfg, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "t.ini:2: model.kv_heads = 2: the trainer builds"));
}

/* perf.papi_events: the list's syntax is the deck's; which events exist is PAPI's (not here). */
static void test_papi_events(void **state)
{
    (void)state;
    assert_int_equal(parse("[perf]\npapi_events = perf::TASK-CLOCK, perf::PAGE-FAULTS,PAPI_TOT_INS\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
    assert_int_equal(parse("[perf]\npapi_events = NO_SUCH_EVENT\n"), 0); /* PAPI refuses it later */
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
    expect_check_error("[perf]\npapi_events = perf::TASK-CLOCK,,perf::PAGE-FAULTS\n", 1,
                       "t.ini:2: perf.papi_events: empty event name in 'perf::TASK-CLOCK,,perf::PAGE-FAULTS'");
    expect_check_error("[perf]\npapi_events = perf::TASK-CLOCK,\n", 1, "t.ini:2: perf.papi_events: empty event name");
    expect_check_error("[perf]\npapi_events = perf::TASK-CLOCK perf::PAGE-FAULTS\n", 1,
                       "t.ini:2: perf.papi_events: 'perf::TASK-CLOCK perf::PAGE-FAULTS' is not one event name");
    expect_check_error("[perf]\npapi_events = A,B,A\n", 1, "t.ini:2: perf.papi_events: event 'A' is listed twice");
    expect_check_error("[perf]\npapi_events = a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q\n", 1,
                       "t.ini:2: perf.papi_events: more than 16 events");
    assert_int_equal(parse("[perf]\npapi_events = a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), 0);
}

static void test_cross_world(void **state)
{
    (void)state;
    expect_check_error("[parallel]\ntp = 2\n", 1,
                       "t.ini:2: the layout dp x pp x ep x tp = 1 x 1 x 1 x 2 = 2 ranks, but the job has 1");
    expect_check_error("[parallel]\ndp = 1\n", 2, /* one rank, not "1 ranks" */
                       "t.ini:2: the layout dp x pp x ep x tp = 1 x 1 x 1 x 1 = 1 rank, but the job has 2");
    assert_int_equal(parse("[parallel]\ntp = 2\ndp = 2\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 4, g_err, sizeof g_err), 0);
    expect_check_error("[train]\nsteps = 10\nwarmup = 20\n", 1, "t.ini:3: train.warmup = 20 is longer than the run");
    expect_check_error("[cluster]\ngpus = 4\ngpus_per_replica = 8\n", 1, "t.ini:3: cluster.gpus_per_replica = 8 exceeds cluster.gpus = 4");
    /* SPARe: r within 1..dp or auto, with any layout (expert parallelism included) */
    assert_int_equal(parse("[parallel]\ndp = 4\n[spare]\nr = 4\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 4, g_err, sizeof g_err), 0);
    expect_check_error("[parallel]\ndp = 2\n[spare]\nr = 3\n", 2, "t.ini:4: spare.r = 3 exceeds parallel.dp = 2");
    /* auto: the deck stays auto (train_spare_auto picks r before the grid); its bad combinations */
    assert_int_equal(parse("[parallel]\ndp = 2\n[spare]\nr = auto\nspares = 1\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 3, g_err, sizeof g_err), 0);
    assert_true(g_cfg.spare.r == FT_AUTO);
    assert_int_equal(parse("[model]\nexperts = 2\n[parallel]\nep = 2\n[spare]\nr = auto\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 2, g_err, sizeof g_err), 0);
    expect_check_error("[spare]\nr = auto\nspares = 1\n", 1,
                       "t.ini:3: spare.spares = 1 needs SPARe (spare.r >= 1 or auto, here auto) and parallel.dp >= 2 (here 1)");
    /* a replica is tp x pp x ep ranks: r counts replicas (dp), not data ranks (dp x ep); hot
     * spares are whole replicas too */
    assert_int_equal(parse("[model]\nexperts = 4\n[parallel]\nep = 2\ndp = 2\n[spare]\nr = 2\n"
                           "spares = 1\n"), 0);
    assert_int_equal(deck_check(&g_cfg, 6, g_err, sizeof g_err), 0);
    expect_check_error("[model]\nexperts = 4\n[parallel]\nep = 2\ndp = 2\n[spare]\nr = 3\n", 4,
                       "t.ini:7: spare.r = 3 exceeds parallel.dp = 2");
    expect_check_error("[model]\nexperts = 4\n[parallel]\nep = 2\ndp = 2\n[spare]\nr = 2\n"
                       "spares = 1\n", 5, "the layout (dp + spare.spares) x pp x ep x tp = (2 + 1) x 1 x 2 x 1 = 6 ranks, but the job has 5");
}

/* The longest deck file name the parser keeps (FT_DECK_STR_MAX - 1 characters: a deep path on a
 * parallel file system) is named whole, with the line, at the start of each kind of message:
 * a parse error, a cross-key check, the layout against the job's ranks, the PAPI list, a shape
 * the trainer does not build. */
static void test_long_path(void **state)
{
    (void)state;
    char path[FT_DECK_STR_MAX], want[FT_DECK_STR_MAX + 16];
    memset(path, 'd', sizeof path - 1);
    path[0] = '/', path[sizeof path - 1] = '\0';
    memcpy(path + sizeof path - 5, ".ini", 4);
    const struct { const char *text; int nranks, line, trainable; } c[] = {
        {"[train]\nsteps = 10\nnosuch = 1\n", 0, 3, 0},
        {"[train]\nsteps = 10\nwarmup = 20\n", 1, 3, 0},
        {"[parallel]\ntp = 2\n", 1, 2, 0},
        {"[perf]\npapi_events = A,B,A\n", 1, 2, 0},
        {"[model]\nffn = 100\n", 1, 2, 1},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        g_err[0] = '\0';
        int rc = deck_parse(&g_cfg, path, c[k].text, strlen(c[k].text), g_err, sizeof g_err);
        if (c[k].nranks > 0) {
            assert_int_equal(rc, 0);
            rc = deck_check(&g_cfg, c[k].nranks, g_err, sizeof g_err);
            if (c[k].trainable) {
                assert_int_equal(rc, 0);
                rc = deck_check_trainable(&g_cfg, g_err, sizeof g_err);
            }
        }
        snprintf(want, sizeof want, "%s:%d: ", path, c[k].line);
        if (rc == 0 || strncmp(g_err, want, strlen(want)))
            fail_msg("case %zu: rc %d, '%s' does not start with the whole path and line %d", k, rc,
                     g_err, c[k].line);
        assert_null(strchr(g_err, '\n'));
    }
}

static void test_overrides(void **state)
{
    (void)state;
    assert_int_equal(parse("[model]\nlayers = 2\n"), 0);
    assert_int_equal(deck_override(&g_cfg, "model.layers=8", 1, g_err, sizeof g_err), 0);
    assert_int_equal(g_cfg.model.layers, 8);
    assert_int_equal(g_cfg.src[FT_KEY_model_layers].kind, FT_SRC_CMDLINE);
    assert_int_equal(deck_override(&g_cfg, " train.lr = 0.5 ", 2, g_err, sizeof g_err), 0);
    assert_true(g_cfg.train.lr == 0.5);
    assert_int_equal(deck_override(&g_cfg, "model.layers=3", 3, g_err, sizeof g_err), 0);
    assert_int_equal(g_cfg.model.layers, 3); /* the later override wins */
    assert_int_equal(deck_override(&g_cfg, "model.layers", 4, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "command line override 4: expected section.key=value, got 'model.layers'"));
    assert_int_equal(deck_override(&g_cfg, "layers=3", 5, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "expected section.key=value"));
    /* the first '.' after the '=' is the value's, not a section's */
    assert_int_equal(deck_override(&g_cfg, "lr=0.5", 5, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "command line override 5: expected section.key=value, got 'lr=0.5'"));
    assert_int_equal(deck_override(&g_cfg, "model.layres=3", 6, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "command line override 6 'model.layres=3': unknown key 'layres' in [model] (did you mean 'layers'?)"));
    assert_int_equal(deck_override(&g_cfg, "model.layers=x", 7, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "model.layers: expected an integer, got 'x'"));
    char longv[400] = "run.name=";
    memset(longv + 9, 'n', 300);
    longv[309] = '\0';
    assert_int_equal(deck_override(&g_cfg, longv, 8, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "run.name: value is longer than 255 characters"));
    /* the longest value that fits (255 characters) is accepted, blanks around it or not */
    char name255[256];
    memset(name255, 'n', 255);
    name255[255] = '\0';
    for (int pad = 0; pad < 2; pad++) {
        snprintf(longv, sizeof longv, "run.name=%s%s%s", pad ? " " : "", name255, pad ? " " : "");
        assert_int_equal(deck_override(&g_cfg, longv, 8, g_err, sizeof g_err), 0);
        assert_string_equal(g_cfg.run.name, name255);
    }
    snprintf(longv, sizeof longv, "run.name= %sn ", name255); /* 256: one too many */
    assert_int_equal(deck_override(&g_cfg, longv, 8, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "run.name: value is longer than 255 characters"));
    /* a newline inside an argument never splits the message */
    assert_int_equal(deck_override(&g_cfg, "model.layers=2\nx", 10, g_err, sizeof g_err), -1);
    assert_null(strchr(g_err, '\n'));
    assert_non_null(strstr(g_err, "got '2?x'"));
    /* a cross-check failure caused by an override names the override */
    assert_int_equal(deck_override(&g_cfg, "model.channels=130", 9, g_err, sizeof g_err), 0);
    assert_int_equal(deck_check(&g_cfg, 1, g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "command line override 9: model.channels = 130"));
}

/* The printed resolved deck parses back to the same values. */
static void test_print_roundtrip(void **state)
{
    (void)state;
    const char *deck = "[run]\nname = round trip\nseed = 7\n[model]\nlayers = 6\nheads = 6\n"
                       "channels = 384\n[train]\nlr = 0.1\nbeta2 = 0.98765432123456789\n"
                       "schedule = constant\n[data]\nval =\n";
    assert_int_equal(parse(deck), 0);
    FtConfig a = g_cfg;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    deck_print(f, &a);
    fclose(f);
    FtConfig b;
    assert_int_equal(deck_parse(&b, "printed.ini", buf, len, g_err, sizeof g_err), 0);
    int nkeys;
    const FtDeckKey *keys = deck_keys(&nkeys);
    for (int i = 0; i < nkeys; i++) {
        char va[FT_DECK_STR_MAX], vb[FT_DECK_STR_MAX];
        deck_format_value(&a, &keys[i], va, sizeof va);
        deck_format_value(&b, &keys[i], vb, sizeof vb);
        assert_string_equal(va, vb);
    }
    assert_true(a.train.beta2 == b.train.beta2);
    assert_string_equal(b.data.val, "");
    free(buf);
}

/* The echo of the changed keys: a deck that, with the defaults, gives every value back; it
 * holds no key at its default (a key set to its default in the deck included); deck_save writes
 * the full deck to a file. */
static void test_print_changed(void **state)
{
    (void)state;
    const char *deck = "[run]\nname = echo\nseed = 1337\n[model]\nlayers = 6\nheads = 6\n"
                       "channels = 384\n[train]\nlr = 0.1\n[data]\nval =\n[perf]\n"
                       "papi_events = perf::TASK-CLOCK\n";
    assert_int_equal(parse(deck), 0);
    FtConfig a = g_cfg;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    deck_print_changed(f, &a);
    fclose(f);
    assert_non_null(strstr(buf, "\nlayers = 6 "));
    assert_non_null(strstr(buf, "\npapi_events = perf::TASK-CLOCK "));
    assert_null(strstr(buf, "seed =")); /* 1337 is the default, though the deck sets it */
    assert_null(strstr(buf, "[cluster]")); /* no changed key there */
    assert_non_null(strstr(buf, "; end of the keys that differ from the defaults\n"));
    FtConfig b;
    assert_int_equal(deck_parse(&b, "echo.ini", buf, len, g_err, sizeof g_err), 0);
    int nkeys;
    const FtDeckKey *keys = deck_keys(&nkeys);
    for (int i = 0; i < nkeys; i++) {
        char va[FT_DECK_STR_MAX], vb[FT_DECK_STR_MAX];
        deck_format_value(&a, &keys[i], va, sizeof va);
        deck_format_value(&b, &keys[i], vb, sizeof vb);
        assert_string_equal(va, vb);
    }
    free(buf);
    /* every key to a file, which parses back the same */
    char path[] = "/tmp/ft_deck_save_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(deck_save(&a, path, g_err, sizeof g_err), 0);
    f = fopen(path, "r");
    assert_non_null(f);
    char text[1 << 16];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    remove(path);
    assert_non_null(strstr(text, "seed = 1337 "));
    assert_int_equal(deck_parse(&b, path, text, n, g_err, sizeof g_err), 0);
    assert_string_equal(b.perf.papi_events, "perf::TASK-CLOCK");
    assert_int_equal(b.model.layers, 6);
    assert_int_equal(deck_save(&a, "/nonexistent-dir/x.deck.ini", g_err, sizeof g_err), -1);
    assert_non_null(strstr(g_err, "/nonexistent-dir/x.deck.ini: cannot write the resolved deck: "));
}

static void test_help_lists_every_key(void **state)
{
    (void)state;
    for (int md = 0; md < 2; md++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        deck_help(f, md);
        fclose(f);
        int nkeys;
        const FtDeckKey *keys = deck_keys(&nkeys);
        for (int i = 0; i < nkeys; i++) {
            char want[96];
            snprintf(want, sizeof want, md ? "| `%s` |" : "  %s ", keys[i].name);
            assert_non_null(strstr(buf, want));
            assert_non_null(strstr(buf, keys[i].help));
        }
        free(buf);
    }
}

FT_TEST_MAIN(cmocka_unit_test(test_defaults_valid), cmocka_unit_test(test_parse_good),
             cmocka_unit_test(test_empty_and_comments_only), cmocka_unit_test(test_unknown_section),
             cmocka_unit_test(test_unknown_key), cmocka_unit_test(test_wrong_types),
             cmocka_unit_test(test_bool_values), cmocka_unit_test(test_out_of_range),
             cmocka_unit_test(test_duplicates_and_syntax),
             cmocka_unit_test(test_line_limits_and_binary),
             cmocka_unit_test(test_reserved_and_auto), cmocka_unit_test(test_cross_checks),
             cmocka_unit_test(test_cross_edges), cmocka_unit_test(test_cross_engine),
             cmocka_unit_test(test_papi_events), cmocka_unit_test(test_print_changed),
             cmocka_unit_test(test_cross_world), cmocka_unit_test(test_long_path),
             cmocka_unit_test(test_overrides),
             cmocka_unit_test(test_print_roundtrip), cmocka_unit_test(test_help_lists_every_key))
