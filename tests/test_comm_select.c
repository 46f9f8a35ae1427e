/* test_comm_select.c: how a CUDA job's ranks would talk (comm.h, comm_select.c): NCCL with a GPU
 * per rank and NCCL loadable, MPI with host staging when ranks share a GPU or NCCL is missing,
 * an error without a GPU or with inconsistent local ranks; the job's choice is NCCL only where
 * every rank chose it. In a build without CUDA, the NCCL backend says so in one line.
 * ft-test: ranks 1 2 */
#include <string.h>

#include "ft_test.h"
#include "ftllm/comm.h"

static void test_choice_table(void **state)
{
    (void)state;
    static const struct {
        int local_rank, local_size, ngpus;
        bool nccl;
        int want, device;
        const char *why;
    } cases[] = {
        {0, 1, 1, true, FT_DEVCOMM_NCCL, 0, ""},
        {3, 8, 8, true, FT_DEVCOMM_NCCL, 3, ""},
        {2, 4, 8, true, FT_DEVCOMM_NCCL, 2, ""},
        {5, 8, 4, true, FT_DEVCOMM_MPI_STAGED, 1, "8 ranks share 4 GPUs"},
        {1, 2, 1, true, FT_DEVCOMM_MPI_STAGED, 0, "2 ranks share 1 GPU on"},
        {0, 4, 4, false, FT_DEVCOMM_MPI_STAGED, 0, "NCCL is not available"},
        {0, 2, 0, true, -1, -1, "no GPU on this node for its 2 ranks"},
        {2, 2, 4, true, -1, -1, "local rank 2 of 2 ranks"},
        {-1, 2, 4, true, -1, -1, "inconsistent"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[256];
        int dev = 99;
        int got = comm_device_choice(cases[i].local_rank, cases[i].local_size, cases[i].ngpus,
                                     cases[i].nccl, &dev, why, sizeof why);
        if (got != cases[i].want || dev != cases[i].device ||
            (cases[i].why[0] ? !strstr(why, cases[i].why) : why[0] != '\0'))
            fail_msg("case %zu: got %d device %d '%s', want %d device %d '%s'", i, got, dev, why,
                     cases[i].want, cases[i].device, cases[i].why);
    }
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
             cmocka_unit_test(test_nccl_without_cuda))
