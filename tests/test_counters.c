/* test_counters.c: event counts per named region (counters.h) through the region timers
 * (timers.h): nesting, reset, the end-of-run table's columns (min / avg / max over ranks), and
 * PAPI itself where it can count (perf::TASK-CLOCK is a software event; a machine whose PAPI
 * cannot count at all, e.g. a VM without a CPU PMU, gets NULL and the test says so). The run's
 * other reports: the waiting line of each rank (timeline.h: ms per step, the share of the step
 * spent waiting and per kind, rank 0 printing every rank's) and the ETA of the live progress
 * line (progress.h), and the wall clock that the ULFM report's failure times read (timers_wall).
 * ft-test: ranks 1 2 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/counters.h"
#include "ftllm/log.h"
#include "ftllm/progress.h"
#include "ftllm/timeline.h"
#include "ftllm/timers.h"

/* A counter source the test moves by hand: two events, values[0] and values[1]. */
static int hand_read(void *ctx, long long *v)
{
    memcpy(v, ctx, 2 * sizeof(long long));
    return 0;
}

static const char *const g_names[2] = {"test::A", "test::B"};

/* Nested regions each get their inclusive count, as their timers do. */
static void test_nesting(void **state)
{
    (void)state;
    long long now[2] = {100, 7};
    FtCounters *c = counters_open_source(2, g_names, FT_NREGIONS, hand_read, now);
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_attach(&t, c);
    timers_begin(&t, FT_REGION_STEP);
    now[0] += 10;
    timers_begin(&t, FT_REGION_FORWARD);
    now[0] += 5, now[1] += 2;
    timers_end(&t, FT_REGION_FORWARD);
    now[0] += 1;
    timers_begin(&t, FT_REGION_BACKWARD);
    now[0] += 20;
    timers_end(&t, FT_REGION_BACKWARD);
    timers_end(&t, FT_REGION_STEP);
    now[0] += 1000; /* outside every region: counted nowhere */
    assert_int_equal(counters_total(c, FT_REGION_STEP, 0), 36);
    assert_int_equal(counters_total(c, FT_REGION_FORWARD, 0), 5);
    assert_int_equal(counters_total(c, FT_REGION_BACKWARD, 0), 20);
    assert_int_equal(counters_total(c, FT_REGION_STEP, 1), 2);
    assert_int_equal(counters_total(c, FT_REGION_BACKWARD, 1), 0);
    assert_int_equal(counters_total(c, FT_REGION_EVAL, 0), 0);
    /* a second call adds to the first */
    timers_begin(&t, FT_REGION_FORWARD);
    now[0] += 3;
    timers_end(&t, FT_REGION_FORWARD);
    assert_int_equal(counters_total(c, FT_REGION_FORWARD, 0), 8);
    /* the warm-up reset zeroes the totals and keeps the counters attached */
    timers_reset(&t);
    assert_ptr_equal(t.ctr, c);
    for (int r = 0; r < FT_NREGIONS; r++) /* every region's, not only the first */
        for (int e = 0; e < 2; e++) assert_int_equal(counters_total(c, r, e), 0);
    timers_begin(&t, FT_REGION_STEP);
    now[1] += 4;
    timers_end(&t, FT_REGION_STEP);
    assert_int_equal(counters_total(c, FT_REGION_STEP, 1), 4);
    assert_int_equal(t.calls[FT_REGION_STEP], 1);
    counters_close(c);
}

/* timers_report's table over the test's ranks, as a string (caller frees). */
static char *report_text(FtTimers *t)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    timers_report(t, ft_test_comm(), f);
    fclose(f);
    return text;
}

/* Rank 0's table over all ranks: rank k counts (k + 1) x 1000 events A and 12345678 B in its
 * step, so the step row reads min 1000, avg (size + 1) x 500, max size x 1000 for A. */
static void test_report_columns(void **state)
{
    (void)state;
    int rank = ft_test_rank(), size = ft_test_size();
    long long now[2] = {0, 0};
    FtCounters *c = counters_open_source(2, g_names, FT_NREGIONS, hand_read, now);
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_attach(&t, c);
    timers_begin(&t, FT_REGION_STEP);
    now[0] += (rank + 1) * 1000LL, now[1] += 12345678;
    timers_end(&t, FT_REGION_STEP);
    char *text = report_text(&t);
    int good = 1;
    if (rank == 0) {
        char want[128];
        snprintf(want, sizeof want, "1000 / %d / %d  ", (size + 1) * 500, size * 1000);
        const char *step = strstr(text, "\nstep ");
        good = strstr(text, "test::A") && strstr(text, "test::B") && step &&
               strstr(step, want) && strstr(step, "12.3M / 12.3M / 12.3M") &&
               strstr(text, "PAPI event counts") && !strstr(text, "\nforward ");
        if (!good) fprintf(stderr, "table:\n%s\nwant '%s' in the step row\n", text, want);
    }
    assert_all(good);
    free(text);
    counters_close(c);
}

/* The counts' cells: 9999 as is, larger counts in 3 significant digits and a suffix (at most 5
 * characters), one region per count, the same on every rank. Event B's column (the row's last)
 * takes the boundaries: a count that rounds up to the next width or suffix (99950 is 100k, not
 * 100.0k; 999500 is 1.00M). */
static void test_report_counts(void **state)
{
    (void)state;
    typedef struct {
        long long n;
        const char *cell;
    } Cell;
    static const Cell cases[FT_NREGIONS] = {
        {9999, "9999 / 9999 / 9999"},        {12345, "12.3k / 12.3k / 12.3k"},
        {999499, "999k / 999k / 999k"},      {999600, "1.00M / 1.00M / 1.00M"},
        {1234567, "1.23M / 1.23M / 1.23M"},  {5000000, "5.00M / 5.00M / 5.00M"},
        {45678901, "45.7M / 45.7M / 45.7M"}, {123456789012, "123G / 123G / 123G"}};
    static const Cell edges[FT_NREGIONS] = {
        {99949, "99.9k / 99.9k / 99.9k"},   {99950, "100k / 100k / 100k"},
        {10000, "10.0k / 10.0k / 10.0k"},   {999500, "1.00M / 1.00M / 1.00M"},
        {9995000, "10.0M / 10.0M / 10.0M"}, {99950000, "100M / 100M / 100M"},
        {5000000000000000000LL, "5.00E / 5.00E / 5.00E"}, {0, "0 / 0 / 0"}};
    long long now[2] = {0, 0};
    FtCounters *c = counters_open_source(2, g_names, FT_NREGIONS, hand_read, now);
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_attach(&t, c);
    for (int r = 0; r < FT_NREGIONS; r++) {
        timers_begin(&t, r);
        now[0] += cases[r].n;
        now[1] += edges[r].n;
        timers_end(&t, r);
    }
    char *text = report_text(&t);
    int good = 1;
    for (int r = 0; r < FT_NREGIONS && ft_test_rank() == 0; r++) {
        char want[64];
        snprintf(want, sizeof want, "  %19s  ", cases[r].cell); /* event A's column, B's after */
        const char *row = text;
        for (int k = 0; row && k <= r + 1; k++) row = strchr(row + 1, '\n'); /* header, rows */
        const char *end = row ? strchr(row + 1, '\n') : NULL;
        const char *at = row ? strstr(row, want) : NULL;
        if (!at || (end && at > end)) {
            fprintf(stderr, "table:\n%s\nwant '%s' in row %d\n", text, want, r);
            good = 0;
        }
        snprintf(want, sizeof want, "  %19s", edges[r].cell); /* event B's, the row's end */
        size_t wl = strlen(want);
        if (!row || !end || end - row < (ptrdiff_t)wl || strncmp(end - wl, want, wl)) {
            fprintf(stderr, "table:\n%s\nwant '%s' ending row %d\n", text, want, r);
            good = 0;
        }
    }
    assert_all(good);
    free(text);
    counters_close(c);
}

/* Without counters the table has no event columns (the same as before counters existed). */
static void test_report_without(void **state)
{
    (void)state;
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_begin(&t, FT_REGION_STEP);
    timers_end(&t, FT_REGION_STEP);
    char *text = report_text(&t);
    int slashes = -1; /* in the step row: seconds and % of step, min / avg / max each */
    const char *row = strstr(text, "\nstep ");
    if (row)
        for (slashes = 0, row++; *row && *row != '\n'; row++) slashes += *row == '/';
    assert_all(ft_test_rank() != 0 || (slashes == 4 && !strstr(text, "PAPI")));
    free(text);
}

/* The table's rows from times and calls set by hand (no clock involved): rank k spent k + 1 s in
 * its steps and 0.5 s in forward, so forward's share of the step is 50 / (k + 1) % on rank k:
 * the share is of each rank's own step, min / avg / max over the ranks. One validation on
 * rank 0 only (calls 1 in all) brings the footnote on regions that run between steps; a table
 * without eval and checkpoint has none. */
static void test_report_shares(void **state)
{
    (void)state;
    int rank = ft_test_rank(), size = ft_test_size();
    FtTimers t;
    memset(&t, 0, sizeof t);
    t.total[FT_REGION_STEP] = rank + 1.0, t.calls[FT_REGION_STEP] = 4;
    t.total[FT_REGION_FORWARD] = 0.5, t.calls[FT_REGION_FORWARD] = 8;
    for (int with_eval = 0; with_eval < 2; with_eval++) {
        if (with_eval && rank == 0) t.total[FT_REGION_EVAL] = 0.25, t.calls[FT_REGION_EVAL] = 1;
        char *text = report_text(&t);
        int good = 1;
        if (rank == 0) {
            double pmin = 50.0 / size, pavg = 0;
            for (int k = 0; k < size; k++) pavg += 50.0 / (k + 1) / size;
            char step[128], fwd[128];
            snprintf(step, sizeof step, "\n%-11s %9d %8.3f / %7.3f / %7.3f %6.1f / %5.1f / %5.1f\n", "step", 4,
                     1.0, (size + 1) / 2.0, (double)size, 100.0, 100.0, 100.0);
            snprintf(fwd, sizeof fwd, "\n%-11s %9d %8.3f / %7.3f / %7.3f %6.1f / %5.1f / %5.1f\n", "forward", 8,
                     0.5, 0.5, 0.5, pmin, pavg, 50.0);
            const char *note = "(eval and checkpoint run between steps";
            int eval_row = strstr(text, "\neval ") != NULL;
            good = strstr(text, step) && strstr(text, fwd) && eval_row == with_eval &&
                   (strstr(text, note) != NULL) == with_eval;
            if (!good)
                fprintf(stderr, "table:\n%s\nwant the rows:%s%s%s eval row and footnote\n", text, step,
                        fwd, with_eval ? "an" : "no");
        }
        assert_all(good);
        free(text);
    }
}

/* Each region's name finds it again (the last one too); an unknown name is -1. */
static void test_region_names(void **state)
{
    (void)state;
    static const char *const names[FT_NREGIONS] = {
#define NAME(name, text, help) text,
        FT_REGION_LIST(NAME)
#undef NAME
    };
    for (int r = 0; r < FT_NREGIONS; r++) assert_int_equal(timers_region_of(names[r]), r);
    assert_int_equal(timers_region_of("nope"), -1);
    assert_int_equal(timers_region_of(""), -1);
    /* FTLLM_TEST_KILL's names: the regions, and the kill point after a DMR agreement */
    for (int r = 0; r < FT_NREGIONS; r++) assert_int_equal(timers_kill_point_of(names[r]), r);
    assert_int_equal(timers_kill_point_of("agreed"), FT_KILL_AGREED);
    assert_int_equal(timers_region_of("agreed"), -1);
    assert_int_equal(timers_kill_point_of("idle"), FT_KILL_IDLE); /* a waiting spare's */
    assert_int_equal(timers_region_of("idle"), -1);
    assert_true(FT_KILL_IDLE != FT_KILL_AGREED && (int)FT_KILL_IDLE >= (int)FT_NREGIONS);
    assert_int_equal(timers_kill_point_of("regrid"), FT_KILL_REGRID); /* a job's new grid */
    assert_int_equal(timers_region_of("regrid"), -1);
    assert_true(FT_KILL_REGRID != FT_KILL_IDLE && FT_KILL_REGRID != FT_KILL_AGREED &&
                (int)FT_KILL_REGRID >= (int)FT_NREGIONS);
    assert_int_equal(timers_kill_point_of("nope"), -1);
}

/* A kill point that is not a region counts its own passes only (not region entries), and a
 * region's kill point does not count passes. */
static void test_kill_point_agreed(void **state)
{
    (void)state;
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_kill_at(&t, FT_KILL_AGREED, 3);
    for (int r = 0; r < FT_NREGIONS; r++) {
        timers_begin(&t, (FtRegion)r);
        timers_end(&t, (FtRegion)r);
    }
    assert_int_equal(t.kill_left, 3);
    timers_point(&t, FT_KILL_AGREED);
    timers_point(&t, FT_KILL_AGREED);
    assert_int_equal(t.kill_left, 1);
    timers_kill_at(&t, FT_REGION_OPTIMIZER, 2);
    timers_point(&t, FT_KILL_AGREED);
    assert_int_equal(t.kill_left, 2);
}

/* The test kill point (timers_kill_at): it counts entries into its own region only, a reset
 * (the warm-up's) neither clears nor restarts it, and the nth entry raises SIGKILL (in a child
 * process, which makes no MPI call before it dies). */
static void test_kill_point(void **state)
{
    (void)state;
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_kill_at(&t, FT_REGION_CHECKPOINT, 3);
    for (int i = 0; i < 5; i++) { /* other regions: never counted */
        timers_begin(&t, FT_REGION_STEP);
        timers_end(&t, FT_REGION_STEP);
    }
    timers_begin(&t, FT_REGION_CHECKPOINT);
    timers_end(&t, FT_REGION_CHECKPOINT);
    timers_reset(&t);
    assert_int_equal(t.kill_region, FT_REGION_CHECKPOINT);
    assert_int_equal(t.kill_left, 2);
    assert_int_equal(t.calls[FT_REGION_CHECKPOINT], 0);
    timers_begin(&t, FT_REGION_CHECKPOINT);
    timers_end(&t, FT_REGION_CHECKPOINT);
    assert_int_equal(t.kill_left, 1);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        log_init(0, FT_LOG_ERROR); /* not the kill's own line */
        timers_begin(&t, FT_REGION_CHECKPOINT); /* the 3rd entry: does not return */
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* A region's seconds add up over its calls: a long first call and a short second one leave at
 * least the first one's time (a total that kept only the last call's would drop). */
static void test_seconds_add_up(void **state)
{
    (void)state;
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_begin(&t, FT_REGION_DATA);
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < 0.02) continue;
    timers_end(&t, FT_REGION_DATA);
    double first = t.total[FT_REGION_DATA];
    timers_begin(&t, FT_REGION_DATA);
    timers_end(&t, FT_REGION_DATA);
    assert_true(first >= 0.02);
    assert_true(t.total[FT_REGION_DATA] >= first);
    assert_int_equal(t.calls[FT_REGION_DATA], 2);
}

/* timers_wall is the wall clock in seconds with its sub-second part (the ULFM report's "saw
 * the failure at wall X, D s before the agreement ended" subtracts two of them, taken on
 * different ranks): each reading lies between two CLOCK_REALTIME readings taken around it,
 * to double's resolution at today's epoch seconds (a quarter of a microsecond). Five readings
 * a millisecond apart, so that a clock that dropped its nanoseconds (or scaled them wrongly)
 * fails unless every reading fell in the first microsecond of its second. */
static double wall_of(const struct timespec *ts)
{
    return (double)ts->tv_sec + (double)ts->tv_nsec / 1e9;
}

static void test_wall_clock(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++) {
        struct timespec a, b, pause = {0, 1000000};
        clock_gettime(CLOCK_REALTIME, &a);
        double w = timers_wall();
        clock_gettime(CLOCK_REALTIME, &b);
        assert_true(w >= wall_of(&a) - 1e-6);
        assert_true(w <= wall_of(&b) + 1e-6);
        nanosleep(&pause, NULL);
    }
}

/* PAPI: an empty list opens nothing; perf::TASK-CLOCK counts a busy region where PAPI can
 * count, and every rank gets the same answer (the open is collective). */
static void test_papi(void **state)
{
    (void)state;
    assert_null(counters_open_papi("", FT_NREGIONS, ft_test_comm()));
    FtCounters *c = counters_open_papi("perf::TASK-CLOCK,perf::NO-SUCH-EVENT", FT_NREGIONS,
                                       ft_test_comm());
    int n = counters_num(c);
    assert_all(ft_same_bytes(&n, sizeof n));
    if (!c) {
        print_message("PAPI cannot count on this machine (the warning above says why): "
                      "counting not checked\n");
        skip();
    }
    assert_all(n == 1 && !strcmp(counters_name(c, 0), "perf::TASK-CLOCK"));
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_attach(&t, c);
    timers_begin(&t, FT_REGION_STEP);
    volatile double x = 0;
    for (long i = 0; i < 20000000; i++) x += 1e-9 * (double)i;
    timers_end(&t, FT_REGION_STEP);
    assert_all(counters_total(c, FT_REGION_STEP, 0) > 0 && x > 0);
    counters_close(c);
}

/* The waiting report: after a reset (of a step and a wait booked before it), rank r books two
 * steps of 0.5 s, a tensor-parallel wait of 0.25 s and a pipeline one of (r + 1) / 8 s (binary
 * fractions: every sum is exact). Each rank gets its waiting share of the step time; rank 0
 * prints one line per rank: its label, 500.00 ms/step, the share and each kind's. A timeline
 * booked past its event array keeps its first events and every total, the last kind's too. */
static void test_timeline_report(void **state)
{
    (void)state;
    int rank = ft_test_rank(), size = ft_test_size();
    FtTimeline tl;
    timeline_init(&tl, 8);
    timeline_add(&tl, FT_TL_STEP, 1.0, 2.0); /* warm-up: reset away */
    timeline_add(&tl, FT_TL_PP, 1.0, 1.5);
    timeline_reset(&tl);
    double pp = 0.125 * (rank + 1);
    timeline_add(&tl, FT_TL_STEP, 10.0, 10.5);
    timeline_add(&tl, FT_TL_TP, 10.0, 10.25);
    timeline_add(&tl, FT_TL_STEP, 11.0, 11.5);
    timeline_add(&tl, FT_TL_PP, 11.0, 11.0 + pp);
    assert_all(tl.nev == 4 && tl.count[FT_TL_STEP] == 2 && timeline_wait(&tl) == 0.25 + pp);
    /* every waiting kind counts (the last too); past the array's 8 events only the totals
     * grow */
    FtTimeline full;
    timeline_init(&full, 8);
    for (int k = 0; k < 2 * FT_TL_NKINDS; k++) timeline_add(&full, k % FT_TL_NKINDS, 0.0, 0.5);
    assert_all(full.nev == 8 && full.count[FT_TL_OTHER] == 2 && full.total[FT_TL_OTHER] == 1.0 &&
               timeline_wait(&full) == (FT_TL_NKINDS - 1) * 1.0);
    timeline_free(&full);
    char label[32], *text = NULL;
    snprintf(label, sizeof label, "rank %d", rank);
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    double share = timeline_report(&tl, ft_test_comm(), label, f);
    fclose(f);
    assert_all(share == 0.25 + pp);
    int good = 1;
    for (int r = 0; r < size && rank == 0; r++) {
        char head[32], want[96];
        snprintf(head, sizeof head, "[r%d] rank %d ", r, r);
        snprintf(want, sizeof want, "500.00 ms/step, waiting %5.1f%% (tp 25.0%%, pp %.1f%%)\n",
                 100 * (0.25 + 0.125 * (r + 1)), 100 * 0.125 * (r + 1));
        const char *line = strstr(text, head), *end = line ? strchr(line, '\n') : NULL;
        const char *at = line ? strstr(line, want) : NULL;
        if (!at || at + strlen(want) - 1 != end) {
            fprintf(stderr, "report:\n%s\nwant a line '%s...%s'\n", text, head, want);
            good = 0;
        }
    }
    assert_all(good);
    free(text);
    timeline_free(&tl);
}

/* The live line's ETA: h:mm:ss past an hour, else m:ss, rounded to the second; "?" when
 * unknown. */
static void test_eta(void **state)
{
    (void)state;
    static const struct {
        double s;
        const char *want;
    } cases[] = {{0, "0:00"},       {59.4, "0:59"},     {59.6, "1:00"}, {125, "2:05"},
                 {3599, "59:59"},   {3725, "1:02:05"},  {36061, "10:01:01"},
                 {-1, "?"},         {NAN, "?"},         {INFINITY, "?"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char buf[32];
        progress_format_eta(cases[k].s, buf, sizeof buf);
        assert_string_equal(buf, cases[k].want);
    }
}

FT_TEST_MAIN(cmocka_unit_test(test_nesting), cmocka_unit_test(test_report_columns),
             cmocka_unit_test(test_report_counts), cmocka_unit_test(test_report_without),
             cmocka_unit_test(test_report_shares), cmocka_unit_test(test_region_names),
             cmocka_unit_test(test_kill_point),
             cmocka_unit_test(test_kill_point_agreed), cmocka_unit_test(test_seconds_add_up),
             cmocka_unit_test(test_wall_clock), cmocka_unit_test(test_papi),
             cmocka_unit_test(test_timeline_report), cmocka_unit_test(test_eta))
