/* test_comm.c: the comm layer on the MPI backend: every operation, blocking and non-blocking,
 * with inputs whose results are exactly known (small integers in floats sum exactly in any
 * order), bitwise agreement across ranks for general floats, the poll hook (also in the
 * agreements), a duplicate communicator, receives matched by tag, and counters (one call and
 * the buffer's bytes per operation).
 * ft-test: ranks 1 2 3 4 */
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/comm.h"
#include "ftllm/log.h"

static FtComm *g_c;

static int setup(void **state)
{
    (void)state;
    g_c = comm_create_mpi(ft_test_comm(), "world");
    return 0;
}
static int teardown(void **state)
{
    (void)state;
    comm_destroy(g_c);
    return 0;
}

static void test_allreduce_exact(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c);
    enum { N = 1000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++) x[i] = (float)(i % 97 + r);
    comm_allreduce_sum(g_c, x, y, N, FT_F32);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= y[i] == (float)(n * (i % 97) + n * (n - 1) / 2);
    assert_all(ok);
    /* in place */
    comm_allreduce_sum(g_c, FT_IN_PLACE, x, N, FT_F32);
    assert_all(memcmp(x, y, N * sizeof *x) == 0);
    long long v = r + 1;
    comm_allreduce_sum(g_c, FT_IN_PLACE, &v, 1, FT_I64);
    assert_all(v == (long long)n * (n + 1) / 2);
    free(x);
    free(y);
}

static void test_allreduce_same_bits(void **state)
{
    (void)state;
    /* general floats: the sum's rounding depends on the order, but every rank must hold the
     * same bits (replicas of one model must stay identical) */
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x);
    unsigned s = 77u + (unsigned)comm_rank(g_c) * 7919u;
    for (int i = 0; i < N; i++) s = s * 1664525u + 1013904223u, x[i] = (float)(s >> 8) * 1e-7f - 0.8f;
    comm_allreduce_sum(g_c, FT_IN_PLACE, x, N, FT_F32);
    assert_all(ft_same_bytes(x, N * sizeof *x));
    free(x);
}

static void test_reduce_scatter_allgather(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c);
    enum { K = 33 };
    float *send = malloc((size_t)n * K * sizeof *send), part[K], *all = malloc((size_t)n * K * sizeof *all);
    for (int i = 0; i < n * K; i++) send[i] = (float)(i + 10 * r);
    comm_reduce_scatter_sum(g_c, send, part, K, FT_F32);
    int ok = 1;
    for (int i = 0; i < K; i++) ok &= part[i] == (float)(n * (r * K + i) + 10 * n * (n - 1) / 2);
    assert_all(ok);
    /* all-gather of the parts gives back the full reduction, in rank order */
    comm_allgather(g_c, part, all, K, FT_F32);
    for (int i = 0; i < n * K; i++) ok &= all[i] == (float)(n * i + 10 * n * (n - 1) / 2);
    assert_all(ok);
    free(send);
    free(all);
}

static void test_alltoallv(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c);
    /* rank r sends (r + j + 1) ints to rank j, valued 1000 r + j */
    int *sc = calloc((size_t)n, sizeof *sc), *sd = calloc((size_t)n, sizeof *sd);
    int *rc = calloc((size_t)n, sizeof *rc), *rd = calloc((size_t)n, sizeof *rd);
    int stot = 0, rtot = 0;
    for (int j = 0; j < n; j++) sc[j] = r + j + 1, sd[j] = stot, stot += sc[j];
    for (int j = 0; j < n; j++) rc[j] = j + r + 1, rd[j] = rtot, rtot += rc[j];
    int *sb = malloc(sizeof(int) * (size_t)stot), *rb = malloc(sizeof(int) * (size_t)rtot);
    for (int j = 0; j < n; j++)
        for (int k = 0; k < sc[j]; k++) sb[sd[j] + k] = 1000 * r + j;
    FtReq req;
    comm_ialltoallv(g_c, sb, sc, sd, rb, rc, rd, FT_I32, &req);
    comm_wait(&req, NULL);
    int ok = !req.active;
    for (int j = 0; j < n; j++)
        for (int k = 0; k < rc[j]; k++) ok &= rb[rd[j] + k] == 1000 * j + r;
    assert_all(ok);
    free(sc), free(sd), free(rc), free(rd), free(sb), free(rb);
}

static void test_send_recv_ring(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c);
    double out[5], in[5];
    for (int i = 0; i < 5; i++) out[i] = r * 10.0 + i;
    FtReq reqs[2];
    comm_irecv(g_c, in, 5, FT_F64, (r + n - 1) % n, 7, &reqs[0]);
    comm_isend(g_c, out, 5, FT_F64, (r + 1) % n, 7, &reqs[1]);
    comm_waitall(reqs, 2, NULL);
    int ok = 1, prev = (r + n - 1) % n;
    for (int i = 0; i < 5; i++) ok &= in[i] == prev * 10.0 + i;
    assert_all(ok);
}

/* A poll hook that counts its calls and, on its first call, sends rank `to` (>= 0) a message
 * (tag SIGNAL_TAG). A late rank that waits for that message (late_until_polled) before it
 * contributes to a collective makes the others' wait certain to poll: the collective cannot
 * complete before it contributes. (A late rank that merely spun for 50 ms left it to the
 * scheduler: on a loaded machine the others could reach their first test after its data.) */
enum { SIGNAL_TAG = 11 };
typedef struct poll_signal {
    long polls;
    int to;
    bool sent;
    double token;
    FtReq req;
} PollSignal;

static bool count_polls(void *arg)
{
    PollSignal *s = arg;
    s->polls++;
    if (s->to >= 0 && !s->sent) {
        comm_isend(g_c, &s->token, 1, FT_F64, s->to, SIGNAL_TAG, &s->req);
        s->sent = true;
    }
    return false;
}

/* Rank 0's hook tells the last rank; the others only count (one rank: nobody waits). */
static PollSignal poll_signal(void)
{
    int n = comm_size(g_c), r = comm_rank(g_c);
    return (PollSignal){.to = r == 0 && n > 1 ? n - 1 : -1};
}

/* The last rank (of several) arrives late: only once rank 0's hook has run. */
static void late_until_polled(void)
{
    int n = comm_size(g_c), r = comm_rank(g_c);
    if (n == 1 || r != n - 1) return;
    double token;
    FtReq q;
    comm_irecv(g_c, &token, 1, FT_F64, 0, SIGNAL_TAG, &q);
    comm_wait(&q, NULL);
}

/* after the collective: the signal's send completes */
static void poll_signal_done(PollSignal *s)
{
    if (s->sent) comm_wait(&s->req, NULL);
}

static void test_nonblocking_poll_and_stats(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c);
    FtCommStats before = comm_stats(g_c);
    /* the last rank contributes only once rank 0's poll hook ran, so the others' request is
     * still in flight: the test must be able to return false, and the hook must run while
     * waiting */
    float x = 1.0f;
    FtReq req;
    PollSignal sig = poll_signal();
    FtPoll poll = {count_polls, &sig};
    late_until_polled();
    comm_iallreduce_sum(g_c, FT_IN_PLACE, &x, 1, FT_F32, &req);
    comm_wait(&req, &poll);
    poll_signal_done(&sig);
    assert_all(x == (float)n && !req.active && comm_test(&req));
    long max_polls = comm_max_i64(g_c, sig.polls);
    assert_all(n == 1 || max_polls > 0);
    FtCommStats after = comm_stats(g_c);
    assert_all(after.calls > before.calls && after.bytes >= before.bytes + 4 &&
               after.wait_s >= before.wait_s);
    /* agreements */
    assert_all(comm_all_true(g_c, 1) == 1);
    assert_all(comm_all_true(g_c, r != n - 1) == 0); /* the last rank says no */
    assert_all(comm_sum_f64(g_c, 0.5) == 0.5 * n);
    assert_all(comm_max_i64(g_c, r) == n - 1);
}

/* The agreements' _poll forms: right results, and the hook runs while the last rank is late. */
static void test_agreements_poll(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c);
    PollSignal s[4] = {poll_signal(), poll_signal(), poll_signal(), poll_signal()};
    FtPoll p[4] = {{count_polls, &s[0]}, {count_polls, &s[1]}, {count_polls, &s[2]},
                   {count_polls, &s[3]}};
    late_until_polled();
    int all = comm_all_true_poll(g_c, r != n - 1, &p[0]);
    late_until_polled();
    long long mx = comm_max_i64_poll(g_c, 10 * r, &p[1]);
    late_until_polled();
    double sum = comm_sum_f64_poll(g_c, 0.25 + r, &p[2]);
    late_until_polled();
    double mf = comm_max_f64_poll(g_c, -1.5 * r, &p[3]);
    for (int i = 0; i < 4; i++) poll_signal_done(&s[i]);
    assert_all(all == 0 && mx == 10LL * (n - 1) && sum == 0.25 * n + n * (n - 1) / 2.0 &&
               mf == 0.0);
    assert_all(comm_all_true_poll(g_c, 1, NULL) == 1 && comm_max_f64_poll(g_c, r, NULL) == n - 1);
    for (int i = 0; i < 4; i++) assert_all(n == 1 || comm_max_i64(g_c, s[i].polls) > 0);
}

/* A duplicate has its own message space: a broadcast on it stays in flight while the original
 * communicator runs another collective, and completes afterwards. */
static int g_deleted; /* test_dup: deletions of its attribute */
static int count_delete(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm, (void)key, (void)val, (void)extra;
    g_deleted++;
    return MPI_SUCCESS;
}

static void test_dup(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c);
    FtComm *d = comm_create_mpi_dup(ft_test_comm(), "dup");
    assert_all(comm_size(d) == n && comm_rank(d) == r && !strcmp(comm_name(d), "dup"));
    int flag = r == 0 ? 42 : 0;
    FtReq req;
    comm_ibcast(d, &flag, 1, FT_I32, 0, &req);
    assert_all(comm_sum_f64(g_c, 1.0) == n);
    comm_wait(&req, NULL);
    assert_all(flag == 42);
    comm_destroy(d);
    /* a dup's MPI communicator is freed with it (no communicator leaks per trainer or
     * regrid): an attribute of the parent, copied onto the dup by MPI_Comm_dup, is deleted
     * when comm_destroy frees the dup */
    MPI_Comm parent;
    int key;
    FT_CHECK_MPI(MPI_Comm_dup(ft_test_comm(), &parent));
    FT_CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &key, NULL));
    FT_CHECK_MPI(MPI_Comm_set_attr(parent, key, &g_deleted));
    g_deleted = 0;
    comm_destroy(comm_create_mpi_dup(parent, "dup of parent"));
    assert_all(g_deleted == 1);
    MPI_Comm_free(&parent);
    MPI_Comm_free_keyval(&key);
}

static void test_bcast(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c);
    int buf[3] = {r, r, r};
    comm_bcast(g_c, buf, 3, FT_I32, n - 1);
    assert_all(buf[0] == n - 1 && buf[2] == n - 1);
}

/* The counters: one call per operation, and its bytes are the whole buffer on one side (an
 * all-reduce's count, a reduce-scatter's send and an all-gather's receive buffer: size x count
 * elements, an all-to-all's elements sent, a message's elements). */
static void test_stats_bytes(void **state)
{
    (void)state;
    int n = comm_size(g_c);
    enum { K = 5 };
    float *buf = calloc((size_t)n * K, sizeof *buf), part[K];
    FtCommStats s0 = comm_stats(g_c);
    comm_reduce_scatter_sum(g_c, buf, part, K, FT_F32);
    FtCommStats s1 = comm_stats(g_c);
    comm_allgather(g_c, part, buf, K, FT_F32);
    FtCommStats s2 = comm_stats(g_c);
    comm_allreduce_sum(g_c, FT_IN_PLACE, buf, K, FT_F32);
    FtCommStats s3 = comm_stats(g_c);
    double step = (double)n * K * sizeof(float);
    assert_all(s1.calls == s0.calls + 1 && s1.bytes == s0.bytes + step);
    assert_all(s2.calls == s1.calls + 1 && s2.bytes == s1.bytes + step);
    assert_all(s3.calls == s2.calls + 1 && s3.bytes == s2.bytes + K * sizeof(float));
    /* an all-to-all whose sides differ: j + 1 elements to rank j, r + 1 from each rank */
    int r = comm_rank(g_c), sent = n * (n + 1) / 2;
    int *scnt = calloc((size_t)n, sizeof *scnt), *sdsp = calloc((size_t)n, sizeof *sdsp);
    int *rcnt = calloc((size_t)n, sizeof *rcnt), *rdsp = calloc((size_t)n, sizeof *rdsp);
    int *ib = calloc((size_t)sent, sizeof *ib), *ob = calloc((size_t)n * (r + 1), sizeof *ob);
    for (int j = 0; j < n; j++)
        scnt[j] = j + 1, sdsp[j] = j * (j + 1) / 2, rcnt[j] = r + 1, rdsp[j] = j * (r + 1);
    FtReq req;
    comm_ialltoallv(g_c, ib, scnt, sdsp, ob, rcnt, rdsp, FT_I32, &req);
    comm_wait(&req, NULL);
    FtCommStats s4 = comm_stats(g_c);
    assert_all(s4.calls == s3.calls + 1 && s4.bytes == s3.bytes + (double)sent * sizeof(int));
    free(buf), free(scnt), free(sdsp), free(rcnt), free(rdsp), free(ib), free(ob);
}

/* Receives match by tag, not by arrival: two messages from one peer, received in the other
 * order than they were sent (as a pipeline stage may post its receives), each land where their
 * tag says. */
static void test_tags(void **state)
{
    (void)state;
    int n = comm_size(g_c), r = comm_rank(g_c), next = (r + 1) % n, prev = (r + n - 1) % n;
    int out[2] = {100 * r + 1, 100 * r + 2}, in[2] = {-1, -1};
    FtReq reqs[4];
    comm_irecv(g_c, &in[1], 1, FT_I32, prev, 12, &reqs[0]);
    comm_irecv(g_c, &in[0], 1, FT_I32, prev, 11, &reqs[1]);
    comm_isend(g_c, &out[0], 1, FT_I32, next, 11, &reqs[2]);
    comm_isend(g_c, &out[1], 1, FT_I32, next, 12, &reqs[3]);
    comm_waitall(reqs, 4, NULL);
    assert_all(in[0] == 100 * prev + 1 && in[1] == 100 * prev + 2);
}

FT_TEST_MAIN(cmocka_unit_test_setup_teardown(test_allreduce_exact, setup, teardown),
             cmocka_unit_test_setup_teardown(test_allreduce_same_bits, setup, teardown),
             cmocka_unit_test_setup_teardown(test_reduce_scatter_allgather, setup, teardown),
             cmocka_unit_test_setup_teardown(test_alltoallv, setup, teardown),
             cmocka_unit_test_setup_teardown(test_send_recv_ring, setup, teardown),
             cmocka_unit_test_setup_teardown(test_nonblocking_poll_and_stats, setup, teardown),
             cmocka_unit_test_setup_teardown(test_agreements_poll, setup, teardown),
             cmocka_unit_test_setup_teardown(test_dup, setup, teardown),
             cmocka_unit_test_setup_teardown(test_bcast, setup, teardown),
             cmocka_unit_test_setup_teardown(test_stats_bytes, setup, teardown),
             cmocka_unit_test_setup_teardown(test_tags, setup, teardown))
