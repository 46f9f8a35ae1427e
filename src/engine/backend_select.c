/* backend_select.c: a backend by name (backend.h). The one place that knows whether this build
 * has the CUDA backend: `make CUDA=1` compiles the C sources with FTLLM_CUDA and links cuda/. */
#include "ftllm/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftllm/comm.h"

const FtBackend *backend_open(const char *name, int device, char *err, size_t errlen)
{
    if (!strcmp(name, "cpu")) return backend_cpu();
    if (!strcmp(name, "cuda")) {
        const char *t = getenv("FTLLM_TEST_DEVICE"); /* a testing aid: backend_standin */
        if (t && !strcmp(t, "standin")) return backend_standin();
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

/* backend_stager's functions: ctx is the backend */
static int stager_is_device(void *ctx, const void *p)
{
    const FtBackend *be = ctx;
    return be->is_device(be->ctx, p);
}

static void stager_to_host(void *ctx, void *host, const void *dev, size_t bytes)
{
    const FtBackend *be = ctx;
    be->to_host(be->ctx, host, dev, bytes);
}

static void stager_to_device(void *ctx, void *dev, const void *host, size_t bytes)
{
    const FtBackend *be = ctx;
    be->to_device(be->ctx, dev, host, bytes);
}

void backend_stager(const FtBackend *be, FtCommStager *st)
{
    *st = (FtCommStager){.ctx = (void *)be, .is_device = stager_is_device,
                         .to_host = stager_to_host, .to_device = stager_to_device};
}
