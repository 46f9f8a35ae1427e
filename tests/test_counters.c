/* test_counters.c: event counts per named region (counters.h) through the region timers
 * (timers.h): nesting, reset, the end-of-run table's columns (min / avg / max over ranks), and
 * PAPI itself where it can count (perf::TASK-CLOCK is a software event; a machine whose PAPI
 * cannot count at all, e.g. a VM without a CPU PMU, gets NULL and the test says so).
 * ft-test: ranks 1 2 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/counters.h"
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
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    timers_report(&t, ft_test_comm(), f);
    fclose(f);
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

/* Without counters the table has no event columns (the same as before counters existed). */
static void test_report_without(void **state)
{
    (void)state;
    FtTimers t;
    memset(&t, 0, sizeof t);
    timers_begin(&t, FT_REGION_STEP);
    timers_end(&t, FT_REGION_STEP);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    timers_report(&t, ft_test_comm(), f);
    fclose(f);
    int slashes = -1; /* in the step row: seconds and % of step, min / avg / max each */
    const char *row = strstr(text, "\nstep ");
    if (row)
        for (slashes = 0, row++; *row && *row != '\n'; row++) slashes += *row == '/';
    assert_all(ft_test_rank() != 0 || (slashes == 4 && !strstr(text, "PAPI")));
    free(text);
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

FT_TEST_MAIN(cmocka_unit_test(test_nesting), cmocka_unit_test(test_report_columns),
             cmocka_unit_test(test_report_without), cmocka_unit_test(test_papi))
