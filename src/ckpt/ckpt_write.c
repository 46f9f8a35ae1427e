/* ckpt_write.c: the checkpoint writer (see ckpt.h): ckpt_put_* record what to write, ckpt_commit
 * writes it, inline (synchronous mode) or from a background thread (asynchronous mode).
 *
 * Key decisions:
 * - One code path for both modes: puts build a list of items; the write (checksums, HDF5,
 *   manifest, sync, rename, prune) runs from that list. Synchronous puts keep the caller's
 *   pointer (no copy); asynchronous puts copy into host buffers at the step boundary, which is
 *   the whole training stall of an asynchronous checkpoint.
 * - Before touching the file, one all-reduce compares a hash of the list of puts across ranks
 *   and one sums every dataset's element counts (a dataset's hyperslabs must tile it exactly
 *   once): a rank that put something different dies with a message instead of deadlocking
 *   inside HDF5. The partial checksums are computed by a helper thread while this thread writes
 *   the data, then summed by one all-reduce and stored as attributes before the manifest.
 * - Asynchronous mode keeps its host staging buffers between checkpoints: in this VM a
 *   first-touched page costs ~10 us, far more than copying it.
 * - Data writes are collective (MPI-IO two-phase I/O); contiguous datasets with no fill value
 *   (H5D_FILL_TIME_NEVER, else parallel HDF5 writes every byte twice).
 * - Only the ranks that hold a slab of some dataset (and rank 0, which writes the manifest and
 *   renames) open the file: its collective HDF5 calls run on a communicator split off for each
 *   write. A data-parallel job's other replicas put every dataset with count 0 and take part
 *   only in the agreements, so the file's collectives (a few per dataset) do not wait for them:
 *   on a cluster, thousands of replica ranks out of every metadata operation; on a node with
 *   more ranks than cores (MPICH polls while it waits), 25 ms against 2.6 s per checkpoint of
 *   `make run`'s model with 3 of 4 ranks training on 2 cores.
 * - Durability: H5Fclose, then every rank that wrote open()s the file and fsync()s it, one
 *   all-reduce over all ranks, then
 *   rank 0 renames and fsyncs the folder, then prunes. Not MPI_File_open + MPI_File_sync: MPICH's
 *   ROMIO (ADIOI_GEN_Flush) only fsyncs on a handle that itself wrote ("if this process did no
 *   writes, there is no work to be done"), so a sync on a freshly opened handle is a no-op
 *   (strace: no fsync at all; the data reached the disk only later, at writeback). H5Fflush
 *   would sync through HDF5's own handle, but H5Fclose then rewrites the superblock after it.
 *   A POSIX fsync on every rank is what ROMIO's generic flush does on each writer, and covers
 *   file systems whose clients cache separately (each client flushes its own pages).
 * - The background thread has its own duplicated communicator, does no OpenMP fan-out (it
 *   competes with training for the cores) and waits with test + yield loops where it can.
 * - A process failure (opts.ft, ULFM) abandons the write instead of stopping the job: every MPI
 *   operation's return code is tested (mpi_ok), the first failure revokes the write's
 *   communicators (every rank waiting in one leaves it) and skips what is left; one
 *   fault-tolerant agreement after the file's split and before any HDF5 call puts every
 *   survivor into the file or none (HDF5's own communicators, duplicates of the file's, cannot
 *   be revoked: a rank must not leave others waiting in there; an asynchronous write takes an
 *   all-reduce there instead, see write_all); an HDF5 error while a member
 *   of the write is lost abandons too. Rank 0 renames only when its last agreement completed,
 *   so a file under its final name is whole. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <omp.h>

#include "ckpt_impl.h"
#include "ftllm/ftllm.h"
#include "ftllm/log.h"

enum item_kind { IT_TENSOR, IT_SCALAR, IT_TEXT };

struct item {
    int kind;
    char name[CKPT_NAME_MAX];
    CkptDtype dt;
    int ndim;
    uint64_t gshape[CKPT_MAX_DIMS], offset[CKPT_MAX_DIMS], count[CKPT_MAX_DIMS];
    const void *data; /* this rank's slab (or the scalar / text) */
    void *owned;      /* a copy we free (async tensors, every scalar and text) */
    size_t nbytes;    /* bytes of this rank's slab */
    char *units, *desc;
};

struct ft_ckpt {
    char dir[CKPT_PATH_MAX], run[CKPT_NAME_MAX];
    FtCkptOpts opts;
    MPI_Comm ctl, io; /* main-thread agreements; the write (possibly from the thread) */
    int rank, size;
    long long step;
    char created[32];
    bool begun, in_flight;
    bool broken; /* this write met a process failure (opts.ft): abandoned (ckpt_abandoned) */
    MPI_Comm fio; /* the file's ranks during a write (else MPI_COMM_NULL) */
    struct item *items;
    int n, cap;
    pthread_t thread;
    void **stage;       /* asynchronous mode: host staging buffer of the i-th put, kept between */
    size_t *stage_cap;  /* checkpoints (first-touch page faults cost more than the copy) */
    int nstage;
    char path[CKPT_PATH_MAX];
    double last_s, last_bytes;
    double phase[6]; /* seconds of the last write: agree, data, checksums, meta, sync, rename */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* A process failed (opts.ft): the write is abandoned from here on; the write's communicators
 * are revoked, so that every rank waiting in one of their operations leaves it. */
static void abandon(FtCkpt *c, const char *what)
{
    if (c->broken) return;
    c->broken = true;
    log_debug("checkpoint of step %lld: %s: a process failed: abandoning the write", c->step,
              what);
    c->opts.ft->revoke(c->io);
    c->opts.ft->revoke(c->ctl);
    if (c->fio != MPI_COMM_NULL) c->opts.ft->revoke(c->fio);
}

/* The status of an MPI operation of a write on comm: 1 = done; 0 = a process failed (opts.ft
 * says so): the write is abandoned from here on; any other error is fatal. */
static int mpi_ok(FtCkpt *c, MPI_Comm comm, int rc, const char *what)
{
    if (rc == MPI_SUCCESS) return 1;
    if (c->opts.ft && c->opts.ft->failed(comm, rc)) {
        abandon(c, what);
        return 0;
    }
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    FT_DIE("checkpoint of step %lld: %s failed: %s", c->step, what, msg);
}

/* ckpt_wait_req for a write: 1 when done, 0 when abandoned */
static int wait_ft(FtCkpt *c, MPI_Comm comm, MPI_Request *req, const char *what)
{
    for (int done = 0; !done;) {
        if (!mpi_ok(c, comm, MPI_Test(req, &done, MPI_STATUS_IGNORE), what)) return 0;
        if (!done) sched_yield();
    }
    return 1;
}

/* ckpt_allreduce for a write: nothing once it is abandoned; 1 when done, 0 when abandoned */
static int allreduce_ft(FtCkpt *c, const void *send, void *recv, int count, MPI_Datatype t,
                        MPI_Op op, MPI_Comm comm, const char *what)
{
    if (c->broken) return 0;
    MPI_Request req;
    if (!mpi_ok(c, comm, MPI_Iallreduce(send, recv, count, t, op, comm, &req), what)) return 0;
    return wait_ft(c, comm, &req, what);
}

/* ckpt_sum_allreduce for a write (ckpt_util.c's lanes) */
static int sum_allreduce_ft(FtCkpt *c, const uint64_t *send, uint64_t *recv, int n,
                            MPI_Comm comm)
{
    uint32_t *lanes = ckpt_sum_lanes(send, n);
    int ok = allreduce_ft(c, lanes, lanes + 2 * n, 2 * n, MPI_UINT32_T, MPI_SUM, comm,
                          "summing the checksums");
    ckpt_sum_unlane(lanes, recv, n); /* (zeros when abandoned: not read then) */
    return ok;
}

static int name_ok(const char *s)
{
    if (!s[0] || strlen(s) >= CKPT_NAME_MAX) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

/* mkdir -p */
static int make_dirs(const char *dir)
{
    char buf[CKPT_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) && errno != EEXIST) return -1;
    return 0;
}

FtCkpt *ckpt_create(const char *dir, const char *run, MPI_Comm comm, const FtCkptOpts *opts,
                    char *err, size_t errlen)
{
    int rank;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    char msg[CKPT_ERR_MAX] = "";
    if (!name_ok(run))
        snprintf(msg, sizeof msg, "checkpoint: run name '%.64s' cannot name files (use letters, "
                 "digits, '.', '_' or '-')", run);
    else if (!dir[0] || strlen(dir) > CKPT_PATH_MAX - CKPT_NAME_MAX - 32)
        snprintf(msg, sizeof msg, "checkpoint: folder name is empty or too long");
    else if (opts->keep < 1)
        snprintf(msg, sizeof msg, "checkpoint: keep must be >= 1 (got %d)", opts->keep);
    else if (rank == 0) {
        struct stat st;
        if (make_dirs(dir))
            snprintf(msg, sizeof msg, "%s: cannot create the checkpoint folder: %s", dir,
                     strerror(errno));
        else if (stat(dir, &st) || !S_ISDIR(st.st_mode))
            snprintf(msg, sizeof msg, "%s: the checkpoint folder is not a folder", dir);
        else if (access(dir, W_OK | X_OK))
            snprintf(msg, sizeof msg, "%s: cannot write in the checkpoint folder: %s", dir,
                     strerror(errno));
    }
    if (ckpt_agree(comm, msg[0] == 0, msg, sizeof msg)) {
        snprintf(err, errlen, "%s", msg);
        return NULL;
    }
    if (opts->async) {
        int provided = 0;
        FT_CHECK_MPI(MPI_Query_thread(&provided));
        if (provided < MPI_THREAD_MULTIPLE)
            FT_DIE("asynchronous checkpoints need MPI_THREAD_MULTIPLE, but MPI was initialized "
                   "with thread level %d (use MPI_Init_thread)", provided);
    }
    FtCkpt *c = calloc(1, sizeof *c);
    if (!c) FT_DIE("out of memory");
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    snprintf(c->run, sizeof c->run, "%s", run);
    c->opts = *opts;
    c->fio = MPI_COMM_NULL;
    FT_CHECK_MPI(MPI_Comm_dup(comm, &c->ctl));
    FT_CHECK_MPI(MPI_Comm_dup(comm, &c->io));
    c->rank = rank;
    FT_CHECK_MPI(MPI_Comm_size(comm, &c->size));
    return c;
}

static void free_items(FtCkpt *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->items[i].owned);
        free(c->items[i].units);
        free(c->items[i].desc);
    }
    c->n = 0;
}

void ckpt_wait(FtCkpt *c)
{
    if (!c->in_flight) return;
    int rc = pthread_join(c->thread, NULL);
    if (rc) FT_DIE("checkpoint: joining the writer thread failed: %s", strerror(rc));
    c->in_flight = false;
    free_items(c);
}

void ckpt_destroy(FtCkpt *c)
{
    if (!c) return;
    ckpt_wait(c);
    free_items(c);
    free(c->items);
    for (int i = 0; i < c->nstage; i++) free(c->stage[i]);
    free(c->stage);
    free(c->stage_cap);
    MPI_Comm_free(&c->ctl);
    MPI_Comm_free(&c->io);
    free(c);
}

void ckpt_begin(FtCkpt *c, long long step)
{
    ckpt_wait(c);
    if (c->begun) FT_DIE("checkpoint: ckpt_begin(%lld) while step %lld is not committed", step, c->step);
    c->step = step;
    c->begun = true;
    c->broken = false;
    /* one timestamp for every rank (attributes must be equal) */
    long long t = (long long)time(NULL);
    MPI_Request req;
    if (mpi_ok(c, c->ctl, MPI_Ibcast(&t, 1, MPI_LONG_LONG, 0, c->ctl, &req), "the timestamp"))
        wait_ft(c, c->ctl, &req, "the timestamp");
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(c->created, sizeof c->created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (c->rank == 0) ckpt_prune(c->dir, c->run, (long long)1 << 62, 1 << 30, 1);
}

/* memcpy over the caller's OpenMP threads in 4 MiB pieces: the asynchronous staging copy is
 * the training stall, and training is paused while it runs, so its cores are free. */
static void copy_parallel(void *dst, const void *src, size_t n)
{
    const size_t piece = (size_t)4 << 20;
    long long pieces = (long long)((n + piece - 1) / piece);
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (long long i = 0; i < pieces; i++) {
        size_t o = (size_t)i * piece, m = n - o < piece ? n - o : piece;
        memcpy((char *)dst + o, (const char *)src + o, m);
    }
}

static struct item *new_item(FtCkpt *c, int kind, const char *name, CkptDtype dt,
                             const char *units, const char *desc)
{
    if (!c->begun) FT_DIE("checkpoint: put of '%s' before ckpt_begin", name);
    if (!name[0] || name[0] == '/' || strlen(name) >= CKPT_NAME_MAX || !strcmp(name, CKPT_MANIFEST))
        FT_DIE("checkpoint: bad dataset name '%.64s'", name);
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->items[i].name, name)) FT_DIE("checkpoint: dataset '%s' put twice", name);
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        struct item *ni = realloc(c->items, c->cap * sizeof *ni);
        if (!ni) FT_DIE("out of memory");
        c->items = ni;
    }
    struct item *it = &c->items[c->n++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    snprintf(it->name, sizeof it->name, "%s", name);
    it->dt = dt;
    it->units = strdup(units ? units : "");
    it->desc = strdup(desc ? desc : "");
    if (!it->units || !it->desc) FT_DIE("out of memory");
    return it;
}

void ckpt_put_tensor(FtCkpt *c, const char *name, CkptDtype dt, int ndim, const uint64_t *gshape,
                     const uint64_t *offset, const uint64_t *count, const void *data,
                     const char *units, const char *description)
{
    if (ndim < 0 || ndim > CKPT_MAX_DIMS || dt == CKPT_TEXT || ckpt_dtype_size(dt) == 0)
        FT_DIE("checkpoint: tensor '%s': bad ndim %d or dtype %d", name, ndim, (int)dt);
    struct item *it = new_item(c, ndim == 0 ? IT_SCALAR : IT_TENSOR, name, dt, units, description);
    it->ndim = ndim;
    uint64_t elems = 1;
    for (int d = 0; d < ndim; d++) {
        it->gshape[d] = gshape[d];
        it->offset[d] = offset[d];
        it->count[d] = count[d];
        if (offset[d] + count[d] > gshape[d] || offset[d] + count[d] < offset[d])
            FT_DIE("checkpoint: tensor '%s': dimension %d: offset %llu + count %llu exceeds the "
                   "global size %llu", name, d, (unsigned long long)offset[d],
                   (unsigned long long)count[d], (unsigned long long)gshape[d]);
        elems *= count[d];
    }
    if (ndim == 0 && c->rank != 0) elems = 0; /* a scalar is written by rank 0 */
    it->nbytes = elems * ckpt_dtype_size(dt);
    if (it->nbytes && !data) FT_DIE("checkpoint: tensor '%s': NULL data", name);
    if (ndim == 0 && it->nbytes) {
        it->owned = malloc(it->nbytes);
        if (!it->owned) FT_DIE("out of memory");
        memcpy(it->owned, data, it->nbytes);
        it->data = it->owned;
    } else if (c->opts.async && it->nbytes) {
        int k = c->n - 1;
        if (k >= c->nstage) {
            int ns = 2 * c->n;
            void **st = realloc(c->stage, ns * sizeof *st);
            size_t *sc = st ? realloc(c->stage_cap, ns * sizeof *sc) : NULL;
            if (!st || !sc) FT_DIE("out of memory");
            for (int i = c->nstage; i < ns; i++) {
                st[i] = NULL;
                sc[i] = 0;
            }
            c->stage = st;
            c->stage_cap = sc;
            c->nstage = ns;
        }
        if (c->stage_cap[k] < it->nbytes) {
            free(c->stage[k]);
            c->stage[k] = malloc(it->nbytes);
            if (!c->stage[k])
                FT_DIE("checkpoint: out of host memory staging '%s' (%zu bytes)", name, it->nbytes);
            c->stage_cap[k] = it->nbytes;
        }
        copy_parallel(c->stage[k], data, it->nbytes);
        it->data = c->stage[k];
    } else {
        it->data = data;
    }
}

void ckpt_put_i64(FtCkpt *c, const char *name, long long v, const char *units,
                  const char *description)
{
    int64_t x = v;
    ckpt_put_tensor(c, name, CKPT_I64, 0, NULL, NULL, NULL, &x, units, description);
}

void ckpt_put_u64(FtCkpt *c, const char *name, uint64_t v, const char *units,
                  const char *description)
{
    ckpt_put_tensor(c, name, CKPT_U64, 0, NULL, NULL, NULL, &v, units, description);
}

void ckpt_put_f64(FtCkpt *c, const char *name, double v, const char *units,
                  const char *description)
{
    ckpt_put_tensor(c, name, CKPT_F64, 0, NULL, NULL, NULL, &v, units, description);
}

void ckpt_put_text(FtCkpt *c, const char *name, const char *text, const char *description)
{
    struct item *it = new_item(c, IT_TEXT, name, CKPT_TEXT, "", description);
    size_t len = strlen(text) + 1; /* stored with its NUL */
    it->ndim = 1;
    it->gshape[0] = len;
    it->count[0] = c->rank == 0 ? len : 0;
    it->owned = malloc(len);
    if (!it->owned) FT_DIE("out of memory");
    memcpy(it->owned, text, len);
    it->data = it->owned;
    it->nbytes = it->count[0];
}

/* ---- the write ---- */

/* An HDF5 call of the write failed: abandoned when a process of the write has failed (opts.ft:
 * the error is the failure's), else fatal. Returns with the write broken. */
static void h5_failed(FtCkpt *c, const char *path, const char *what)
{
    char h5e[256];
    ckpt_h5_error(h5e, sizeof h5e);
    if (c->broken) return;
    if (c->opts.ft && c->opts.ft->lost(c->io)) {
        abandon(c, what);
        return;
    }
    FT_DIE("checkpoint %s: %s failed: %s", path, what, h5e);
}
#define CK_H5(expr, what)                                                                      \
    do {                                                                                       \
        if ((expr) < 0) h5_failed(c, path, what);                                              \
    } while (0)

static void attr_str(FtCkpt *c, hid_t obj, const char *key, const char *val, const char *path)
{
    if (c->broken) return;
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, strlen(val) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    hid_t a = H5Acreate2(obj, key, t, s, H5P_DEFAULT, H5P_DEFAULT);
    CK_H5(a, key);
    if (a >= 0) {
        CK_H5(H5Awrite(a, t, val), key);
        H5Aclose(a);
    }
    H5Sclose(s);
    H5Tclose(t);
}

static void attr_num(FtCkpt *c, hid_t obj, const char *key, hid_t ftype, hid_t mtype,
                     const void *val, const char *path)
{
    if (c->broken) return;
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, key, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
    CK_H5(a, key);
    if (a >= 0) {
        CK_H5(H5Awrite(a, mtype, val), key);
        H5Aclose(a);
    }
    H5Sclose(s);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void write_dataset(FtCkpt *c, hid_t file, hid_t dxpl, const struct item *it,
                          const char *path)
{
    if (c->broken) return;
    hid_t ftype, mtype, fspace, mspace;
    hsize_t dims[CKPT_MAX_DIMS], off[CKPT_MAX_DIMS], cnt[CKPT_MAX_DIMS];
    bool mine = it->nbytes > 0;
    if (it->kind == IT_TEXT) {
        ftype = H5Tcopy(H5T_C_S1);
        H5Tset_size(ftype, it->gshape[0]);
        H5Tset_strpad(ftype, H5T_STR_NULLTERM);
        mtype = H5Tcopy(ftype);
        fspace = H5Screate(H5S_SCALAR);
        mspace = H5Screate(H5S_SCALAR);
    } else {
        ftype = H5Tcopy(ckpt_h5_file_type(it->dt));
        mtype = H5Tcopy(ckpt_h5_mem_type(it->dt));
        if (it->ndim == 0) {
            fspace = H5Screate(H5S_SCALAR);
            mspace = H5Screate(H5S_SCALAR);
        } else {
            hsize_t one = 1;
            for (int d = 0; d < it->ndim; d++) {
                dims[d] = it->gshape[d];
                off[d] = it->offset[d];
                cnt[d] = it->count[d];
            }
            fspace = H5Screate_simple(it->ndim, dims, NULL);
            if (mine) {
                mspace = H5Screate_simple(it->ndim, cnt, NULL);
                CK_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL), it->name);
            } else {
                mspace = H5Screate_simple(1, &one, NULL);
            }
        }
    }
    if (!mine) {
        H5Sselect_none(fspace);
        H5Sselect_none(mspace);
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t filespace_all = it->kind == IT_TENSOR ? H5Screate_simple(it->ndim, dims, NULL)
                                                : H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(file, it->name, ftype, filespace_all, lcpl, dcpl, H5P_DEFAULT);
    CK_H5(ds, it->name);
    if (ds >= 0) {
        attr_str(c, ds, "units", it->units, path);
        attr_str(c, ds, "description", it->desc, path);
        if (!c->broken)
            CK_H5(H5Dwrite(ds, mtype, mspace, fspace, dxpl, mine ? it->data : NULL), it->name);
        H5Dclose(ds);
    }
    H5Sclose(filespace_all);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(fspace);
    H5Sclose(mspace);
    H5Tclose(ftype);
    H5Tclose(mtype);
}

static void format_shape(char *buf, size_t len, int ndim, const uint64_t *shape)
{
    size_t o = snprintf(buf, len, "[");
    for (int d = 0; d < ndim && o < len; d++)
        o += snprintf(buf + o, len - o, "%s%llu", d ? "," : "", (unsigned long long)shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

struct sum_job {
    const FtCkpt *c;
    uint64_t *sums;
};

/* The partial checksums of this rank's slabs, one thread (it runs beside the HDF5 writes). */
static void *sum_thread(void *arg)
{
    struct sum_job *job = arg;
    omp_set_num_threads(1);
    for (int i = 0; i < job->c->n; i++) {
        const struct item *it = &job->c->items[i];
        job->sums[i] = 0;
        if (!it->nbytes) continue;
        if (it->kind == IT_TEXT) job->sums[i] = ckpt_checksum_bytes(it->data, it->nbytes);
        else job->sums[i] = ckpt_checksum_slab(it->data, ckpt_dtype_size(it->dt), it->ndim,
                                               it->gshape, it->offset, it->count);
    }
    return NULL;
}

/* 2.-3. The file, on the ranks that write (fio, nfio of them): its attributes, the datasets,
 * their checksums (this rank's partial sums on a helper thread beside the writes, summed over
 * fio into tot) and the manifest with the commit marker; closed. A process failure (opts.ft)
 * skips what is left and closes the file (its errors then ignored). */
static void write_file(FtCkpt *c, MPI_Comm fio, int nfio, const char *tmp, const char *path,
                       uint64_t *sums, uint64_t *tot)
{
    int n = c->n;
    double tp = now_s();
    struct sum_job job = {c, sums};
    pthread_t helper;
    int rc = pthread_create(&helper, NULL, sum_thread, &job);
    if (rc) FT_DIE("checkpoint: cannot start the checksum thread: %s", strerror(rc));
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, fio, MPI_INFO_NULL);
    H5Pset_coll_metadata_write(fapl, 1);
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CK_H5(file, "creating the file");
    H5Pclose(fapl);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    attr_str(c, file, "format", CKPT_FORMAT, path);
    int64_t v = CKPT_FORMAT_VERSION;
    attr_num(c, file, "format_version", H5T_STD_I64LE, H5T_NATIVE_INT64, &v, path);
    attr_str(c, file, "ftllm_version", FTLLM_VERSION, path);
    attr_str(c, file, "run_name", c->run, path);
    v = c->step;
    attr_num(c, file, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, &v, path);
    attr_str(c, file, "created_utc", c->created, path);
    v = nfio;
    attr_num(c, file, "writer_ranks", H5T_STD_I64LE, H5T_NATIVE_INT64, &v, path);
    attr_str(c, file, "checksum_algorithm", CKPT_CHECKSUM_ALG, path);

    /* 3. datasets, then the manifest and the commit marker */
    size_t mcap = 4096, mlen = 0;
    char *man = malloc(mcap);
    if (!man) FT_DIE("out of memory");
    man[0] = 0;
    for (int i = 0; i < n && !c->broken; i++) {
        if (c->opts.debug_delay_ms > 0) usleep(1000 * c->opts.debug_delay_ms);
        if (c->opts.before_dataset) c->opts.before_dataset(c->opts.before_dataset_ctx);
        write_dataset(c, file, dxpl, &c->items[i], path);
    }
    c->phase[1] = now_s() - tp;
    tp = now_s();
    rc = pthread_join(helper, NULL);
    if (rc) FT_DIE("checkpoint: joining the checksum thread failed: %s", strerror(rc));
    c->phase[2] = now_s() - tp;
    tp = now_s();
    sum_allreduce_ft(c, sums, tot, n, fio);
    for (int i = 0; i < n && !c->broken; i++) {
        const struct item *it = &c->items[i];
        hid_t ds = H5Dopen2(file, it->name, H5P_DEFAULT);
        CK_H5(ds, it->name);
        if (ds < 0) break;
        attr_num(c, ds, "checksum", H5T_STD_U64LE, H5T_NATIVE_UINT64, &tot[i], path);
        H5Dclose(ds);
        char shape[256], line[CKPT_NAME_MAX + 320];
        format_shape(shape, sizeof shape, it->kind == IT_TEXT ? 0 : it->ndim, it->gshape);
        int ll = snprintf(line, sizeof line, "%s\t%s\t%s\t%016llx\n", it->name,
                          ckpt_dtype_name(it->dt), shape, (unsigned long long)tot[i]);
        while (mlen + ll + 1 > mcap) {
            mcap *= 2;
            char *nm = realloc(man, mcap);
            if (!nm) FT_DIE("out of memory");
            man = nm;
        }
        memcpy(man + mlen, line, ll + 1);
        mlen += ll;
    }
    if (!c->broken) {
        struct item mi = {.kind = IT_TEXT, .dt = CKPT_TEXT, .ndim = 1, .data = man, .units = "",
                          .desc = "name, dtype, shape and checksum of every dataset, written last"};
        snprintf(mi.name, sizeof mi.name, "%s", CKPT_MANIFEST);
        mi.gshape[0] = mlen + 1;
        mi.nbytes = c->rank == 0 ? mlen + 1 : 0;
        write_dataset(c, file, dxpl, &mi, path);
    }
    if (!c->broken) {
        uint64_t msum = ckpt_checksum_bytes(man, mlen + 1);
        hid_t mds = H5Dopen2(file, CKPT_MANIFEST, H5P_DEFAULT);
        CK_H5(mds, CKPT_MANIFEST);
        if (mds >= 0) {
            attr_num(c, mds, "checksum", H5T_STD_U64LE, H5T_NATIVE_UINT64, &msum, path);
            H5Dclose(mds);
        }
    }
    free(man);
    v = 1;
    attr_num(c, file, "complete", H5T_STD_I64LE, H5T_NATIVE_INT64, &v, path);
    H5Pclose(dxpl);
    if (file >= 0) CK_H5(H5Fclose(file), "closing the file");
    if (c->broken) H5Eclear2(H5E_DEFAULT);
    c->phase[3] = now_s() - tp;
}

static void write_all(FtCkpt *c)
{
    double t0 = now_s();
    char tmp[CKPT_PATH_MAX], path[CKPT_PATH_MAX];
    ckpt_name(tmp, sizeof tmp, c->dir, c->run, c->step, 1);
    ckpt_name(path, sizeof path, c->dir, c->run, c->step, 0);
    int n = c->n;

    /* 1. agree on what is written before any collective HDF5 call: the hash of the list of
     * puts, and every dataset's element count (the hyperslabs must tile it) */
    uint64_t *sums = calloc(n + 1, sizeof *sums), *tot = calloc(n + 1, sizeof *tot);
    uint64_t *cnt = calloc(n + 1, sizeof *cnt), *cnt_all = calloc(n + 1, sizeof *cnt_all);
    if (!sums || !tot || !cnt || !cnt_all) FT_DIE("out of memory");
    uint64_t h = 1469598103934665603ull;
    h = fnv(h, &c->step, sizeof c->step);
    double bytes = 0;
    for (int i = 0; i < n; i++) {
        const struct item *it = &c->items[i];
        cnt[i] = it->nbytes / ckpt_dtype_size(it->dt);
        bytes += it->nbytes;
        h = fnv(h, &it->kind, sizeof it->kind);
        h = fnv(h, it->name, strlen(it->name) + 1);
        h = fnv(h, &it->dt, sizeof it->dt);
        h = fnv(h, &it->ndim, sizeof it->ndim);
        h = fnv(h, it->gshape, it->ndim * sizeof it->gshape[0]);
        h = fnv(h, it->units, strlen(it->units) + 1);
        h = fnv(h, it->desc, strlen(it->desc) + 1);
    }
    uint64_t hh[2] = {h, ~h}, hmax[2];
    if (allreduce_ft(c, hh, hmax, 2, MPI_UINT64_T, MPI_MAX, c->io, "agreeing on the datasets") &&
        hmax[0] != ~hmax[1])
        FT_DIE("checkpoint %s: the ranks put different lists of datasets (names, dtypes, shapes, "
               "units and descriptions must be equal on every rank, in the same order)", path);
    if (allreduce_ft(c, cnt, cnt_all, n, MPI_UINT64_T, MPI_SUM, c->io, "counting the elements"))
        for (int i = 0; i < n; i++) {
            const struct item *it = &c->items[i];
            uint64_t want = 1;
            for (int d = 0; d < it->ndim; d++) want *= it->gshape[d];
            if (cnt_all[i] != want)
                FT_DIE("checkpoint %s: dataset '%s': the ranks' hyperslabs hold %llu elements, "
                       "the global shape %llu (they must tile it exactly once; a replica gives "
                       "count 0)", path, it->name, (unsigned long long)cnt_all[i],
                       (unsigned long long)want);
        }
    /* the file's ranks: those with a slab, and rank 0 (the manifest, the rename) */
    bool writes = c->rank == 0;
    for (int i = 0; i < n && !writes; i++) writes = c->items[i].nbytes > 0;
    int nfio = 0;
    c->fio = MPI_COMM_NULL;
    if (!c->broken &&
        mpi_ok(c, c->io, MPI_Comm_split(c->io, writes ? 0 : MPI_UNDEFINED, c->rank, &c->fio),
               "splitting the file's ranks") &&
        writes)
        FT_CHECK_MPI(MPI_Comm_size(c->fio, &nfio));
    /* ULFM: one verdict for every survivor before the file: a failure seen so far by anyone
     * (an operation above failed on some rank, not on all) abandons the write everywhere, so
     * no rank waits inside HDF5 for one that left. An asynchronous write takes an all-reduce
     * instead of MPIX_Comm_agree: Open MPI 5's agreement from this background thread while the
     * training thread runs its own (the step's) came back 0 on every rank though all gave 1
     * (about one fault-free run in 20, e2e/ulfm_fuzz). Not as strong: a death during the
     * all-reduce may fail it on some ranks only; they abandon and revoke io and fio, and the
     * others look for that (or the death) once more before HDF5, but one that has gone past
     * that look can wait inside HDF5 (README: the limits). */
    if (c->opts.ft && c->opts.async) {
        int ok = !c->broken, all_ok = 0;
        if (allreduce_ft(c, &ok, &all_ok, 1, MPI_INT, MPI_MIN, c->io,
                         "the agreement before the file") &&
            (!all_ok || c->opts.ft->lost(c->io)))
            abandon(c, "the agreement before the file");
    } else if (c->opts.ft && !c->opts.ft->agree(c->io, !c->broken))
        abandon(c, "the agreement before the file");
    c->phase[0] = now_s() - t0;
    if (writes && !c->broken) write_file(c, c->fio, nfio, tmp, path, sums, tot);
    else c->phase[1] = c->phase[2] = c->phase[3] = 0;
    double tp = now_s();
    /* 4. durable (every rank that wrote fsyncs: see the file comment), then visible under its
     * final name, then prune */
    int ok = 1, all_ok = 0;
    if (writes && !c->broken) {
        int fd = open(tmp, O_RDONLY);
        ok = fd >= 0 && fsync(fd) == 0;
        if (!ok) FT_DIE("checkpoint %s: fsync failed: %s", tmp, strerror(errno));
        close(fd);
    }
    if (c->fio != MPI_COMM_NULL) MPI_Comm_free(&c->fio);
    c->fio = MPI_COMM_NULL;
    allreduce_ft(c, &ok, &all_ok, 1, MPI_INT, MPI_MIN, c->io, "agreeing the file is durable");
    c->phase[4] = now_s() - tp;
    tp = now_s();
    if (c->rank == 0 && !c->broken) {
        if (rename(tmp, path))
            FT_DIE("checkpoint: rename %s -> %s failed: %s", tmp, path, strerror(errno));
        ckpt_fsync_dir(c->dir);
        ckpt_prune(c->dir, c->run, c->step, c->opts.keep, 0);
    }
    int one = 1, all = 0; /* every rank returns after the rename */
    allreduce_ft(c, &one, &all, 1, MPI_INT, MPI_SUM, c->io, "the rename");
    snprintf(c->path, sizeof c->path, "%s", c->broken ? "" : path);
    c->phase[5] = now_s() - tp;
    c->last_s = now_s() - t0;
    if (!c->broken)
        log_debug("checkpoint: %s: agree %.3f s, data %.3f s, checksum wait %.3f s, metadata "
                  "%.3f s, sync %.3f s, rename %.3f s", path, c->phase[0], c->phase[1],
                  c->phase[2], c->phase[3], c->phase[4], c->phase[5]);
    double tb = 0;
    if (allreduce_ft(c, &bytes, &tb, 1, MPI_DOUBLE, MPI_SUM, c->io, "the bytes written"))
        c->last_bytes = tb;
    free(sums);
    free(tot);
    free(cnt);
    free(cnt_all);
}

static void *writer_thread(void *arg)
{
    FtCkpt *c = arg;
    omp_set_num_threads(1);
    write_all(c);
    if (!c->broken)
        log_info("checkpoint: wrote %s (%.1f MB in %.2f s, in the background)", c->path,
                 c->last_bytes / 1e6, c->last_s);
    return NULL;
}

void ckpt_commit(FtCkpt *c, const char **path)
{
    if (!c->begun) FT_DIE("checkpoint: ckpt_commit without ckpt_begin");
    c->begun = false;
    ckpt_h5_quiet();
    if (c->opts.async) {
        int rc = pthread_create(&c->thread, NULL, writer_thread, c);
        if (rc) FT_DIE("checkpoint: cannot start the writer thread: %s", strerror(rc));
        c->in_flight = true;
        if (path) *path = NULL;
        return;
    }
    write_all(c);
    free_items(c);
    if (!c->broken)
        log_debug("checkpoint: wrote %s (%.1f MB in %.2f s)", c->path, c->last_bytes / 1e6,
                  c->last_s);
    if (path) *path = c->broken ? NULL : c->path;
}

bool ckpt_abandoned(const FtCkpt *c) { return c->broken; }

double ckpt_last_write_s(const FtCkpt *c) { return c->last_s; }
double ckpt_last_write_bytes(const FtCkpt *c) { return c->last_bytes; }
