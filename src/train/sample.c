/* sample.c: text generation (sample.h). One forward-only tape of B = 1 and T = the window,
 * rerun per generated token (the window is short on a CPU run; a KV cache is not worth its
 * complexity here). Causal attention makes the unused tail of the window irrelevant to the
 * row that is read, so it is simply left as token 0. */
#include "ftllm/sample.h"

#include <stdlib.h>
#include <string.h>

#include "ftllm/exec.h"
#include "ftllm/log.h"

int sample_pick(const float *p, int V, double coin)
{
    double cdf = 0;
    int last = 0;
    for (int v = 0; v < V; v++) {
        if (!(p[v] > 0)) continue;
        cdf += p[v];
        last = v;
        if (coin < cdf) return v;
    }
    return last; /* the probabilities summed to less than the coin in float */
}

void sample_generate(const FtModel *m, uint64_t seed, const int *prompt, int nprompt, int n,
                     int *out)
{
    FT_ASSERT(nprompt >= 1 && n >= 0);
    int W = m->cfg.maxT, V = m->cfg.V, Vp = m->cfg.Vp;
    int *ctx = malloc(sizeof(int) * (size_t)(nprompt + n));
    FT_ASSERT(ctx);
    memcpy(ctx, prompt, sizeof(int) * (size_t)nprompt);
    int len = nprompt;
    if (W > nprompt + n) W = nprompt + n;
    FtTape tp;
    FtTapeOpts o = {.B = 1, .T = W, .ac = FT_AC_OFF, .backward = false, .loss_scale = 1};
    model_build_tape(m, &o, &tp);
    const FtBackend *be = m->be;
    int *tok = calloc((size_t)W, sizeof(int)); /* host staging */
    float *p = malloc(sizeof(float) * (size_t)Vp);
    FT_ASSERT(tok && p);
    FtExec ex = {.be = be};
    uint64_t rng = seed ^ 0x5A4D504C45ull;
    for (int k = 0; k < n; k++) {
        int start = len > W ? len - W : 0, used = len - start;
        memset(tok, 0, sizeof(int) * (size_t)W);
        memcpy(tok, ctx + start, sizeof(int) * (size_t)used);
        be->to_device(be->ctx, tp.t[tp.tokens].data, tok, sizeof(int) * (size_t)W);
        exec_run_ctx(&ex, &tp, 0, tp.fwd_end);
        be->to_host(be->ctx, p, (const float *)tp.t[tp.probs].data + (size_t)(used - 1) * Vp,
                    sizeof(float) * (size_t)Vp);
        int next = sample_pick(p, V, model_rng_uniform(&rng));
        ctx[len++] = next;
        out[k] = next;
    }
    tape_free(&tp);
    free(tok), free(p), free(ctx);
}

/* Length of the valid UTF-8 sequence starting at tokens[i] (1-4), or 0 when the bytes there
 * do not form one (a half-trained model emits stray high bytes). */
static int utf8_len(const int *tokens, int i, int n)
{
    int c = tokens[i], len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (c >= 0xF5 || c < 0xC2 || i + len > n) return 0;
    for (int k = 1; k < len; k++)
        if ((tokens[i + k] & 0xC0) != 0x80) return 0;
    return len;
}

void sample_print(FILE *f, const int *tokens, int n, int V)
{
    for (int i = 0; i < n; i++) {
        if (V > 256) {
            fprintf(f, "%s%d", i ? " " : "", tokens[i]);
            continue;
        }
        /* bytes as text: printable ASCII, newlines, tabs and whole UTF-8 sequences as they
         * are; control characters and broken sequences as '?', so the terminal stays sane */
        int c = tokens[i];
        if (c == '\n' || c == '\t' || (c >= 32 && c < 127)) {
            fputc(c, f);
        } else if (c >= 128 && utf8_len(tokens, i, n)) {
            int len = utf8_len(tokens, i, n);
            for (int k = 0; k < len; k++) fputc(tokens[i + k], f);
            i += len - 1;
        } else {
            fputc('?', f);
        }
    }
    fputc('\n', f);
}

int sample_default_prompt(int V)
{
    if (V <= 256) return '\n' < V ? '\n' : 0;
    if (V == 50257) return 50256;
    return 0;
}
