/* test_train_standin.c: tests/gpu/test_gpu_train.c against the stand-in device (ft_test.h's
 * ft_dev, FT_GPU_STANDIN in gpu_skip.h) in every `make test`, no GPU needed: dense, dense with
 * full activation checkpointing and MoE top-2 training with the model staged into device
 * memory, against the CPU backend (bitwise here, as the stand-in is the CPU backend: the
 * tolerances are the GPU's) and run twice; and bf16 against the fp32 CPU (the stand-in's
 * GEMMs round their operands to bf16, as cuBLAS's).
 * ft-test: ranks 1 */
#define FT_GPU_STANDIN 1
#define FT_TEST_FILE "test_train_standin.c"
#include "gpu/test_gpu_train.c"
