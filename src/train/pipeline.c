/* pipeline.c: GPipe and 1F1B schedules (pipeline.h). Pure functions of (kind, pp, stage, M):
 * every stage derives its own list, and tests check them against a simulation of blocking
 * receives (tests/test_pipeline.c). */
#include "ftllm/pipeline.h"

#include "ftllm/log.h"

/* 1F1B's warm-up forwards on stage (extra more on every stage but the last) */
static int warmup(int pp, int stage, int M, int extra)
{
    long long w = pp - stage - 1 + (stage < pp - 1 ? (long long)extra : 0);
    return w < M ? (int)w : M;
}

void pipeline_schedule(FtPipeSchedule kind, int pp, int stage, int M, int extra, FtPipeOp *ops)
{
    FT_ASSERT(pp >= 1 && stage >= 0 && stage < pp && M >= 1 && extra >= 0);
    int n = 0;
    if (kind == FT_PIPE_GPIPE) {
        for (int k = 0; k < M; k++) ops[n++] = (FtPipeOp){true, k};
        for (int k = 0; k < M; k++) ops[n++] = (FtPipeOp){false, k};
        return;
    }
    int warm = warmup(pp, stage, M, extra);
    int f = 0, b = 0;
    for (; f < warm; f++) ops[n++] = (FtPipeOp){true, f};
    while (f < M) { /* steady state: one forward, one backward */
        ops[n++] = (FtPipeOp){true, f++};
        ops[n++] = (FtPipeOp){false, b++};
    }
    while (b < M) ops[n++] = (FtPipeOp){false, b++};
}

int pipeline_slots(FtPipeSchedule kind, int pp, int stage, int M, int extra)
{
    if (kind == FT_PIPE_GPIPE) return M;
    int w = warmup(pp, stage, M, extra);
    return w < M ? w + 1 : M; /* the warm-up's and the steady state's one more */
}
