/* test_comm_select.c: how a CUDA job's ranks would talk (comm.h, comm_select.c): NCCL with a GPU
 * per rank (told by the GPUs' UUIDs, however they are bound) and NCCL loadable, MPI with host
 * staging when ranks share a GPU or NCCL is missing, an error with inconsistent local ranks; the
 * job's choice is NCCL only where every rank chose it; parallel.device_comm resolved from it. In a build without CUDA, the NCCL backend says so in one line.
 * ft-test: ranks 1 2 */
#include <string.h>

#include "ft_test.h"
#include "ftllm/comm.h"
#include "ftllm/deck_keys.h"

/* A node's GPUs as its ranks drive them: one letter per local rank, the same letter for the same
 * GPU (16-byte UUIDs that differ in their first byte). */
static const unsigned char *gpus(const char *who)
{
    static unsigned char u[16 * 16];
    memset(u, 0, sizeof u);
    for (size_t q = 0; q < strlen(who) && q < 16; q++) u[16 * q] = (unsigned char)who[q];
    return u;
}

static void test_choice_table(void **state)
{
    (void)state;
    static const struct {
        const char *gpus; /* per local rank */
        int local_rank;
        bool nccl;
        int want;
        const char *why;
    } cases[] = {
        {"a", 0, true, FT_DEVCOMM_NCCL, ""},
        {"abcdefgh", 3, true, FT_DEVCOMM_NCCL, ""},
        /* one GPU visible per task: every rank's device 0, but different GPUs */
        {"abcd", 2, true, FT_DEVCOMM_NCCL, ""},
        {"abab", 1, true, FT_DEVCOMM_MPI_STAGED, "shares its GPU with 1 other rank on"},
        {"aaaa", 0, true, FT_DEVCOMM_MPI_STAGED, "with 3 other ranks"},
        {"abcc", 0, true, FT_DEVCOMM_NCCL, ""}, /* its own; the job agrees (comm_device_agree) */
        {"abcc", 3, true, FT_DEVCOMM_MPI_STAGED, "with 1 other rank"},
        {"abcd", 0, false, FT_DEVCOMM_MPI_STAGED, "NCCL is not available"},
        {"ab", 2, true, -1, "local rank 2 of 2 ranks"},
        {"ab", -1, true, -1, "inconsistent"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[256];
        int got = comm_device_choice(gpus(cases[i].gpus), cases[i].local_rank,
                                     (int)strlen(cases[i].gpus), cases[i].nccl, why, sizeof why);
        if (got != cases[i].want ||
            (cases[i].why[0] ? !strstr(why, cases[i].why) : why[0] != '\0'))
            fail_msg("case %zu: got %d '%s', want %d '%s'", i, got, why, cases[i].want,
                     cases[i].why);
    }
    char why[64];
    assert_int_equal(comm_device_choice(NULL, 0, 1, true, why, sizeof why), -1);
}

static void test_agreement(void **state)
{
    (void)state;
    FtComm *w = comm_create_mpi(ft_test_comm(), "world");
    int r = comm_rank(w), n = comm_size(w);
    assert_all(comm_device_agree(w, FT_DEVCOMM_NCCL) == FT_DEVCOMM_NCCL);
    assert_all(comm_device_agree(w, FT_DEVCOMM_MPI_STAGED) == FT_DEVCOMM_MPI_STAGED);
    /* one rank that must stage makes every rank stage */
    FtDevComm mine = r == n - 1 ? FT_DEVCOMM_MPI_STAGED : FT_DEVCOMM_NCCL;
    assert_all(comm_device_agree(w, mine) == FT_DEVCOMM_MPI_STAGED);
    assert_true(comm_device_agree(NULL, FT_DEVCOMM_NCCL) == FT_DEVCOMM_NCCL);
    comm_destroy(w);
}

/* parallel.device_comm: auto takes NCCL only for several ranks, every one able, no ULFM, no
 * SPARe (an explicit nccl with SPARe is let through); nccl
 * asked for where it cannot be had is an error naming why; mpi is always MPI. Where several
 * reasons hold, the message names the first of one rank, ULFM, another rank, SPARe (nccl asked
 * for: ULFM, another rank). */
static void test_pick(void **state)
{
    (void)state;
    enum { N = FT_DEVCOMM_NCCL, M = FT_DEVCOMM_MPI_STAGED };
    static const struct {
        int want, nranks;
        bool ulfm, spare;
        int agreed, got;
        const char *msg;
    } cases[] = {
        {FT_DEVCOMM_KEY_AUTO, 4, false, false, N, N, "over NCCL"},
        {FT_DEVCOMM_KEY_AUTO, 1, false, false, N, M, "one rank"},
        {FT_DEVCOMM_KEY_AUTO, 4, true, false, N, M, "ULFM"},
        {FT_DEVCOMM_KEY_AUTO, 4, false, false, M, M, "shares its GPU"},
        {FT_DEVCOMM_KEY_AUTO, 4, false, true, N, M, "SPARe (spare.r, spare.spares) rebuilds"},
        {FT_DEVCOMM_KEY_AUTO, 4, true, true, N, M, "ULFM"},
        /* one reason, the first: one rank, ULFM, another rank, then SPARe */
        {FT_DEVCOMM_KEY_AUTO, 4, true, false, M, M, "ULFM"},
        {FT_DEVCOMM_KEY_AUTO, 1, false, true, N, M, "one rank"},
        {FT_DEVCOMM_KEY_AUTO, 1, false, false, M, M, "one rank"},
        {FT_DEVCOMM_KEY_AUTO, 1, true, false, N, M, "one rank"},
        {FT_DEVCOMM_KEY_NCCL, 1, false, false, N, N, "parallel.device_comm = nccl)"},
        {FT_DEVCOMM_KEY_NCCL, 4, false, false, M, -1, "parallel.device_comm = nccl: this rank shares"},
        {FT_DEVCOMM_KEY_NCCL, 4, true, false, N, -1, "parallel.device_comm = nccl: the job runs under ULFM"},
        {FT_DEVCOMM_KEY_NCCL, 4, true, false, M, -1, "parallel.device_comm = nccl: the job runs under ULFM"},
        {FT_DEVCOMM_KEY_NCCL, 4, false, true, N, N, "parallel.device_comm = nccl)"},
        {FT_DEVCOMM_KEY_MPI, 4, false, false, N, M, ""},
        {FT_DEVCOMM_KEY_MPI, 4, false, true, N, M, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[256];
        int got = comm_device_pick(cases[i].want, cases[i].nranks, cases[i].ulfm, cases[i].spare,
                                   (FtDevComm)cases[i].agreed, "this rank shares its GPU with 1 other rank on its node",
                                   msg, sizeof msg);
        if (got != cases[i].got ||
            (cases[i].msg[0] ? !strstr(msg, cases[i].msg) : msg[0] != '\0'))
            fail_msg("case %zu: got %d '%s', want %d '%s'", i, got, msg, cases[i].got,
                     cases[i].msg);
    }
    char msg[256];
    assert_int_equal(comm_device_pick(FT_DEVCOMM_KEY_AUTO, 2, false, false, (FtDevComm)M, "", msg, sizeof msg), M);
    assert_non_null(strstr(msg, "another rank cannot use NCCL"));
}

static void test_nccl_without_cuda(void **state)
{
    (void)state;
    char err[256] = "";
    FtComm *c = comm_create_nccl(ft_test_comm(), "world", NULL, err, sizeof err);
#ifdef FTLLM_CUDA
    (void)c;
    skip(); /* the CUDA build: tests/gpu/test_gpu_nccl.c */
#else
    assert_null(c);
    assert_non_null(strstr(err, "built without the CUDA backend"));
    err[0] = '\0';
    assert_false(comm_nccl_available(err, sizeof err));
    assert_non_null(strstr(err, "NCCL: "));
#endif
}

FT_TEST_MAIN(cmocka_unit_test(test_choice_table), cmocka_unit_test(test_agreement),
             cmocka_unit_test(test_pick),
             cmocka_unit_test(test_nccl_without_cuda))
