/* backend_cpu.c: the CPU backend (backend.h): host memory, memcpy, the ops_cpu table. */
#include "ftllm/backend.h"

#include <stdlib.h>
#include <string.h>

#include "ftllm/copy_stream.h"
#include "ftllm/fingerprint.h"
#include "ftllm/log.h"

static void *cpu_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    void *p = NULL;
    size_t n = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, n ? n : 64)) return NULL;
    memset(p, 0, n ? n : 64);
    return p;
}
static void cpu_release(void *ctx, void *p) { (void)ctx, free(p); }
static void cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes && dst != src) memcpy(dst, src, bytes);
}
static void cpu_copy_cold(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes && dst != src) ft_copy_stream(dst, src, bytes);
}
static void cpu_set(void *ctx, void *dst, int byte, size_t bytes) { (void)ctx, memset(dst, byte, bytes); }
static void cpu_sync(void *ctx) { (void)ctx; }
static void cpu_checker_run(void *ctx, FtOpFn fn, FtOpCall *c) { (void)ctx, fn(c); }
static int cpu_equal(void *ctx, const void *a, const void *b, size_t bytes)
{
    (void)ctx;
    return !bytes || !memcmp(a, b, bytes);
}
static void cpu_mark_differs(void *ctx, const void *a, const void *b, size_t bytes,
                             unsigned *flag)
{
    (void)ctx;
    if (bytes && memcmp(a, b, bytes)) *flag = 1;
}
static uint64_t cpu_fingerprint(void *ctx, const void *p, size_t esize, size_t n)
{
    (void)ctx;
    return ft_fingerprint(p, esize * n);
}
static void cpu_fingerprint_into(void *ctx, const void *p, size_t esize, size_t n, uint64_t *slot)
{
    *slot = cpu_fingerprint(ctx, p, esize, n);
}

const FtBackend *backend_cpu(void)
{
    static FtBackend be;
    if (!be.ops) /* constant fields only: the same values from any thread */
        be = (FtBackend){.name = "cpu", .ops = ops_cpu_table(), .alloc = cpu_alloc,
                         .release = cpu_release, .to_device = cpu_copy, .to_host = cpu_copy,
                         .copy = cpu_copy, .copy_cold = cpu_copy_cold, .set = cpu_set,
                         .sync = cpu_sync,
                         .checker_run = cpu_checker_run, .equal = cpu_equal,
                         .fingerprint = cpu_fingerprint, .mark_differs = cpu_mark_differs,
                         .fingerprint_into = cpu_fingerprint_into};
    return &be;
}

void *backend_alloc(const FtBackend *be, size_t bytes, const char *what)
{
    void *p = be->alloc(be->ctx, bytes);
    if (!p) FT_DIE("out of memory on the %s backend: %zu bytes for %s", be->name, bytes, what);
    return p;
}
