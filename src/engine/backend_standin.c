/* backend_standin.c: the stand-in device (backend.h): the CPU backend under another identity, so
 * the engine's device paths (staging the model, checkpoints and messages through host copies,
 * DMR's checks through the backend) run and are tested where there is no GPU.
 *
 * Key decisions:
 *  - Its memory is host memory, but backend_is_host says no, and its is_device knows the
 *    ranges it allocated: MPI stages them (comm_create_staged) as it would a GPU's.
 *  - It counts what a GPU run would pay for (bytes copied each way, stream waits, compares and
 *    fingerprints that wait for their answer, checker runs): tests read the counters.
 *  - fp32 only (no set_precision), no stream, a zero UUID (so ranks of a node count as sharing
 *    one GPU: parallel.device_comm picks MPI staging).
 *  - `ftllm train` gets it for run.backend = cuda when FTLLM_TEST_DEVICE=standin (a testing
 *    aid, backend_select.c), in any build: tests/e2e/cuda.sh runs the CUDA run's paths of the
 *    command line with it on a machine without a GPU. Not thread safe (one per process). */
#include "ftllm/backend.h"

#include <stdlib.h>

#include "ftllm/log.h"

static struct {
    const char *p;
    size_t n;
} *g_allocs;
static int g_nallocs, g_cap;
static FtStandinCounters g_count;
static FtBackend g_dev;

static void *dev_alloc(void *ctx, size_t bytes)
{
    void *p = backend_cpu()->alloc(ctx, bytes);
    if (!p) return NULL;
    if (g_nallocs == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 256;
        void *na = realloc(g_allocs, sizeof *g_allocs * (size_t)g_cap);
        FT_ASSERT(na);
        g_allocs = na;
    }
    g_allocs[g_nallocs].p = p, g_allocs[g_nallocs++].n = bytes ? bytes : 1;
    return p;
}

static void dev_release(void *ctx, void *p)
{
    for (int i = g_nallocs - 1; i >= 0; i--)
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
    g_count.to_host += (double)bytes;
    backend_cpu()->to_host(ctx, host, src, bytes);
}

static void dev_to_device(void *ctx, void *dst, const void *host, size_t bytes)
{
    g_count.to_device += (double)bytes;
    backend_cpu()->to_device(ctx, dst, host, bytes);
}

static void dev_sync(void *ctx)
{
    g_count.syncs++;
    backend_cpu()->sync(ctx);
}

static int dev_equal(void *ctx, const void *a, const void *b, size_t bytes)
{
    g_count.answers++;
    return backend_cpu()->equal(ctx, a, b, bytes);
}

static uint64_t dev_fingerprint(void *ctx, const void *p, size_t esize, size_t n)
{
    g_count.answers++;
    return backend_cpu()->fingerprint(ctx, p, esize, n);
}

static void dev_checker_run(void *ctx, FtOpFn fn, FtOpCall *c)
{
    g_count.checker_runs++;
    backend_cpu()->checker_run(ctx, fn, c);
}

const FtBackend *backend_standin(void)
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

FtStandinCounters *backend_standin_counters(void) { return &g_count; }
