/* verb_inspect.c: `ftllm inspect FILE | DIR [--run NAME]`: verifies a checkpoint and
 * summarizes it (step, run, format, a table of datasets with their checksum verdict, the stored
 * configuration). Given a folder, it does what a resume does: picks the newest checkpoint of the
 * run that verifies (reporting what it skipped) and inspects that one. Runs on 1 or N ranks
 * (each rank verifies a share of every dataset).
 *
 * Testing aid (not in --help; documented in checkpoint/README.md):
 *   ftllm inspect --write-test DIR STEP [--run NAME] [--mb MB] [--keep K] [--async]
 *                 [--delay-ms MS]
 * writes a synthetic checkpoint of MB megabytes (one f32 tensor split by rows over the ranks),
 * slowly when --delay-ms is given, so tests can kill a write half-way and check storage. */
#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/ckpt.h"
#include "ftllm/cli.h"
#include "ftllm/ftllm.h"
#include "ftllm/log.h"
#include "ftllm/parse_int.h"

static const char *usage_text =
    "usage: ftllm inspect FILE | DIR [--run NAME]  (a checkpoint file, or a folder: its newest "
    "checkpoint that verifies)";

static void fmt_shape(char *buf, size_t len, const CkptDsInfo *d)
{
    if (d->dtype == CKPT_TEXT) {
        snprintf(buf, len, "%llu chars", (unsigned long long)d->shape[0] - 1);
        return;
    }
    size_t o = snprintf(buf, len, "[");
    for (int i = 0; i < d->ndim && o < len; i++)
        o += snprintf(buf + o, len - o, "%s%llu", i ? ", " : "", (unsigned long long)d->shape[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

/* Prints the summary and verifies every dataset; returns the exit code. */
static int inspect_file(const char *path, MPI_Comm comm, int rank)
{
    char err[CKPT_ERR_MAX];
    FtCkptFile *f = ckpt_open(path, comm, err, sizeof err);
    if (!f) {
        cli_error(comm, err);
        return FT_EXIT_USAGE;
    }
    const char *run = ckpt_file_attr(f, "run_name"), *ver = ckpt_file_attr(f, "ftllm_version"),
               *when = ckpt_file_attr(f, "created_utc");
    int n = ckpt_num_datasets(f), bad = 0;
    char first_bad[CKPT_ERR_MAX] = "";
    if (rank == 0) {
        printf("checkpoint %s\n  run %s, step %lld, written %s by ftllm %s (format %s v%d)\n",
               path, run ? run : "?", ckpt_file_step(f), when ? when : "?", ver ? ver : "?",
               CKPT_FORMAT, CKPT_FORMAT_VERSION);
        printf("\n  %-36s %-5s %-20s %-12s %s\n", "dataset", "dtype", "shape", "units", "checksum");
    }
    double bytes = 0;
    for (int i = 0; i < n; i++) {
        const CkptDsInfo *d = ckpt_dataset(f, i);
        int ok = ckpt_verify_dataset(f, i, err, sizeof err) == 0;
        if (!ok && !bad++) snprintf(first_bad, sizeof first_bad, "%s", err);
        double e = (double)ckpt_dtype_size(d->dtype);
        for (int k = 0; k < (d->dtype == CKPT_TEXT ? 1 : d->ndim); k++) e *= (double)d->shape[k];
        bytes += e;
        if (rank == 0) {
            char shape[96];
            fmt_shape(shape, sizeof shape, d);
            printf("  %-36s %-5s %-20s %-12s %s\n", d->name, ckpt_dtype_name(d->dtype), shape,
                   d->units, ok ? "OK" : "BAD");
        }
    }
    char *text = NULL;
    const char *which = ckpt_find_dataset(f, CKPT_DS_CONFIG) ? CKPT_DS_CONFIG
                        : ckpt_find_dataset(f, CKPT_DS_DECK) ? CKPT_DS_DECK : NULL;
    if (which && ckpt_read_text(f, which, &text, err, sizeof err) == 0 && rank == 0)
        printf("\n  configuration (%s):\n%s%s", which, text, text[0] && text[strlen(text) - 1] != '\n' ? "\n" : "");
    free(text);
    ckpt_close(f);
    if (rank == 0) fflush(stdout);
    if (bad) {
        char msg[CKPT_ERR_MAX + 64];
        snprintf(msg, sizeof msg, "%s (%d of %d datasets bad)", first_bad, bad, n);
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    log_info("verdict: checkpoint OK (%d datasets, %.1f MB, every checksum verified)", n, bytes / 1e6);
    return FT_EXIT_OK;
}

/* The run names present in dir (rank 0): the only one, or an error naming them. */
static int only_run(const char *dir, char *run, size_t len, char *msg, size_t mlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(msg, mlen, "%s: cannot read the folder", dir);
        return -1;
    }
    int n = 0;
    char names[512] = "";
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *p = strstr(de->d_name, ".step-");
        if (!p || !strstr(p, ".h5")) continue;
        char r[CKPT_NAME_MAX];
        snprintf(r, sizeof r, "%.*s", (int)(p - de->d_name), de->d_name);
        if (n && !strcmp(r, run)) continue;
        char quoted[CKPT_NAME_MAX + 2];
        snprintf(quoted, sizeof quoted, "'%s'", r);
        if (n && strstr(names, quoted)) continue;
        size_t o = strlen(names);
        snprintf(names + o, sizeof names - o, "%s%s", o ? ", " : "", quoted);
        snprintf(run, len, "%s", r);
        n++;
    }
    closedir(d);
    if (n == 1) return 0;
    if (n == 0) snprintf(msg, mlen, "%s: no checkpoint files in this folder", dir);
    else snprintf(msg, mlen, "%s: checkpoints of several runs (%s): choose one with --run NAME", dir, names);
    return -1;
}

static int inspect_dir(const char *dir, const char *run_arg, MPI_Comm comm, int rank)
{
    char run[CKPT_NAME_MAX] = "", msg[CKPT_ERR_MAX] = "";
    int ok = 1;
    if (run_arg) snprintf(run, sizeof run, "%s", run_arg);
    else if (rank == 0) ok = only_run(dir, run, sizeof run, msg, sizeof msg) == 0;
    int all = 0;
    FT_CHECK_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm));
    FT_CHECK_MPI(MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, comm));
    FT_CHECK_MPI(MPI_Bcast(run, sizeof run, MPI_CHAR, 0, comm));
    if (!all) {
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    char path[CKPT_PATH_MAX];
    long long step = 0;
    int rc = ckpt_find_latest(dir, run, comm, path, sizeof path, &step, msg, sizeof msg);
    if (rc < 0) {
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    if (rc == 0) {
        snprintf(msg, sizeof msg, "%s: no checkpoint of run '%s'", dir, run);
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    log_info("latest checkpoint of run '%s' that verifies: %s (step %lld)", run, path, step);
    return inspect_file(path, comm, rank);
}

/* Whether s is a whole decimal number in [lo, hi] (into *out). */
static bool whole(const char *s, long long lo, long long hi, long long *out)
{
    return ft_parse_int(s, lo, hi, out) == FT_INT_OK;
}

/* The testing aid: one synthetic checkpoint. */
static int write_test(int argc, char **argv, MPI_Comm comm, int rank, int size)
{
    if (argc < 4) {
        cli_error(comm, "usage: ftllm inspect --write-test DIR STEP [--run NAME] [--mb MB] "
                        "[--keep K] [--async] [--delay-ms MS]");
        return FT_EXIT_USAGE;
    }
    const char *dir = argv[2], *run = "ftllm";
    long long step = 0, keep = 2, delay = 0;
    double mb = 1;
    FtCkptOpts o = {0};
    char msg[256] = "";
    if (!whole(argv[3], 0, LLONG_MAX, &step))
        snprintf(msg, sizeof msg, "ftllm inspect --write-test: STEP '%.64s': expected an integer "
                 ">= 0", argv[3]);
    for (int i = 4; i < argc && !*msg; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL, *want = NULL;
        if (!strcmp(a, "--async")) {
            o.async = true;
            continue;
        }
        if (strcmp(a, "--run") && strcmp(a, "--mb") && strcmp(a, "--keep") &&
            strcmp(a, "--delay-ms")) {
            snprintf(msg, sizeof msg, "ftllm inspect --write-test: unknown argument '%.64s'", a);
            break;
        }
        if (!v) {
            snprintf(msg, sizeof msg, "ftllm inspect --write-test: %s needs a value", a);
            break;
        }
        i++;
        if (!strcmp(a, "--run")) {
            run = v;
        } else if (!strcmp(a, "--mb")) {
            char *end = NULL;
            mb = strtod(v, &end);
            if (end == v || *end || !(mb > 0)) want = "a number > 0";
        } else if (!strcmp(a, "--keep")) {
            if (!whole(v, 1, 1000000, &keep)) want = "an integer in [1, 1000000]";
        } else if (!whole(v, 0, 3600000, &delay)) {
            want = "an integer in [0, 3600000]";
        }
        if (want)
            snprintf(msg, sizeof msg, "ftllm inspect --write-test: %s '%.64s': expected %s", a, v,
                     want);
    }
    if (*msg) {
        cli_error(comm, msg);
        return FT_EXIT_USAGE;
    }
    o.keep = (int)keep, o.debug_delay_ms = (int)delay;
    char err[CKPT_ERR_MAX];
    FtCkpt *c = ckpt_create(dir, run, comm, &o, err, sizeof err);
    if (!c) {
        cli_error(comm, err);
        return FT_EXIT_USAGE;
    }
    enum { COLS = 1024, PARTS = 8 };
    uint64_t rows = (uint64_t)(mb * 1e6 / (4.0 * COLS * PARTS)) + 1;
    uint64_t r0 = rows * rank / size, r1 = rows * (rank + 1) / size;
    float *w = malloc((r1 - r0) * COLS * sizeof *w + 1);
    if (!w) FT_DIE("out of memory");
    for (uint64_t i = 0; i < (r1 - r0) * COLS; i++)
        w[i] = (float)(((r0 * COLS + i) * 2654435761u + (uint64_t)step) % 1000003) * 1e-6f;
    ckpt_begin(c, step);
    uint64_t g[2] = {rows, COLS}, off[2] = {r0, 0}, cnt[2] = {r1 - r0, COLS};
    for (int p = 0; p < PARTS; p++) { /* several datasets, so a slow write can be interrupted */
        char name[64];
        snprintf(name, sizeof name, "params/w%d", p);
        ckpt_put_tensor(c, name, CKPT_F32, 2, g, off, cnt, w, "1", "synthetic test tensor");
    }
    ckpt_put_i64(c, CKPT_DS_STEP, step, "steps", "steps completed");
    ckpt_put_text(c, CKPT_DS_CONFIG, "; synthetic checkpoint written by ftllm inspect --write-test\n",
                  "resolved configuration");
    const char *path = NULL;
    ckpt_commit(c, &path);
    ckpt_wait(c);
    log_info("wrote %s step %lld (%.1f MB in %.2f s)", dir, step, ckpt_last_write_bytes(c) / 1e6,
             ckpt_last_write_s(c));
    ckpt_destroy(c);
    free(w);
    return FT_EXIT_OK;
}

int verb_inspect(int argc, char **argv, MPI_Comm comm)
{
    int rank = 0, size = 1;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &size));
    if (argc >= 2 && !strcmp(argv[1], "--write-test")) return write_test(argc, argv, comm, rank, size);
    if (argc < 2 || argv[1][0] == '-') {
        cli_error(comm, usage_text);
        return FT_EXIT_USAGE;
    }
    const char *run = NULL;
    for (int i = 2; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--run")) {
            run = argv[++i];
        } else {
            cli_error(comm, usage_text);
            return FT_EXIT_USAGE;
        }
    }
    /* a folder or a file? (rank 0 looks; everyone follows) */
    int is_dir = 0;
    if (rank == 0) {
        DIR *d = opendir(argv[1]);
        if (d) {
            is_dir = 1;
            closedir(d);
        }
    }
    FT_CHECK_MPI(MPI_Bcast(&is_dir, 1, MPI_INT, 0, comm));
    if (is_dir) return inspect_dir(argv[1], run, comm, rank);
    if (run) {
        cli_error(comm, "ftllm inspect: --run applies to a folder, not to a file");
        return FT_EXIT_USAGE;
    }
    return inspect_file(argv[1], comm, rank);
}
