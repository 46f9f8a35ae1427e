/* ft_test.c: see ft_test.h. */
#include "ft_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftllm/backend.h"
#include "ftllm/ops.h"

static int g_rank, g_size;

MPI_Comm ft_test_comm(void) { return MPI_COMM_WORLD; }
int ft_test_rank(void) { return g_rank; }
int ft_test_size(void) { return g_size; }

int ft_all(int cond)
{
    int in = cond ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out;
}

int ft_same_bytes(const void *buf, size_t len)
{
    /* FNV-1a of the bytes, then min == max over ranks */
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
    unsigned long long lo = h, hi = h, mn, mx;
    MPI_Allreduce(&lo, &mn, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&hi, &mx, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return mn == mx;
}

void ft_tmpfile(const char *text, size_t len, char *buf)
{
    char name[64] = "";
    if (g_rank == 0) {
        snprintf(name, sizeof name, "/tmp/ft_test_XXXXXX");
        int fd = mkstemp(name);
        if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
            perror("ft_tmpfile");
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        close(fd);
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    memcpy(buf, name, sizeof name);
}

void ft_tmpdir(char *buf)
{
    if (g_rank == 0) {
        snprintf(buf, 64, "/tmp/ft_test_XXXXXX");
        assert_non_null(mkdtemp(buf));
    }
    MPI_Bcast(buf, 64, MPI_CHAR, 0, MPI_COMM_WORLD);
}

void ft_rmdir(const char *dir)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

void ft_synth_fetch(void *ctx, uint64_t first, int B, int *in, int *tg)
{
    const int *dims = ctx; /* T, V */
    int T = dims[0], V = dims[1];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            uint64_t i = first + (uint64_t)b;
            in[b * T + t] = (int)((i * 3 + 5 * (uint64_t)t) % (uint64_t)V);
            tg[b * T + t] = (int)((i * 3 + 5 * (uint64_t)t + 5) % (uint64_t)V);
        }
}

float *ft_frand(size_t n, float amp, unsigned *seed)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = amp * ((float)(*seed >> 8) / 16777216.0f - 0.5f);
    }
    return p;
}

float *ft_nans(size_t n)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

double ft_rel_l2(const float *got, const float *want, size_t n)
{
    double e = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i])) return INFINITY;
        double d = (double)got[i] - want[i];
        e += d * d, w += (double)want[i] * want[i];
    }
    return sqrt(e / (w > 0 ? w : 1));
}

void ft_attention_vs_cpu(int B, int T, int C, int NH, unsigned seed, FtAttnFwd fwd,
                         FtAttnBwd bwd, double err[3])
{
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = ft_frand(nq, 4.0f, &seed), *dy = ft_frand(ny, 2.0f, &seed);
    float *y = ft_nans(ny), *lse = ft_nans(nl), *dqkv = ft_nans(nq);
    float *yc = ft_nans(ny), *lc = ft_nans(nl), *dc = ft_nans(nq);
    const FtOpDesc *op = ops_desc(FT_OP_ATTENTION);
    FtOpCall f = {.in = {qkv}, .out = {yc, lc}, .d = {B, T, C, NH}};
    op->fwd(&f);
    FtOpCall g = {.in = {dy, qkv, lc}, .out = {dc}, .d = {B, T, C, NH}};
    op->bwd(&g);
    fwd(y, lse, qkv, B, T, C, NH);
    bwd(dqkv, dy, qkv, lc, B, T, C, NH); /* from the CPU's lse, as test_gpu_ops does */
    err[0] = ft_rel_l2(y, yc, ny), err[1] = ft_rel_l2(lse, lc, nl);
    err[2] = ft_rel_l2(dqkv, dc, nq);
    free(qkv), free(dy), free(y), free(lse), free(dqkv), free(yc), free(lc), free(dc);
}

int ft_test_run(int argc, char **argv, const char *name, const struct CMUnitTest *tests, size_t n)
{
    int provided = 0; /* asynchronous checkpoints write from a thread (ckpt.h checks the level) */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    const char *base = strrchr(name, '/');
    int failed = _cmocka_run_group_tests(base ? base + 1 : name, tests, n, NULL, NULL);
    int worst = 0;
    MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    fflush(stdout);
    MPI_Finalize();
    return worst ? 1 : 0;
}

/* the stand-in device (ft_test.h): the library's (backend_standin.c) */
const FtBackend *ft_dev(void) { return backend_standin(); }

/* ft_capture: ft_test.h */
void ft_capture(void (*fn)(void), char *out, char *err, size_t len)
{
    char *bufs[2] = {out, err};
    int fds[2] = {STDOUT_FILENO, STDERR_FILENO}, saved[2];
    FILE *tmp[2];
    fflush(NULL);
    for (int i = 0; i < 2; i++) {
        tmp[i] = tmpfile();
        assert_non_null(tmp[i]);
        saved[i] = dup(fds[i]);
        assert_true(saved[i] >= 0 && dup2(fileno(tmp[i]), fds[i]) >= 0);
    }
    fn();
    fflush(NULL);
    for (int i = 0; i < 2; i++) {
        dup2(saved[i], fds[i]);
        close(saved[i]);
        rewind(tmp[i]);
        size_t n = fread(bufs[i], 1, len - 1, tmp[i]);
        bufs[i][n] = 0;
        fclose(tmp[i]);
    }
}
