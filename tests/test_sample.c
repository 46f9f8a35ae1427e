/* test_sample.c: how sampled byte tokens are shown: text stays text, valid UTF-8 passes
 * through, control bytes and broken sequences become '?'; larger vocabularies print ids.
 * ft-test: ranks 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "ftllm/sample.h"

static char *shown(const int *t, int n, int V)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sample_print(f, t, n, V);
    fclose(f);
    return buf;
}

static void test_bytes_as_text(void **state)
{
    (void)state;
    /* "a\n", a valid 2-byte e-acute, ESC, a lone continuation byte, a truncated 3-byte lead */
    int t[] = {'a', '\n', 0xC3, 0xA9, 27, 0x80, 'b', 0xE2, 0x82};
    char *s = shown(t, 9, 256);
    assert_string_equal(s, "a\n\xC3\xA9??b??\n");
    free(s);
    int ids[] = {50256, 7, 12};
    s = shown(ids, 3, 50257);
    assert_string_equal(s, "50256 7 12\n");
    free(s);
}

FT_TEST_MAIN(cmocka_unit_test(test_bytes_as_text))
