/* test_exec.c: the executor's pipeline marks on two stages, with hand-made tapes. A stage's
 * sends are left in flight (exec.c), so the executor must complete a tape's earlier send in a
 * direction before any op of that tape writes again in that direction (the send's buffer is
 * the tape's own tensor; waiting on the other direction's send deadlocks 1F1B once messages
 * wait for their receive). Stage 0 runs forward, forward, backward, backward on one tape (two
 * micro-batches in flight) and stage 1 forward, backward, forward, backward, with messages of
 * 4 KiB and then of 1 MiB (past MPI's eager limit); after every op an after-op hook checks
 * that no send of its tape in the op's direction is still in flight, and each stage checks
 * the bytes it received (activations 2a, gradients 4a of micro-batch k's input a).
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

static void check_sends(void *arg, const FtTape *tp, int entry, const FtOpCall *c)
{
    (void)c;
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
    FtExec ex = {.pp = pp};
    HookState h = {.ex = &ex};
    ex.hooks = (FtExecHooks){check_sends, &h};
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

FT_TEST_MAIN(cmocka_unit_test(test_sends_complete_before_reuse))
