/* test_threads.c: the threads-per-rank rule, and that threads_setup applies it.
 * ft-test: ranks 1 2 */
#include <omp.h>
#include <stdlib.h>

#include "ft_test.h"
#include "ftllm/threads.h"

static void test_rule(void **state)
{
    (void)state;
    assert_int_equal(threads_pick(3, "8", 2, 2, 2), 3);     /* the deck wins */
    assert_int_equal(threads_pick(0, "5", 2, 2, 2), 5);     /* then OMP_NUM_THREADS */
    assert_int_equal(threads_pick(0, "4,2", 8, 8, 1), 4);   /* a nested list: its first level */
    assert_int_equal(threads_pick(0, "", 2, 2, 2), 1);      /* 2 ranks share 2 cores */
    assert_int_equal(threads_pick(0, NULL, 64, 64, 8), 8);  /* 8 ranks on a 64-core node */
    assert_int_equal(threads_pick(0, NULL, 4, 64, 8), 4);   /* bound by the launcher: its set */
    assert_int_equal(threads_pick(0, NULL, 2, 2, 8), 1);    /* oversubscribed: at least 1 */
    assert_int_equal(threads_pick(0, "junk", 2, 2, 1), 2);  /* unreadable env: the node's share */
    assert_int_equal(threads_pick(0, "0", 2, 2, 1), 2);     /* not a thread count: the same */
    assert_int_equal(threads_pick(0, "-3", 4, 8, 2), 4);    /* nor a negative one */
}

static void test_setup_applies(void **state)
{
    (void)state;
    int n = threads_setup(ft_test_comm(), 3);
    assert_all(n == 3 && omp_get_max_threads() == 3);
    /* tests/run.sh sets OMP_NUM_THREADS=1 */
    const char *env = getenv("OMP_NUM_THREADS");
    n = threads_setup(ft_test_comm(), 0);
    assert_all(!env || n == atoi(env));
    assert_all(omp_get_max_threads() == n);
}

FT_TEST_MAIN(cmocka_unit_test(test_rule), cmocka_unit_test(test_setup_applies))
