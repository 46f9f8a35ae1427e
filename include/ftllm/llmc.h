/* llmc.h: llm.c's GPT-2 model files, so a user can start from llm.c weights or hand weights back.
 *
 * Format (llm.c train_gpt2.c): a header of 256 int32: [0] magic 20240326, [1] version (3 =
 * fp32; llm.c's 5 = bf16 is refused), [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp, the rest
 * zero; then every parameter in fp32, in llm.c's order (the order of model.h), wte with Vp rows.
 * Errors (not a model file, wrong version, truncated or oversized, shape not matching the deck)
 * are one line naming the file and what was expected; reading never half-fills a model. */
#ifndef FTLLM_LLMC_H
#define FTLLM_LLMC_H

#include <stddef.h>

#include "ftllm/model.h"

#define FT_LLMC_MAGIC 20240326
#define FT_LLMC_VERSION_FP32 3
#define FT_LLMC_HEADER_INTS 256

/* Reads only the header's shape. Returns 0 or -1 with err set. */
int llmc_read_config(const char *path, FtGpt2Config *mc, char *err, size_t errlen);

/* Reads the parameters into m, whose shape (from the deck) must match the file's. Returns 0 or
 * -1 with err set (m unchanged). */
int llmc_read_model(const char *path, FtModel *m, char *err, size_t errlen);

/* Writes m's parameters (through a temporary file and a rename). Returns 0 or -1 with err set. */
int llmc_write_model(const char *path, const FtModel *m, char *err, size_t errlen);

#endif
