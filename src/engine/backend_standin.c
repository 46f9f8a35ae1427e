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
 *    on a GPU, and a test catches it.
 *  - Not host-addressable, like a GPU's memory: its allocations come from one arena that is
 *    PROT_NONE except while the stand-in itself works in it (running its queue, its copies,
 *    equal, fingerprint), so host code that dereferences a device pointer faults here as on a
 *    GPU. backend_standin_set_host_access(true) opens it and runs everything at once (a test
 *    that reads device memory directly; a stand-in transport that does: tests/test_staged.c).
 *  - run.precision = bf16 as the CUDA backend has it (set_precision): its ops and checker runs
 *    round the operands of the model's GEMMs to bf16 (ops_cpu_set_gemm_bf16, on only while the
 *    queue runs), and attention's too with FTLLM_CUDA_ATTENTION=gemm (the CUDA backend's
 *    default: also when unset) or tc (which rounds the same operands), so bf16 runs, their
 *    tolerances and DMR under bf16 are tested here too. No
 *    stream, a zero UUID (so ranks of a node count as sharing one GPU: parallel.device_comm
 *    picks MPI staging).
 *  - `ftllm train` gets it for run.backend = cuda when FTLLM_TEST_DEVICE=standin (a testing
 *    aid, backend_select.c), in any build: tests/e2e/cuda.sh runs the CUDA run's paths of the
 *    command line with it on a machine without a GPU. Not thread safe (one per process). */
#include "ftllm/backend.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ftllm/deck_keys.h"
#include "ftllm/log.h"

/* ---- memory: one arena, host-addressable only while the stand-in works in it ---- */

/* The arena is reserved once (address space only) and handed out first fit in 64-byte units,
 * freed blocks merged with their neighbours. Outside the stand-in's own work it is PROT_NONE:
 * host code that dereferences a device pointer faults here as it would on a GPU. */
#define ARENA_BYTES ((size_t)64 << 30)
#define UNIT 64
static char *g_base;
static size_t g_top;  /* bytes handed out at least once (the extent that is mapped) */
static size_t g_open; /* extent now readable and writable (0: none) */
static int g_access;  /* backend_standin_set_host_access: > 0 keeps it open */
typedef struct blk { size_t off, len; } Blk;
static Blk *g_used, *g_free; /* sorted by offset */
static int g_nused, g_capused, g_nfree, g_capfree;

static void arena_open(void)
{
    size_t want = (g_top + 4095) & ~(size_t)4095;
    if (g_open >= want) return;
    if (mprotect(g_base, want, PROT_READ | PROT_WRITE)) FT_DIE("stand-in device: mprotect failed");
    g_open = want;
}

static void arena_close(void)
{
    if (g_access > 0 || !g_open) return;
    if (mprotect(g_base, g_open, PROT_NONE)) FT_DIE("stand-in device: mprotect failed");
    g_open = 0;
}

static void blk_insert(Blk **a, int *n, int *cap, int at, Blk b)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        Blk *na = realloc(*a, sizeof *na * (size_t)*cap);
        FT_ASSERT(na);
        *a = na;
    }
    memmove(*a + at + 1, *a + at, sizeof **a * (size_t)(*n - at));
    (*a)[at] = b, (*n)++;
}

static int blk_find(const Blk *a, int n, size_t off) /* the last block at or before off */
{
    int lo = 0, hi = n - 1, at = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (a[mid].off <= off) at = mid, lo = mid + 1;
        else hi = mid - 1;
    }
    return at;
}

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
static bool g_bf16;     /* run.precision = bf16 (dev_set_precision) */
static bool g_att_bf16; /* and FTLLM_CUDA_ATTENTION gemm, tc or unset: attention's in bf16 too */

static void arena_open(void);
static void arena_close(void);

/* Runs the queue, leaving the arena open for the caller's own work in it (it closes it). */
static void wait_open(void)
{
    arena_open();
    const FtBackend *cpu = backend_cpu();
    ops_cpu_set_gemm_bf16(g_bf16); /* the queue's ops, in this device's precision */
    ops_cpu_set_attention_bf16(g_att_bf16);
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
    ops_cpu_set_gemm_bf16(false); /* the CPU backend's own ops stay fp32 */
    ops_cpu_set_attention_bf16(false);
    g_nq = 0;
}

/* Runs the queue (what a wait on the stream does). */
static void flush(void)
{
    if (!g_nq) return;
    wait_open();
    arena_close();
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

void backend_standin_set_host_access(bool on)
{
    flush();
    g_eager = on;
    g_access += on ? 1 : -1;
    if (g_access > 0) arena_open();
    else g_access = 0, arena_close();
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
    (void)ctx;
    if (!g_base) {
        g_base = mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
        if (g_base == MAP_FAILED) FT_DIE("stand-in device: cannot reserve its address space");
    }
    size_t len = (bytes + UNIT - 1) / UNIT * UNIT;
    if (!len) len = UNIT;
    size_t off = 0;
    int f = 0;
    while (f < g_nfree && g_free[f].len < len) f++;
    if (f < g_nfree) { /* first fit */
        off = g_free[f].off;
        if (g_free[f].len == len) {
            memmove(g_free + f, g_free + f + 1, sizeof *g_free * (size_t)(g_nfree - f - 1));
            g_nfree--;
        } else {
            g_free[f].off += len, g_free[f].len -= len;
        }
    } else {
        if (g_top + len > ARENA_BYTES) return NULL;
        off = g_top, g_top += len;
    }
    blk_insert(&g_used, &g_nused, &g_capused, blk_find(g_used, g_nused, off) + 1,
               (Blk){off, len});
    arena_open();
    memset(g_base + off, 0, len); /* zeroed, as backend.h promises */
    arena_close();
    return g_base + off;
}

static void dev_release(void *ctx, void *p)
{
    (void)ctx;
    flush(); /* as cudaFree waits for the device */
    if (!p) return;
    size_t off = (size_t)((char *)p - g_base);
    int u = blk_find(g_used, g_nused, off);
    FT_ASSERT(u >= 0 && g_used[u].off == off);
    Blk b = g_used[u];
    memmove(g_used + u, g_used + u + 1, sizeof *g_used * (size_t)(g_nused - u - 1));
    g_nused--;
    int at = blk_find(g_free, g_nfree, off) + 1; /* merge with the free neighbours */
    if (at > 0 && g_free[at - 1].off + g_free[at - 1].len == b.off) {
        g_free[at - 1].len += b.len;
        b = g_free[--at];
        memmove(g_free + at, g_free + at + 1, sizeof *g_free * (size_t)(g_nfree - at - 1));
        g_nfree--;
    }
    if (at < g_nfree && b.off + b.len == g_free[at].off) {
        g_free[at].off = b.off, g_free[at].len += b.len;
        b = g_free[at];
        memmove(g_free + at, g_free + at + 1, sizeof *g_free * (size_t)(g_nfree - at - 1));
        g_nfree--;
    }
    if (b.off + b.len == g_top) { /* the top: the extent shrinks, its pages go back */
        size_t keep = (b.off + 4095) & ~(size_t)4095, end = (g_top + 4095) & ~(size_t)4095;
        g_top = b.off;
        if (end > keep) {
            if (madvise(g_base + keep, end - keep, MADV_DONTNEED) ||
                mprotect(g_base + keep, end - keep, PROT_NONE))
                FT_DIE("stand-in device: cannot return memory");
            if (g_open > keep) g_open = keep;
        }
        return;
    }
    blk_insert(&g_free, &g_nfree, &g_capfree, at, b);
}

static int dev_is_device(void *ctx, const void *p)
{
    (void)ctx;
    const char *c = p;
    if (!g_base || c < g_base || c >= g_base + g_top) return 0;
    int u = blk_find(g_used, g_nused, (size_t)(c - g_base));
    return u >= 0 && (size_t)(c - g_base) < g_used[u].off + g_used[u].len;
}

static void dev_to_host(void *ctx, void *host, const void *src, size_t bytes)
{
    g_count.to_host += (double)bytes;
    wait_open(); /* and the copy or compare in the open arena */
    backend_cpu()->to_host(ctx, host, src, bytes);
    arena_close();
}

static void dev_to_device(void *ctx, void *dst, const void *host, size_t bytes)
{
    g_count.to_device += (double)bytes;
    wait_open(); /* and the copy or compare in the open arena */
    backend_cpu()->to_device(ctx, dst, host, bytes);
    arena_close();
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
    wait_open(); /* and the copy or compare in the open arena */
    int same = backend_cpu()->equal(ctx, a, b, bytes);
    arena_close();
    return same;
}

static uint64_t dev_fingerprint(void *ctx, const void *p, size_t esize, size_t n)
{
    g_count.answers++;
    wait_open(); /* and the copy or compare in the open arena */
    uint64_t fp = backend_cpu()->fingerprint(ctx, p, esize, n);
    arena_close();
    return fp;
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

/* run.precision for the ops queued from now on (those before it run in the old one). */
static void dev_set_precision(void *ctx, int precision)
{
    (void)ctx;
    flush();
    g_bf16 = precision == FT_PRECISION_BF16;
    /* the CUDA backend's kernel choice (cuda/ops_attention.cu: gemm when unset) */
    const char *att = getenv("FTLLM_CUDA_ATTENTION");
    g_att_bf16 = g_bf16 && (!att || !*att || !strcmp(att, "gemm") || !strcmp(att, "tc"));
}

const FtBackend *backend_standin(void)
{
    if (!g_dev.ops) {
        g_dev = *backend_cpu();
        g_dev.ops = queued_table();
        g_dev.name = "cpu-as-device", g_dev.alloc = dev_alloc, g_dev.release = dev_release;
        g_dev.copy = dev_copy, g_dev.set = dev_set;
        g_dev.copy_cold = NULL; /* the CPU's would run before the queued ops: copy (queued) */
        g_dev.mark_differs = dev_mark_differs, g_dev.fingerprint_into = dev_fingerprint_into;
        g_dev.to_host = dev_to_host, g_dev.to_device = dev_to_device;
        g_dev.is_device = dev_is_device, g_dev.sync = dev_sync;
        g_dev.equal = dev_equal, g_dev.fingerprint = dev_fingerprint;
        g_dev.checker_run = dev_checker_run;
        g_dev.set_precision = dev_set_precision;
    }
    return &g_dev;
}

FtStandinCounters *backend_standin_counters(void) { return &g_count; }
