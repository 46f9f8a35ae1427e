/* deck_load.c: the collective deck load. Rank 0 reads the file; its bytes (or the reason it
 * could not read them) are broadcast, and every rank parses the same bytes, so every rank
 * returns the same status and nobody branches alone on a bad deck. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/deck.h"
#include "ftllm/log.h"

/* Reads the whole file; returns its length, or -1 with errno-style reason in err. */
static long read_file(const char *path, char **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the deck: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) FT_DIE("out of memory");
    for (;;) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (len > FT_DECK_TEXT_MAX) {
            snprintf(err, errlen, "%s: deck is larger than %d bytes (is this a deck?)", path,
                     FT_DECK_TEXT_MAX);
            goto out_fail;
        }
        if (n == 0) break;
        if (len == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) FT_DIE("out of memory");
            buf = nb;
        }
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
        goto out_fail;
    }
    fclose(f);
    buf[len] = '\0';
    *out = buf;
    return (long)len;
out_fail:
    fclose(f);
    free(buf);
    return -1;
}

/* The load; nranks > 0: the layout must match it (deck_check). */
static int load(FtConfig *cfg, const char *path, int noverrides, char **overrides, MPI_Comm comm,
                int nranks, char *err, size_t errlen)
{
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    char *text = NULL;
    long len = 0;
    char msg[FT_DECK_ERR_MAX] = "";
    if (rank == 0) len = read_file(path, &text, msg, sizeof msg);
    FT_CHECK_MPI(MPI_Bcast(&len, 1, MPI_LONG, 0, comm));
    if (len < 0) {
        /* rank 0's reason reaches everyone, so every rank can report the same line */
        FT_CHECK_MPI(MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, comm));
        snprintf(err, errlen, "%s", msg);
        deck_defaults(cfg, msg, sizeof msg);
        return -1;
    }
    if (rank != 0) {
        text = malloc((size_t)len + 1);
        if (!text) FT_DIE("out of memory");
        text[len] = '\0';
    }
    if (len > 0) FT_CHECK_MPI(MPI_Bcast(text, (int)len, MPI_CHAR, 0, comm));
    int rc = deck_parse(cfg, path, text, (size_t)len, err, errlen);
    cfg->text = text;
    cfg->text_len = (size_t)len;
    for (int i = 0; rc == 0 && i < noverrides; i++)
        rc = deck_override(cfg, overrides[i], i + 1, err, errlen);
    if (rc == 0) rc = deck_check(cfg, nranks, err, errlen);
    return rc;
}

int deck_load(FtConfig *cfg, const char *path, int noverrides, char **overrides, MPI_Comm comm,
              char *err, size_t errlen)
{
    int nranks = 1;
    FT_CHECK_MPI(MPI_Comm_size(comm, &nranks));
    return load(cfg, path, noverrides, overrides, comm, nranks, err, errlen);
}

int deck_load_any_layout(FtConfig *cfg, const char *path, int noverrides, char **overrides,
                         MPI_Comm comm, char *err, size_t errlen)
{
    return load(cfg, path, noverrides, overrides, comm, 0, err, errlen);
}
