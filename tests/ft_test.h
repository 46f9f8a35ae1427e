/* ft_test.h: the small harness every test binary uses (cmocka, in-process, MPI-aware).
 *
 * A test file is a list of cmocka tests and one FT_TEST_MAIN(...) line; its header comment says
 * with how many ranks tests/run.sh runs it, as "ft-test: ranks 1 2 4". MPI is initialized for
 * every test binary, so the same file runs as 1 rank or under mpiexec -n K.
 *
 * Assertions in code that runs on several ranks must be collective: assert_all(cond) is true on
 * every rank iff cond holds on every rank, so all ranks fail (or pass) together and no rank is
 * left waiting in a collective. Rank 0 prints cmocka's report; the others are silent on stdout. */
#ifndef FT_TEST_H
#define FT_TEST_H

#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ftllm/backend.h"

MPI_Comm ft_test_comm(void);
int ft_test_rank(void);
int ft_test_size(void);

/* Collective: 1 on every rank iff cond is non-zero on every rank. */
int ft_all(int cond);
/* Collective: 1 iff the bytes of buf are equal on every rank. */
int ft_same_bytes(const void *buf, size_t len);

#define assert_all(cond) assert_true(ft_all((cond) ? 1 : 0))

/* Skips the calling test (collectively) unless the job has at least n ranks. */
#define ft_require_ranks(n)                                                                    \
    do {                                                                                       \
        if (ft_test_size() < (n)) skip();                                                      \
    } while (0)

/* Writes text to a fresh temporary file on rank 0 and gives every rank its name (collective).
 * The name lives in buf (at least 64 bytes). */
void ft_tmpfile(const char *text, size_t len, char *buf);

/* A fresh temporary folder made by rank 0, its name on every rank in buf (at least 64 bytes),
 * and its removal with everything in it (both collective; a failure fails the test). */
void ft_tmpdir(char *buf);
void ft_rmdir(const char *dir);

/* Runs fn and gives what it wrote to stdout in out and to stderr in err (each at most len - 1
 * bytes, NUL-terminated), caught in temporary files: a program's messages as a user sees them. */
void ft_capture(void (*fn)(void), char *out, char *err, size_t len);

/* A learnable synthetic token stream for training tests (an FtBatchSource fetch): sequence i is
 * (3 i + 5 t) mod V for t = 0..T, so the next token is the current one + 5. ctx points to
 * int dims[2] = {T, V}. */
void ft_synth_fetch(void *ctx, uint64_t first, int B, int *in, int *tg);

/* Random floats for kernel tests: n values uniform in [-amp/2, amp/2) from an LCG that *seed
 * carries on; n NaNs (outputs that must be written completely); and the relative L2 error of
 * got against want, |got - want| / |want| (|got - want| when want is all zero), infinity when got
 * holds a NaN. The arrays are malloc'd (the caller frees them). */
float *ft_frand(size_t n, float amp, unsigned *seed);
float *ft_nans(size_t n);
double ft_rel_l2(const float *got, const float *want, size_t n);

/* An emulation of attention (a GPU kernel's arithmetic run on the host) against the CPU op
 * (ops.h ATTENTION) on random inputs of one shape (qkv amplitude 4, dy 2, from seed): fwd
 * writes y and lse from qkv, bwd writes dqkv from dy, qkv and the CPU's lse; err[0..2] get the
 * relative L2 errors of y, lse and dqkv against the op's (ft_rel_l2). */
typedef void (*FtAttnFwd)(float *y, float *lse, const float *qkv, long long B, long long T,
                          long long C, long long NH);
typedef void (*FtAttnBwd)(float *dqkv, const float *dy, const float *qkv, const float *lse,
                          long long B, long long T, long long C, long long NH);
void ft_attention_vs_cpu(int B, int T, int C, int NH, unsigned seed, FtAttnFwd fwd,
                         FtAttnBwd bwd, double err[3]);

/* A stand-in device for the tests of host staging (checkpoints, MPI) and of DMR's device
 * paths: backend_standin (backend.h), the CPU backend under another identity (backend_is_host
 * says no) whose allocations are "device memory" (its is_device knows their ranges). Its
 * counters (the tests may reset them): bytes to_host / to_device moved, stream waits (sync),
 * compares and fingerprints that waited for their answer, ops run through checker_run. */
struct ft_backend;
const struct ft_backend *ft_dev(void);
#define ft_dev_to_host (backend_standin_counters()->to_host)
#define ft_dev_to_device (backend_standin_counters()->to_device)
#define ft_dev_syncs (backend_standin_counters()->syncs)
#define ft_dev_answers (backend_standin_counters()->answers)
#define ft_dev_checker_runs (backend_standin_counters()->checker_runs)

int ft_test_run(int argc, char **argv, const char *name, const struct CMUnitTest *tests, size_t n);

#ifndef FT_TEST_FILE /* the suite's name (a file that includes another test's source sets it) */
#define FT_TEST_FILE __FILE__
#endif
#define FT_TEST_MAIN(...)                                                                      \
    int main(int argc, char **argv)                                                            \
    {                                                                                          \
        const struct CMUnitTest ft_tests_[] = {__VA_ARGS__};                                   \
        return ft_test_run(argc, argv, FT_TEST_FILE, ft_tests_, sizeof ft_tests_ / sizeof ft_tests_[0]); \
    }

#endif
