/* fuzz_faults.c: libFuzzer target for the fault schedule (make fuzz): fault_parse on any bytes,
 * then, when it parses, fault_plan against a fixed job (4 ranks, dp 2, 10 steps, a few op kinds
 * per rank). Either call must succeed or give one line that starts with the file name; never a
 * crash, a leak, undefined behaviour or a hang (libFuzzer's timeout), and a plan's flips must lie
 * inside the job. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/fault.h"

static void one_line(int rc, const char *err)
{
    if (rc != 0 && (strncmp(err, "f.faults:", 9) || strchr(err, '\n'))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FtFaultSchedule s;
    char err[512] = "", warn[512] = "";
    int rc = fault_parse(&s, "f.faults", (const char *)data, size, err, sizeof err);
    one_line(rc, err);
    if (rc) return 0;
    static FtFaultOps ops[4];
    for (int r = 0; r < 4; r++) { /* rank r runs kinds 1..4, r + 3 times each */
        memset(&ops[r], 0, sizeof ops[r]);
        for (int k = 1; k <= 4 && k < FT_OP_NKINDS; k++)
            ops[r].count[k] = r + 3, ops[r].max_elems[k] = 1000 + r, ops[r].bits[k] = 32;
    }
    FtFaultJob job = {.nranks = 4, .dp = 2, .steps = 10, .ops = ops, .seed = 7};
    FtFlip *f = NULL;
    int n = 0;
    rc = fault_plan(&s, &job, &f, &n, err, sizeof err, warn, sizeof warn);
    one_line(rc, err);
    if (warn[0] && (strncmp(warn, "f.faults:", 9) || strchr(warn, '\n'))) abort();
    for (int i = 0; !rc && i < n; i++) {
        const FtFlip *x = &f[i];
        if (x->rank < 0 || x->rank >= 4 || x->step < 1 || x->step > 10 || x->op < 1 || x->op > 4 ||
            x->nth < 0 || x->nth >= ops[x->rank].count[x->op] || x->bit < 0 || x->bit >= 32 ||
            x->elem >= ops[x->rank].max_elems[x->op])
            abort();
    }
    free(f);
    fault_free(&s);
    return 0;
}
