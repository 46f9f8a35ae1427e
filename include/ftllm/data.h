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
 * where it applies, the token offset. Opening is not collective: every rank opens read-only. */
#ifndef FTLLM_DATA_H
#define FTLLM_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FT_DATA_MAGIC 20240520
#define FT_DATA_VERSION 1
#define FT_DATA_HEADER_INTS 256

typedef struct ft_data FtData;

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

#endif
