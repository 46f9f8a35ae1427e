/* test_gpu_nccl.c: the NCCL comm backend (src/comm/comm_nccl.c) on device buffers of the CUDA
 * backend, one rank: NCCL loads (or says in one line why not), a communicator is made from the
 * MPI one, and an in-place all-reduce, an all-gather, a broadcast and an all-to-all(v) of device
 * buffers give the values the operations define (one rank: copies), through the comm layer's
 * wait loop. The same operations through MPI with host staging (comm_create_staged, what the
 * trainer uses for a device model): the backend's is_device tells cudaMalloc memory from host
 * memory, device buffers come back with the values, host ones pass unstaged. And both at once
 * (comm_create_routed): device collectives on NCCL, host ones on MPI. Where no GPU is
 * usable the GPU tests skip with one line saying why.
 * ft-test: ranks 1 */
#include <stdio.h>
#include <string.h>

#include "../ft_test.h"
#include "ftllm/backend.h"
#include "ftllm/comm.h"
#include "gpu_skip.h"

static void test_available(void **s)
{
    (void)s;
    char err[256] = "";
    bool ok = comm_nccl_available(err, sizeof err);
    printf("  NCCL: %s\n", ok ? "loads" : err);
    if (!ok) assert_non_null(strstr(err, "NCCL"));
}

static void test_ops(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    char err[256] = "";
    /* the backend's stream as the compute stream, as the trainer passes it: with NULL (the
     * legacy stream, which orders nothing of the backend's non-blocking stream) the set of b
     * below could run after the all-to-all wrote it (the CUDA emulator's late streams showed
     * it) */
    FtComm *c = comm_create_nccl(ft_test_comm(), "world", be->stream, err, sizeof err);
    if (!c) fail_msg("comm_create_nccl: %s", err);
    enum { N = 1000 };
    float h[N], back[2 * N];
    for (int i = 0; i < N; i++)
        h[i] = (float)i * 0.25f - 7.0f;
    float *a = backend_alloc(be, sizeof h, "nccl test"),
          *b = backend_alloc(be, sizeof back, "nccl test");
    be->to_device(be->ctx, a, h, sizeof h);
    comm_allreduce_sum(c, FT_IN_PLACE, a, N, FT_F32);
    be->to_host(be->ctx, back, a, sizeof h);
    assert_memory_equal(back, h, sizeof h);
    comm_allgather(c, a, b, N, FT_F32);
    be->to_host(be->ctx, back, b, sizeof h);
    assert_memory_equal(back, h, sizeof h);
    comm_bcast(c, a, N, FT_F32, 0);
    be->to_host(be->ctx, back, a, sizeof h);
    assert_memory_equal(back, h, sizeof h);
    int cnt = N, disp = 0;
    be->set(be->ctx, b, 0, sizeof back);
    FtReq r;
    comm_ialltoallv(c, a, &cnt, &disp, b, &cnt, &disp, FT_F32, &r);
    comm_wait(&r, NULL);
    be->to_host(be->ctx, back, b, sizeof h);
    assert_memory_equal(back, h, sizeof h);
    be->release(be->ctx, a), be->release(be->ctx, b);
    comm_destroy(c);
}

static void test_staged(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    assert_non_null(be->is_device);
    enum { N = 1000 };
    float h[N], back[N];
    for (int i = 0; i < N; i++)
        h[i] = (float)i * 0.5f - 3.0f;
    float *a = backend_alloc(be, sizeof h, "staged test"),
          *b = backend_alloc(be, sizeof h, "staged test");
    assert_true(be->is_device(be->ctx, a) && be->is_device(be->ctx, b + N / 2));
    assert_false(be->is_device(be->ctx, h) || be->is_device(be->ctx, back));
    FtCommStager st;
    backend_stager(be, &st);
    FtComm *c = comm_create_staged(ft_test_comm(), "staged", &st);
    be->to_device(be->ctx, a, h, sizeof h);
    comm_allreduce_sum(c, FT_IN_PLACE, a, N, FT_F32);
    be->to_host(be->ctx, back, a, sizeof h);
    assert_memory_equal(back, h, sizeof h);
    comm_allgather(c, a, b, N, FT_F32);
    be->to_host(be->ctx, back, b, sizeof h);
    assert_memory_equal(back, h, sizeof h);
    be->set(be->ctx, b, 0, sizeof h);
    comm_bcast(c, a, N, FT_F32, 0);
    comm_allreduce_sum(c, a, b, N, FT_F32);
    be->to_host(be->ctx, back, b, sizeof h);
    assert_memory_equal(back, h, sizeof h);
    assert_true(comm_stats(c).staged_bytes >= 4.0 * sizeof h);
    double staged = comm_stats(c).staged_bytes;
    long long v = 5;
    comm_allreduce_sum(c, FT_IN_PLACE, &v, 1, FT_I64); /* a host buffer: not staged */
    assert_true(v == 5 && comm_stats(c).staged_bytes == staged);
    be->release(be->ctx, a), be->release(be->ctx, b);
    comm_destroy(c);
}

/* NCCL beside MPI (comm_create_routed, parallel.device_comm = nccl): the collectives on device
 * buffers go to NCCL and are not staged, host buffers go to MPI, both give the values. */
static void test_routed(void **s)
{
    (void)s;
    const FtBackend *be = gpu();
    FtCommStager st;
    backend_stager(be, &st);
    char err[256] = "";
    FtComm *c = comm_create_routed(ft_test_comm(), "routed", &st, be->stream, err, sizeof err);
    if (!c) fail_msg("comm_create_routed: %s", err);
    enum { N = 1000 };
    float h[N], back[N];
    for (int i = 0; i < N; i++)
        h[i] = (float)i * 0.75f - 5.0f;
    float *a = backend_alloc(be, sizeof h, "routed test"),
          *b = backend_alloc(be, sizeof h, "routed test");
    be->to_device(be->ctx, a, h, sizeof h);
    comm_allreduce_sum(c, a, b, N, FT_F32);
    comm_bcast(c, b, N, FT_F32, 0);
    be->to_host(be->ctx, back, b, sizeof h);
    assert_memory_equal(back, h, sizeof h);
    FtCommStats cs = comm_stats(c);
    assert_true(cs.dev_calls == 2 && cs.staged_bytes == 0);
    long long v = 7;
    comm_allreduce_sum(c, FT_IN_PLACE, &v, 1, FT_I64); /* host: MPI */
    cs = comm_stats(c);
    assert_true(v == 7 && cs.dev_calls == 2 && cs.calls == 3);
    be->release(be->ctx, a), be->release(be->ctx, b);
    comm_destroy(c);
}

FT_TEST_MAIN(cmocka_unit_test(test_available), cmocka_unit_test(test_ops),
             cmocka_unit_test(test_staged), cmocka_unit_test(test_routed))
