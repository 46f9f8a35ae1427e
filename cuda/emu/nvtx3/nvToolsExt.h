/* nvtx3/nvToolsExt.h (ftllm's CUDA emulator): NVTX ranges as no-ops (no Nsight here). */
#ifndef FTEMU_NVTOOLSEXT_H
#define FTEMU_NVTOOLSEXT_H
static inline int nvtxRangePushA(const char *name) { (void)name; return 0; }
static inline int nvtxRangePop(void) { return 0; }
#endif
