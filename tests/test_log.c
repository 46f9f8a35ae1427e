/* test_log.c: rank-0 logging (log.h) as a user sees it on stdout and stderr: which levels reach
 * which stream with which tag, rank 0 only for ft_log and every rank, "[rK]"-prefixed, for
 * ft_log_rank; the status line (the live progress line) is rank 0's, one line, erased before a
 * log line and drawn again after it.
 * ft-test: ranks 1 2 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/log.h"

static void write_levels(void)
{
    log_init(ft_test_rank(), FT_LOG_INFO);
    log_error("e %d", 1);
    log_warn("w %d", 2);
    log_info("i %d", 3);
    log_debug("d %d", 4);
    ft_log_rank(FT_LOG_WARN, "rw %d", 5);
    ft_log_rank(FT_LOG_INFO, "ri %d", 6);
    ft_log_rank(FT_LOG_DEBUG, "rd %d", 7);
}

/* At info level: errors and warnings on stderr with their tag, info on stdout, debug nowhere;
 * ft_log on rank 0 only, ft_log_rank on every rank with its rank. */
static void test_levels(void **state)
{
    (void)state;
    int rank = ft_test_rank();
    char out[1024], err[1024], want_out[128], want_err[128];
    ft_capture(write_levels, out, err, sizeof out);
    snprintf(want_out, sizeof want_out, "%s[r%d] ri 6\n", rank == 0 ? "i 3\n" : "", rank);
    snprintf(want_err, sizeof want_err, "%s[r%d] warning: rw 5\n",
             rank == 0 ? "error: e 1\nwarning: w 2\n" : "", rank);
    int good = !strcmp(out, want_out) && !strcmp(err, want_err);
    if (!good)
        fprintf(stderr, "rank %d: stdout '%s' (want '%s'), stderr '%s' (want '%s')\n", rank, out,
                want_out, err, want_err);
    assert_all(good);
    log_init(rank, FT_LOG_INFO);
}

static void write_quiet(void)
{
    log_init(ft_test_rank(), FT_LOG_ERROR);
    log_warn("w");
    ft_log_rank(FT_LOG_WARN, "rw");
    log_error("e");
}

/* At error level a warning is not shown, from ft_log or ft_log_rank. */
static void test_quiet(void **state)
{
    (void)state;
    int rank = ft_test_rank();
    char out[256], err[256];
    ft_capture(write_quiet, out, err, sizeof out);
    assert_all(!out[0] && !strcmp(err, rank == 0 ? "error: e\n" : ""));
    log_init(rank, FT_LOG_INFO);
}

static void write_status(void)
{
    log_init(ft_test_rank(), FT_LOG_INFO);
    log_status("step 1\r\nof 2");
    log_info("a line");
    log_status("");
    log_status(NULL);
}

/* The status line: rank 0 only, its line breaks turned to spaces; a log line erases it ("\r"
 * and ESC[K), prints, and draws it again; an empty status is a blank; NULL ends it with a
 * newline. */
static void test_status(void **state)
{
    (void)state;
    int rank = ft_test_rank();
    char out[256], err[256];
    ft_capture(write_status, out, err, sizeof out);
    const char *want = rank == 0 ? "step 1  of 2\r\033[Ka line\nstep 1  of 2\r\033[K \n" : "";
    int good = !strcmp(out, want) && !err[0];
    if (!good) fprintf(stderr, "rank %d: stdout '%s', stderr '%s'\n", rank, out, err);
    assert_all(good);
}

FT_TEST_MAIN(cmocka_unit_test(test_levels), cmocka_unit_test(test_quiet),
             cmocka_unit_test(test_status))
