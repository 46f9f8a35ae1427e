/* test_pipeline.c: the GPipe and 1F1B schedules. For pp 1..6 and M 1..9, each stage's list runs
 * every micro-batch's forward and backward exactly once, forward before backward, backwards in
 * micro-batch order (the single-rank accumulation order), never more micro-batches in flight
 * than pipeline_slots() says and exactly that many at the peak (1F1B never more than pp - stage),
 * and a simulation of the stages with blocking receives (a forward on stage s waits for stage
 * s-1's forward of that micro-batch, a backward for stage s+1's backward) finishes: no
 * deadlock; run in lock step with unit-time ops it takes the ideal 2 (M + pp - 1) rounds.
 * 1F1B also with 1..3 extra warm-up forwards (parallel.warmup_extra): the same properties,
 * that many more micro-batches in flight on every stage but the last.
 * ft-test: ranks 1 */
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/pipeline.h"

static void check(FtPipeSchedule kind, int pp, int M, int extra)
{
    FtPipeOp *ops = malloc(sizeof *ops * (size_t)(2 * M * pp));
    int *pos = calloc((size_t)pp, sizeof(int));
    int *fdone = calloc((size_t)(pp * M), sizeof(int)), *bdone = calloc((size_t)(pp * M), sizeof(int));
    for (int s = 0; s < pp; s++) {
        FtPipeOp *o = ops + (size_t)s * 2 * M;
        pipeline_schedule(kind, pp, s, M, extra, o);
        int slots = pipeline_slots(kind, pp, s, M, extra), inflight = 0, maxin = 0, nextb = 0;
        int *seenf = calloc((size_t)M, sizeof(int)), *seenb = calloc((size_t)M, sizeof(int));
        for (int i = 0; i < 2 * M; i++) {
            assert_true(o[i].mb >= 0 && o[i].mb < M);
            if (o[i].fwd) {
                assert_int_equal(seenf[o[i].mb]++, 0);
                inflight++;
            } else {
                assert_int_equal(seenf[o[i].mb], 1);
                assert_int_equal(seenb[o[i].mb]++, 0);
                assert_int_equal(o[i].mb, nextb++);
                inflight--;
            }
            maxin = inflight > maxin ? inflight : maxin;
        }
        assert_int_equal(maxin, slots); /* the activation sets it asks for are all used */
        if (kind == FT_PIPE_1F1B) /* extra more on every stage but the last */
            assert_int_equal(slots, pp - s + (s < pp - 1 ? extra : 0) < M
                                        ? pp - s + (s < pp - 1 ? extra : 0) : M);
        free(seenf), free(seenb);
    }
    /* simulation: repeatedly run any stage whose next op's input is ready */
    int remaining = 2 * M * pp;
    while (remaining) {
        int progressed = 0;
        for (int s = 0; s < pp; s++) {
            if (pos[s] == 2 * M) continue;
            FtPipeOp op = ops[(size_t)s * 2 * M + pos[s]];
            int ready = op.fwd ? (s == 0 || fdone[(s - 1) * M + op.mb])
                               : (s == pp - 1 || bdone[(s + 1) * M + op.mb]);
            if (!ready) continue;
            (op.fwd ? fdone : bdone)[s * M + op.mb] = 1;
            pos[s]++;
            remaining--;
            progressed = 1;
        }
        assert_true(progressed); /* else: deadlock */
    }
    /* in lock step (each round, every stage whose input was ready at the round's start runs
     * its next op; forward and backward take one round each), both schedules finish in the
     * ideal 2 (M + pp - 1) rounds: no bubble beyond the pipeline's fill and drain */
    memset(pos, 0, sizeof(int) * (size_t)pp);
    memset(fdone, 0, sizeof(int) * (size_t)(pp * M)), memset(bdone, 0, sizeof(int) * (size_t)(pp * M));
    int *run = calloc((size_t)pp, sizeof(int)), rounds = 0;
    for (remaining = 2 * M * pp; remaining; rounds++) {
        for (int s = 0; s < pp; s++) {
            FtPipeOp op = ops[(size_t)s * 2 * M + (pos[s] < 2 * M ? pos[s] : 0)];
            run[s] = pos[s] < 2 * M && (op.fwd ? (s == 0 || fdone[(s - 1) * M + op.mb])
                                               : (s == pp - 1 || bdone[(s + 1) * M + op.mb]));
        }
        for (int s = 0; s < pp; s++) {
            if (!run[s]) continue;
            FtPipeOp op = ops[(size_t)s * 2 * M + pos[s]++];
            (op.fwd ? fdone : bdone)[s * M + op.mb] = 1;
            remaining--;
        }
        assert_true(rounds < 4 * M * pp); /* else: deadlock */
    }
    if (extra == 0) assert_int_equal(rounds, 2 * (M + pp - 1));
    else assert_true(rounds <= 2 * (M + pp - 1) + 2 * extra); /* warm-up forwards run ahead */
    free(run), free(ops), free(pos), free(fdone), free(bdone);
}

static void test_schedules(void **state)
{
    (void)state;
    for (int pp = 1; pp <= 6; pp++)
        for (int M = 1; M <= 9; M++) {
            for (int extra = 0; extra <= 3; extra++) check(FT_PIPE_1F1B, pp, M, extra);
            check(FT_PIPE_GPIPE, pp, M, 0);
        }
    /* 1F1B holds fewer activations than GPipe once M > pp; warm-up_extra holds more */
    assert_int_equal(pipeline_slots(FT_PIPE_1F1B, 4, 0, 8, 0), 4);
    assert_int_equal(pipeline_slots(FT_PIPE_GPIPE, 4, 0, 8, 0), 8);
    assert_int_equal(pipeline_slots(FT_PIPE_1F1B, 4, 0, 8, 1), 5);
    assert_int_equal(pipeline_slots(FT_PIPE_1F1B, 4, 3, 8, 1), 1); /* the last stage: as 1F1B */
    /* pp 2, M 4, one extra warm-up forward on the first stage: F0 F1 F2 B0 F3 B1 B2 B3 */
    FtPipeOp o[8];
    pipeline_schedule(FT_PIPE_1F1B, 2, 0, 4, 1, o);
    const int fwd[8] = {1, 1, 1, 0, 1, 0, 0, 0}, mb[8] = {0, 1, 2, 0, 3, 1, 2, 3};
    for (int i = 0; i < 8; i++) assert_true(o[i].fwd == fwd[i] && o[i].mb == mb[i]);
}

FT_TEST_MAIN(cmocka_unit_test(test_schedules))
