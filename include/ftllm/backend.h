/* backend.h: where tensors live and ops run: the op table plus memory and a context.
 *
 * The executor launches every op through its backend's table, with the backend's context in
 * FtOpCall.ctx (CUDA: streams and cuBLAS handles; CPU: none). The model's buffers, the tape's
 * arena and the trainer's reduction buffers are allocated through it; host code that reads or
 * writes a tensor (the loss, the tokens, the optimizer's sums) copies through it. The CPU
 * backend is plain host memory, so its copies are memcpy and pointers may be read directly by
 * code that only ever runs on it (checkpoints, initialization, tests). */
#ifndef FTLLM_BACKEND_H
#define FTLLM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftllm/ops.h"

typedef struct ft_backend {
    const char *name;   /* "cpu", "cuda" */
    const FtOpDesc *ops; /* indexed by FtOpKind */
    void *ctx;          /* passed to every op (FtOpCall.ctx) and to the functions below */
    /* zeroed memory, 64-byte aligned; NULL when there is none */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *p);
    void (*to_device)(void *ctx, void *dst, const void *host, size_t bytes);
    void (*to_host)(void *ctx, void *host, const void *src, size_t bytes);
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes); /* within the device */
    /* a copy within the device whose destination is not read again soon (DMR's kept inputs,
     * read at the check's replay), ordered as copy is: the CPU streams it past the caches
     * (copy_stream.h); NULL: copy (a backend built from the CPU's struct sets it again) */
    void (*copy_cold)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*set)(void *ctx, void *dst, int byte, size_t bytes);
    void (*sync)(void *ctx); /* waits for everything launched so far */
    /* DMR's device side (dmr.h), so checks never read outputs through host pointers:
     * checker_run runs fn(c) with c->ctx the checker's context (CUDA: a second stream with its
     * own cuBLAS handle, fixed workspace and op scratch, so it reproduces the primary's bytes;
     * CPU: the same thread), ordered after everything launched so far and before everything
     * launched after it; equal says whether two buffers of the backend hold the same bytes;
     * fingerprint is ft_fingerprint (fingerprint.h) of the n * esize bytes at p (n elements of
     * esize 1, 2, 4 or 8), the same value on every backend. equal and fingerprint wait for their answer. */
    void (*checker_run)(void *ctx, FtOpFn fn, FtOpCall *c);
    int (*equal)(void *ctx, const void *a, const void *b, size_t bytes);
    uint64_t (*fingerprint)(void *ctx, const void *p, size_t esize, size_t n);
    /* equal without waiting for the answer: sets *flag (a word of this backend's memory) to 1
     * when the bytes differ, and leaves it alone when not; ordered like the backend's other
     * work, so a later copy of the flag to the host (to_host) sees the answer. NULL: DMR waits
     * for equal at each compare. */
    void (*mark_differs)(void *ctx, const void *a, const void *b, size_t bytes, unsigned *flag);
    /* fingerprint without waiting: its value into *slot (8 bytes of this backend's memory),
     * ordered like mark_differs. NULL: DMR waits for fingerprint. */
    void (*fingerprint_into)(void *ctx, const void *p, size_t esize, size_t n, uint64_t *slot);
    /* GEMM precision (enum ft_precision_choice, deck_keys.h: run.precision), for the primary
     * and the checker alike; NULL: fp32 only (the CPU) */
    void (*set_precision)(void *ctx, int precision);
    /* whether p is this backend's memory, which host code and MPI may not read (CUDA: device
     * memory); NULL: all of it is host memory (the CPU). Communication stages it (comm.h). */
    int (*is_device)(void *ctx, const void *p);
    /* the primary's stream (CUDA: a cudaStream_t), after whose work a device transport's
     * operations start (comm_create_routed); NULL: none (the CPU) */
    void *stream;
    /* the GPU this backend drives (CUDA: cudaDeviceProp.uuid), which tells ranks that share a
     * GPU from ranks that see one each (parallel.device_comm); zeros on the CPU */
    unsigned char uuid[16];
    /* one line for the run's log: the device and the kernels chosen (CUDA: the GPU, its SMs
     * and memory, the attention kernels); NULL: nothing to say */
    const char *about;
} FtBackend;

/* The CPU backend (C + OpenMP + OpenBLAS, ops_cpu.c). */
const FtBackend *backend_cpu(void);

/* The backend called `name` ("cpu" or "cuda"; device: this rank's place on its node, which
 * picks GPU device mod the node's GPU count, so ranks beyond the GPUs share them). NULL with a
 * one-line reason in err when it cannot be had: an unknown name, a build without the CUDA
 * backend, no usable GPU. Opening "cuda" twice gives the same backend (backend_select.c). */
const FtBackend *backend_open(const char *name, int device, char *err, size_t errlen);

/* The CUDA backend (cuda/backend_cuda.cu): defined only in a `make CUDA=1` build; callers go
 * through backend_open. */
const FtBackend *backend_cuda_open(int device, char *err, size_t errlen);

/* The stand-in device (backend_standin.c): the CPU backend posing as a device, for running and
 * testing the device paths without a GPU. Its memory is host memory that backend_is_host
 * disowns and its is_device recognizes; run.precision = bf16 rounds its GEMMs' operands as the
 * CUDA backend's (set_precision). `ftllm train` uses it for run.backend = cuda
 * when the environment has FTLLM_TEST_DEVICE=standin (a testing aid). */
const FtBackend *backend_standin(void);
/* What the stand-in did so far (the tests may reset them): bytes copied to the host and to the
 * device, stream waits (sync), compares and fingerprints that waited for their answer (equal,
 * fingerprint), ops run through checker_run. */
typedef struct ft_standin_counters {
    double to_host, to_device;
    long long syncs, answers, checker_runs;
} FtStandinCounters;
FtStandinCounters *backend_standin_counters(void);
/* The stand-in queues its ops, device copies and non-waiting checks like a GPU's stream and runs
 * them when something waits (sync, copies to or from the host, equal, fingerprint, release), and
 * its memory is not host-addressable outside its own work (PROT_NONE: a host dereference
 * faults, as on a GPU). set_host_access(true) runs everything at once and leaves the memory
 * readable and writable by the host (for a test that reads it directly, or a stand-in
 * transport); calls nest, false undoes one true. */
void backend_standin_set_host_access(bool on);

/* Whether be's memory is host memory (host code may then read its pointers directly). */
static inline int backend_is_host(const FtBackend *be) { return be == backend_cpu(); }

/* How MPI staging (comm_create_staged, comm.h) recognizes and moves be's memory: be's own
 * is_device (which must be set), to_host and to_device, into *st. */
struct ft_comm_stager;
void backend_stager(const FtBackend *be, struct ft_comm_stager *st);

/* Allocation that dies with a clear message when the memory is not there. */
void *backend_alloc(const FtBackend *be, size_t bytes, const char *what);

#endif
