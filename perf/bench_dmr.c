/* bench_dmr.c: what DMR costs, as step-time ratios against no DMR measured in one run.
 *
 * One rank, a small GPT-2 (L 6, NH 8, C 256, V 256, T 128, B 4), synthetic tokens, no faults.
 * Five trainers live side by side, each on its own copy of the same model: AC none with DMR off
 * and naive; AC full with DMR off, naive and piggyback. Each round runs one step of every
 * trainer, in an order rotated from round to round (the machine is shared: its load drifts, so
 * every ratio is a pair of steps taken back to back); the table gives, per variant, the median
 * and best step time and the median of the per-round ratios to DMR off with the same AC, plus
 * piggyback against naive under AC full. The DMR module's own estimate (time inside its checks
 * over the rest of the step) is printed beside it.
 * Usage: bench_dmr [rounds] (default 8 timed rounds after 1 warm-up round). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/deck.h"
#include "ftllm/log.h"
#include "ftllm/model.h"
#include "ftllm/train.h"
#include "ftllm/train_dmr.h"

#include "bench_util.h"

enum { NV = 5 };
static const struct {
    const char *name;
    int ac, mode, base; /* base: the variant this one is compared with */
} g_var[NV] = {
    {"ac none, off", FT_AC_CHOICE_NONE, FT_DMR_OFF, 0},
    {"ac none, naive", FT_AC_CHOICE_NONE, FT_DMR_NAIVE, 0},
    {"ac full, off", FT_AC_CHOICE_FULL, FT_DMR_OFF, 2},
    {"ac full, naive", FT_AC_CHOICE_FULL, FT_DMR_NAIVE, 2},
    {"ac full, piggyback", FT_AC_CHOICE_FULL, FT_DMR_PIGGYBACK, 2},
};

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 8;
    if (rounds < 1) rounds = 1;
    MPI_Init(&argc, &argv);
    log_init(0, FT_LOG_WARN); /* no set-up lines */
    FtConfig c[NV];
    FtModel m[NV];
    FtTrainer tr[NV];
    FtTrainDmr *td[NV];
    static int dims[2];
    char err[FT_DECK_ERR_MAX];
    for (int v = 0; v < NV; v++) {
        if (deck_defaults(&c[v], err, sizeof err)) return 1;
        c[v].model.layers = 6, c[v].model.heads = 8, c[v].model.channels = 256;
        c[v].model.vocab = 256, c[v].model.vocab_pad = 128, c[v].model.seq_len = 128;
        c[v].train.batch = 4, c[v].train.steps = 1000, c[v].train.warmup = 10;
        c[v].train.ac = g_var[v].ac, c[v].dmr.mode = g_var[v].mode;
        if (deck_check(&c[v], 1, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        dims[0] = (int)c[v].model.seq_len, dims[1] = (int)c[v].model.vocab;
        FtGpt2Config mc;
        model_config_from_deck(&c[v], &mc);
        model_create(&m[v], &mc);
        model_init_random(&m[v], 1337);
        FtBatchSource src = {bench_synth_fetch, dims};
        train_init(&tr[v], &c[v], &m[v], &src, NULL);
        if (train_dmr_setup(&td[v], &tr[v], &c[v], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    int nt = omp_get_max_threads();
    printf("bench_dmr: GPT-2 L6 NH8 C256 V256 T128 B4, %d thread%s, %d rounds of one step per "
           "variant (order rotated) after 1 warm-up round\n", nt, nt == 1 ? "" : "s", rounds);
    double *t = calloc((size_t)NV * rounds, sizeof *t);
    FT_ASSERT(t);
    for (int r = -1; r < rounds; r++) {
        for (int j = 0; j < NV; j++) {
            int v = (j + (r < 0 ? 0 : r)) % NV;
            FtStepInfo st;
            train_step(&tr[v], &st);
            if (r >= 0) t[v * rounds + r] = st.seconds;
        }
    }
    printf("%-20s %10s %10s %16s %14s\n", "variant", "median ms", "best ms", "ratio (median)",
           "dmr estimate");
    double ratio[NV];
    for (int v = 0; v < NV; v++) {
        double rr[rounds], tt[rounds], best = 1e30;
        for (int r = 0; r < rounds; r++) {
            tt[r] = t[v * rounds + r];
            rr[r] = tt[r] / t[g_var[v].base * rounds + r];
            if (tt[r] < best) best = tt[r];
        }
        ratio[v] = bench_median(rr, rounds);
        char est[32] = "-";
        if (td[v]) {
            FtDmrStats s;
            train_dmr_stats(td[v], &s);
            double rest = s.compute_s - s.check_s;
            snprintf(est, sizeof est, "+%.0f%%", rest > 0 ? 100 * s.check_s / rest : 0.0);
        }
        printf("%-20s %10.1f %10.1f %15.3fx %14s\n", g_var[v].name, 1e3 * bench_median(tt, rounds),
               1e3 * best, ratio[v], est);
    }
    double pn[rounds];
    for (int r = 0; r < rounds; r++) pn[r] = t[4 * rounds + r] / t[3 * rounds + r];
    printf("RESULT naive vs off: %.2fx (ac none), %.2fx (ac full); piggyback vs off (ac full): "
           "%.2fx; piggyback vs naive (ac full): %.2fx\n", ratio[1], ratio[3], ratio[4],
           bench_median(pn, rounds));
    for (int v = 0; v < NV; v++) {
        train_dmr_destroy(td[v]);
        train_free(&tr[v]);
        model_free(&m[v]);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
