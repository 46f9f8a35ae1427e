/* exec.c: the executor (exec.h). The one place ops are launched: walks tape entries, resolves
 * tensors, calls the op table's forward or backward, optionally timing each call. Markers are
 * no-ops on one rank; later issues attach communication, DMR checks and fault injection to
 * exactly these calls. */
#include "ftllm/exec.h"

#include <omp.h>

#include "ftllm/log.h"

void exec_op(FtOpKind kind, FtOpDir dir, const FtOpCall *c, FtExecStats *stats)
{
    const FtOpDesc *d = ops_desc(kind);
    FtOpFn fn = dir == FT_FWD ? d->fwd : d->bwd;
    FT_ASSERT(fn);
    if (!stats) {
        fn(c);
        return;
    }
    double t0 = omp_get_wtime();
    fn(c);
    stats->seconds[kind][dir] += omp_get_wtime() - t0;
    stats->calls[kind][dir]++;
    stats->flops[kind][dir] += d->flops(c, dir);
}

void exec_run(const FtTape *tp, int begin, int end, FtExecStats *stats)
{
    FT_ASSERT(begin >= 0 && end <= tp->ne);
    for (int i = begin; i < end; i++) {
        const FtTapeEntry *e = &tp->e[i];
        if (e->kind == FT_OP_MARK) continue; /* communication points: nothing on one rank */
        FtOpCall c;
        tape_call(tp, i, &c);
        exec_op(e->kind, e->dir, &c, stats);
    }
}

void exec_stats_print(FILE *out, const FtExecStats *s)
{
    double total = 0;
    for (int k = 0; k < FT_OP_NKINDS; k++) total += s->seconds[k][0] + s->seconds[k][1];
    fprintf(out, "%-16s %8s %10s %9s %6s\n", "op", "calls", "ms", "GFLOP/s", "%");
    for (int k = 0; k < FT_OP_NKINDS; k++)
        for (int dir = 0; dir < 2; dir++) {
            if (!s->calls[k][dir]) continue;
            double sec = s->seconds[k][dir];
            char name[32];
            snprintf(name, sizeof name, "%s.%s", ops_desc(k)->name, dir ? "bwd" : "fwd");
            fprintf(out, "%-16s %8lld %10.1f %9.2f %6.1f\n", name, s->calls[k][dir], 1e3 * sec,
                    sec > 0 ? s->flops[k][dir] / sec / 1e9 : 0.0, total > 0 ? 100 * sec / total : 0.0);
        }
}
