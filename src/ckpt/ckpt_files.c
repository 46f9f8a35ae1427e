/* ckpt_files.c: checkpoint files in their folder: names (RUN.step-00000100.h5, temporaries with
 * ".tmp" appended), listing a run's files, keep-last-K pruning and picking the newest
 * checkpoint that verifies (ckpt_find_latest).
 *
 * Decisions: steps are parsed from the names and compared as numbers (no reliance on zero
 * padding). Pruning first removes checkpoints of steps after the one just written: after a
 * restart from an earlier checkpoint (the newest was corrupt), those belong to an abandoned
 * future and would otherwise be kept as "newest" while the live run's files are deleted.
 * Only rank 0 touches the folder; the others learn the list by broadcast. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_impl.h"
#include "ftllm/log.h"

void ckpt_name(char *buf, size_t len, const char *dir, const char *run, long long step, int tmp)
{
    snprintf(buf, len, "%s/%s.step-%08lld.h5%s", dir, run, step, tmp ? ".tmp" : "");
}

void ckpt_path(char *buf, size_t len, const char *dir, const char *run, long long step)
{
    ckpt_name(buf, len, dir, run, step, 0);
}

int ckpt_parse_name(const char *name, const char *run, long long *step, int *tmp)
{
    size_t lr = strlen(run);
    if (strncmp(name, run, lr) || strncmp(name + lr, ".step-", 6)) return 0;
    const char *p = name + lr + 6, *q = p;
    long long s = 0;
    while (*q >= '0' && *q <= '9' && q - p < 18) s = s * 10 + (*q++ - '0');
    if (q == p) return 0;
    if (!strcmp(q, ".h5")) *tmp = 0;
    else if (!strcmp(q, ".h5.tmp")) *tmp = 1;
    else return 0;
    *step = s;
    return 1;
}

struct entry {
    long long step;
    int tmp;
};

static int newest_first(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? 1 : -1;
    return x->tmp - y->tmp;
}

int ckpt_list_run(const char *dir, const char *run, long long **steps, int **tmp)
{
    *steps = NULL;
    *tmp = NULL;
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct entry *e = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct entry x;
        if (!ckpt_parse_name(de->d_name, run, &x.step, &x.tmp)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            struct entry *ne = realloc(e, cap * sizeof *e);
            if (!ne) FT_DIE("out of memory listing %s", dir);
            e = ne;
        }
        e[n++] = x;
    }
    closedir(d);
    if (n) qsort(e, n, sizeof *e, newest_first);
    *steps = malloc((n ? n : 1) * sizeof **steps);
    *tmp = malloc((n ? n : 1) * sizeof **tmp);
    if (!*steps || !*tmp) FT_DIE("out of memory listing %s", dir);
    for (int i = 0; i < n; i++) {
        (*steps)[i] = e[i].step;
        (*tmp)[i] = e[i].tmp;
    }
    free(e);
    return n;
}

void ckpt_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) FT_DIE("checkpoint: cannot open folder %s to sync it: %s", dir, strerror(errno));
    if (fsync(fd) && errno != EINVAL) /* some file systems cannot sync a folder */
        FT_DIE("checkpoint: fsync of folder %s failed: %s", dir, strerror(errno));
    close(fd);
}

static void remove_file(const char *path, const char *why)
{
    if (unlink(path) && errno != ENOENT)
        log_warn("checkpoint: cannot remove %s (%s): %s", path, why, strerror(errno));
    else
        log_debug("checkpoint: removed %s (%s)", path, why);
}

void ckpt_prune(const char *dir, const char *run, long long step, int keep, int remove_tmp)
{
    long long *steps;
    int *tmp;
    int n = ckpt_list_run(dir, run, &steps, &tmp);
    if (n < 0) FT_DIE("checkpoint: cannot list folder %s: %s", dir, strerror(errno));
    char path[CKPT_PATH_MAX];
    int kept = 0, removed = 0;
    for (int i = 0; i < n; i++) {
        ckpt_name(path, sizeof path, dir, run, steps[i], tmp[i]);
        if (tmp[i]) {
            if (remove_tmp) {
                log_warn("checkpoint: removing %s, left by an interrupted write", path);
                remove_file(path, "interrupted write");
                removed++;
            }
        } else if (steps[i] > step) {
            log_warn("checkpoint: removing %s: superseded by the restart that wrote step %lld",
                     path, step);
            remove_file(path, "superseded");
            removed++;
        } else if (kept < keep) {
            kept++;
        } else {
            remove_file(path, "keep-last-K");
            removed++;
        }
    }
    if (removed) ckpt_fsync_dir(dir);
    free(steps);
    free(tmp);
}

int ckpt_find_latest(const char *dir, const char *run, MPI_Comm comm, char *path, size_t pathlen,
                     long long *step, char *err, size_t errlen)
{
    int rank;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    long long *steps = NULL;
    int *tmp = NULL, n = 0;
    char msg[CKPT_ERR_MAX] = "";
    if (rank == 0) {
        n = ckpt_list_run(dir, run, &steps, &tmp);
        if (n < 0) {
            if (errno == ENOENT) n = 0;
            else snprintf(msg, sizeof msg, "%s: cannot read the checkpoint folder: %s", dir,
                          strerror(errno));
        }
    }
    if (ckpt_agree(comm, msg[0] == 0, msg, sizeof msg)) {
        snprintf(err, errlen, "%s", msg);
        free(steps);
        free(tmp);
        return -1;
    }
    FT_CHECK_MPI(MPI_Bcast(&n, 1, MPI_INT, 0, comm));
    if (rank != 0) {
        steps = malloc((n ? n : 1) * sizeof *steps);
        tmp = malloc((n ? n : 1) * sizeof *tmp);
        if (!steps || !tmp) FT_DIE("out of memory");
    }
    FT_CHECK_MPI(MPI_Bcast(steps, n, MPI_LONG_LONG, 0, comm));
    FT_CHECK_MPI(MPI_Bcast(tmp, n, MPI_INT, 0, comm));
    int found = 0, skipped = 0, finals = 0;
    char first_bad[CKPT_ERR_MAX] = "";
    for (int i = 0; i < n && !found; i++) {
        char name[CKPT_PATH_MAX];
        ckpt_name(name, sizeof name, dir, run, steps[i], tmp[i]);
        if (tmp[i]) {
            log_warn("checkpoint: ignoring %s, left by an interrupted write", name);
            continue;
        }
        finals++;
        FtCkptFile *f = ckpt_open(name, comm, msg, sizeof msg);
        if (f && ckpt_verify(f, msg, sizeof msg) == 0) {
            snprintf(path, pathlen, "%s", name);
            if (step) *step = ckpt_file_step(f);
            found = 1;
        } else {
            log_warn("checkpoint: skipping %s", msg);
            if (!skipped++) snprintf(first_bad, sizeof first_bad, "%s", msg);
        }
        ckpt_close(f);
    }
    free(steps);
    free(tmp);
    if (found) {
        if (skipped)
            log_warn("checkpoint: resuming from %s, older than %d newer file%s that failed "
                     "verification", path, skipped, skipped == 1 ? "" : "s");
        return 1;
    }
    if (finals == 0) return 0;
    snprintf(err, errlen, "%s: none of the %d checkpoint%s of run '%s' verifies (newest: %s)",
             dir, finals, finals == 1 ? "" : "s", run, first_bad);
    return -1;
}
