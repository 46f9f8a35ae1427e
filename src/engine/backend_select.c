/* backend_select.c: a backend by name (backend.h). The one place that knows whether this build
 * has the CUDA backend: `make CUDA=1` compiles the C sources with FTLLM_CUDA and links cuda/. */
#include "ftllm/backend.h"

#include <stdio.h>
#include <string.h>

const FtBackend *backend_open(const char *name, int device, char *err, size_t errlen)
{
    if (!strcmp(name, "cpu")) return backend_cpu();
    if (!strcmp(name, "cuda")) {
#ifdef FTLLM_CUDA
        return backend_cuda_open(device, err, errlen);
#else
        (void)device;
        snprintf(err, errlen, "this ftllm was built without the CUDA backend (HINT: build it with "
                              "`make CUDA=1` where the CUDA toolkit is installed)");
        return NULL;
#endif
    }
    snprintf(err, errlen, "unknown backend '%s' (cpu or cuda)", name);
    return NULL;
}
