/* test_standin.c: the stand-in device (backend.h backend_standin: the CPU backend posing as a
 * GPU, which the device-path tests and tests/e2e/cuda.sh run on). What they rely on:
 *   - its memory is zeroed, recognized by is_device (and nothing else is), reused after a
 *     release (first fit; neighbours merged), and not host-addressable: a direct read faults,
 *     as on a GPU, until set_host_access opens it; a released block at the top gives its
 *     pages back (a read faults even with host access open);
 *   - its ops, device copies and non-waiting compares are queued like a stream's work and run in
 *     order when something waits (a copy to the host, sync); a sync-free op is not waited for.
 * ft-test: ranks 1 */
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/backend.h"
#include "ftllm/ops.h"

static const FtBackend *dev(void) { return backend_standin(); }

static sigjmp_buf g_jmp;
static void on_segv(int sig)
{
    (void)sig;
    siglongjmp(g_jmp, 1);
}

/* Whether reading *p faults. */
static int read_faults(const volatile float *p)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old);
    int faulted = 1;
    if (!sigsetjmp(g_jmp, 1)) {
        volatile float v = *p;
        (void)v;
        faulted = 0;
    }
    sigaction(SIGSEGV, &old, NULL);
    return faulted;
}

static void test_memory(void **state)
{
    (void)state;
    enum { N = 1000 };
    float *a = dev()->alloc(dev()->ctx, sizeof(float) * N);
    float *b = dev()->alloc(dev()->ctx, sizeof(float) * N);
    float host[N], h2[N];
    assert_true(a && b && a != b);
    assert_true(dev()->is_device(dev()->ctx, a) && dev()->is_device(dev()->ctx, a + N - 1));
    assert_true(dev()->is_device(dev()->ctx, b) && !dev()->is_device(dev()->ctx, host));
    dev()->to_host(dev()->ctx, host, b, sizeof host);
    for (int i = 0; i < N; i++) assert_true(host[i] == 0.0f); /* zeroed */
    assert_true(read_faults(a)); /* not host-addressable */
    backend_standin_set_host_access(true);
    assert_false(read_faults(a));
    a[3] = 7.0f;
    backend_standin_set_host_access(false);
    assert_true(read_faults(a + 3));
    dev()->to_host(dev()->ctx, host, a, sizeof host);
    assert_true(host[3] == 7.0f);
    /* reuse: a's block for the next allocation that fits; a and b merged when both are free */
    dev()->release(dev()->ctx, a);
    assert_false(dev()->is_device(dev()->ctx, a));
    float *c = dev()->alloc(dev()->ctx, sizeof(float) * 10);
    assert_true(c == a);
    dev()->to_host(dev()->ctx, h2, c, sizeof(float) * 10);
    assert_true(h2[3] == 0.0f); /* zeroed again */
    dev()->release(dev()->ctx, c);
    dev()->release(dev()->ctx, b);
    float *d = dev()->alloc(dev()->ctx, sizeof(float) * 2 * N);
    assert_true(d == a);
    dev()->release(dev()->ctx, d);
}

static void test_queue(void **state)
{
    (void)state;
    enum { N = 64 };
    float hx[N], hy[N];
    for (int i = 0; i < N; i++) hx[i] = 0.1f * (float)i;
    float *x = dev()->alloc(dev()->ctx, sizeof hx), *y = dev()->alloc(dev()->ctx, sizeof hx);
    float *z = dev()->alloc(dev()->ctx, sizeof hx);
    dev()->to_device(dev()->ctx, x, hx, sizeof hx);
    long long syncs = backend_standin_counters()->syncs;
    FtOpCall c = {.in = {x}, .out = {y}, .d = {N}};
    dev()->ops[FT_OP_GELU].fwd(&c); /* queued */
    dev()->copy(dev()->ctx, z, y, sizeof hx); /* after it, in order */
    dev()->set(dev()->ctx, x, 0, sizeof hx);  /* after the op read x */
    ops_desc(FT_OP_GELU)->fwd(&(FtOpCall){.in = {hx}, .out = {hy}, .d = {N}}); /* the CPU's */
    float got[N];
    dev()->to_host(dev()->ctx, got, z, sizeof got); /* waits for all three */
    assert_memory_equal(got, hy, sizeof got);
    dev()->to_host(dev()->ctx, got, x, sizeof got);
    for (int i = 0; i < N; i++) assert_true(got[i] == 0.0f);
    assert_true(backend_standin_counters()->syncs == syncs); /* copies wait without a sync */
    dev()->release(dev()->ctx, x), dev()->release(dev()->ctx, y), dev()->release(dev()->ctx, z);
}

/* A released block at the top of the arena gives its pages back: a read of them faults even
 * while host access is open (a use after release shows, as on a GPU), and the next
 * allocation there is zeroed again. */
static void test_release_top(void **state)
{
    (void)state;
    enum { N = 1 << 20 }; /* 4 MiB: larger than any free block, so at the top */
    backend_standin_set_host_access(true);
    float *t = dev()->alloc(dev()->ctx, sizeof(float) * N);
    assert_non_null(t);
    t[N / 2] = 5.0f;
    assert_false(read_faults(t + N / 2));
    dev()->release(dev()->ctx, t);
    assert_true(read_faults(t + N / 2)); /* its pages are gone though host access is open */
    float *u = dev()->alloc(dev()->ctx, sizeof(float) * N);
    assert_true(u == t && u[N / 2] == 0.0f);
    dev()->release(dev()->ctx, u);
    backend_standin_set_host_access(false);
}

FT_TEST_MAIN(cmocka_unit_test(test_memory), cmocka_unit_test(test_queue),
             cmocka_unit_test(test_release_top))
