/* ft_test.c: see ft_test.h. */
#include "ft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftllm/backend.h"

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

/* ---- the stand-in device (ft_test.h) ---------------------------------------------------- */

enum { MAX_ALLOCS = 4096 };
static struct {
    const char *p;
    size_t n;
} g_allocs[MAX_ALLOCS];
static int g_nallocs;
double ft_dev_to_host, ft_dev_to_device;
long long ft_dev_syncs, ft_dev_answers, ft_dev_checker_runs;
static FtBackend g_dev;

static void *dev_alloc(void *ctx, size_t bytes)
{
    void *p = backend_cpu()->alloc(ctx, bytes);
    if (p) {
        assert_true(g_nallocs < MAX_ALLOCS);
        g_allocs[g_nallocs].p = p, g_allocs[g_nallocs++].n = bytes ? bytes : 1;
    }
    return p;
}

static void dev_release(void *ctx, void *p)
{
    for (int i = 0; i < g_nallocs; i++)
        if (g_allocs[i].p == p) {
            g_allocs[i] = g_allocs[--g_nallocs];
            break;
        }
    backend_cpu()->release(ctx, p);
}

static int dev_is_device(void *ctx, const void *p)
{
    (void)ctx;
    const char *c = p;
    for (int i = 0; i < g_nallocs; i++)
        if (c >= g_allocs[i].p && c < g_allocs[i].p + g_allocs[i].n) return 1;
    return 0;
}

static void dev_to_host(void *ctx, void *host, const void *src, size_t bytes)
{
    ft_dev_to_host += (double)bytes;
    backend_cpu()->to_host(ctx, host, src, bytes);
}

static void dev_to_device(void *ctx, void *dst, const void *host, size_t bytes)
{
    ft_dev_to_device += (double)bytes;
    backend_cpu()->to_device(ctx, dst, host, bytes);
}

static void dev_sync(void *ctx)
{
    ft_dev_syncs++;
    backend_cpu()->sync(ctx);
}

static int dev_equal(void *ctx, const void *a, const void *b, size_t bytes)
{
    ft_dev_answers++;
    return backend_cpu()->equal(ctx, a, b, bytes);
}

static uint64_t dev_fingerprint(void *ctx, const void *p, size_t esize, size_t n)
{
    ft_dev_answers++;
    return backend_cpu()->fingerprint(ctx, p, esize, n);
}

static void dev_checker_run(void *ctx, FtOpFn fn, FtOpCall *c)
{
    ft_dev_checker_runs++;
    backend_cpu()->checker_run(ctx, fn, c);
}

const FtBackend *ft_dev(void)
{
    if (!g_dev.ops) {
        g_dev = *backend_cpu();
        g_dev.name = "cpu-as-device", g_dev.alloc = dev_alloc, g_dev.release = dev_release;
        g_dev.to_host = dev_to_host, g_dev.to_device = dev_to_device;
        g_dev.is_device = dev_is_device, g_dev.sync = dev_sync;
        g_dev.equal = dev_equal, g_dev.fingerprint = dev_fingerprint;
        g_dev.checker_run = dev_checker_run;
    }
    return &g_dev;
}
