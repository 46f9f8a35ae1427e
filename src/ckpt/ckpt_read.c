/* ckpt_read.c: opening, verifying and reading checkpoints (see ckpt.h).
 *
 * Opening checks, in order, what a user can get wrong and says which it was: the file exists
 * and starts with the HDF5 signature (else "a file of another format"), HDF5 can open it (else
 * truncated or damaged, with HDF5's own reason), it is an ftllm checkpoint of a format version
 * this build reads, it has its commit marker and a manifest whose own checksum holds, every
 * dataset the manifest lists exists with the listed dtype, shape and checksum attribute, and no
 * dataset is missing from the manifest. Only metadata is read at open; ckpt_verify reads the
 * data: each rank checksums a share of every dataset's rows (independent reads, in pieces of at
 * most 64 MiB) and one all-reduce per dataset combines the shares.
 *
 * Every rank runs the same metadata reads and the outcome is agreed (ckpt_agree) before anyone
 * branches, so all ranks return the same status and message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_impl.h"
#include "ftllm/log.h"

#define PIECE_BYTES ((size_t)64 << 20)

struct ft_ckpt_file {
    char path[CKPT_PATH_MAX];
    hid_t file;
    MPI_Comm comm;
    int rank, size;
    long long step;
    char *format, *run_name, *ftllm_version, *created_utc;
    int n;
    CkptDsInfo *ds;
    bool batch;                /* ckpt_read_batch: independent reads, agreed at its end */
    char batch_err[CKPT_ERR_MAX]; /* this rank's first failed read in the batch ("": none) */
    char fail_read[CKPT_NAME_MAX]; /* ckpt_test_fail_read */
};

void ckpt_test_fail_read(FtCkptFile *f, const char *name)
{
    snprintf(f->fail_read, sizeof f->fail_read, "%s", name ? name : "");
}

/* ckpt_test_fail_read's failure, once, when `name` is the dataset it named (h5e: the reason). */
static bool injected_failure(FtCkptFile *f, const char *name, char *h5e, size_t len)
{
    if (!f->fail_read[0] || strcmp(f->fail_read, name)) return false;
    f->fail_read[0] = '\0';
    snprintf(h5e, len, "a failure injected by a test");
    return true;
}

static int read_attr_str(hid_t obj, const char *key, char **out)
{
    *out = NULL;
    if (H5Aexists(obj, key) <= 0) return -1;
    hid_t a = H5Aopen(obj, key, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a);
    int rc = -1;
    if (H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
        size_t sz = H5Tget_size(t);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, sz + 1);
        H5Tset_strpad(mt, H5T_STR_NULLTERM);
        char *buf = calloc(sz + 2, 1);
        if (buf && H5Aread(a, mt, buf) >= 0) {
            *out = buf;
            rc = 0;
        } else {
            free(buf);
        }
        H5Tclose(mt);
    }
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

static int read_attr_num(hid_t obj, const char *key, hid_t mtype, void *out)
{
    if (H5Aexists(obj, key) <= 0) return -1;
    hid_t a = H5Aopen(obj, key, H5P_DEFAULT);
    if (a < 0) return -1;
    int rc = H5Aread(a, mtype, out) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

static int dtype_of(hid_t t, CkptDtype *dt)
{
    size_t sz = H5Tget_size(t);
    switch (H5Tget_class(t)) {
    case H5T_FLOAT:
        if (sz == 4) *dt = CKPT_F32;
        else if (sz == 8) *dt = CKPT_F64;
        else return -1;
        return 0;
    case H5T_INTEGER: {
        int sgn = H5Tget_sign(t) == H5T_SGN_2;
        if (sgn && sz == 4) *dt = CKPT_I32;
        else if (sgn && sz == 8) *dt = CKPT_I64;
        else if (!sgn && sz == 1) *dt = CKPT_U8;
        else if (!sgn && sz == 4) *dt = CKPT_U32;
        else if (!sgn && sz == 8) *dt = CKPT_U64;
        else return -1;
        return 0;
    }
    case H5T_STRING:
        if (H5Tis_variable_str(t)) return -1;
        *dt = CKPT_TEXT;
        return 0;
    default: return -1;
    }
}

static void format_shape(char *buf, size_t len, int ndim, const uint64_t *shape)
{
    size_t o = snprintf(buf, len, "[");
    for (int d = 0; d < ndim && o < len; d++)
        o += snprintf(buf + o, len - o, "%s%llu", d ? "," : "", (unsigned long long)shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

/* Reads a whole text dataset (all ranks, independently). */
static int read_text_ds(hid_t file, const char *name, char **out, char *h5err, size_t len)
{
    *out = NULL;
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (ds < 0) goto fail;
    hid_t t = H5Dget_type(ds);
    size_t sz = H5Tget_size(t);
    H5Tclose(t);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, sz);
    H5Tset_strpad(mt, H5T_STR_NULLTERM);
    char *buf = calloc(sz + 1, 1);
    herr_t rc = buf ? H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) : -1;
    if (rc < 0) ckpt_h5_error(h5err, len);
    H5Tclose(mt);
    H5Dclose(ds);
    if (rc < 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
fail:
    ckpt_h5_error(h5err, len);
    return -1;
}

/* Counts datasets in the file (H5Ovisit) and remembers one not in the manifest. */
struct visit {
    const FtCkptFile *f;
    int count;
    char stray[CKPT_NAME_MAX];
};

static herr_t visit_cb(hid_t obj, const char *name, const H5O_info_t *info, void *arg)
{
    struct visit *v = arg;
    if (info->type != H5O_TYPE_DATASET) return 0;
    v->count++;
    if (!strcmp(name, CKPT_MANIFEST)) return 0;
    if (!ckpt_find_dataset(v->f, name) && !v->stray[0])
        snprintf(v->stray, sizeof v->stray, "%s", name);
    return 0;
}

/* Parses the manifest and checks each dataset's metadata against it. */
static int load_manifest(FtCkptFile *f, char *man, char *msg, size_t len)
{
    int lines = 0;
    for (char *p = man; *p; p++) lines += *p == '\n';
    f->ds = calloc(lines ? lines : 1, sizeof *f->ds);
    if (!f->ds) FT_DIE("out of memory");
    char *save = NULL;
    for (char *line = strtok_r(man, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *name = line, *dtn = strchr(name, '\t'), *shp = dtn ? strchr(dtn + 1, '\t') : NULL,
             *sum = shp ? strchr(shp + 1, '\t') : NULL;
        if (!sum) {
            snprintf(msg, len, "%s: manifest line %d is malformed", f->path, f->n + 1);
            return -1;
        }
        *dtn++ = *shp++ = *sum++ = 0;
        CkptDsInfo *d = &f->ds[f->n];
        d->name = strdup(name);
        if (!d->name) FT_DIE("out of memory");
        f->n++;
        d->checksum = strtoull(sum, NULL, 16);
        char h5e[256];
        if (H5Lexists(f->file, name, H5P_DEFAULT) <= 0) {
            H5Eclear2(H5E_DEFAULT);
            snprintf(msg, len, "%s: dataset '%s' listed in the manifest is missing", f->path, name);
            return -1;
        }
        hid_t ds = H5Dopen2(f->file, name, H5P_DEFAULT);
        if (ds < 0) {
            ckpt_h5_error(h5e, sizeof h5e);
            snprintf(msg, len, "%s: dataset '%s' cannot be opened (HDF5: %s)", f->path, name, h5e);
            return -1;
        }
        hid_t t = H5Dget_type(ds), s = H5Dget_space(ds);
        int ok = dtype_of(t, &d->dtype) == 0;
        int nd = H5Sget_simple_extent_ndims(s);
        hsize_t dims[CKPT_MAX_DIMS];
        ok = ok && nd >= 0 && nd <= CKPT_MAX_DIMS && H5Sget_simple_extent_dims(s, dims, NULL) >= 0;
        if (ok) {
            d->ndim = nd;
            for (int i = 0; i < nd; i++) d->shape[i] = dims[i];
            if (d->dtype == CKPT_TEXT) { /* a text's shape is its length (with the NUL) */
                d->ndim = 1;
                d->shape[0] = H5Tget_size(t);
            }
        }
        H5Tclose(t);
        H5Sclose(s);
        char *u = NULL, *de = NULL;
        uint64_t stored = 0;
        read_attr_str(ds, "units", &u);
        read_attr_str(ds, "description", &de);
        int has_sum = read_attr_num(ds, "checksum", H5T_NATIVE_UINT64, &stored) == 0;
        H5Dclose(ds);
        H5Eclear2(H5E_DEFAULT);
        d->units = u ? u : strdup("");
        d->description = de ? de : strdup("");
        if (!ok) {
            snprintf(msg, len, "%s: dataset '%s' has a type or shape ftllm does not write", f->path, name);
            return -1;
        }
        char shape[256];
        format_shape(shape, sizeof shape, d->dtype == CKPT_TEXT ? 0 : d->ndim, d->shape);
        if (strcmp(dtn, ckpt_dtype_name(d->dtype)) || strcmp(shp, shape)) {
            snprintf(msg, len, "%s: dataset '%s' is %s %s but the manifest says %s %s", f->path,
                     name, ckpt_dtype_name(d->dtype), shape, dtn, shp);
            return -1;
        }
        if (!has_sum || stored != d->checksum) {
            snprintf(msg, len, "%s: dataset '%s': %s", f->path, name,
                     has_sum ? "its checksum attribute differs from the manifest"
                             : "no checksum attribute");
            return -1;
        }
    }
    struct visit v = {.f = f};
    if (H5Ovisit(f->file, H5_INDEX_NAME, H5_ITER_INC, visit_cb, &v) < 0) {
        char h5e[256];
        ckpt_h5_error(h5e, sizeof h5e);
        snprintf(msg, len, "%s: cannot list the datasets (HDF5: %s)", f->path, h5e);
        return -1;
    }
    if (v.stray[0]) {
        snprintf(msg, len, "%s: dataset '%s' is not in the manifest", f->path, v.stray);
        return -1;
    }
    return 0;
}

static int precheck(const char *path, char *msg, size_t len)
{
    struct stat st;
    if (stat(path, &st)) {
        snprintf(msg, len, "%s: cannot open the checkpoint: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(msg, len, "%s: not a checkpoint file (a folder or a device)", path);
        return -1;
    }
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(msg, len, "%s: cannot open the checkpoint: %s", path, strerror(errno));
        return -1;
    }
    size_t got = fread(head, 1, 8, fp);
    fclose(fp);
    if (got < 8 || memcmp(head, sig, 8)) {
        snprintf(msg, len, "%s: not an HDF5 file (%s), so not an ftllm checkpoint", path,
                 got < 8 ? "shorter than the HDF5 signature" : "no HDF5 signature at its start");
        return -1;
    }
    return 0;
}

FtCkptFile *ckpt_open(const char *path, MPI_Comm comm, char *err, size_t errlen)
{
    ckpt_h5_quiet();
    FtCkptFile *f = calloc(1, sizeof *f);
    if (!f) FT_DIE("out of memory");
    f->file = -1;
    snprintf(f->path, sizeof f->path, "%s", path);
    FT_CHECK_MPI(MPI_Comm_dup(comm, &f->comm));
    MPI_Comm_rank(f->comm, &f->rank);
    MPI_Comm_size(f->comm, &f->size);
    char msg[CKPT_ERR_MAX] = "", h5e[256];
    char *man = NULL;
    int ok = f->rank != 0 || precheck(path, msg, sizeof msg) == 0;
    if (ckpt_agree(f->comm, ok, msg, sizeof msg)) goto fail;

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, f->comm, MPI_INFO_NULL);
    f->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f->file < 0) {
        ckpt_h5_error(h5e, sizeof h5e); /* before any other HDF5 call clears the stack */
        snprintf(msg, sizeof msg, "%s: truncated or damaged HDF5 file (HDF5: %s)", path, h5e);
    }
    H5Pclose(fapl);
    if (ckpt_agree(f->comm, f->file >= 0, msg, sizeof msg)) goto fail;

    ok = 0;
    int64_t ver = 0, complete = 0, step = 0;
    if (read_attr_str(f->file, "format", &f->format) || strcmp(f->format, CKPT_FORMAT))
        snprintf(msg, sizeof msg, "%s: an HDF5 file, but not an ftllm checkpoint (%s%s%s)", path,
                 f->format ? "format is '" : "no root attribute 'format'",
                 f->format ? f->format : "", f->format ? "'" : "");
    else if (read_attr_num(f->file, "format_version", H5T_NATIVE_INT64, &ver) || ver < 1)
        snprintf(msg, sizeof msg, "%s: no valid format_version attribute", path);
    else if (ver > CKPT_FORMAT_VERSION)
        snprintf(msg, sizeof msg, "%s: written in checkpoint format version %lld; this ftllm "
                 "reads up to version %d", path, (long long)ver, CKPT_FORMAT_VERSION);
    else if (ver < CKPT_FORMAT_VERSION)
        snprintf(msg, sizeof msg, "%s: written in checkpoint format version %lld, whose "
                 "checksums this ftllm no longer computes (it reads version %d); HINT: resume "
                 "with the ftllm that wrote it, or start afresh", path, (long long)ver,
                 CKPT_FORMAT_VERSION);
    else if (read_attr_num(f->file, "complete", H5T_NATIVE_INT64, &complete) || complete != 1)
        snprintf(msg, sizeof msg, "%s: incomplete checkpoint (no commit marker 'complete')", path);
    else if (read_attr_num(f->file, "step", H5T_NATIVE_INT64, &step))
        snprintf(msg, sizeof msg, "%s: no 'step' attribute", path);
    else if (read_text_ds(f->file, CKPT_MANIFEST, &man, h5e, sizeof h5e))
        snprintf(msg, sizeof msg, "%s: no readable manifest (HDF5: %s)", path, h5e);
    else {
        uint64_t want = 0;
        hid_t ds = H5Dopen2(f->file, CKPT_MANIFEST, H5P_DEFAULT);
        int has = ds >= 0 && read_attr_num(ds, "checksum", H5T_NATIVE_UINT64, &want) == 0;
        if (ds >= 0) H5Dclose(ds);
        H5Eclear2(H5E_DEFAULT);
        if (!has || want != ckpt_checksum_bytes(man, strlen(man) + 1))
            snprintf(msg, sizeof msg, "%s: dataset '%s': checksum mismatch: the manifest is "
                     "corrupt", path, CKPT_MANIFEST);
        else
            ok = load_manifest(f, man, msg, sizeof msg) == 0;
    }
    free(man);
    f->step = step;
    read_attr_str(f->file, "run_name", &f->run_name);
    read_attr_str(f->file, "ftllm_version", &f->ftllm_version);
    read_attr_str(f->file, "created_utc", &f->created_utc);
    H5Eclear2(H5E_DEFAULT);
    if (ckpt_agree(f->comm, ok, msg, sizeof msg)) goto fail;
    return f;
fail:
    snprintf(err, errlen, "%s", msg);
    ckpt_close(f);
    return NULL;
}

void ckpt_close(FtCkptFile *f)
{
    if (!f) return;
    if (f->file >= 0) H5Fclose(f->file);
    for (int i = 0; i < f->n; i++) {
        free((char *)f->ds[i].name);
        free((char *)f->ds[i].units);
        free((char *)f->ds[i].description);
    }
    free(f->ds);
    free(f->format);
    free(f->run_name);
    free(f->ftllm_version);
    free(f->created_utc);
    MPI_Comm_free(&f->comm);
    free(f);
}

long long ckpt_file_step(const FtCkptFile *f) { return f->step; }
int ckpt_num_datasets(const FtCkptFile *f) { return f->n; }
const CkptDsInfo *ckpt_dataset(const FtCkptFile *f, int i)
{
    return i >= 0 && i < f->n ? &f->ds[i] : NULL;
}

const char *ckpt_file_attr(const FtCkptFile *f, const char *key)
{
    if (!strcmp(key, "run_name")) return f->run_name;
    if (!strcmp(key, "ftllm_version")) return f->ftllm_version;
    if (!strcmp(key, "created_utc")) return f->created_utc;
    if (!strcmp(key, "format")) return f->format;
    return NULL;
}

const CkptDsInfo *ckpt_find_dataset(const FtCkptFile *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->ds[i].name, name)) return &f->ds[i];
    return NULL;
}

/* This rank's partial checksum of dataset d. Returns 0, or -1 with HDF5's reason in h5e. */
static int partial_checksum(FtCkptFile *f, const CkptDsInfo *d, uint64_t *sum, char *h5e, size_t len)
{
    *sum = 0;
    if (injected_failure(f, d->name, h5e, len)) return -1;
    if (d->dtype == CKPT_TEXT) {
        if (f->rank != 0) return 0;
        char *text = NULL;
        if (read_text_ds(f->file, d->name, &text, h5e, len)) return -1;
        *sum = ckpt_checksum_bytes(text, d->shape[0]);
        free(text);
        return 0;
    }
    size_t es = ckpt_dtype_size(d->dtype);
    hid_t ds = H5Dopen2(f->file, d->name, H5P_DEFAULT);
    if (ds < 0) goto fail;
    hid_t mt = ckpt_h5_mem_type(d->dtype);
    int rc = 0;
    if (d->ndim == 0) {
        uint64_t bits = 0;
        if (f->rank == 0) {
            rc = H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, &bits);
            if (rc >= 0) *sum = ckpt_term(0, bits, es);
            else ckpt_h5_error(h5e, len);
        }
        H5Dclose(ds);
        return rc < 0 ? -1 : 0;
    }
    /* rows of the first dimension, split evenly over ranks, read in pieces */
    uint64_t rows = d->shape[0], row_elems = 1;
    for (int i = 1; i < d->ndim; i++) row_elems *= d->shape[i];
    uint64_t r0 = rows * f->rank / f->size, r1 = rows * (f->rank + 1) / f->size;
    uint64_t per = row_elems ? PIECE_BYTES / (row_elems * es) : rows;
    if (per < 1) per = 1;
    if (r1 <= r0 || row_elems == 0) {
        H5Dclose(ds);
        return 0;
    }
    uint64_t maxrows = per < r1 - r0 ? per : r1 - r0;
    void *buf = malloc(maxrows * row_elems * es);
    if (!buf) FT_DIE("out of memory verifying %s", d->name);
    hid_t fs = H5Dget_space(ds);
    for (uint64_t r = r0; r < r1 && rc >= 0; r += per) {
        uint64_t nr = r1 - r < per ? r1 - r : per;
        hsize_t off[CKPT_MAX_DIMS] = {0}, cnt[CKPT_MAX_DIMS];
        uint64_t o64[CKPT_MAX_DIMS] = {0}, c64[CKPT_MAX_DIMS];
        off[0] = o64[0] = r;
        cnt[0] = c64[0] = nr;
        for (int i = 1; i < d->ndim; i++) cnt[i] = c64[i] = d->shape[i];
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
        hid_t ms = H5Screate_simple(d->ndim, cnt, NULL);
        rc = H5Dread(ds, mt, ms, fs, H5P_DEFAULT, buf);
        if (rc < 0) ckpt_h5_error(h5e, len);
        H5Sclose(ms);
        if (rc >= 0) *sum = ckpt_sum_add(*sum, ckpt_checksum_slab(buf, es, d->ndim, d->shape, o64, c64));
    }
    H5Sclose(fs);
    free(buf);
    H5Dclose(ds);
    return rc < 0 ? -1 : 0;
fail:
    ckpt_h5_error(h5e, len);
    return -1;
}

/* Datasets [first, first + count): every one's partial checksums first, then one agreement on
 * the reads and one sum of all of them: a handful of collectives, not a few per dataset (each
 * waits for every rank, which with more ranks than cores means for each to be scheduled). The
 * error names the first dataset, in the file's order, whose read failed on the lowest such
 * rank, or whose sum is off. */
static int verify_range(FtCkptFile *f, int first, int count, char *err, size_t errlen)
{
    uint64_t *part = calloc((size_t)count + 1, sizeof *part);
    uint64_t *sum = calloc((size_t)count + 1, sizeof *sum);
    if (!part || !sum) FT_DIE("out of memory");
    char msg[CKPT_ERR_MAX] = "", h5e[256];
    int ok = 1;
    for (int i = 0; i < count && ok; i++) {
        const CkptDsInfo *d = &f->ds[first + i];
        ok = partial_checksum(f, d, &part[i], h5e, sizeof h5e) == 0;
        if (!ok) snprintf(msg, sizeof msg, "%s: dataset '%s': read failed (HDF5: %s)", f->path,
                          d->name, h5e);
    }
    int rc = -1;
    if (ckpt_agree(f->comm, ok, msg, sizeof msg)) goto out;
    ckpt_sum_allreduce(part, sum, count, f->comm);
    for (int i = 0; i < count; i++) {
        const CkptDsInfo *d = &f->ds[first + i];
        if (sum[i] != d->checksum) {
            snprintf(msg, sizeof msg, "%s: dataset '%s': checksum mismatch (stored %016llx, "
                     "computed %016llx): the data is corrupt", f->path, d->name,
                     (unsigned long long)d->checksum, (unsigned long long)sum[i]);
            goto out;
        }
    }
    rc = 0;
out:
    if (rc) snprintf(err, errlen, "%s", msg);
    free(part);
    free(sum);
    return rc;
}

int ckpt_verify_dataset(FtCkptFile *f, int i, char *err, size_t errlen)
{
    return verify_range(f, i, 1, err, errlen);
}

int ckpt_verify(FtCkptFile *f, char *err, size_t errlen) { return verify_range(f, 0, f->n, err, errlen); }

/* Metadata checks shared by the readers: equal on every rank, no agreement needed. */
static const CkptDsInfo *lookup(FtCkptFile *f, const char *name, CkptDtype dt, int ndim,
                                const uint64_t *gshape, char *err, size_t errlen)
{
    const CkptDsInfo *d = ckpt_find_dataset(f, name);
    if (!d) {
        snprintf(err, errlen, "%s: no dataset '%s' (a checkpoint of another model or program?)",
                 f->path, name);
        return NULL;
    }
    if (d->dtype != dt) {
        snprintf(err, errlen, "%s: dataset '%s' is %s, expected %s", f->path, name,
                 ckpt_dtype_name(d->dtype), ckpt_dtype_name(dt));
        return NULL;
    }
    if (dt == CKPT_TEXT) return d;
    int same = d->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = d->shape[i] == gshape[i];
    if (!same) {
        char a[256], b[256];
        format_shape(a, sizeof a, d->ndim, d->shape);
        format_shape(b, sizeof b, ndim, gshape);
        snprintf(err, errlen, "%s: dataset '%s' has shape %s, the model expects %s (a checkpoint "
                 "of a different model shape?)", f->path, name, a, b);
        return NULL;
    }
    return d;
}

int ckpt_read_tensor(FtCkptFile *f, const char *name, CkptDtype dt, int ndim,
                     const uint64_t *gshape, const uint64_t *offset, const uint64_t *count,
                     void *data, char *err, size_t errlen)
{
    ckpt_h5_quiet();
    if (ndim < 0 || ndim > CKPT_MAX_DIMS) FT_DIE("checkpoint: read of '%s': bad ndim %d", name, ndim);
    const CkptDsInfo *d = lookup(f, name, dt, ndim, gshape, err, errlen);
    if (!d) return -1;
    hsize_t off[CKPT_MAX_DIMS], cnt[CKPT_MAX_DIMS];
    uint64_t elems = 1;
    for (int i = 0; i < ndim; i++) {
        if (offset[i] + count[i] > gshape[i])
            FT_DIE("checkpoint: read of '%s': dimension %d: offset + count exceeds %llu", name, i,
                   (unsigned long long)gshape[i]);
        off[i] = offset[i];
        cnt[i] = count[i];
        elems *= count[i];
    }
    char msg[CKPT_ERR_MAX] = "", h5e[256];
    hid_t ds = H5Dopen2(f->file, name, H5P_DEFAULT);
    int ok = ds >= 0;
    if (ok) {
        hid_t fs = H5Dget_space(ds), ms;
        hsize_t one = 1;
        if (ndim == 0) {
            ms = H5Screate(H5S_SCALAR);
        } else if (elems) {
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
            ms = H5Screate_simple(ndim, cnt, NULL);
        } else {
            H5Sselect_none(fs);
            ms = H5Screate_simple(1, &one, NULL);
            H5Sselect_none(ms);
        }
        hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
        H5Pset_dxpl_mpio(dxpl, f->batch ? H5FD_MPIO_INDEPENDENT : H5FD_MPIO_COLLECTIVE);
        ok = H5Dread(ds, ckpt_h5_mem_type(dt), ms, fs, dxpl, elems ? data : NULL) >= 0;
        if (!ok) ckpt_h5_error(h5e, sizeof h5e);
        if (ok && injected_failure(f, name, h5e, sizeof h5e)) ok = 0;
        H5Pclose(dxpl);
        H5Sclose(ms);
        H5Sclose(fs);
        H5Dclose(ds);
    }
    else
        ckpt_h5_error(h5e, sizeof h5e);
    if (!ok) snprintf(msg, sizeof msg, "%s: dataset '%s': read failed (HDF5: %s)", f->path, name, h5e);
    if (f->batch) { /* agreed at the batch's end */
        if (!ok && !f->batch_err[0]) snprintf(f->batch_err, sizeof f->batch_err, "%s", msg);
        return 0;
    }
    if (ckpt_agree(f->comm, ok, msg, sizeof msg)) {
        snprintf(err, errlen, "%s", msg);
        return -1;
    }
    return 0;
}

void ckpt_read_batch(FtCkptFile *f)
{
    f->batch = true;
    f->batch_err[0] = '\0';
}

int ckpt_read_batch_end(FtCkptFile *f, char *err, size_t errlen)
{
    f->batch = false;
    char msg[CKPT_ERR_MAX];
    snprintf(msg, sizeof msg, "%s", f->batch_err);
    if (ckpt_agree(f->comm, !f->batch_err[0], msg, sizeof msg)) {
        snprintf(err, errlen, "%s", msg);
        return -1;
    }
    return 0;
}

static int read_scalar(FtCkptFile *f, const char *name, CkptDtype dt, void *v, char *err,
                       size_t errlen)
{
    uint64_t none = 0;
    return ckpt_read_tensor(f, name, dt, 0, &none, &none, &none, v, err, errlen);
}

int ckpt_read_i64(FtCkptFile *f, const char *name, long long *v, char *err, size_t errlen)
{
    int64_t x = 0;
    int rc = read_scalar(f, name, CKPT_I64, &x, err, errlen);
    *v = x;
    return rc;
}

int ckpt_read_u64(FtCkptFile *f, const char *name, uint64_t *v, char *err, size_t errlen)
{
    return read_scalar(f, name, CKPT_U64, v, err, errlen);
}

int ckpt_read_f64(FtCkptFile *f, const char *name, double *v, char *err, size_t errlen)
{
    return read_scalar(f, name, CKPT_F64, v, err, errlen);
}

int ckpt_read_text(FtCkptFile *f, const char *name, char **text, char *err, size_t errlen)
{
    *text = NULL;
    ckpt_h5_quiet();
    if (!lookup(f, name, CKPT_TEXT, 0, NULL, err, errlen)) return -1;
    char msg[CKPT_ERR_MAX] = "", h5e[256];
    int ok = read_text_ds(f->file, name, text, h5e, sizeof h5e) == 0;
    if (!ok) snprintf(msg, sizeof msg, "%s: dataset '%s': read failed (HDF5: %s)", f->path, name, h5e);
    if (ckpt_agree(f->comm, ok, msg, sizeof msg)) {
        free(*text);
        *text = NULL;
        snprintf(err, errlen, "%s", msg);
        return -1;
    }
    return 0;
}
