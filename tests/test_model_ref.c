/* test_model_ref.c: the whole model against PyTorch on the CPU (ref_gpt2.h: the fixture, the
 * check; tests/gpu/test_gpu_train.c runs the same on the GPU and the stand-in device).
 * tests/ref/make_gpt2_fixture.py built a small random GPT-2 (L 2, NH 4, C 32, V 61 -> Vp 64,
 * maxT 16) in PyTorch, wrote it in llm.c's format with a batch of tokens (B 2, T 12), and
 * recorded the logits, the loss, every parameter gradient and the losses of 10 AdamW steps
 * (clipping at 1.0, warm-up 2 + cosine). ftllm loads the same file and must agree.
 * ft-test: ranks 1
 *
 * Tolerances (relative L2 error per tensor, |ftllm - torch| / |torch|), both sides fp32 with
 * different summation orders (BLAS vs PyTorch's kernels) and different transcendental
 * implementations:
 *   logits, loss               1e-5   (measured 2026-11-29: logits 1.5e-7, loss 1.2e-7)
 *   every parameter gradient   1e-5   (measured per tensor: wte 1.4e-7, wpe 1.7e-7, ln1w
 *                                      1.4e-7, ln1b 1.8e-7, qkvw 1.9e-7, qkvb 2.2e-7, attprojw
 *                                      1.8e-7, attprojb 1.6e-7, ln2w 3.2e-7, ln2b 2.2e-7, fcw
 *                                      2.1e-7, fcb 1.8e-7, fcprojw 1.9e-7, fcprojb 1.6e-7, lnfw
 *                                      1.6e-7, lnfb 1.1e-7)
 *   10 AdamW step losses       1e-5 relative each (measured worst 1.6e-7; Adam's m / sqrt(v)
 *                                      can amplify rounding in tiny gradients, hence margin)
 * A wrong formula anywhere gives errors of order 1e-2 or more. */
#include "ref_gpt2.h"

static void test_against_pytorch(void **state)
{
    (void)state;
    ref_gpt2_check(NULL, 1e-5);
}

FT_TEST_MAIN(cmocka_unit_test(test_against_pytorch))
