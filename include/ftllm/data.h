/* data.h: token data in llm.c's shard format, delivered as numbered sequences.
 *
 * A shard is a header of 256 int32 (magic 20240520, version 1, token count) followed by that
 * many uint16 tokens. The shards matching a glob (sorted by name) are concatenated and cut into
 * sequences of T+1 tokens (consecutive sequences share one token, as llm.c's loader does:
 * inputs are tokens [0, T), targets [1, T]). Sequence numbers are global and random-access:
 * sequence idx is a pure function of (files, T, shuffle, seed, idx), so any rank (any SPARe
 * replica) can fetch "the sequences of shard k of step s" and a checkpoint only needs to save
 * the next sequence number (the data cursor). With shuffle on, each epoch (n consecutive
 * numbers, n = data_num_sequences) is its own seeded permutation.
 *
 * Bad files (wrong magic or version, truncated, token count not matching the file size,
 * token id >= vocab, no file matching the glob) are reported as one line naming the file and,
 * where it applies, the token offset. Opening is not collective: every rank opens read-only.
 *
 * Validation data: either its own glob (data.val, as llm.c does), or, when data.val is empty
 * and data.val_fraction > 0, the tail of the training stream held back (data_split_tail): the
 * training set then ends before it, and no token is shared between the two. */
#ifndef FTLLM_DATA_H
#define FTLLM_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FT_DATA_MAGIC 20240520
#define FT_DATA_VERSION 1
#define FT_DATA_HEADER_INTS 256
#define FT_DATA_MODEL_MAGIC 20240326 /* llm.c's model files: named in the wrong-magic message */

typedef struct ft_data FtData;
struct ft_config;

/* Opens and validates the shards matching glob. Returns NULL with a message in err. */
FtData *data_open(const char *glob, int T, int vocab, bool shuffle, uint64_t seed, char *err,
                  size_t errlen);

/* Number of distinct sequences (one epoch); at least 1 for an open FtData. */
uint64_t data_num_sequences(const FtData *d);

/* Total tokens over all shards. */
uint64_t data_num_tokens(const FtData *d);

/* Writes sequence idx (any idx >= 0) into tokens[0..T] (T+1 values). */
void data_sequence(const FtData *d, uint64_t idx, int *tokens);

/* Sequences first .. first+B-1 as a batch: inputs and targets are (B, T), row-major. */
void data_batch(const FtData *d, uint64_t first, int B, int *inputs, int *targets);

void data_close(FtData *d);

/* Writes tokens as one shard file. Returns 0, or -1 with a message in err. */
int data_write_shard(const char *path, const uint16_t *tokens, size_t n, char *err,
                     size_t errlen);

/* ---- additions (all pure functions of their arguments, like data_sequence) ---- */

/* Sequence length T this FtData was opened with. */
int data_seq_len(const FtData *d);

/* Number of shard files behind d. */
int data_num_files(const FtData *d);

/* Where sequence idx comes from, for messages: "FILE:token OFFSET" of its first token (a
 * sequence can run on into the next file). Writes at most len bytes (NUL-terminated). */
void data_locate(const FtData *d, uint64_t idx, char *buf, size_t len);

/* Position of sequence idx in the token stream of the glob (its first token), after the
 * epoch's permutation: what data_sequence copies from. */
uint64_t data_stream_offset(const FtData *d, uint64_t idx);

/* Holds back the last `fraction` (0 < fraction < 1) of d's sequences, in stream order, as a
 * validation set: d keeps the head (its epoch becomes shorter), *val gets the tail, not
 * shuffled, starting one token after d's last target so no token is in both. Both share the
 * mapped files; close them in any order. Returns 0, or -1 with a message in err when either
 * part would have no sequence. Do it right after data_open, before any sequence is used. */
int data_split_tail(FtData *d, double fraction, FtData **val, char *err, size_t errlen);

/* The deck's data: opens cfg->data.train (T, model.vocab, data.shuffle, seeded from run.seed)
 * into *train and the validation set into *val: cfg->data.val when not empty (not shuffled),
 * else the tail cut by data.val_fraction when it is > 0, else *val = NULL. Returns 0, or -1
 * with a message in err (nothing left open). */
int data_open_deck(const struct ft_config *cfg, int T, FtData **train, FtData **val, char *err,
                   size_t errlen);

/* Writes bytes as one shard of byte-level tokens (token = byte value, vocab 256), converting
 * in chunks. Written to a temporary name in the same folder and renamed, so a reader never
 * sees a partial file. Returns 0, or -1 with a message in err. */
int data_write_bytes_shard(const char *path, const unsigned char *bytes, size_t n, char *err,
                           size_t errlen);

#endif
