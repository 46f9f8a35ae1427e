/* verb_tokenize.c: `ftllm tokenize IN.txt OUT.bin [--val VAL.bin --val-fraction F]`.
 *
 * The byte-level tokenizer: every byte of the input is one token (0..255, vocab 256), written
 * as an llm.c token shard. With --val and --val-fraction, the last fraction F of the text goes
 * to VAL.bin instead (cut at the next line start, so the validation text starts on a line of
 * its own); the two files share no byte. Rank 0 does the work and the exit code is broadcast,
 * so the verb behaves the same under mpiexec -n K. Errors are one line, exit code 2. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftllm/cli.h"
#include "ftllm/data.h"
#include "ftllm/ftllm.h"
#include "ftllm/log.h"

#define USAGE "usage: ftllm tokenize IN.txt OUT.bin [--val VAL.bin --val-fraction F]"

struct tok_args {
    const char *in, *out, *val;
    double frac;
};

/* Parses the arguments; returns 0 or -1 with msg set. */
static int parse_args(int argc, char **argv, struct tok_args *a, char *msg, size_t len)
{
    memset(a, 0, sizeof *a);
    int npos = 0, have_frac = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--val") || !strcmp(s, "--val-fraction")) {
            if (i + 1 >= argc) {
                snprintf(msg, len, "ftllm tokenize: %s needs a value; " USAGE, s);
                return -1;
            }
            const char *v = argv[++i];
            if (!strcmp(s, "--val")) {
                a->val = v;
                continue;
            }
            char *end = NULL;
            errno = 0;
            a->frac = strtod(v, &end);
            if (errno || end == v || *end || !(a->frac > 0 && a->frac < 1)) {
                snprintf(msg, len,
                         "ftllm tokenize: --val-fraction '%.64s': expected a number in (0, 1)",
                         v);
                return -1;
            }
            have_frac = 1;
        } else if (s[0] == '-' && s[1]) {
            snprintf(msg, len, "ftllm tokenize: unknown option '%.64s'; " USAGE, s);
            return -1;
        } else if (npos == 0) {
            a->in = s, npos++;
        } else if (npos == 1) {
            a->out = s, npos++;
        } else {
            snprintf(msg, len, "ftllm tokenize: unexpected argument '%.64s'; " USAGE, s);
            return -1;
        }
    }
    if (npos != 2) {
        snprintf(msg, len, USAGE);
        return -1;
    }
    if (!a->val != !have_frac) {
        snprintf(msg, len, "ftllm tokenize: --val and --val-fraction go together; " USAGE);
        return -1;
    }
    return 0;
}

/* Rank 0's work. Returns an exit code; msg holds the error line. */
static int tokenize(const struct tok_args *a, char *msg, size_t len)
{
    int rc = FT_EXIT_USAGE;
    int fd = open(a->in, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(msg, len, "%s: cannot open the input text: %s", a->in, strerror(errno));
        return rc;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        snprintf(msg, len, "%s: cannot stat the input text: %s", a->in, strerror(errno));
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(msg, len, "%s: %s, expected a text file", a->in,
                 S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        goto out_close;
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        snprintf(msg, len, "%s: empty input, nothing to tokenize", a->in);
        goto out_close;
    }
    const unsigned char *text = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (text == MAP_FAILED) {
        snprintf(msg, len, "%s: cannot read the input text: %s", a->in, strerror(errno));
        goto out_close;
    }
    size_t ntrain = n;
    if (a->val) {
        size_t cut = n - (size_t)ceil((double)n * a->frac);
        while (cut > 0 && cut < n && text[cut - 1] != '\n') cut++; /* start val on a line */
        ntrain = cut;
        if (ntrain == 0 || ntrain == n) {
            snprintf(msg, len,
                     "%s: --val-fraction %g of %zu bytes (cut at a line start) leaves %zu bytes "
                     "for %s and none for %s",
                     a->in, a->frac, n, ntrain ? ntrain : n, ntrain ? a->out : a->val,
                     ntrain ? a->val : a->out);
            goto out_unmap;
        }
    }
    if (data_write_bytes_shard(a->out, text, ntrain, msg, len)) goto out_unmap;
    if (a->val && data_write_bytes_shard(a->val, text + ntrain, n - ntrain, msg, len)) {
        unlink(a->out);
        goto out_unmap;
    }
    if (a->val)
        log_info("tokenize: %s: %zu bytes -> %s (%zu tokens) + %s (%zu tokens), vocab 256",
                 a->in, n, a->out, ntrain, a->val, n - ntrain);
    else
        log_info("tokenize: %s: %zu bytes -> %s (%zu tokens), vocab 256", a->in, n, a->out, n);
    rc = FT_EXIT_OK;
out_unmap:
    munmap((void *)text, n);
out_close:
    close(fd);
    return rc;
}

int verb_tokenize(int argc, char **argv, MPI_Comm comm)
{
    int rank = 0;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    char msg[1024] = "";
    struct tok_args a;
    if (parse_args(argc, argv, &a, msg, sizeof msg)) {
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    int rc = rank == 0 ? tokenize(&a, msg, sizeof msg) : FT_EXIT_OK;
    FT_CHECK_MPI(MPI_Bcast(&rc, 1, MPI_INT, 0, comm));
    if (rc != FT_EXIT_OK) cli_error(comm, msg);
    return rc;
}
