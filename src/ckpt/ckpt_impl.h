/* ckpt_impl.h: what the checkpoint files (ckpt_write.c, ckpt_read.c, ckpt_files.c) share and
 * nobody else sees: the checksum, dtype <-> HDF5 type mapping, HDF5 error text, cross-rank
 * agreement on a status with the failing rank's message, and file naming. */
#ifndef FTLLM_CKPT_IMPL_H
#define FTLLM_CKPT_IMPL_H

#include <hdf5.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "ftllm/checksum.h"
#include "ftllm/ckpt.h"

#define CKPT_MANIFEST "manifest" /* root dataset written last (text) */
#define CKPT_CHECKSUM_ALG                                                                      \
    "sum32x2: two 32-bit lanes, each the sum mod 2^32 over elements; i = global row-major "     \
    "element index, u = i+1, w = the element's bytes as a little-endian integer; 1- and 4-byte " \
    "elements: lo += fmix32(w + (lo32(u)*0x9E3779B9 + hi32(u)*0x7F4A7C15)), hi += "              \
    "lowbias32(w ^ (lo32(u)*0x85EBCA77 + hi32(u)*0xC2B2AE3D)); 8-byte elements: t = "            \
    "fmix64(w + u*0x9E3779B97F4A7C15), lo += lo32(t), hi += hi32(t); checksum = hi << 32 | lo"

/* The per-element terms (ckpt_term, ckpt_sum_add and their finalizers): checksum.h (host and
 * device). */

/* recv[i] = ckpt_sum_add over the ranks of comm of send[i] (an all-reduce of 2n uint32 lanes;
 * a test + yield wait). */
void ckpt_sum_allreduce(const uint64_t *send, uint64_t *recv, int n, MPI_Comm comm);
/* Its two halves around an all-reduce of your own (MPI_SUM of 2n MPI_UINT32_T from lanes to
 * lanes + 2n): the lanes of send (4n, malloc'ed), then recv from the summed half (frees them). */
uint32_t *ckpt_sum_lanes(const uint64_t *send, int n);
void ckpt_sum_unlane(uint32_t *lanes, uint64_t *recv, int n);

/* Partial checksum of the hyperslab (offset, count) of a dataset of global shape gshape whose
 * elements (esize bytes each) lie contiguously in data: ckpt_sum_add of ckpt_term over its
 * elements. OpenMP over (row, chunk) pieces, a vector loop inside; integer sums, so the result
 * does not depend on the thread count. ndim 0: one element of index 0. */
uint64_t ckpt_checksum_slab(const void *data, size_t esize, int ndim, const uint64_t *gshape,
                            const uint64_t *offset, const uint64_t *count);

/* Checksum of a text (esize 1, 1-D of len bytes). */
uint64_t ckpt_checksum_bytes(const void *data, size_t len);

/* HDF5 file type and native memory type of dt (CKPT_TEXT: not for these). */
hid_t ckpt_h5_file_type(CkptDtype dt);
hid_t ckpt_h5_mem_type(CkptDtype dt);

/* The innermost message of HDF5's current error stack (or "unknown HDF5 error"), then clears
 * it. */
void ckpt_h5_error(char *buf, size_t len);

/* Turns off HDF5's printing of error stacks (we report errors ourselves). */
void ckpt_h5_quiet(void);

/* Agreement: returns 0 when ok != 0 on every rank of comm, else -1 on every rank, with err
 * holding the message of the lowest failing rank. */
int ckpt_agree(MPI_Comm comm, int ok, char *err, size_t errlen);

/* MPI_Allreduce over a non-blocking call and a test + yield loop (a blocking MPICH call
 * busy-polls; see DESIGN.md); usable from the background writer thread. */
void ckpt_allreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op,
                    MPI_Comm comm);

/* Waits for a request with a test + yield loop. */
void ckpt_wait_req(MPI_Request *req);

/* If name is "RUN.step-<digits>.h5" (tmp: with ".tmp" after it), sets *step and returns 1. */
int ckpt_parse_name(const char *name, const char *run, long long *step, int *tmp);

/* Not collective: the files of `run` in dir, newest step first (a temporary sorts right after
 * the final file of its step). *steps and *tmp are malloc'ed (free both). Returns the count, or
 * -1 when dir cannot be read (errno set). */
int ckpt_list_run(const char *dir, const char *run, long long **steps, int **tmp);
/* A testing aid: the next read of dataset `name` through f fails on this rank, as a failed
 * HDF5 read would (NULL: none). */
void ckpt_test_fail_read(FtCkptFile *f, const char *name);

/* Not collective: the final (tmp = 0) or temporary (tmp = 1) file name of a step. */
void ckpt_name(char *buf, size_t len, const char *dir, const char *run, long long step, int tmp);

/* Not collective (rank 0 of a commit): fsync of a folder, so that a rename in it is durable. */
void ckpt_fsync_dir(const char *dir);

/* Not collective (rank 0 of a commit): removes temporaries of run, checkpoints of steps after
 * `step` (an abandoned future after a restart from an earlier step) and all but the newest
 * `keep` checkpoints. */
void ckpt_prune(const char *dir, const char *run, long long step, int keep, int remove_tmp);

#endif
