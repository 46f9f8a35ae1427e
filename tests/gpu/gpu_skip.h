/* gpu_skip.h: the GPU tests' CUDA backend, opened once, or a skip with the reason printed
 * once (no GPU, no driver, a CPU-only build). */
#ifndef FTLLM_TESTS_GPU_SKIP_H
#define FTLLM_TESTS_GPU_SKIP_H

#include <stdio.h>

#include "../ft_test.h"
#include "ftllm/backend.h"

static inline const FtBackend *gpu(void)
{
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
