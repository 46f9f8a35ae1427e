/* bench_data.c: data loader throughput against a plain memcpy of the same bytes.
 *
 * Reads shuffled sequences (data_sequence: permutation, file lookup, uint16 -> int) from a
 * synthetic 16M-token shard in /tmp (pages warm, so this measures the loader, not the disk),
 * and times memcpy of the same uint16 tokens from the same stream positions into one buffer.
 * Prints sequences/s and tokens/s of both and their ratio (loader time / memcpy time), best of
 * 5 repetitions, for T = 64 and T = 1024. Single-threaded, as the loader is.
 * FT_BENCH_SMOKE=1: a 1M-token shard, 1M tokens per timing, one repetition (well under a
 * second: checks that the benchmark runs, tests/e2e/bench_smoke.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftllm/data.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    const char *smoke_env = getenv("FT_BENCH_SMOKE");
    int smoke = smoke_env && *smoke_env && strcmp(smoke_env, "0") != 0;
    const size_t ntok = (size_t)(smoke ? 1 : 16) << 20;
    const int reps = smoke ? 1 : 5;
    char path[64], err[1024];
    snprintf(path, sizeof path, "/tmp/ftllm_bench_data_%ld.bin", (long)getpid());
    uint16_t *tok = malloc(ntok * sizeof *tok);
    if (!tok) return 1;
    uint64_t x = 88172645463325252ull; /* xorshift64: any token values will do */
    for (size_t i = 0; i < ntok; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tok[i] = (uint16_t)(x % 50257);
    }
    if (data_write_shard(path, tok, ntok, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int status = 0;
    static const int Ts[] = {64, 1024};
    printf("%-6s %14s %14s %14s %8s\n", "T", "loader seq/s", "memcpy seq/s", "loader Mtok/s",
           "ratio");
    for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
        int T = Ts[k];
        FtData *d = data_open(path, T, 50257, true, 1337, err, sizeof err);
        if (!d) {
            fprintf(stderr, "%s\n", err);
            status = 1;
            break;
        }
        uint64_t nseq = data_num_sequences(d);
        /* ~32M tokens per timing (1M in smoke mode) */
        uint64_t reps_seq = (uint64_t)(smoke ? 1u << 20 : 32u << 20) / (uint64_t)T;
        int *buf = malloc(((size_t)T + 1) * sizeof *buf);
        uint16_t *cpy = malloc(((size_t)T + 1) * sizeof *cpy);
        uint64_t *off = malloc(reps_seq * sizeof *off);
        for (uint64_t i = 0; i < reps_seq; i++) off[i] = data_stream_offset(d, i % (2 * nseq));
        double best_l = 1e30, best_m = 1e30;
        long sink = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            for (uint64_t i = 0; i < reps_seq; i++) {
                data_sequence(d, i % (2 * nseq), buf);
                sink += buf[T];
            }
            double t1 = now();
            for (uint64_t i = 0; i < reps_seq; i++) {
                memcpy(cpy, tok + off[i], ((size_t)T + 1) * sizeof *cpy);
                sink += cpy[T];
            }
            double t2 = now();
            if (t1 - t0 < best_l) best_l = t1 - t0;
            if (t2 - t1 < best_m) best_m = t2 - t1;
        }
        printf("%-6d %14.3g %14.3g %14.1f %8.2f%s\n", T, reps_seq / best_l, reps_seq / best_m,
               reps_seq * (double)(T + 1) / best_l / 1e6, best_l / best_m,
               sink == 42 ? " " : "");
        free(buf), free(cpy), free(off);
        data_close(d);
    }
    printf("ratio = loader time / memcpy time of the same tokens (1 = as fast as memcpy)\n");
    unlink(path);
    free(tok);
    return status;
}
