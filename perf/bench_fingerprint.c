/* bench_fingerprint.c: what a DMR fingerprint pass costs on this CPU, against a copy of the same
 * bytes (the baseline: what keeping an input costs), one thread: DMR's fingerprint
 * (fingerprint.h), the checkpoint checksum (ckpt_checksum_array, DMR's fingerprint until
 * 2026-12-01) and memcpy into a second buffer, in GB/s of input, over sizes from an L2-sized
 * output to one past the caches; each figure the median of 5 timed passes of about 0.2 s,
 * the three interleaved. Prints one table and
 *   RESULT 1 MiB: fingerprint / memcpy X, checksum / memcpy Y (time ratios)
 * FT_BENCH_SMOKE=1: small sizes, short passes. */
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ftllm/ckpt.h"
#include "ftllm/fingerprint.h"

static volatile uint64_t g_sink;

/* Seconds per call of variant k on n bytes: reps calls timed together. */
static double pass(int k, unsigned char *a, unsigned char *b, size_t n, int reps)
{
    double t0 = omp_get_wtime();
    for (int r = 0; r < reps; r++) {
        if (k == 0) g_sink += ft_fingerprint(a, n);
        else if (k == 1) g_sink += ckpt_checksum_array(a, 4, n / 4);
        else memcpy(b, a, n), g_sink += b[(size_t)r % n];
    }
    return (omp_get_wtime() - t0) / reps;
}

int main(void)
{
    bool smoke = getenv("FT_BENCH_SMOKE") && atoi(getenv("FT_BENCH_SMOKE"));
    omp_set_num_threads(1);
    static const size_t full[] = {256 << 10, 1 << 20, 8 << 20, 64 << 20};
    static const size_t tiny[] = {64 << 10, 1 << 20};
    const size_t *sizes = smoke ? tiny : full;
    int ns = smoke ? 2 : 4, rounds = smoke ? 1 : 5;
    double target = smoke ? 0.01 : 0.2;
    printf("bench_fingerprint: one thread, GB/s of input (median of %d passes of ~%.2g s)\n",
           rounds, target);
    printf("%10s %12s %12s %12s %16s %16s\n", "bytes", "fingerprint", "checksum", "memcpy",
           "fp / memcpy", "checksum / memcpy");
    double r_fp = 0, r_ck = 0;
    for (int s = 0; s < ns; s++) {
        size_t n = sizes[s];
        unsigned char *a = aligned_alloc(64, n), *b = aligned_alloc(64, n);
        if (!a || !b) return 1;
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0; i < n; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, a[i] = (unsigned char)x;
        memset(b, 0, n);
        int reps = (int)(target * 10e9 / (double)n); /* about target s at 10 GB/s */
        if (reps < 1) reps = 1;
        double t[3][8];
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < 3; k++) t[k][r] = pass(k, a, b, n, reps);
        double m[3];
        for (int k = 0; k < 3; k++) m[k] = bench_median(t[k], rounds);
        printf("%10zu %12.1f %12.1f %12.1f %16.2f %16.2f\n", n, n / m[0] / 1e9, n / m[1] / 1e9,
               n / m[2] / 1e9, m[0] / m[2], m[1] / m[2]);
        if (n == (1 << 20)) r_fp = m[0] / m[2], r_ck = m[1] / m[2];
        free(a), free(b);
    }
    printf("RESULT 1 MiB: fingerprint / memcpy %.2f, checksum / memcpy %.2f (time ratios)\n", r_fp,
           r_ck);
    return 0;
}
