/* test_parse_int.c: the strict integer reading every input file and command line uses.
 * ft-test: ranks 1 */
#include <limits.h>

#include "ft_test.h"
#include "ftllm/parse_int.h"

static FtIntParse p(const char *s, long long lo, long long hi, long long *v)
{
    return ft_parse_int(s, lo, hi, v);
}

static void test_accepts(void **state)
{
    (void)state;
    long long v = -7;
    assert_int_equal(p("0", 0, 10, &v), FT_INT_OK), assert_int_equal(v, 0);
    assert_int_equal(p("12", 0, 100, &v), FT_INT_OK), assert_int_equal(v, 12);
    assert_int_equal(p("-3", -5, 5, &v), FT_INT_OK), assert_int_equal(v, -3);
    assert_int_equal(p("+4", 0, 5, &v), FT_INT_OK), assert_int_equal(v, 4);
    assert_int_equal(p("007", 0, 10, &v), FT_INT_OK), assert_int_equal(v, 7);
    assert_int_equal(p("9223372036854775807", 0, LLONG_MAX, &v), FT_INT_OK);
    assert_true(v == LLONG_MAX);
    assert_int_equal(p("-9223372036854775808", LLONG_MIN, 0, &v), FT_INT_OK);
    assert_true(v == LLONG_MIN);
    assert_int_equal(p("5", 5, 5, &v), FT_INT_OK), assert_int_equal(v, 5); /* both ends inclusive */
}

static void test_rejects(void **state)
{
    (void)state;
    static const char *bad[] = {"", "-", "+", " 5", "5 ", "5\n", "1e3", "0x10", "1.0", "--1",
                                "+-1", "12a", "a12", "1 2", "\t7"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        long long v = 99;
        FtIntParse r = p(bad[i], LLONG_MIN, LLONG_MAX, &v);
        if (r != FT_INT_NOT_INT) fail_msg("'%s': %d, want not an integer", bad[i], (int)r);
        assert_int_equal(v, 99); /* left alone */
    }
    long long v = 99;
    assert_int_equal(p(NULL, 0, 1, &v), FT_INT_NOT_INT);
    assert_int_equal(p("11", 0, 10, &v), FT_INT_RANGE);
    assert_int_equal(p("-1", 0, 10, &v), FT_INT_RANGE);
    assert_int_equal(p("9223372036854775808", 0, LLONG_MAX, &v), FT_INT_RANGE); /* past long long */
    assert_int_equal(p("-9223372036854775809", LLONG_MIN, 0, &v), FT_INT_RANGE);
    assert_int_equal(p("99999999999999999999999", LLONG_MIN, LLONG_MAX, &v), FT_INT_RANGE);
    assert_int_equal(v, 99);
}

FT_TEST_MAIN(cmocka_unit_test(test_accepts), cmocka_unit_test(test_rejects))
