/* llmc_model.c: reading and writing llm.c GPT-2 model files (llmc.h).
 * Key decisions: the header is checked field by field before any parameter is read, the file
 * size must be exactly header + parameters (so truncation and trailing garbage are both
 * caught), parameters go to a scratch buffer first so a failed read leaves the model as it
 * was, and writes go to PATH.tmp then rename(2) so a crash never leaves half a file. */
#include "ftllm/llmc.h"
#include "ftllm/log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_header(FILE *f, const char *path, int32_t *h, long long *fsize, char *err,
                       size_t errlen)
{
    if (fseek(f, 0, SEEK_END) || (*fsize = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        snprintf(err, errlen, "%s: cannot determine the file size: %s", path, strerror(errno));
        return -1;
    }
    if (*fsize < (long long)sizeof(int32_t) * FT_LLMC_HEADER_INTS ||
        fread(h, sizeof(int32_t), FT_LLMC_HEADER_INTS, f) != FT_LLMC_HEADER_INTS) {
        snprintf(err, errlen, "%s: truncated: %lld bytes, shorter than the %zu-byte llm.c header",
                 path, *fsize, sizeof(int32_t) * FT_LLMC_HEADER_INTS);
        return -1;
    }
    if (h[0] != FT_LLMC_MAGIC) {
        snprintf(err, errlen, "%s: not an llm.c model file (magic %d, expected %d)", path, h[0],
                 FT_LLMC_MAGIC);
        return -1;
    }
    if (h[1] != FT_LLMC_VERSION_FP32) {
        snprintf(err, errlen, "%s: llm.c model version %d is not supported (expected %d, fp32%s)",
                 path, h[1], FT_LLMC_VERSION_FP32, h[1] == 5 ? "; version 5 is bf16" : "");
        return -1;
    }
    for (int i = 2; i < 8; i++)
        if (h[i] <= 0 || (i == 7 && h[7] < h[3])) {
            snprintf(err, errlen, "%s: bad llm.c header: field %d is %d (maxT, V, L, NH, C, Vp "
                                  "must be positive and Vp >= V)", path, i, h[i]);
            return -1;
        }
    return 0;
}

static void header_config(const int32_t *h, FtGpt2Config *mc)
{
    memset(mc, 0, sizeof *mc); /* a dense GPT-2: no experts */
    mc->maxT = h[2];
    mc->V = h[3];
    mc->L = h[4];
    mc->NH = h[5];
    mc->C = h[6];
    mc->Vp = h[7];
}

int llmc_read_config(const char *path, FtGpt2Config *mc, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the model file: %s", path, strerror(errno));
        return -1;
    }
    int32_t h[FT_LLMC_HEADER_INTS];
    long long fsize;
    int rc = read_header(f, path, h, &fsize, err, errlen);
    if (!rc) header_config(h, mc);
    fclose(f);
    return rc;
}

int llmc_read_model(const char *path, FtModel *m, char *err, size_t errlen)
{
    int rc = -1;
    float *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the model file: %s", path, strerror(errno));
        return -1;
    }
    int32_t h[FT_LLMC_HEADER_INTS];
    long long fsize;
    if (read_header(f, path, h, &fsize, err, errlen)) goto out_close;
    FtGpt2Config fc, *dc = &m->cfg;
    header_config(h, &fc);
    if (fc.L != dc->L || fc.NH != dc->NH || fc.C != dc->C || fc.V != dc->V || fc.Vp != dc->Vp ||
        fc.maxT != dc->maxT) {
        snprintf(err, errlen,
                 "%s: model shape L %d NH %d C %d V %d Vp %d maxT %d does not match the deck's "
                 "L %d NH %d C %d V %d Vp %d maxT %d (HINT: set model.layers, heads, channels, "
                 "vocab, vocab_pad, seq_len to the file's)",
                 path, fc.L, fc.NH, fc.C, fc.V, fc.Vp, fc.maxT, dc->L, dc->NH, dc->C, dc->V,
                 dc->Vp, dc->maxT);
        goto out_close;
    }
    long long want = (long long)sizeof(int32_t) * FT_LLMC_HEADER_INTS +
                     (long long)sizeof(float) * (long long)m->nparams;
    if (fsize != want) {
        snprintf(err, errlen, "%s: %s: %lld bytes, expected %lld for %zu fp32 parameters", path,
                 fsize < want ? "truncated" : "trailing data", fsize, want, m->nparams);
        goto out_close;
    }
    buf = malloc(sizeof(float) * m->nparams);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory for %zu parameters", path, m->nparams);
        goto out_close;
    }
    if (fread(buf, sizeof(float), m->nparams, f) != m->nparams) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
        goto out_free;
    }
    memcpy(m->params, buf, sizeof(float) * m->nparams);
    rc = 0;
out_free:
    free(buf);
out_close:
    fclose(f);
    return rc;
}

int llmc_write_model(const char *path, const FtModel *m, char *err, size_t errlen)
{
    size_t n = strlen(path) + sizeof ".tmp";
    char *tmp = malloc(n); /* the file goes in under its name only once whole */
    FT_ASSERT(tmp);
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    int32_t h[FT_LLMC_HEADER_INTS] = {FT_LLMC_MAGIC, FT_LLMC_VERSION_FP32, m->cfg.maxT, m->cfg.V,
                                      m->cfg.L, m->cfg.NH, m->cfg.C, m->cfg.Vp};
    int ok = fwrite(h, sizeof h, 1, f) == 1 &&
             fwrite(m->params, sizeof(float), m->nparams, f) == m->nparams;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path)) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
