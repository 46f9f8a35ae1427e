/* ckpt.h: parallel HDF5 checkpoints, a model-independent layer.
 *
 * One HDF5 file per checkpoint, DIR/RUN.step-00000100.h5, written with parallel HDF5 over
 * MPI-IO. A sharded tensor is stored as one global dataset in its full logical shape: every
 * rank gives its own hyperslab (offset, count; count may be empty, e.g. a data-parallel replica
 * that does not write) and the writes are collective, so a checkpoint written with one
 * tp/pp/dp/ep layout is read back by any other (each reader asks for its own hyperslab).
 * Everything is a dataset with `units` and `description` attributes (scalars are 0-d
 * datasets, texts fixed-length strings), grouped by their path ("params/wte", "optim/m/wte",
 * "state/step", "config/deck"); checkpoint/README.md documents the layout.
 *
 * Integrity: every dataset carries a `checksum` attribute: two 32-bit lanes, each the sum
 * modulo 2^32 over its elements of a term keyed by the element's global row-major index i (a
 * bijection of the element's bits for a fixed i; checkpoint/README.md gives the formula). Any
 * partition of a dataset into hyperslabs sums to the same value, so each rank checksums only
 * what it writes or reads and one all-reduce combines them, from any layout; a change of any
 * single element always changes the checksum. Format version 1 files (an older, slower
 * checksum) are rejected with a clear message.
 * A `/manifest` (name and checksum of every dataset, in write order) and the commit marker
 * (root attribute `complete`) are written last. The file is written as NAME.tmp, closed, made
 * durable (fsync on every rank), renamed by rank 0 and the folder fsync'ed; then the
 * newest `keep` checkpoints of the run are kept. A process killed mid-write leaves only a .tmp
 * behind, which readers ignore and the next ckpt_begin removes.
 *
 * Asynchronous mode: the ckpt_put_* calls copy the data to host buffers, ckpt_commit hands the
 * whole write (checksums included) to a background thread with its own duplicated
 * communicator and returns; the next ckpt_begin (or ckpt_wait) joins it. It needs
 * MPI_THREAD_MULTIPLE (checked; dies clearly without it). HDF5 here is not thread-safe: no
 * reader call may run while an asynchronous write is in flight (call ckpt_wait first).
 *
 * Errors: user-facing problems (a checkpoint folder that cannot be created, a corrupt,
 * truncated, foreign or mismatched checkpoint file) are returned as a status with a one-line
 * message naming the file and the dataset; every rank returns the same status. I/O failures in
 * the middle of a write (disk full) and misuse (ranks disagreeing on what they put, hyperslabs
 * that do not tile a dataset) are fatal (FT_DIE): the previous checkpoint stays usable. A
 * process failure during a write is fatal too, unless opts.ft says how to survive it (ULFM):
 * then the write is abandoned (ckpt_abandoned) and the previous checkpoint stays the newest.
 *
 * Unless noted, every function is collective over the communicator given at creation/open, and
 * its arguments (names, dtypes, global shapes, scalar values, texts) must be equal on every rank;
 * only offset/count/data of a tensor are per rank. */
#ifndef FTLLM_CKPT_H
#define FTLLM_CKPT_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_FORMAT "ftllm-checkpoint" /* root attribute `format` */
#define CKPT_FORMAT_VERSION 2          /* root attribute `format_version` (2: sum32x2 checksums) */
#define CKPT_MAX_DIMS 8
#define CKPT_NAME_MAX 256 /* longest dataset path + 1 */
#define CKPT_ERR_MAX 2048 /* size of an error message buffer */
#define CKPT_PATH_MAX 512 /* longest file name + 1 */

/* Conventional names the train loop uses (ftllm inspect prints these when present). */
#define CKPT_DS_STEP "state/step"          /* i64, steps completed */
#define CKPT_DS_CONFIG "config/resolved"   /* text, the resolved deck (deck_print) */
#define CKPT_DS_DECK "config/deck"         /* text, the deck file as given */

/* Element types of stored datasets (little-endian IEEE / two's complement in the file). */
typedef enum ckpt_dtype {
    CKPT_F32, CKPT_F64, CKPT_I32, CKPT_I64, CKPT_U8, CKPT_U32, CKPT_U64,
    CKPT_TEXT, /* only for datasets written by ckpt_put_text */
} CkptDtype;
size_t ckpt_dtype_size(CkptDtype t); /* bytes per element; 1 for CKPT_TEXT */
const char *ckpt_dtype_name(CkptDtype t); /* "f32", ... */

/* Process failures (ULFM) during a write: a layer that knows the MPI's fault tolerance (comm/,
 * through train_ckpt.c) hands these in; the writer then survives a death instead of dying with
 * it. Called from the writer's thread (the background one in asynchronous mode). */
typedef struct ft_ckpt_ft {
    /* rc (not MPI_SUCCESS) from an operation on comm: nonzero when it reports a process
     * failure (then the write is abandoned), 0 for any other error (fatal, as without this) */
    int (*failed)(MPI_Comm comm, int rc);
    /* whether a process of comm is known to have failed (after an HDF5 error: abandon or die) */
    int (*lost)(MPI_Comm comm);
    /* a fault-tolerant agreement over comm's survivors: nonzero on every survivor when ok is
     * nonzero on every survivor and no process of comm has failed; the same answer on all */
    int (*agree)(MPI_Comm comm, int ok);
    /* revokes comm (every rank waiting in an operation on it gets an error, not a hang) */
    void (*revoke)(MPI_Comm comm);
} FtCkptFt;

typedef struct ft_ckpt_opts {
    int keep;           /* newest checkpoints of the run kept on disk (>= 1) */
    bool async;         /* write from a background thread (see above) */
    int debug_delay_ms; /* testing aid: sleep this long before writing each dataset */
    const FtCkptFt *ft; /* NULL: every MPI error in a write is fatal */
    /* testing aid (FTLLM_TEST_KILL's `write`): called before each dataset this rank writes */
    void (*before_dataset)(void *ctx);
    void *before_dataset_ctx;
} FtCkptOpts;

/* ---- writing ---- */

typedef struct ft_ckpt FtCkpt;

/* A checkpoint writer for run `run` in folder `dir` (created by rank 0 when missing). The run
 * name must be letters, digits, '.', '_' or '-'. Duplicates comm. Returns NULL with a message in
 * err when the name is not usable or the folder cannot be created or written. */
FtCkpt *ckpt_create(const char *dir, const char *run, MPI_Comm comm, const FtCkptOpts *opts,
                    char *err, size_t errlen);

/* Waits for any write in flight, then frees the writer. */
void ckpt_destroy(FtCkpt *c);

/* Starts the checkpoint of step `step` (the root attribute `step`): waits for the previous
 * write (asynchronous mode) and removes temporaries of this run left by an interrupted write. */
void ckpt_begin(FtCkpt *c, long long step);

/* Adds tensor `name` ("params/wte") of global shape gshape[ndim] (ndim 0 = scalar); this rank
 * holds the hyperslab offset[ndim], count[ndim] (row-major, contiguous in data). The hyperslabs
 * of all ranks must tile the dataset exactly once; a rank with nothing to write gives a count
 * with a zero. Synchronous mode keeps the pointer: data must stay unchanged until ckpt_commit
 * returns; asynchronous mode copies it now. units/description: attribute texts (may be ""). */
void ckpt_put_tensor(FtCkpt *c, const char *name, CkptDtype dt, int ndim, const uint64_t *gshape,
                     const uint64_t *offset, const uint64_t *count, const void *data,
                     const char *units, const char *description);

/* Scalars and texts, equal on every rank (written once, by rank 0). */
void ckpt_put_i64(FtCkpt *c, const char *name, long long v, const char *units,
                  const char *description);
void ckpt_put_u64(FtCkpt *c, const char *name, uint64_t v, const char *units,
                  const char *description);
void ckpt_put_f64(FtCkpt *c, const char *name, double v, const char *units,
                  const char *description);
void ckpt_put_text(FtCkpt *c, const char *name, const char *text, const char *description);

/* Writes the checkpoint (sync) or hands it to the background thread (async): checksums, the
 * manifest and commit marker, durable sync, rename, keep-last-K. On return in synchronous mode
 * the file is durable under its final name, which *path (optional, may be NULL) points to. */
void ckpt_commit(FtCkpt *c, const char **path);

/* Waits for an asynchronous write in flight (no-op otherwise). */
void ckpt_wait(FtCkpt *c);

/* Whether the last write (ckpt_begin to ckpt_commit, or its background write: call ckpt_wait
 * first) was abandoned because a process failed during it (opts.ft only): no file under the
 * final name came from it on this rank's account; its temporary is removed by the next
 * ckpt_begin. It can differ between ranks (rank 0 may have renamed a complete file before it
 * saw the failure): the caller agrees on it. Not collective. */
bool ckpt_abandoned(const FtCkpt *c);

/* Time the last write took (seconds, from ckpt_commit to durable and renamed) and its bytes. */
double ckpt_last_write_s(const FtCkpt *c);
double ckpt_last_write_bytes(const FtCkpt *c);

/* ---- reading ---- */

typedef struct ft_ckpt_file FtCkptFile;

typedef struct ckpt_ds_info {
    const char *name;    /* "params/wte" */
    CkptDtype dtype;
    int ndim;
    uint64_t shape[CKPT_MAX_DIMS];
    const char *units, *description;
    uint64_t checksum; /* as stored */
} CkptDsInfo;

/* Opens a checkpoint. Returns NULL with a one-line message naming the file when it is missing,
 * not HDF5 ("a file of another format"), truncated or damaged, an HDF5 file that is not an
 * ftllm checkpoint, of another format version, or lacks its commit marker or manifest. */
FtCkptFile *ckpt_open(const char *path, MPI_Comm comm, char *err, size_t errlen);
void ckpt_close(FtCkptFile *f);

long long ckpt_file_step(const FtCkptFile *f);           /* root attribute `step` */
const char *ckpt_file_attr(const FtCkptFile *f, const char *key); /* root string attribute or NULL:
                                        "run_name", "ftllm_version", "created_utc" */
int ckpt_num_datasets(const FtCkptFile *f);
const CkptDsInfo *ckpt_dataset(const FtCkptFile *f, int i); /* in write order */
const CkptDsInfo *ckpt_find_dataset(const FtCkptFile *f, const char *name); /* or NULL */

/* Recomputes the checksum of dataset i (each rank reads a share). Returns 0, or -1 with
 * "FILE: dataset 'NAME': ..." in err. */
int ckpt_verify_dataset(FtCkptFile *f, int i, char *err, size_t errlen);
/* Every dataset in manifest order; stops at (and names) the first bad one. */
int ckpt_verify(FtCkptFile *f, char *err, size_t errlen);

/* Reads this rank's hyperslab (offset, count) of tensor `name` into data; dtype and global
 * shape must match the file's, else a one-line error naming the dataset and both shapes. */
int ckpt_read_tensor(FtCkptFile *f, const char *name, CkptDtype dt, int ndim,
                     const uint64_t *gshape, const uint64_t *offset, const uint64_t *count,
                     void *data, char *err, size_t errlen);
int ckpt_read_i64(FtCkptFile *f, const char *name, long long *v, char *err, size_t errlen);
/* A batch of reads (ckpt_read_tensor and the scalar reads, not texts): each rank reads
 * independently and a failed read is agreed once, at ckpt_read_batch_end (collective), instead
 * of after each read; a read's own return then reports only what every rank sees alike (no
 * such dataset, another dtype or shape). Each agreement waits for every rank, which with more
 * ranks than cores means for each to be scheduled: a restore of 48 tensors took 1.8 s on 4
 * ranks of 2 cores, one agreement per read. The data read are undefined until the batch's end
 * returns 0. */
void ckpt_read_batch(FtCkptFile *f);
int ckpt_read_batch_end(FtCkptFile *f, char *err, size_t errlen);
int ckpt_read_u64(FtCkptFile *f, const char *name, uint64_t *v, char *err, size_t errlen);
int ckpt_read_f64(FtCkptFile *f, const char *name, double *v, char *err, size_t errlen);
/* *text is malloc'ed (NUL-terminated); the caller frees it. */
int ckpt_read_text(FtCkptFile *f, const char *name, char **text, char *err, size_t errlen);

/* ---- the checksum as a fingerprint ---- */

/* The checksum a 1-D dataset of n elements of esize bytes (1, 4 or 8) at data gets (sum32x2):
 * changing any single element always changes it, the result does not depend on the thread
 * count. DMR fingerprints op outputs with it. Not collective; host memory. */
uint64_t ckpt_checksum_array(const void *data, size_t esize, size_t n);

/* ---- finding ---- */

/* The file name of run's checkpoint of step `step` in dir. */
void ckpt_path(char *buf, size_t len, const char *dir, const char *run, long long step);

/* The newest checkpoint of `run` in `dir` that opens and verifies. Every corrupt, truncated or
 * foreign file is reported (log_warn on rank 0: its name and the first bad dataset) and skipped
 * in favour of the previous one; leftover temporaries are reported and ignored. Returns 1 with
 * the file's name in path (and *step), 0 when the run has no checkpoint file at all, or -1 with
 * a message in err when files exist but none verifies. */
int ckpt_find_latest(const char *dir, const char *run, MPI_Comm comm, char *path, size_t pathlen,
                     long long *step, char *err, size_t errlen);

#endif
