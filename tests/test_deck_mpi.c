/* test_deck_mpi.c: the collective deck load: rank 0 reads, every rank gets the same config or
 * the same error, so no rank branches alone.
 * ft-test: ranks 1 2 4 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/deck.h"

static void test_same_config_everywhere(void **state)
{
    (void)state;
    char deck[256], path[64];
    snprintf(deck, sizeof deck, "[model]\nlayers = 6\nheads = 2\nchannels = 64\n[parallel]\ndp = %d\n",
             ft_test_size());
    ft_tmpfile(deck, strlen(deck), path);
    char *over[] = {"train.lr=0.25", "run.name=mpi"};
    FtConfig cfg;
    char err[FT_DECK_ERR_MAX] = "";
    int rc = deck_load(&cfg, path, 2, over, ft_test_comm(), err, sizeof err);
    if (rc) fprintf(stderr, "deck_load: %s\n", err);
    assert_all(rc == 0);
    assert_all(cfg.model.layers == 6 && cfg.train.lr == 0.25 && !strcmp(cfg.run.name, "mpi"));
    assert_all(cfg.text_len == strlen(deck) && !memcmp(cfg.text, deck, cfg.text_len));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    deck_print(f, &cfg);
    fclose(f);
    assert_all(ft_same_bytes(buf, len));
    free(buf);
    deck_free(&cfg);
    if (ft_test_rank() == 0) unlink(path);
}

static void test_missing_file_same_error(void **state)
{
    (void)state;
    FtConfig cfg;
    char err[FT_DECK_ERR_MAX] = "";
    int rc = deck_load(&cfg, "/nonexistent/deck.ini", 0, NULL, ft_test_comm(), err, sizeof err);
    assert_all(rc == -1);
    assert_all(strstr(err, "/nonexistent/deck.ini: cannot open the deck: No such file") != NULL);
    assert_all(ft_same_bytes(err, strlen(err)));
    deck_free(&cfg);
}

static void test_bad_deck_same_error(void **state)
{
    (void)state;
    const char *deck = "[model]\nlayers = 2\n[parallel]\ndp = 3\n";
    char path[64];
    ft_tmpfile(deck, strlen(deck), path);
    FtConfig cfg;
    char err[FT_DECK_ERR_MAX] = "";
    int rc = deck_load(&cfg, path, 0, NULL, ft_test_comm(), err, sizeof err);
    /* dp = 3 matches no job size this test runs with (1, 2, 4) */
    assert_all(rc == -1);
    assert_all(strstr(err, ":4: the layout dp x pp x ep x tp = 3 x 1 x 1 x 1 = 3 ranks") != NULL);
    assert_all(ft_same_bytes(err, strlen(err)));
    deck_free(&cfg);
    char *over[] = {"model.heads=zz"};
    rc = deck_load(&cfg, path, 1, over, ft_test_comm(), err, sizeof err);
    assert_all(rc == -1 && strstr(err, "command line override 1 'model.heads=zz'") != NULL);
    deck_free(&cfg);
    if (ft_test_rank() == 0) unlink(path);
}

/* A file over the size limit is refused on every rank, with the same line; one at the limit is
 * a deck (comment lines: it parses). */
static void test_size_limit(void **state)
{
    (void)state;
    size_t n = FT_DECK_TEXT_MAX + 1;
    char *text = malloc(n);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++) text[i] = i % 64 == 63 ? '\n' : (i % 64 == 0 ? ';' : 'x');
    char path[64], err[FT_DECK_ERR_MAX] = "";
    FtConfig cfg;
    for (int over = 1; over >= 0; over--) {
        ft_tmpfile(text, n - (size_t)(1 - over), path);
        int rc = deck_load_any_layout(&cfg, path, 0, NULL, ft_test_comm(), err, sizeof err);
        if (over) {
            assert_all(rc == -1 && strstr(err, ": deck is larger than 1048576 bytes (is this a deck?)"));
            assert_all(ft_same_bytes(err, strlen(err)));
        } else {
            if (rc) fprintf(stderr, "deck_load: %s\n", err);
            assert_all(rc == 0 && cfg.text_len == FT_DECK_TEXT_MAX);
        }
        deck_free(&cfg);
        if (ft_test_rank() == 0) unlink(path);
    }
    free(text);
}

FT_TEST_MAIN(cmocka_unit_test(test_same_config_everywhere), cmocka_unit_test(test_size_limit),
             cmocka_unit_test(test_missing_file_same_error),
             cmocka_unit_test(test_bad_deck_same_error))
