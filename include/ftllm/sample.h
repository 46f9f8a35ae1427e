/* sample.h: text generation from a model (`ftllm sample`, and the sample at the end of
 * `ftllm train`). Sampling draws each next token from the softmax over the unpadded vocabulary
 * (temperature 1) with a seeded stream, so the same model and seed give the same text. The
 * forward runs on a forward-only tape through the executor, like everything else. */
#ifndef FTLLM_SAMPLE_H
#define FTLLM_SAMPLE_H

#include <stdint.h>
#include <stdio.h>

#include "ftllm/model.h"

/* Appends n sampled tokens to the prompt (nprompt >= 1 tokens) and writes them to out[0..n).
 * The context window is model.seq_len tokens; longer texts slide it. */
void sample_generate(const FtModel *m, uint64_t seed, const int *prompt, int nprompt, int n,
                     int *out);

/* The token that a coin in [0, 1) picks from probabilities p[0..V): the first v whose
 * cumulative probability exceeds the coin. Tokens of probability 0 are never picked (nor is a
 * NaN's); where rounding leaves the sum below the coin, the last token of nonzero probability
 * (token 0 when none has any). */
int sample_pick(const float *p, int V, double coin);

/* Prints tokens as text: bytes for the byte tokenizer (V <= 256; control characters other than
 * newline and tab shown as '?'), else token ids separated by spaces. */
void sample_print(FILE *f, const int *tokens, int n, int V);

/* The default one-token prompt: '\n' for the byte tokenizer, GPT-2's <|endoftext|> (50256) for
 * its vocabulary, else token 0. */
int sample_default_prompt(int V);

#endif
