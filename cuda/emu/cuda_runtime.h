/* cuda_runtime.h (ftllm's CUDA emulator, cuda/emu/README.md): the part of the CUDA runtime API
 * that ftllm uses, declared for C and C++, implemented on the host by emu_runtime.cc. Only the
 * emulator build (make CUDA=emu) puts this folder on the include path. */
#ifndef FTEMU_CUDA_RUNTIME_H
#define FTEMU_CUDA_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorNotReady = 600,
    cudaErrorLaunchFailure = 719
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};

typedef struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer, *hostPointer;
} cudaPointerAttributes;

typedef struct CUuuid_st { char bytes[16]; } cudaUUID_t;

typedef struct cudaDeviceProp {
    char name[256];
    cudaUUID_t uuid;
    size_t totalGlobalMem;
    int major, minor, multiProcessorCount;
} cudaDeviceProp;

typedef struct ftemu_stream *cudaStream_t;
typedef struct ftemu_event *cudaEvent_t;

/* the one device attribute and the one kernel attribute ftllm uses (CUDA's values) */
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventQuery(cudaEvent_t e);
/* the emulated device is an H100/H200: 227 KiB of shared memory per block when opted in */
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);
cudaError_t ftemu_func_set_attribute(const void *kernel, enum cudaFuncAttribute attr, int value);

/* The emulator's own (not CUDA's): whether p .. p + bytes lies inside one cudaMalloc block. */
int ftemu_is_device_range(const void *p, size_t bytes);

#ifdef __cplusplus
}
/* CUDA's C++ runtime API takes the kernel itself */
template <typename K> cudaError_t cudaFuncSetAttribute(K *kernel, cudaFuncAttribute attr, int value)
{
    return ftemu_func_set_attribute((const void *)kernel, attr, value);
}
#include "emu_device.h"
#endif

#endif
