/* gpu_skip.h: the GPU tests' CUDA backend, opened once, or a skip with the reason printed
 * once (no GPU, no driver, a CPU-only build). Compiled with FT_GPU_STANDIN (a CPU test that
 * includes a GPU test's source: tests/test_dmr_standin.c), the stand-in device instead
 * (ft_test.h's ft_dev: the CPU backend under another identity), so the test's logic and the
 * engine's device paths run in every `make test`. */
#ifndef FTLLM_TESTS_GPU_SKIP_H
#define FTLLM_TESTS_GPU_SKIP_H

#include <stdio.h>

#include "../ft_test.h"
#include "ftllm/backend.h"

static inline const FtBackend *gpu(void)
{
#ifdef FT_GPU_STANDIN
    return ft_dev();
#endif
    static int tried;
    static const FtBackend *be;
    if (!tried) {
        char why[512] = "";
        tried = 1;
        be = backend_open("cuda", 0, why, sizeof why);
        if (!be) printf("SKIP: GPU tests: %s\n", why);
    }
    if (!be) skip();
    return be;
}

#endif
