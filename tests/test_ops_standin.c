/* test_ops_standin.c: tests/gpu/test_gpu_ops.c against the stand-in device (ft_test.h's ft_dev,
 * FT_GPU_STANDIN in gpu_skip.h) in every `make test`, no GPU needed: every op kind and direction
 * of the table into outputs pre-filled with different byte patterns (every output byte written,
 * the same bytes twice and through checker_run), and the test's own coverage of the table. The
 * comparison with the CPU is trivial here (the stand-in is the CPU backend) except under bf16,
 * where the stand-in's GEMMs round their operands as cuBLAS's (its first measurement).
 * ft-test: ranks 1 */
#define FT_GPU_STANDIN 1
#define FT_TEST_FILE "test_ops_standin.c"
#include "gpu/test_gpu_ops.c"
