/* test_dmr_standin.c: tests/gpu/test_gpu_dmr.c against the stand-in device (ft_test.h's
 * ft_dev, FT_GPU_STANDIN in gpu_skip.h) in every `make test`, no GPU needed: the flip campaigns
 * (naive, piggyback, planned dense and MoE with the dynamic planner) go through the engine's
 * device paths (model staged to the device, checks through the backend's checker_run,
 * mark_differs and fingerprint_into, kept inputs in device memory) the way a GPU run does, so a
 * change that breaks them fails here, not first on a lent GPU. The kernel checks of that file
 * (fingerprint, equal) then compare the CPU backend with itself: the GPU run is theirs.
 * ft-test: ranks 1 */
#define FT_GPU_STANDIN 1
#define FT_TEST_FILE "test_dmr_standin.c"
#include "gpu/test_gpu_dmr.c"
