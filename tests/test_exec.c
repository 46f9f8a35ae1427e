/* test_exec.c: the executor's pipeline marks on two stages, with hand-made tapes. A stage's
 * sends are left in flight (exec.c), so the executor must complete a tape's earlier send in a
 * direction before any op of that tape writes again in that direction (the send's buffer is
 * the tape's own tensor; waiting on the other direction's send deadlocks 1F1B once messages
 * wait for their receive). Stage 0 runs forward, forward, backward, backward on one tape (two
 * micro-batches in flight) and stage 1 forward, backward, forward, backward, with messages of
 * 4 KiB and then of 1 MiB (past MPI's eager limit); after every op an after-op hook checks
 * that no send of its tape in the op's direction is still in flight, and each stage checks
 * the bytes it received (activations 2a, gradients 4a of micro-batch k's input a). Every
 * receive's wait is charged to the timeline as a pipeline wait, and exec_finish leaves no send
 * in flight. Then the executor's other waits: a tensor-parallel all-reduce marker sums over the
 * ranks and is charged as a tp wait; a wait runs the poll hook while its message is in flight
 * (the peer sends only after the poll hook ran, so without it the wait never ends); a watched
 * request is tested after each op and forgotten once complete, and not watched at all when
 * progress is off.
 * ft-test: ranks 2 */
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/comm.h"
#include "ftllm/exec.h"
#include "ftllm/tape.h"


typedef struct hook_state {
    FtExec *ex;
    int ops, in_flight; /* ops run; ops that ran while their tape's send was in flight */
} HookState;

static void check_sends(void *arg, const FtTape *tp, int entry, int instance, const FtOpCall *c)
{
    (void)c, (void)instance;
    HookState *h = arg;
    h->ops++;
    for (int i = 0; i < h->ex->nsends; i++) {
        if (h->ex->sends[i].tape != tp) continue;
        bool fwd = entry < tp->fwd_end;
        if (fwd ? h->ex->sends[i].act.active : h->ex->sends[i].grad.active) h->in_flight++;
    }
}

static FtTapeEntry entry(FtOpKind kind, FtOpDir dir, FtPhase ph, FtMark mk, int in0, int in1,
                         int out0, int n)
{
    FtTapeEntry e = {.kind = kind, .dir = dir, .phase = ph, .mark = mk, .layer = -1, .seg = -1,
                     .twin = -1, .d = {n}};
    for (int k = 0; k < FT_OP_MAX_IN; k++) e.in[k] = -1;
    for (int k = 0; k < FT_OP_MAX_OUT; k++) e.out[k] = -1;
    e.in[0] = in0, e.in[1] = in1, e.out[0] = out0;
    return e;
}

/* Micro-batch k's input, exact in float when doubled and quadrupled. */
static void input_of(int k, float *a, int n)
{
    for (int i = 0; i < n; i++) a[i] = (float)(i % 97) * 0.25f + (float)k;
}

static int all_equal(const float *a, const float *in, float scale, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != scale * in[i]) return 0;
    return 1;
}

/* One exchange of two micro-batches of n floats; returns 1 when every received byte was right
 * and no op ran while its tape's send was in flight. */
static int two_microbatches(FtComm *pp, int n)
{
    int stage = comm_rank(pp);
    FtTape tp;
    tape_init(&tp);
    FtTapeEntry e;
    int a = -1, x, g = -1, d;
    if (stage == 0) { /* x = a + a, sent on; the gradient received into g */
        a = tape_tensor(&tp, "a", FT_F32, FT_TR_IO, n, NULL, -1);
        x = tape_tensor(&tp, "x", FT_F32, FT_TR_ACT, n, NULL, -1);
        g = tape_tensor(&tp, "d.x", FT_F32, FT_TR_ACT_GRAD, n, NULL, -1);
        e = entry(FT_OP_RESIDUAL, FT_FWD, FT_PH_FWD, FT_MARK_NONE, a, a, x, n), tape_push(&tp, &e);
        e = entry(FT_OP_MARK, FT_FWD, FT_PH_FWD, FT_MARK_PP_SEND, x, -1, -1, n), tape_push(&tp, &e);
        tp.fwd_end = tp.ne;
        e = entry(FT_OP_MARK, FT_BWD, FT_PH_BWD, FT_MARK_PP_RECV, -1, -1, g, n), tape_push(&tp, &e);
    } else { /* x received; its "gradient" d = x + x sent back */
        x = tape_tensor(&tp, "x", FT_F32, FT_TR_ACT, n, NULL, -1);
        d = tape_tensor(&tp, "d.x", FT_F32, FT_TR_ACT_GRAD, n, NULL, -1);
        e = entry(FT_OP_MARK, FT_FWD, FT_PH_FWD, FT_MARK_PP_RECV, -1, -1, x, n), tape_push(&tp, &e);
        tp.fwd_end = tp.ne;
        e = entry(FT_OP_RESIDUAL, FT_FWD, FT_PH_BWD, FT_MARK_NONE, x, x, d, n), tape_push(&tp, &e);
        e = entry(FT_OP_MARK, FT_BWD, FT_PH_BWD, FT_MARK_PP_SEND, d, -1, -1, n), tape_push(&tp, &e);
    }
    tape_alloc(&tp);
    FtTimeline tl;
    timeline_init(&tl, 64);
    FtExec ex = {.pp = pp, .tl = &tl};
    HookState h = {.ex = &ex};
    ex.hooks = (FtExecHooks){.after_op = check_sends, .arg = &h};
    float *in = malloc(sizeof(float) * (size_t)n);
    int ok = 1;
    /* stage 0: F0 F1 B0 B1 (1F1B's warm-up on pp 2); stage 1: F0 B0 F1 B1 */
    static const int order[2][4] = {{0, 0, 1, 1}, {0, 1, 0, 1}}; /* 0: forward, 1: backward */
    int nf = 0, nb = 0;
    for (int i = 0; i < 4; i++) {
        bool fwd = order[stage][i] == 0;
        int k = fwd ? nf++ : nb++;
        input_of(k, in, n);
        if (fwd && stage == 0) memcpy(tp.t[a].data, in, sizeof(float) * (size_t)n);
        exec_run_ctx(&ex, &tp, fwd ? 0 : tp.fwd_end, fwd ? tp.fwd_end : tp.ne);
        if (fwd && stage == 1) ok &= all_equal(tp.t[x].data, in, 2.0f, n);
        if (!fwd && stage == 0) ok &= all_equal(tp.t[g].data, in, 4.0f, n);
    }
    exec_finish(&ex);
    for (int i = 0; i < ex.nsends; i++) ok &= !ex.sends[i].act.active && !ex.sends[i].grad.active;
    /* two receives waited (and maybe sends), all charged as pipeline waits */
    ok &= tl.count[FT_TL_PP] >= 2 && tl.count[FT_TL_PP] == (long long)tl.nev;
    timeline_free(&tl);
    free(in);
    tape_free(&tp);
    return ok && h.ops == 2 && h.in_flight == 0;
}

static void test_sends_complete_before_reuse(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip(); /* two stages */
    FtComm *pp = comm_create_mpi_dup(ft_test_comm(), "pp");
    /* 4 KiB messages go out eagerly (a send completes without its receive, so the order of
     * waits cannot deadlock and the hook sees any op that outruns its send); 1 MiB ones wait
     * for their receive (a wait on the wrong send can deadlock: the harness's timeout) */
    assert_all(two_microbatches(pp, 1024));
    assert_all(two_microbatches(pp, 1 << 18));
    comm_destroy(pp);
}

/* A forward-only tape of n elements: x = a + a (*a, *x), then, with tp_mark, a tensor-parallel
 * all-reduce of x; allocated. */
static void sum_tape(FtTape *tp, int n, bool tp_mark, int *a, int *x)
{
    tape_init(tp);
    *a = tape_tensor(tp, "a", FT_F32, FT_TR_IO, n, NULL, -1);
    *x = tape_tensor(tp, "x", FT_F32, FT_TR_ACT, n, NULL, -1);
    FtTapeEntry e = entry(FT_OP_RESIDUAL, FT_FWD, FT_PH_FWD, FT_MARK_NONE, *a, *a, *x, n);
    tape_push(tp, &e);
    if (tp_mark) {
        e = entry(FT_OP_MARK, FT_FWD, FT_PH_FWD, FT_MARK_COMM_TP, *x, -1, -1, n);
        tape_push(tp, &e);
    }
    tp->fwd_end = tp->ne;
    tape_alloc(tp);
}

/* A tensor-parallel all-reduce marker after x = a + a: x is the sum over the ranks, and its wait
 * is charged as tp (only). */
static void test_tp_allreduce_wait(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    enum { N = 64 };
    FtComm *tpc = comm_create_mpi_dup(ft_test_comm(), "tp");
    FtTape tp;
    int a, x;
    sum_tape(&tp, N, true, &a, &x);
    input_of(ft_test_rank(), tp.t[a].data, N);
    FtTimeline tl;
    timeline_init(&tl, 8);
    FtExec ex = {.tp = tpc, .tl = &tl};
    exec_run_ctx(&ex, &tp, 0, tp.ne);
    float sum[N], in1[N];
    input_of(0, sum, N), input_of(1, in1, N);
    for (int i = 0; i < N; i++) sum[i] += in1[i]; /* exact: quarters and small integers */
    assert_all(all_equal(tp.t[x].data, sum, 2.0f, N));
    assert_all(tl.count[FT_TL_TP] == 1 && tl.nev == 1);
    timeline_free(&tl);
    tape_free(&tp);
    comm_destroy(tpc);
}

/* Rank 0's poll hook: tells rank 1 (once) that it may send. */
static bool poll_go(void *arg)
{
    int *told = arg, go = 1;
    if (!*told) MPI_Send(&go, 1, MPI_INT, 1, 99, ft_test_comm());
    *told = 1;
    return false;
}

static void test_wait_polls(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    FtComm *c = comm_create_mpi_dup(ft_test_comm(), "pp");
    float v = 0;
    int told = 0;
    if (ft_test_rank() == 0) {
        FtExec ex = {.pp = c, .poll = {poll_go, &told}};
        FtReq r;
        comm_irecv(c, &v, 1, FT_F32, 1, 7, &r);
        exec_wait(&ex, &r, 1, FT_TL_PP); /* completes only once poll_go has run */
    } else {
        int go = 0;
        MPI_Recv(&go, 1, MPI_INT, 0, 99, ft_test_comm(), MPI_STATUS_IGNORE);
        v = 42.0f;
        FtReq r;
        comm_isend(c, &v, 1, FT_F32, 0, 7, &r);
        comm_wait(&r, NULL);
        told = go;
    }
    assert_all(v == 42.0f && told == 1);
    comm_destroy(c);
}

/* exec_watch: a watched request stays listed until an op after its completion tests it; with
 * progress off nothing is listed. */
static void test_watch(void **state)
{
    (void)state;
    if (ft_test_size() != 2) skip();
    enum { N = 16 };
    FtComm *c = comm_create_mpi_dup(ft_test_comm(), "dp");
    FtTape tp;
    int a, x;
    sum_tape(&tp, N, false, &a, &x);
    input_of(0, tp.t[a].data, N);
    for (int off = 0; off <= 1; off++) {
        FtExec ex = {.no_progress = off};
        float buf[N];
        input_of(ft_test_rank(), buf, N);
        FtReq r;
        comm_iallreduce_sum(c, FT_IN_PLACE, buf, N, FT_F32, &r);
        exec_watch(&ex, &r);
        int listed = ex.nwatch;
        exec_wait(&ex, &r, 1, FT_TL_DP);
        int after_wait = ex.nwatch; /* complete, but not yet tested by an op */
        exec_run_ctx(&ex, &tp, 0, tp.ne);
        assert_all(listed == !off && after_wait == !off && ex.nwatch == 0);
    }
    tape_free(&tp);
    comm_destroy(c);
}

FT_TEST_MAIN(cmocka_unit_test(test_sends_complete_before_reuse),
             cmocka_unit_test(test_tp_allreduce_wait), cmocka_unit_test(test_wait_polls),
             cmocka_unit_test(test_watch))
