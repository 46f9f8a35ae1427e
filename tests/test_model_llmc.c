/* test_model_llmc.c: llm.c model files: write/read round trip (bitwise), the header's shape,
 * and bad files (wrong magic, bf16 version, truncated, trailing data, shape not matching the
 * deck, missing) each give one line naming the file and leave the model untouched; the header
 * written has llm.c's fields at llm.c's offsets, and a Vp below V is a bad header.
 * ft-test: ranks 1 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_test.h"
#include "ftllm/llmc.h"
#include "ftllm/model.h"

static const FtGpt2Config g_mc = {.L = 2, .NH = 2, .C = 8, .V = 10, .Vp = 16, .maxT = 6};

static void tmpname(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "%s/ftllm_llmc_%d_%s.bin", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), tag);
}

static void test_round_trip(void **state)
{
    (void)state;
    FtModel a, b;
    model_create(&a, &g_mc);
    model_create(&b, &g_mc);
    model_init_random(&a, 5);
    char path[256], err[512];
    tmpname(path, sizeof path, "rt");
    assert_int_equal(llmc_write_model(path, &a, err, sizeof err), 0);
    FtGpt2Config got;
    assert_int_equal(llmc_read_config(path, &got, err, sizeof err), 0);
    assert_memory_equal(&got, &g_mc, sizeof got);
    assert_int_equal(llmc_read_model(path, &b, err, sizeof err), 0);
    assert_memory_equal(a.params, b.params, sizeof(float) * a.nparams);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    assert_int_equal(ftell(f), 1024 + 4 * (long)a.nparams);
    fclose(f);
    remove(path);
    model_free(&a);
    model_free(&b);
}

/* Writes a valid file, lets `mutate` damage it, and expects an error containing want. */
static void expect_bad(const char *tag, void (*mutate)(const char *path), const FtGpt2Config *deck,
                       const char *want)
{
    FtModel a, b;
    model_create(&a, &g_mc);
    model_init_random(&a, 5);
    model_create(&b, deck);
    for (size_t i = 0; i < b.nparams; i++) b.params[i] = 42.0f;
    char path[256], err[512] = "";
    tmpname(path, sizeof path, tag);
    assert_int_equal(llmc_write_model(path, &a, err, sizeof err), 0);
    if (mutate) mutate(path);
    int rc = llmc_read_model(path, &b, err, sizeof err);
    printf("  %-10s -> %s\n", tag, err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, want));
    assert_null(strchr(err, '\n'));
    for (size_t i = 0; i < b.nparams; i++) assert_true(b.params[i] == 42.0f);
    remove(path);
    model_free(&a);
    model_free(&b);
}

static void put_int(const char *path, long off, int32_t v)
{
    FILE *f = fopen(path, "r+b");
    fseek(f, off, SEEK_SET);
    fwrite(&v, sizeof v, 1, f);
    fclose(f);
}
static void bad_magic(const char *p) { put_int(p, 0, 20240520); }
static void bf16(const char *p) { put_int(p, 4, 5); }
static void truncate_it(const char *p) { assert_int_equal(truncate(p, 1024 + 100), 0); }
static void short_header(const char *p) { assert_int_equal(truncate(p, 64), 0); }
static void trailing(const char *p)
{
    FILE *f = fopen(p, "ab");
    fputs("junk", f);
    fclose(f);
}
static void remove_it(const char *p) { remove(p); }

static void test_bad_files(void **state)
{
    (void)state;
    expect_bad("magic", bad_magic, &g_mc, "not an llm.c model file (magic 20240520, expected 20240326)");
    expect_bad("bf16", bf16, &g_mc, "version 5 is not supported");
    expect_bad("truncated", truncate_it, &g_mc, "truncated");
    expect_bad("header", short_header, &g_mc, "truncated");
    expect_bad("trailing", trailing, &g_mc, "trailing data");
    expect_bad("missing", remove_it, &g_mc, "cannot open");
    FtGpt2Config other = g_mc;
    other.L = 3;
    expect_bad("shape", NULL, &other, "does not match the deck");
    other = g_mc;
    other.Vp = 32;
    expect_bad("vocab", NULL, &other, "does not match the deck");
    other = g_mc;
    other.maxT = 2 * g_mc.maxT; /* wpe's rows: named as a shape, not as a file size */
    expect_bad("seq_len", NULL, &other, "does not match the deck");
    other = g_mc;
    other.NH = g_mc.NH > 1 ? 1 : 2; /* the same parameter count: only the header tells */
    expect_bad("heads", NULL, &other, "does not match the deck");
}

/* The header as llm.c lays it out (train_gpt2.c: magic, version, maxT, V, L, NH, C, Vp, then
 * zeros up to 256 ints), written and read back field by field, with every field distinct so a
 * field read from its neighbour's place shows. */
static void test_header_fields(void **state)
{
    (void)state;
    static const FtGpt2Config mc = {.L = 3, .NH = 2, .C = 8, .V = 11, .Vp = 16, .maxT = 5};
    FtModel a;
    model_create(&a, &mc);
    model_init_random(&a, 5);
    char path[256], err[512];
    tmpname(path, sizeof path, "hdr");
    assert_int_equal(llmc_write_model(path, &a, err, sizeof err), 0);
    int32_t h[FT_LLMC_HEADER_INTS];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(h, sizeof h[0], FT_LLMC_HEADER_INTS, f), FT_LLMC_HEADER_INTS);
    fclose(f);
    const int32_t want[8] = {20240326, 3, 5, 11, 3, 2, 8, 16};
    assert_memory_equal(h, want, sizeof want);
    for (int i = 8; i < FT_LLMC_HEADER_INTS; i++) assert_int_equal(h[i], 0);
    FtGpt2Config got;
    assert_int_equal(llmc_read_config(path, &got, err, sizeof err), 0);
    assert_memory_equal(&got, &mc, sizeof got);
    /* a padded vocabulary smaller than the vocabulary is refused by the header check itself */
    put_int(path, 7 * 4, 10);
    assert_int_equal(llmc_read_config(path, &got, err, sizeof err), -1);
    assert_non_null(strstr(err, "bad llm.c header: field 7 is 10"));
    remove(path);
    model_free(&a);
}

FT_TEST_MAIN(cmocka_unit_test(test_round_trip), cmocka_unit_test(test_bad_files),
             cmocka_unit_test(test_header_fields))
