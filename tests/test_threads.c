/* test_threads.c: the threads-per-rank rule, and that threads_setup applies it.
 * ft-test: ranks 1 2 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
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

/* A launcher that binds the rank to one core (srun --cpu-bind, mpiexec -bind-to core): with no
 * thread count from the deck or the environment, threads_setup takes this process's own set (one
 * thread), not the node's share. Run on one and on two ranks: one either way. */
static void test_setup_bound(void **state)
{
    (void)state;
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    int first = 0;
    while (!CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    char *env = getenv("OMP_NUM_THREADS");
    char saved[64] = "";
    if (env) snprintf(saved, sizeof saved, "%s", env);
    unsetenv("OMP_NUM_THREADS");
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    int n = threads_setup(ft_test_comm(), 0);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    if (env) setenv("OMP_NUM_THREADS", saved, 1);
    assert_all(n == 1 && omp_get_max_threads() == 1);
}

FT_TEST_MAIN(cmocka_unit_test(test_rule), cmocka_unit_test(test_setup_applies),
             cmocka_unit_test(test_setup_bound))
