/* ckpt_util.c: the checkpoint module's shared pieces (see ckpt_impl.h): the layout-independent
 * checksum, HDF5 type mapping and error text, and cross-rank agreement.
 *
 * The checksum is two 32-bit lanes, each a sum of per-element terms keyed by the element's
 * global index, so every rank sums only its own hyperslab and one all-reduce (lane by lane)
 * gives the dataset's checksum whatever the layout; work is split over OpenMP threads by (row,
 * chunk), and integer sums make the result independent of the thread count. 4-byte elements
 * (every tensor a model checkpoints) go through a vectorizable loop of 32-bit arithmetic;
 * 1- and 8-byte elements (texts, scalars) through ckpt_term itself. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_impl.h"
#include "ftllm/log.h"

size_t ckpt_dtype_size(CkptDtype t)
{
    switch (t) {
    case CKPT_F32: case CKPT_I32: case CKPT_U32: return 4;
    case CKPT_F64: case CKPT_I64: case CKPT_U64: return 8;
    case CKPT_U8: case CKPT_TEXT: return 1;
    }
    return 0;
}

const char *ckpt_dtype_name(CkptDtype t)
{
    static const char *names[] = {"f32", "f64", "i32", "i64", "u8", "u32", "u64", "text"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static inline uint64_t load_bits(const unsigned char *p, size_t esize)
{
    switch (esize) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* The lanes of n consecutive 4-byte elements starting at global index i0. Split where the
 * upper half of u = i + 1 changes (every 2^32 elements), so that inside a piece both keys grow
 * by a constant per element and the loop is plain 32-bit vector arithmetic (about 8 GB/s on
 * one core of this VM with AVX2, against about 3 GB/s for fmix64 per element). */
static uint64_t sum_f4(const unsigned char *p, uint64_t n, uint64_t i0)
{
    uint32_t lo = 0, hi = 0;
    while (n) {
        uint64_t room = ((uint64_t)1 << 32) - ((i0 + 1) & 0xFFFFFFFFull);
        uint64_t m = n < room ? n : room;
        uint32_t klo = ckpt_key_lo(i0), khi = ckpt_key_hi(i0);
#pragma omp simd reduction(+ : lo, hi)
        for (uint64_t j = 0; j < m; j++) {
            uint32_t w;
            memcpy(&w, p + 4 * j, 4);
            lo += ckpt_mix_lo(w + (klo + (uint32_t)j * CKPT_KEY_LO_A));
            hi += ckpt_mix_hi(w ^ (khi + (uint32_t)j * CKPT_KEY_HI_A));
        }
        p += 4 * m;
        i0 += m;
        n -= m;
    }
    return (uint64_t)hi << 32 | lo;
}

#define CKPT_CHUNK 65536 /* elements per OpenMP task along the last dimension */

uint64_t ckpt_checksum_slab(const void *data, size_t esize, int ndim, const uint64_t *gshape,
                            const uint64_t *offset, const uint64_t *count)
{
    const unsigned char *p = data;
    if (ndim == 0) return ckpt_term(0, load_bits(p, esize), esize);
    uint64_t rows = 1;
    for (int d = 0; d < ndim - 1; d++) rows *= count[d];
    uint64_t inner = count[ndim - 1];
    if (rows == 0 || inner == 0) return 0;
    uint64_t chunks = (inner + CKPT_CHUNK - 1) / CKPT_CHUNK, tasks = rows * chunks;
    uint32_t lo = 0, hi = 0;
#pragma omp parallel for reduction(+ : lo, hi) schedule(static) if (tasks > 1)
    for (uint64_t t = 0; t < tasks; t++) {
        uint64_t r = t / chunks, c = t % chunks;
        /* global index of (row r of the slab, column 0 of the slab) */
        uint64_t rem = r, gidx = 0, stride = gshape[ndim - 1];
        for (int d = ndim - 2; d >= 0; d--) {
            uint64_t i = rem % count[d];
            rem /= count[d];
            gidx += (offset[d] + i) * stride;
            stride *= gshape[d];
        }
        gidx += offset[ndim - 1];
        uint64_t j0 = c * CKPT_CHUNK, j1 = j0 + CKPT_CHUNK < inner ? j0 + CKPT_CHUNK : inner;
        const unsigned char *row = p + (r * inner) * esize;
        uint64_t s = 0;
        if (esize == 4) {
            s = sum_f4(row + j0 * 4, j1 - j0, gidx + j0);
        } else {
            for (uint64_t j = j0; j < j1; j++)
                s = ckpt_sum_add(s, ckpt_term(gidx + j, load_bits(row + j * esize, esize), esize));
        }
        lo += (uint32_t)s;
        hi += (uint32_t)(s >> 32);
    }
    return (uint64_t)hi << 32 | lo;
}

uint64_t ckpt_checksum_bytes(const void *data, size_t len)
{
    uint64_t n = len, off = 0;
    return ckpt_checksum_slab(data, 1, 1, &n, &off, &n);
}

uint64_t ckpt_checksum_array(const void *data, size_t esize, size_t n)
{
    uint64_t n64 = n, off = 0;
    return ckpt_checksum_slab(data, esize, 1, &n64, &off, &n64);
}

hid_t ckpt_h5_file_type(CkptDtype dt)
{
    switch (dt) {
    case CKPT_F32: return H5T_IEEE_F32LE;
    case CKPT_F64: return H5T_IEEE_F64LE;
    case CKPT_I32: return H5T_STD_I32LE;
    case CKPT_I64: return H5T_STD_I64LE;
    case CKPT_U8: return H5T_STD_U8LE;
    case CKPT_U32: return H5T_STD_U32LE;
    case CKPT_U64: return H5T_STD_U64LE;
    case CKPT_TEXT: break;
    }
    FT_DIE("no HDF5 file type for dtype %d", (int)dt);
}

hid_t ckpt_h5_mem_type(CkptDtype dt)
{
    switch (dt) {
    case CKPT_F32: return H5T_NATIVE_FLOAT;
    case CKPT_F64: return H5T_NATIVE_DOUBLE;
    case CKPT_I32: return H5T_NATIVE_INT32;
    case CKPT_I64: return H5T_NATIVE_INT64;
    case CKPT_U8: return H5T_NATIVE_UINT8;
    case CKPT_U32: return H5T_NATIVE_UINT32;
    case CKPT_U64: return H5T_NATIVE_UINT64;
    case CKPT_TEXT: break;
    }
    FT_DIE("no HDF5 memory type for dtype %d", (int)dt);
}

struct h5_err_walk {
    char *buf;
    size_t len;
};

static herr_t h5_err_cb(unsigned n, const H5E_error2_t *e, void *arg)
{
    struct h5_err_walk *w = arg;
    /* walking downward: the last entry is the innermost, most specific one */
    if (e->desc && e->desc[0]) snprintf(w->buf, w->len, "%s", e->desc);
    return 0;
}

void ckpt_h5_error(char *buf, size_t len)
{
    struct h5_err_walk w = {buf, len};
    snprintf(buf, len, "unknown HDF5 error");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, h5_err_cb, &w);
    H5Eclear2(H5E_DEFAULT);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

void ckpt_h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

void ckpt_wait_req(MPI_Request *req)
{
    for (;;) {
        int done = 0;
        FT_CHECK_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done) break;
        sched_yield();
    }
}

uint32_t *ckpt_sum_lanes(const uint64_t *send, int n)
{
    uint32_t *lanes = calloc(4 * (size_t)n, sizeof *lanes);
    if (!lanes) FT_DIE("out of memory");
    for (int i = 0; i < n; i++) {
        lanes[2 * i] = (uint32_t)send[i];
        lanes[2 * i + 1] = (uint32_t)(send[i] >> 32);
    }
    return lanes;
}

void ckpt_sum_unlane(uint32_t *lanes, uint64_t *recv, int n)
{
    for (int i = 0; i < n; i++)
        recv[i] = (uint64_t)lanes[2 * n + 2 * i + 1] << 32 | lanes[2 * n + 2 * i];
    free(lanes);
}

void ckpt_sum_allreduce(const uint64_t *send, uint64_t *recv, int n, MPI_Comm comm)
{
    uint32_t *lanes = ckpt_sum_lanes(send, n);
    ckpt_allreduce(lanes, lanes + 2 * n, 2 * n, MPI_UINT32_T, MPI_SUM, comm);
    ckpt_sum_unlane(lanes, recv, n);
}

void ckpt_allreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op,
                    MPI_Comm comm)
{
    MPI_Request req;
    FT_CHECK_MPI(MPI_Iallreduce(send, recv, count, t, op, comm, &req));
    ckpt_wait_req(&req);
}

int ckpt_agree(MPI_Comm comm, int ok, char *err, size_t errlen)
{
    int rank, size;
    FT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    FT_CHECK_MPI(MPI_Comm_size(comm, &size));
    int mine = ok ? size : rank, first = 0;
    ckpt_allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == size) return 0;
    char msg[CKPT_ERR_MAX] = "";
    if (rank == first) snprintf(msg, sizeof msg, "%s", err);
    MPI_Request req;
    FT_CHECK_MPI(MPI_Ibcast(msg, sizeof msg, MPI_CHAR, first, comm, &req));
    ckpt_wait_req(&req);
    if (errlen) snprintf(err, errlen, "%s", msg);
    return -1;
}
