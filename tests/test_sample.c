/* test_sample.c: how sampled byte tokens are shown: text stays text, valid UTF-8 passes
 * through, control bytes and broken sequences become '?'; larger vocabularies print ids. And
 * which row of the model's output sampling reads: on a model whose next-token distribution is
 * one-hot on a function of the position alone, each generated token is that function of the
 * last position of the window (the prompt's last token's, then the previous token's), also
 * once the text outgrows the window and it slides. And that each token gets its own draw: on a
 * freshly initialized model (next-token distributions close to uniform) the tokens spread over
 * the vocabulary, where one draw reused would pick about the same token every time; another
 * seed gives another text. sample_pick's rule on hand-made probabilities.
 * ft-test: ranks 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/deck.h"
#include "ftllm/sample.h"

static char *shown(const int *t, int n, int V)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sample_print(f, t, n, V);
    fclose(f);
    return buf;
}

static void test_bytes_as_text(void **state)
{
    (void)state;
    /* "a\n", a valid 2-byte e-acute, ESC, a lone continuation byte, a truncated 3-byte lead */
    int t[] = {'a', '\n', 0xC3, 0xA9, 27, 0x80, 'b', 0xE2, 0x82};
    char *s = shown(t, 9, 256);
    assert_string_equal(s, "a\n\xC3\xA9??b??\n");
    free(s);
    /* tab passes, DEL is a control byte; a 4-byte sequence led by 0xF4 (U+10FFFF) passes, a lead
     * byte followed by ASCII instead of a continuation byte is broken */
    int u[] = {'\t', 127, 0xF4, 0x8F, 0xBF, 0xBF, 0xE2, 'x', 0x82, 0xF0, 0x9F, 0x98, 0x80};
    s = shown(u, 13, 256);
    assert_string_equal(s, "\t?\xF4\x8F\xBF\xBF?x?\xF0\x9F\x98\x80\n");
    free(s);
    int ids[] = {50256, 7, 12};
    s = shown(ids, 3, 50257);
    assert_string_equal(s, "50256 7 12\n");
    free(s);
}

/* sample_pick: the first token whose cumulative probability passes the coin; zero-probability
 * tokens never (a coin of exactly 0, or one past a sum that rounding left short); the default
 * prompts. */
static void test_pick(void **state)
{
    (void)state;
    const float p[5] = {0.0f, 0.25f, 0.5f, 0.0f, 0.25f};
    assert_int_equal(sample_pick(p, 5, 0.0), 1);
    assert_int_equal(sample_pick(p, 5, 0.2499), 1);
    assert_int_equal(sample_pick(p, 5, 0.25), 2);
    assert_int_equal(sample_pick(p, 5, 0.7499), 2);
    assert_int_equal(sample_pick(p, 5, 0.75), 4);
    const float short_sum[4] = {0.5f, 0.4f, 0.0999f, 0.0f}; /* sums to 0.9999 */
    assert_int_equal(sample_pick(short_sum, 4, 0.99995), 2);
    const float none[3] = {0, 0, 0};
    assert_int_equal(sample_pick(none, 3, 0.5), 0);
    assert_int_equal(sample_default_prompt(256), '\n');
    assert_int_equal(sample_default_prompt(50257), 50256);
    assert_int_equal(sample_default_prompt(1000), 0);
}

enum { POS_C = 64, POS_T = 8 }; /* C = V = Vp = 64: a token and a position each own a channel */

/* The channel position t's embedding points at: distinct for t < POS_T. */
static int pos_channel(int t) { return (7 * t + 3) % POS_C; }

/* A model that ignores its context: every block weight zero (the blocks add exactly 0 to the
 * residual stream), wte[v] = 10 e_v, wpe[t] = 20 e_pos_channel(t), final LayerNorm the
 * identity map's scale. The stream at (token v, position t) is 10 e_v + 20 e_p: after the final
 * LayerNorm, channel p is 7.1, channel v 3.5, the rest -0.17, and the tied head (x 10) gives
 * token p a logit 36 above any other: its probability is 1 in float (the others' sum < 1e-15),
 * so whatever the random draw, the sampled token is pos_channel of the row read. */
static void position_model(FtModel *m)
{
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 2, c.model.heads = 2, c.model.channels = POS_C, c.model.vocab = POS_C;
    c.model.vocab_pad = 16, c.model.seq_len = POS_T;
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    assert_int_equal(mc.Vp, POS_C);
    model_create(m, &mc);
    memset(m->params, 0, sizeof(float) * m->nparams);
    float *wte = model_tensor(m, m->params, FT_P_WTE, -1), *wpe = model_tensor(m, m->params, FT_P_WPE, -1);
    float *lnf = model_tensor(m, m->params, FT_P_LNFW, -1);
    for (int v = 0; v < POS_C; v++) wte[v * POS_C + v] = 10.0f, lnf[v] = 1.0f;
    for (int t = 0; t < POS_T; t++) wpe[t * POS_C + pos_channel(t)] = 20.0f;
}

static void test_reads_last_position(void **state)
{
    (void)state;
    FtModel m;
    position_model(&m);
    /* window not filled (it is nprompt + n < T long), filled exactly, outgrown (it slides),
     * and a prompt longer than the window */
    static const int cases[][2] = {{1, 3}, {3, 5}, {2, 14}, {11, 4}}; /* nprompt, n */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int np = cases[k][0], n = cases[k][1], prompt[16], out[16];
        for (int i = 0; i < np; i++) prompt[i] = (5 * i + 1) % POS_C;
        sample_generate(&m, 1234 + k, prompt, np, n, out);
        for (int i = 0; i < n; i++) { /* the text is np + i tokens long; its last W are read */
            int len = np + i, W = np + n < POS_T ? np + n : POS_T;
            int last = (len < W ? len : W) - 1; /* the last token's place in the window */
            if (out[i] != pos_channel(last))
                printf("  prompt %d, %d tokens: token %d is %d, want %d (position %d)\n", np, n,
                       i, out[i], pos_channel(last), last);
            assert_int_equal(out[i], pos_channel(last));
        }
    }
    model_free(&m);
}

/* 48 tokens from a random GPT-2 of V = 64: its logits are within a few tenths of each other
 * (weights of std 0.02), so each token is close to a uniform draw and 48 of them hit about 33
 * distinct values; the same draw for every token (a stream restarted per token) lands each
 * time where the cumulative distribution crosses it, which moves by a token or two: a few
 * distinct values. The two runs of the same seed agree. */
static void test_draw_per_token(void **state)
{
    (void)state;
    enum { N = 48 };
    FtConfig c;
    char err[FT_DECK_ERR_MAX];
    assert_int_equal(deck_defaults(&c, err, sizeof err), 0);
    c.model.layers = 2, c.model.heads = 2, c.model.channels = 32, c.model.vocab = 64;
    c.model.vocab_pad = 16, c.model.seq_len = 16;
    FtGpt2Config mc;
    model_config_from_deck(&c, &mc);
    FtModel m;
    model_create(&m, &mc);
    model_init_random(&m, 3);
    int prompt = 1, out[N], again[N], seen[64] = {0}, distinct = 0;
    sample_generate(&m, 77, &prompt, 1, N, out);
    sample_generate(&m, 77, &prompt, 1, N, again);
    assert_memory_equal(out, again, sizeof out);
    sample_generate(&m, 78, &prompt, 1, N, again); /* another seed, another text */
    assert_memory_not_equal(out, again, sizeof out);
    for (int i = 0; i < N; i++) {
        assert_true(out[i] >= 0 && out[i] < 64);
        distinct += !seen[out[i]]++;
    }
    printf("  %d distinct tokens of %d\n", distinct, N);
    assert_true(distinct >= 16);
    model_free(&m);
}

FT_TEST_MAIN(cmocka_unit_test(test_bytes_as_text), cmocka_unit_test(test_pick), cmocka_unit_test(test_reads_last_position),
             cmocka_unit_test(test_draw_per_token))
