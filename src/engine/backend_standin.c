/* backend_standin.c: the stand-in device (backend.h): the CPU backend under another identity, so
 * the engine's device paths (staging the model, checkpoints and messages through host copies,
 * DMR's checks through the backend) run and are tested where there is no GPU.
 *
 * Key decisions:
 *  - Its memory is host memory, but backend_is_host says no, and its is_device knows the
 *    ranges it allocated: MPI stages them (comm_create_staged) as it would a GPU's.
 *  - It counts what a GPU run would pay for (bytes copied each way, stream waits, compares and
 *    fingerprints that wait for their answer, checker runs): tests read the counters.
 *  - Asynchronous like a GPU's stream: ops, device copies and sets, checker runs, and the
 *    compares and fingerprints that do not wait (mark_differs, fingerprint_into) are queued and
 *    run in order only when something waits for them: sync, a copy to or from the host (which
 *    waits, as the CUDA backend's do), equal, fingerprint, release. So host code that reads
 *    device memory without copying it to the host first reads stale bytes here, as it would
 *    on a GPU, and a test catches it. backend_standin_set_lazy(false) runs everything at once
 *    (for a stand-in transport that reads device memory directly: tests/test_staged.c).
 *  - fp32 only (no set_precision), no stream, a zero UUID (so ranks of a node count as sharing
 *    one GPU: parallel.device_comm picks MPI staging).
 *  - `ftllm train` gets it for run.backend = cuda when FTLLM_TEST_DEVICE=standin (a testing
 *    aid, backend_select.c), in any build: tests/e2e/cuda.sh runs the CUDA run's paths of the
 *    command line with it on a machine without a GPU. Not thread safe (one per process). */
#include "ftllm/backend.h"

#include <stdbool.h>
#include <stdlib.h>

#include "ftllm/log.h"

static struct {
    const char *p;
    size_t n;
} *g_allocs;
static int g_nallocs, g_cap;
static FtStandinCounters g_count;
static FtBackend g_dev;

/* ---- the queue (the stand-in's stream) ---- */

enum item_kind { IT_OP, IT_CHECKER, IT_COPY, IT_SET, IT_MARK, IT_FPINTO };
typedef struct item {
    enum item_kind kind;
    FtOpFn fn;
    FtOpCall c;
    void *dst;
    const void *src;
    size_t bytes, esize;
    int byte;
    unsigned *flag;
    uint64_t *slot;
} Item;
static Item *g_q;
static int g_nq, g_capq;
static bool g_eager;

static void flush(void)
{
    const FtBackend *cpu = backend_cpu();
    for (int i = 0; i < g_nq; i++) { /* items queued while flushing go after (none do) */
        Item *it = &g_q[i];
        switch (it->kind) {
        case IT_OP: it->fn(&it->c); break;
        case IT_CHECKER: cpu->checker_run(cpu->ctx, it->fn, &it->c); break;
        case IT_COPY: cpu->copy(cpu->ctx, it->dst, it->src, it->bytes); break;
        case IT_SET: cpu->set(cpu->ctx, it->dst, it->byte, it->bytes); break;
        case IT_MARK: cpu->mark_differs(cpu->ctx, it->dst, it->src, it->bytes, it->flag); break;
        case IT_FPINTO:
            cpu->fingerprint_into(cpu->ctx, it->src, it->esize, it->bytes, it->slot);
            break;
        }
    }
    g_nq = 0;
}

static void push(Item it)
{
    if (g_nq == g_capq) {
        g_capq = g_capq ? 2 * g_capq : 1024;
        Item *nq = realloc(g_q, sizeof *nq * (size_t)g_capq);
        FT_ASSERT(nq);
        g_q = nq;
    }
    g_q[g_nq++] = it;
    if (g_eager) flush();
}

void backend_standin_set_lazy(bool lazy)
{
    flush();
    g_eager = !lazy;
}

/* The op table: the CPU's functions, queued. One wrapper per (kind, direction). */
static FtOpDesc g_ops[FT_OP_NKINDS];
static FtOpFn g_real[16][2]; /* FT_OP_NKINDS of them used (the WRAPs below) */
#define WRAP(k)                                                                                 \
    static void wf##k(const FtOpCall *c) { push((Item){.kind = IT_OP, .fn = g_real[k][0], .c = *c}); } \
    static void wb##k(const FtOpCall *c) { push((Item){.kind = IT_OP, .fn = g_real[k][1], .c = *c}); }
WRAP(0) WRAP(1) WRAP(2) WRAP(3) WRAP(4) WRAP(5) WRAP(6) WRAP(7) WRAP(8) WRAP(9) WRAP(10)
WRAP(11) WRAP(12) WRAP(13) WRAP(14) WRAP(15)
#undef WRAP
static const FtOpFn g_wf[] = {wf0, wf1, wf2, wf3, wf4, wf5, wf6, wf7,
                              wf8, wf9, wf10, wf11, wf12, wf13, wf14, wf15};
static const FtOpFn g_wb[] = {wb0, wb1, wb2, wb3, wb4, wb5, wb6, wb7,
                              wb8, wb9, wb10, wb11, wb12, wb13, wb14, wb15};
_Static_assert(FT_OP_NKINDS <= 16, "more op kinds: add WRAPs and grow g_real");

static const FtOpDesc *queued_table(void)
{
    const FtOpDesc *cpu = ops_cpu_table();
    for (int k = 0; k < FT_OP_NKINDS; k++) {
        g_ops[k] = cpu[k];
        g_real[k][0] = cpu[k].fwd, g_real[k][1] = cpu[k].bwd;
        g_ops[k].fwd = cpu[k].fwd ? g_wf[k] : NULL;
        g_ops[k].bwd = cpu[k].bwd ? g_wb[k] : NULL;
    }
    return g_ops;
}

/* ---- memory and the backend's functions ---- */

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
    flush(); /* as cudaFree waits for the device */
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
    flush();
    backend_cpu()->to_host(ctx, host, src, bytes);
}

static void dev_to_device(void *ctx, void *dst, const void *host, size_t bytes)
{
    g_count.to_device += (double)bytes;
    flush();
    backend_cpu()->to_device(ctx, dst, host, bytes);
}

static void dev_sync(void *ctx)
{
    g_count.syncs++;
    flush();
    (void)ctx;
}

static int dev_equal(void *ctx, const void *a, const void *b, size_t bytes)
{
    g_count.answers++;
    flush();
    return backend_cpu()->equal(ctx, a, b, bytes);
}

static uint64_t dev_fingerprint(void *ctx, const void *p, size_t esize, size_t n)
{
    g_count.answers++;
    flush();
    return backend_cpu()->fingerprint(ctx, p, esize, n);
}

static void dev_checker_run(void *ctx, FtOpFn fn, FtOpCall *c)
{
    (void)ctx;
    g_count.checker_runs++;
    /* fn is the table's (a queued wrapper) or a CPU function: run the CPU's */
    for (int k = 0; k < FT_OP_NKINDS; k++)
        if (fn == g_ops[k].fwd || fn == g_ops[k].bwd) fn = g_real[k][fn == g_ops[k].bwd];
    push((Item){.kind = IT_CHECKER, .fn = fn, .c = *c});
}

static void dev_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    push((Item){.kind = IT_COPY, .dst = dst, .src = src, .bytes = bytes});
}

static void dev_set(void *ctx, void *dst, int byte, size_t bytes)
{
    (void)ctx;
    push((Item){.kind = IT_SET, .dst = dst, .byte = byte, .bytes = bytes});
}

static void dev_mark_differs(void *ctx, const void *a, const void *b, size_t bytes,
                             unsigned *flag)
{
    (void)ctx;
    push((Item){.kind = IT_MARK, .dst = (void *)a, .src = b, .bytes = bytes, .flag = flag});
}

static void dev_fingerprint_into(void *ctx, const void *p, size_t esize, size_t n,
                                 uint64_t *slot)
{
    (void)ctx;
    push((Item){.kind = IT_FPINTO, .src = p, .esize = esize, .bytes = n, .slot = slot});
}

const FtBackend *backend_standin(void)
{
    if (!g_dev.ops) {
        g_dev = *backend_cpu();
        g_dev.ops = queued_table();
        g_dev.name = "cpu-as-device", g_dev.alloc = dev_alloc, g_dev.release = dev_release;
        g_dev.copy = dev_copy, g_dev.set = dev_set;
        g_dev.mark_differs = dev_mark_differs, g_dev.fingerprint_into = dev_fingerprint_into;
        g_dev.to_host = dev_to_host, g_dev.to_device = dev_to_device;
        g_dev.is_device = dev_is_device, g_dev.sync = dev_sync;
        g_dev.equal = dev_equal, g_dev.fingerprint = dev_fingerprint;
        g_dev.checker_run = dev_checker_run;
    }
    return &g_dev;
}

FtStandinCounters *backend_standin_counters(void) { return &g_count; }
