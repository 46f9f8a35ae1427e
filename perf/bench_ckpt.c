/* bench_ckpt.c: checkpoint write/read bandwidth of a GPT-2 124M-sized state against plain
 * sequential I/O of the same bytes in the same folder, and the training stall of an
 * asynchronous checkpoint as a fraction of a synchronous one.
 *
 * The state: llm.c's 16 GPT-2 (124M) parameter tensors (V padded to 50304, T = 1024, C = 768,
 * L = 12, layers stacked in the first dimension), stored three times (params, optim/m, optim/v):
 * 124.5M x 3 x 4 bytes = 1.49 GB, rows split over the ranks. Baseline: every rank pwrite()s its
 * share of the same byte count into one plain file in 64 MiB calls, then fsync (a checkpoint is
 * durable too). Reads are cold for both: each file's pages are dropped (fsync +
 * POSIX_FADV_DONTNEED) before it is read. Both write new files (a checkpoint always does; in
 * this VM first-touched pages cost more than the copy) into a folder from which the previous
 * round's files were removed before the timers started (a checkpoint's keep-last-K pruning,
 * ~0.3 s per 1.5 GB file here, is deletion, not writing; the plain side's unlink is untimed too).
 * Which side writes first alternates between rounds. Reported: best and median over the rounds
 * of each time, and the median of the rounds' paired ratios (both sides of one round saw the
 * same machine state; on this shared VM that is the steadiest number).
 *
 *   build/release/perf/bench_ckpt            (1 rank; mpiexec -n N for N ranks)
 *   FT_BENCH_DIR=/scratch/x ...               folder (default build/bench-ckpt); removed after
 *   FT_BENCH_SCALE=0.1 ...                    a smaller state (quick check)
 *   FT_BENCH_ROUNDS=9 ...                     rounds (default 5)
 *   FT_BENCH_VERBOSE=1 ...                    the checkpoint writer's phase times (log_debug)
 *   FT_BENCH_SMOKE=1 ...                      scale 0.002 (4 MB) and 1 round unless set: checks
 *                                             that the benchmark runs (tests/e2e/bench_smoke.sh) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ftllm/ckpt.h"
#include "ftllm/log.h"

#define MAX_ROUNDS 50
#define NT 16

struct tensor {
    const char *name;
    uint64_t shape[3];
    int ndim;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double max_over(double x)
{
    double y;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return y;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    log_init(rank, getenv("FT_BENCH_VERBOSE") ? FT_LOG_DEBUG : FT_LOG_WARN);
    const char *dir = getenv("FT_BENCH_DIR") ? getenv("FT_BENCH_DIR") : "build/bench-ckpt";
    const char *smoke_env = getenv("FT_BENCH_SMOKE");
    int smoke = smoke_env && *smoke_env && strcmp(smoke_env, "0") != 0;
    double scale = getenv("FT_BENCH_SCALE") ? atof(getenv("FT_BENCH_SCALE")) : smoke ? 0.002 : 1.0;
    const uint64_t Vp = 50304, T = 1024, C = 768, L = 12;
    struct tensor ts[NT] = {
        {"wte", {Vp, C}, 2}, {"wpe", {T, C}, 2}, {"ln1w", {L, C}, 2}, {"ln1b", {L, C}, 2},
        {"qkvw", {L, 3 * C, C}, 3}, {"qkvb", {L, 3 * C}, 2}, {"attprojw", {L, C, C}, 3},
        {"attprojb", {L, C}, 2}, {"ln2w", {L, C}, 2}, {"ln2b", {L, C}, 2},
        {"fcw", {L, 4 * C, C}, 3}, {"fcb", {L, 4 * C}, 2}, {"fcprojw", {L, C, 4 * C}, 3},
        {"fcprojb", {L, C}, 2}, {"lnfw", {C}, 1}, {"lnfb", {C}, 1}};
    /* FT_BENCH_SCALE shrinks the big tensors along their second-to-last dimension */
    if (scale > 0 && scale < 1)
        for (int i = 0; i < NT; i++)
            if (ts[i].ndim >= 2 && ts[i].shape[ts[i].ndim - 2] > 100)
                ts[i].shape[ts[i].ndim - 2] = (uint64_t)(ts[i].shape[ts[i].ndim - 2] * scale) + 1;
    /* this rank's rows of each tensor (first dimension split, or the whole tensor on rank 0
     * when the first dimension is smaller than the number of ranks) */
    uint64_t off[NT][3] = {{0}}, cnt[NT][3], mine = 0, total = 0;
    size_t start[NT];
    for (int i = 0; i < NT; i++) {
        uint64_t rows = ts[i].shape[0], row = 1;
        for (int d = 1; d < ts[i].ndim; d++) row *= ts[i].shape[d];
        uint64_t r0 = rows * rank / size, r1 = rows * (rank + 1) / size;
        memcpy(cnt[i], ts[i].shape, sizeof cnt[i]);
        off[i][0] = r0;
        cnt[i][0] = r1 - r0;
        start[i] = mine;
        mine += (r1 - r0) * row;
        total += rows * row;
    }
    float *state = malloc(mine * sizeof *state + 4);
    if (!state) FT_DIE("out of memory for %llu floats", (unsigned long long)mine);
    for (uint64_t i = 0; i < mine; i++) state[i] = (float)((i * 2654435761u) % 100003) * 1e-5f - 0.5f;
    double bytes = 3.0 * (double)total * 4; /* params, m, v */
    char plain[CKPT_PATH_MAX], err[CKPT_ERR_MAX];
    snprintf(plain, sizeof plain, "%s/plain.bin", dir);
    FtCkptOpts so = {.keep = 1}, ao = {.keep = 1, .async = true};
    FtCkpt *sync_w = ckpt_create(dir, "bench", MPI_COMM_WORLD, &so, err, sizeof err);
    FtCkpt *async_w = ckpt_create(dir, "bench", MPI_COMM_WORLD, &ao, err, sizeof err);
    if (!sync_w || !async_w) FT_DIE("%s", err);
    const char *groups[3] = {"params", "optim/m", "optim/v"};
    int rounds = getenv("FT_BENCH_ROUNDS") ? atoi(getenv("FT_BENCH_ROUNDS")) : smoke ? 1 : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS) FT_DIE("FT_BENCH_ROUNDS must be 1..%d", MAX_ROUNDS);
    /* per round: plain w, ckpt w, plain r, ckpt r, async stall, async total */
    static double res[6][MAX_ROUNDS];
    size_t chunk = (size_t)64 << 20, my_bytes = 3 * mine * sizeof(float);
    char *rbuf = malloc(chunk);
    long long step = 0;
    for (int round = 0; round < rounds; round++) {
        unsigned long long o = 0, mb = my_bytes;
        MPI_Exscan(&mb, &o, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) o = 0;
        /* both sides write a new file into a folder without the previous one; the deletions
         * (a 1.5 GB unlink takes ~0.3 s here) happen before the timers start */
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            unlink(plain);
            char p[CKPT_PATH_MAX];
            for (long long s = 1; s <= step; s++) {
                ckpt_path(p, sizeof p, dir, "bench", s);
                unlink(p);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double tw = 0, tc = 0;
        const char *path = NULL;
        /* the order alternates between rounds, so neither side always meets the other's
         * writeback or freshly freed pages */
        for (int side = 0; side < 2; side++) {
            if ((side == 0) == (round % 2 == 0)) {
                /* plain write: each rank its share at its offset, 64 MiB pwrites, fsync */
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = now_s();
                int fd = open(plain, O_WRONLY | O_CREAT, 0644);
                if (fd < 0) FT_DIE("%s: %s", plain, strerror(errno));
                for (int g = 0; g < 3; g++)
                    for (size_t b = 0; b < mine * sizeof(float); b += chunk) {
                        size_t n = mine * sizeof(float) - b < chunk ? mine * sizeof(float) - b : chunk;
                        if (pwrite(fd, (char *)state + b, n, o + g * mine * sizeof(float) + b) != (ssize_t)n)
                            FT_DIE("pwrite %s: %s", plain, strerror(errno));
                    }
                if (fsync(fd)) FT_DIE("fsync: %s", strerror(errno));
                close(fd);
                tw = max_over(now_s() - t0);
            } else {
                /* the checkpoint, synchronous */
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = now_s();
                ckpt_begin(sync_w, ++step);
                for (int g = 0; g < 3; g++)
                    for (int i = 0; i < NT; i++) {
                        char name[64];
                        snprintf(name, sizeof name, "%s/%s", groups[g], ts[i].name);
                        ckpt_put_tensor(sync_w, name, CKPT_F32, ts[i].ndim, ts[i].shape, off[i],
                                        cnt[i], state + start[i], "1", "");
                    }
                ckpt_put_i64(sync_w, CKPT_DS_STEP, step, "steps", "");
                ckpt_commit(sync_w, &path);
                tc = max_over(now_s() - t0);
            }
        }
        char cpath[CKPT_PATH_MAX];
        snprintf(cpath, sizeof cpath, "%s", path);
        /* cold reads: the plain file, then the checkpoint (open + every tensor) */
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            drop_cache(plain);
            drop_cache(cpath);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_s();
        int fd = open(plain, O_RDONLY);
        for (size_t b = 0; b < my_bytes; b += chunk) {
            size_t n = my_bytes - b < chunk ? my_bytes - b : chunk;
            if (pread(fd, rbuf, n, o + b) != (ssize_t)n) FT_DIE("pread: %s", strerror(errno));
        }
        close(fd);
        double trp = max_over(now_s() - t0);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now_s();
        FtCkptFile *f = ckpt_open(cpath, MPI_COMM_WORLD, err, sizeof err);
        if (!f) FT_DIE("%s", err);
        for (int g = 0; g < 3; g++)
            for (int i = 0; i < NT; i++) {
                char name[64];
                snprintf(name, sizeof name, "%s/%s", groups[g], ts[i].name);
                if (ckpt_read_tensor(f, name, CKPT_F32, ts[i].ndim, ts[i].shape, off[i], cnt[i],
                                     state + start[i], err, sizeof err))
                    FT_DIE("%s", err);
            }
        ckpt_close(f);
        double trc = max_over(now_s() - t0);
        /* asynchronous: the stall is begin + puts (copies) + commit; then the write finishes */
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now_s();
        ckpt_begin(async_w, ++step);
        for (int g = 0; g < 3; g++)
            for (int i = 0; i < NT; i++) {
                char name[64];
                snprintf(name, sizeof name, "%s/%s", groups[g], ts[i].name);
                ckpt_put_tensor(async_w, name, CKPT_F32, ts[i].ndim, ts[i].shape, off[i], cnt[i],
                                state + start[i], "1", "");
            }
        ckpt_put_i64(async_w, CKPT_DS_STEP, step, "steps", "");
        ckpt_commit(async_w, NULL);
        double tstall = max_over(now_s() - t0);
        ckpt_wait(async_w);
        double tasync = max_over(now_s() - t0);
        double v[6] = {tw, tc, trp, trc, tstall, tasync};
        for (int k = 0; k < 6; k++) res[k][round] = v[k];
        if (rank == 0)
            printf("  round %d: plain write %.3f s, checkpoint write %.3f s, plain read %.3f s, "
                   "checkpoint read %.3f s, async stall %.3f s (write %.3f s)\n",
                   round + 1, tw, tc, trp, trc, tstall, tasync);
    }
    ckpt_destroy(sync_w);
    ckpt_destroy(async_w);
    if (rank == 0) {
        double gb = bytes / 1e9, best[6], med[6], ratio[3][MAX_ROUNDS];
        for (int k = 0; k < 6; k++) {
            best[k] = res[k][0];
            for (int r = 1; r < rounds; r++) best[k] = res[k][r] < best[k] ? res[k][r] : best[k];
            med[k] = median(res[k], rounds);
        }
        for (int r = 0; r < rounds; r++) { /* paired: both sides of one round */
            ratio[0][r] = res[0][r] / res[1][r];
            ratio[1][r] = res[2][r] / res[3][r];
            ratio[2][r] = res[4][r] / res[1][r];
        }
        printf("bench_ckpt: GPT-2 124M-sized state (%.3f GB = %.0f bytes: params + AdamW m, v), "
               "%d rank%s, folder %s, %d rounds\n", gb, bytes, size, size == 1 ? "" : "s", dir,
               rounds);
        printf("  %-30s %8s %8s %8s %8s\n", "", "best s", "GB/s", "median s", "GB/s");
        const char *what[4] = {"plain write + fsync", "checkpoint write (sync)", "plain read (cold)",
                               "checkpoint read (cold)"};
        for (int k = 0; k < 4; k++)
            printf("  %-30s %8.2f %8.2f %8.2f %8.2f\n", what[k], best[k], gb / best[k], med[k],
                   gb / med[k]);
        printf("  write ratio checkpoint/plain bandwidth: best %.2f, median %.2f, median of the "
               "rounds' ratios %.2f (target >= 0.7)\n", best[0] / best[1], med[0] / med[1],
               median(ratio[0], rounds));
        printf("  read ratio checkpoint/plain bandwidth:  best %.2f, median %.2f, median of the "
               "rounds' ratios %.2f\n", best[2] / best[3], med[2] / med[3], median(ratio[1], rounds));
        printf("  async stall: median %.3f s = %.3f of a synchronous checkpoint (median of the "
               "rounds' ratios; best %.3f s); the background write took %.2f s (median)\n",
               med[4], median(ratio[2], rounds), best[4], med[5]);
        unlink(plain);
        char p[CKPT_PATH_MAX];
        for (long long s = 1; s <= step; s++) {
            ckpt_path(p, sizeof p, dir, "bench", s);
            unlink(p);
        }
        rmdir(dir); /* only when empty: a folder given by the user keeps its other files */
    }
    free(rbuf);
    free(state);
    MPI_Finalize();
    return 0;
}
