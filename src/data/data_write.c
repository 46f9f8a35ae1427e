/* data_write.c: writing llm.c token shards (see data.h).
 *
 * A shard is written to PATH.tmp.PID in the same folder and renamed onto PATH once complete,
 * so a reader (or a rerun of scripts/make-data) never sees a half-written file. The header's
 * token count is an int32, so one shard holds at most 2^31-1 tokens; larger inputs are an error
 * that says so (split the text into several shards: a glob reads them as one stream). */
#include "ftllm/data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK_TOKENS 65536

struct writer {
    const char *path;
    char tmp[4096];
    int fd;
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Creates the temporary file and writes the header for n tokens. */
static int writer_open(struct writer *w, const char *path, size_t n, char *err, size_t errlen)
{
    w->path = path;
    w->fd = -1;
    if (n > INT32_MAX) {
        seterr(err, errlen,
               "%s: %zu tokens do not fit one shard (its header counts at most %d); split the "
               "input into several shards",
               path, n, INT32_MAX);
        return -1;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        seterr(err, errlen, "%s: is a directory, cannot write a token shard there", path);
        return -1;
    }
    if ((size_t)snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld", path, (long)getpid()) >=
        sizeof w->tmp) {
        seterr(err, errlen, "%.200s...: path too long", path);
        return -1;
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        seterr(err, errlen, "%s: cannot create the token shard: %s", path, strerror(errno));
        return -1;
    }
    int32_t hdr[FT_DATA_HEADER_INTS] = {0};
    hdr[0] = FT_DATA_MAGIC;
    hdr[1] = FT_DATA_VERSION;
    hdr[2] = (int32_t)n;
    if (write_all(w->fd, hdr, sizeof hdr)) {
        seterr(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int writer_put(struct writer *w, const uint16_t *tok, size_t n, char *err, size_t errlen)
{
    if (write_all(w->fd, tok, n * sizeof *tok)) {
        seterr(err, errlen, "%s: cannot write: %s", w->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Closes; on success renames onto the final path, else removes the temporary file. */
static int writer_close(struct writer *w, int ok, char *err, size_t errlen)
{
    int rc = ok ? 0 : -1;
    if (w->fd >= 0 && close(w->fd) && rc == 0) {
        seterr(err, errlen, "%s: cannot write: %s", w->path, strerror(errno));
        rc = -1;
    }
    if (w->fd >= 0 && rc == 0 && rename(w->tmp, w->path)) {
        seterr(err, errlen, "%s: cannot rename the finished shard onto this name: %s", w->path,
               strerror(errno));
        rc = -1;
    }
    if (w->fd >= 0 && rc != 0) unlink(w->tmp);
    w->fd = -1;
    return rc;
}

int data_write_shard(const char *path, const uint16_t *tokens, size_t n, char *err,
                     size_t errlen)
{
    struct writer w;
    int ok = writer_open(&w, path, n, err, errlen) == 0 &&
             writer_put(&w, tokens, n, err, errlen) == 0;
    return writer_close(&w, ok, err, errlen);
}

int data_write_bytes_shard(const char *path, const unsigned char *bytes, size_t n, char *err,
                           size_t errlen)
{
    struct writer w;
    uint16_t buf[CHUNK_TOKENS];
    int ok = writer_open(&w, path, n, err, errlen) == 0;
    for (size_t i = 0; ok && i < n; i += CHUNK_TOKENS) {
        size_t m = n - i < CHUNK_TOKENS ? n - i : CHUNK_TOKENS;
        for (size_t j = 0; j < m; j++) buf[j] = bytes[i + j];
        ok = writer_put(&w, buf, m, err, errlen) == 0;
    }
    return writer_close(&w, ok, err, errlen);
}
