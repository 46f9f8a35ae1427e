/* test_ckpt.c: the checkpoint layer: checksum properties (against its written definition, also
 * on slabs that start or end the dataset, where an off-by-one would hide), round trips with resharding (write
 * with one decomposition, read with another, on the world and on one rank), scalars and texts,
 * keep-last-K and leftover temporaries, asynchronous writes, and every kind of bad file (flipped
 * bytes, truncation, another format, a foreign HDF5 file, a dataset missing from or not in the
 * manifest, another model shape, a changed first or last element): each gives its message, and
 * ckpt_find_latest falls back.
 * ft-test: ranks 1 2 3 */
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>

#include "../src/ckpt/ckpt_impl.h"
#include "ft_test.h"
#include "ftllm/ckpt.h"

#define RUN "t"

/* A value of global element i that any rank computes identically. */
static float val(uint64_t i, int salt)
{
    uint64_t x = ckpt_term(i, (uint64_t)salt, 8);
    return (float)((x >> 40) * (1.0 / (1 << 24))) - 0.5f;
}

static void tmpdir(char *buf) /* collective; buf >= 64 bytes */
{
    char name[64] = "";
    if (ft_test_rank() == 0) {
        snprintf(name, sizeof name, "/tmp/ft_ckpt_XXXXXX");
        if (!mkdtemp(name)) MPI_Abort(MPI_COMM_WORLD, 4);
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    memcpy(buf, name, sizeof name);
}

static void rmdir_all(const char *dir) /* collective */
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (ft_test_rank() == 0) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd)) fprintf(stderr, "cannot remove %s\n", dir);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static int exists(const char *dir, long long step, int tmp)
{
    char p[CKPT_PATH_MAX];
    ckpt_name(p, sizeof p, dir, RUN, step, tmp);
    return access(p, F_OK) == 0;
}

enum { R = 13, C = 7 }; /* tensor a: [R, C], rows split unevenly over ranks */

/* Writes checkpoint `step` over comm: a (rows split), b (rank 0 writes all, others count 0),
 * rng (one row per rank), scalars and a text. */
static void write_ckpt(const char *dir, MPI_Comm comm, long long step, int keep, int async,
                       int salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    FtCkptOpts o = {.keep = keep, .async = async};
    char err[CKPT_ERR_MAX];
    FtCkpt *c = ckpt_create(dir, RUN, comm, &o, err, sizeof err);
    assert_non_null(c);
    uint64_t r0 = (uint64_t)R * rank / size, r1 = (uint64_t)R * (rank + 1) / size;
    float *a = malloc(R * C * sizeof *a), b[5 * 6];
    for (uint64_t i = r0 * C; i < r1 * C; i++) a[i - r0 * C] = val(i, salt);
    for (int i = 0; i < 30; i++) b[i] = val(i, salt + 1);
    uint64_t rng[2] = {0x1234567890abcdefull ^ rank, (uint64_t)step * 1000 + rank};
    ckpt_begin(c, step);
    uint64_t ga[2] = {R, C}, oa[2] = {r0, 0}, ca[2] = {r1 - r0, C};
    ckpt_put_tensor(c, "params/a", CKPT_F32, 2, ga, oa, ca, a, "1", "a test matrix");
    uint64_t gb[2] = {5, 6}, ob[2] = {0, 0}, cb[2] = {rank == 0 ? 5 : 0, 6};
    ckpt_put_tensor(c, "optim/m/b", CKPT_F32, 2, gb, ob, cb, b, "1", "replicated: rank 0 writes");
    uint64_t gr[2] = {(uint64_t)size, 2}, orr[2] = {(uint64_t)rank, 0}, cr[2] = {1, 2};
    ckpt_put_tensor(c, "state/rng", CKPT_U64, 2, gr, orr, cr, rng, "", "per-rank RNG state");
    ckpt_put_i64(c, CKPT_DS_STEP, step, "steps", "steps completed");
    ckpt_put_f64(c, "state/lr", 6e-4 * step, "1", "learning rate");
    ckpt_put_u64(c, "state/data_cursor", 42 + (uint64_t)step, "sequences", "next sequence");
    ckpt_put_text(c, CKPT_DS_CONFIG, "[run]\nname = t\n", "resolved deck");
    const char *path = NULL;
    ckpt_commit(c, &path);
    if (async) {
        /* the state may change right after commit: the write uses its copy */
        for (uint64_t i = 0; i < (r1 - r0) * C; i++) a[i] = -1.0f;
        ckpt_wait(c);
    } else {
        assert_non_null(path);
    }
    ckpt_destroy(c);
    free(a);
}

/* Reads a back split by columns over comm and checks every value. */
static int check_a_by_columns(FtCkptFile *f, MPI_Comm comm, int salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    uint64_t c0 = (uint64_t)C * rank / size, c1 = (uint64_t)C * (rank + 1) / size;
    uint64_t g[2] = {R, C}, o[2] = {0, c0}, n[2] = {R, c1 - c0};
    float *buf = malloc((R * C + 1) * sizeof *buf);
    char err[CKPT_ERR_MAX];
    int ok = ckpt_read_tensor(f, "params/a", CKPT_F32, 2, g, o, n, buf, err, sizeof err) == 0;
    for (uint64_t r = 0; ok && r < R; r++)
        for (uint64_t j = c0; j < c1; j++) {
            float want = val(r * C + j, salt), got = buf[r * (c1 - c0) + (j - c0)];
            ok &= memcmp(&want, &got, 4) == 0;
        }
    free(buf);
    return ok;
}

/* The checksum's definition, element by element (the reference twin of the vector loop). */
static uint64_t ref_checksum(const void *data, size_t es, uint64_t g0, uint64_t n)
{
    uint64_t s = 0;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t bits = 0;
        memcpy(&bits, (const char *)data + j * es, es);
        s = ckpt_sum_add(s, ckpt_term(g0 + j, bits, es));
    }
    return s;
}

/* Vector loop vs the reference for 1-, 4- and 8-byte elements, on slabs that start anywhere,
 * including across the 2^32 boundary of the index (where the 4-byte loop splits), and every
 * single-element change (any bit of any element) is seen, for each element size. */
static void test_checksum_reference(void **state)
{
    (void)state;
    enum { N = 300 };
    static unsigned char buf[N * 8];
    for (int i = 0; i < N * 8; i++) buf[i] = (unsigned char)(ckpt_term(i, 77, 8) >> 24);
    const uint64_t starts[] = {0, 5, 65530, ((uint64_t)1 << 32) - 150, ((uint64_t)1 << 32) - 1,
                               ((uint64_t)1 << 33) + 3};
    const size_t sizes[] = {1, 4, 8};
    int ok = 1;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t t = 0; t < sizeof starts / sizeof starts[0]; t++) {
            size_t es = sizes[k];
            uint64_t g = ((uint64_t)1 << 34), off = starts[t], cnt = N;
            uint64_t want = ref_checksum(buf, es, off, N);
            uint64_t got = ckpt_checksum_slab(buf, es, 1, &g, &off, &cnt);
            ok &= got == want;
            /* two pieces split at every 37th element combine to the whole */
            for (uint64_t cut = 1; cut < N; cut += 37) {
                uint64_t o2 = off + cut, c1 = cut, c2 = N - cut;
                uint64_t a = ckpt_checksum_slab(buf, es, 1, &g, &off, &c1);
                uint64_t b = ckpt_checksum_slab(buf + cut * es, es, 1, &g, &o2, &c2);
                ok &= ckpt_sum_add(a, b) == want;
            }
            if (t != 3) continue; /* single-bit flips: one start (across 2^32) is enough */
            for (uint64_t e = 0; e < N; e += 13)
                for (size_t bit = 0; bit < 8 * es; bit++) {
                    buf[e * es + bit / 8] ^= (unsigned char)(1u << (bit % 8));
                    ok &= ckpt_checksum_slab(buf, es, 1, &g, &off, &cnt) != want;
                    buf[e * es + bit / 8] ^= (unsigned char)(1u << (bit % 8));
                }
        }
    /* lanes add without carry: a partial whose lower lane overflows still combines exactly */
    ok &= ckpt_sum_add(0x00000001FFFFFFFFull, 0x0000000000000001ull) == 0x0000000100000000ull;
    assert_all(ok);
}

/* The definition on an n-D slab: every element of the slab in row-major order, its global
 * index computed from its coordinates (independently of the slab code's row/chunk walk). */
static uint64_t ref_checksum_nd(const void *data, size_t es, int ndim, const uint64_t *g,
                                const uint64_t *off, const uint64_t *cnt)
{
    uint64_t n = 1, s = 0, coord[4] = {0};
    for (int d = 0; d < ndim; d++) n *= cnt[d];
    for (uint64_t e = 0; e < n; e++) {
        uint64_t rem = e, gidx = 0;
        for (int d = ndim - 1; d >= 0; d--) coord[d] = rem % cnt[d], rem /= cnt[d];
        for (int d = 0; d < ndim; d++) gidx = gidx * g[d] + off[d] + coord[d];
        uint64_t bits = 0;
        memcpy(&bits, (const char *)data + e * es, es);
        s = ckpt_sum_add(s, ckpt_term(gidx, bits, es));
    }
    return s;
}

/* Slabs that start and that end the dataset (where a loop bound is off by one, if anywhere):
 * the whole dataset, its first and last element alone, its first and last rows and columns, a
 * last dimension longer than one OpenMP chunk; 1-, 2- and 3-D; 1-, 4- and 8-byte elements. Each
 * against the definition, and a change of the first or the last element of the dataset (any
 * byte) changes the whole dataset's checksum. */
static void test_checksum_ends(void **state)
{
    (void)state;
    enum { CH = 65536 }; /* ckpt_util.c's chunk along the last dimension */
    static unsigned char buf[(2 * (CH + 3)) * 8];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(ckpt_term(i, 5, 8) >> 32);
    static const struct {
        int ndim;
        uint64_t g[3];
    } shapes[] = {{1, {1}}, {1, {37}}, {1, {CH + 3}}, {2, {5, 7}}, {2, {2, CH + 3}},
                  {2, {9, 1}}, {3, {3, 4, 5}}};
    const size_t sizes[] = {1, 4, 8};
    int ok = 1, nslab = 0;
    for (size_t k = 0; k < 3; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            size_t es = sizes[k];
            int nd = shapes[s].ndim;
            const uint64_t *g = shapes[s].g;
            /* slabs: whole; first element; last element; first and last "row" (all but the
             * first dimension fixed at its start / end); first and last "column" (the last
             * dimension at its start / end); the last half of the last dimension */
            for (int kind = 0; kind < 7; kind++) {
                uint64_t o[3] = {0}, c[3] = {0};
                for (int d = 0; d < nd; d++) o[d] = 0, c[d] = g[d];
                for (int d = 0; d < nd; d++) {
                    if (kind == 1) c[d] = 1;
                    if (kind == 2) o[d] = g[d] - 1, c[d] = 1;
                    if (kind == 3 && d == 0) c[d] = 1;
                    if (kind == 4 && d == 0) o[d] = g[d] - 1, c[d] = 1;
                    if (kind == 5 && d == nd - 1) c[d] = 1;
                    if (kind == 6 && d == nd - 1) o[d] = g[d] / 2, c[d] = g[d] - g[d] / 2;
                }
                ok &= ckpt_checksum_slab(buf, es, nd, g, o, c) == ref_checksum_nd(buf, es, nd, g, o, c);
                nslab++;
            }
            /* the first and the last element of the dataset, each byte, change the whole's sum */
            uint64_t o[3] = {0}, n = 1;
            for (int d = 0; d < nd; d++) n *= g[d];
            uint64_t whole = ckpt_checksum_slab(buf, es, nd, g, o, g);
            for (int end = 0; end < 2; end++)
                for (size_t b = 0; b < es; b++) {
                    unsigned char *p = buf + (end ? n - 1 : 0) * es + b;
                    *p ^= 0x10;
                    ok &= ckpt_checksum_slab(buf, es, nd, g, o, g) != whole;
                    *p ^= 0x10;
                }
        }
    if (!ok && ft_test_rank() == 0) printf("  a slab at an end of the dataset differs from the definition\n");
    assert_all(ok && nslab == 3 * 7 * 7);
}

static void test_checksum(void **state)
{
    (void)state;
    enum { NR = 6, NC = 10 };
    float m[NR * NC], part[NR * NC];
    for (int i = 0; i < NR * NC; i++) m[i] = val(i, 3);
    uint64_t g[2] = {NR, NC}, o[2] = {0, 0}, n[2] = {NR, NC};
    uint64_t whole = ckpt_checksum_slab(m, 4, 2, g, o, n);
    /* row blocks */
    uint64_t s = 0;
    for (int r0 = 0; r0 < NR; r0 += 4) {
        uint64_t oo[2] = {r0, 0}, nn[2] = {r0 + 4 <= NR ? 4 : NR - r0, NC};
        s = ckpt_sum_add(s, ckpt_checksum_slab(m + r0 * NC, 4, 2, g, oo, nn));
    }
    int ok = s == whole;
    /* column blocks, each copied to a contiguous buffer */
    s = 0;
    for (int c0 = 0; c0 < NC; c0 += 3) {
        int w = c0 + 3 <= NC ? 3 : NC - c0;
        for (int r = 0; r < NR; r++) memcpy(part + r * w, m + r * NC + c0, w * 4);
        uint64_t oo[2] = {0, (uint64_t)c0}, nn[2] = {NR, (uint64_t)w};
        s = ckpt_sum_add(s, ckpt_checksum_slab(part, 4, 2, g, oo, nn));
    }
    ok &= s == whole;
    /* one flipped bit anywhere changes it; so does swapping two elements */
    for (int i = 0; i < NR * NC; i += 7) {
        uint32_t bits;
        memcpy(&bits, &m[i], 4);
        bits ^= 1u << (i % 32);
        memcpy(&part[0], m, sizeof m);
        memcpy(&part[i], &bits, 4);
        ok &= ckpt_checksum_slab(part, 4, 2, g, o, n) != whole;
    }
    memcpy(part, m, sizeof m);
    part[3] = m[17];
    part[17] = m[3];
    ok &= ckpt_checksum_slab(part, 4, 2, g, o, n) != whole;
    /* independent of the thread count (an integer sum) */
    static float big[3 * 70000];
    for (int i = 0; i < 3 * 70000; i++) big[i] = val(i, 9);
    uint64_t gb[2] = {3, 70000}, ob[2] = {0, 0};
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    uint64_t one = ckpt_checksum_slab(big, 4, 2, gb, ob, gb);
    omp_set_num_threads(2);
    ok &= ckpt_checksum_slab(big, 4, 2, gb, ob, gb) == one;
    omp_set_num_threads(nt);
    assert_all(ok);
}

static void test_roundtrip_reshard(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], path[CKPT_PATH_MAX];
    tmpdir(dir);
    write_ckpt(dir, MPI_COMM_WORLD, 7, 2, 0, 11);
    ckpt_path(path, sizeof path, dir, RUN, 7);
    FtCkptFile *f = ckpt_open(path, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    assert_all(ckpt_verify(f, err, sizeof err) == 0);
    assert_all(ckpt_file_step(f) == 7 && !strcmp(ckpt_file_attr(f, "run_name"), RUN));
    assert_all(ckpt_num_datasets(f) == 7);
    const CkptDsInfo *d = ckpt_find_dataset(f, "params/a");
    assert_all(d && d->ndim == 2 && d->shape[0] == R && d->shape[1] == C && d->dtype == CKPT_F32 &&
               !strcmp(d->description, "a test matrix"));
    /* the stored checksums are the documented ones (checkpoint/README.md): the whole tensor's
     * and the scalar's, as one process computes them, whatever layout wrote the file */
    float *whole = malloc(sizeof(float) * R * C);
    for (int i = 0; i < R * C; i++) whole[i] = val(i, 11);
    const CkptDsInfo *dstep = ckpt_find_dataset(f, CKPT_DS_STEP);
    assert_all(d->checksum == ckpt_checksum_array(whole, 4, R * C) && dstep &&
               dstep->checksum == ckpt_term(0, 7, 8));
    free(whole);
    /* another decomposition: columns instead of rows */
    assert_all(check_a_by_columns(f, MPI_COMM_WORLD, 11));
    /* the replicated tensor, whole on every rank */
    float b[30];
    uint64_t gb[2] = {5, 6}, ob[2] = {0, 0};
    assert_all(ckpt_read_tensor(f, "optim/m/b", CKPT_F32, 2, gb, ob, gb, b, err, sizeof err) == 0);
    int ok = 1;
    for (int i = 0; i < 30; i++) ok &= b[i] == val(i, 12);
    assert_all(ok);
    /* per-rank state: this rank's row */
    uint64_t rng[2], gr[2] = {(uint64_t)ft_test_size(), 2}, orr[2] = {(uint64_t)ft_test_rank(), 0},
             cr[2] = {1, 2};
    assert_all(ckpt_read_tensor(f, "state/rng", CKPT_U64, 2, gr, orr, cr, rng, err, sizeof err) == 0);
    assert_all(rng[0] == (0x1234567890abcdefull ^ ft_test_rank()) &&
               rng[1] == 7000 + (uint64_t)ft_test_rank());
    long long step;
    double lr;
    uint64_t cur;
    char *text = NULL;
    assert_all(ckpt_read_i64(f, CKPT_DS_STEP, &step, err, sizeof err) == 0 && step == 7);
    assert_all(ckpt_read_f64(f, "state/lr", &lr, err, sizeof err) == 0 && lr == 6e-4 * 7);
    assert_all(ckpt_read_u64(f, "state/data_cursor", &cur, err, sizeof err) == 0 && cur == 49);
    assert_all(ckpt_read_text(f, CKPT_DS_CONFIG, &text, err, sizeof err) == 0 &&
               !strcmp(text, "[run]\nname = t\n"));
    free(text);
    ckpt_close(f);
    /* a restart on one rank: every rank alone reads the whole tensor */
    f = ckpt_open(path, MPI_COMM_SELF, err, sizeof err);
    ok = f && ckpt_verify(f, err, sizeof err) == 0 && check_a_by_columns(f, MPI_COMM_SELF, 11);
    ckpt_close(f);
    assert_all(ok);
    rmdir_all(dir);
}

/* Written by one rank alone, read by the whole job split by columns. */
static void test_write_one_read_many(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], path[CKPT_PATH_MAX];
    tmpdir(dir);
    if (ft_test_rank() == 0) write_ckpt(dir, MPI_COMM_SELF, 3, 2, 0, 5);
    MPI_Barrier(MPI_COMM_WORLD);
    ckpt_path(path, sizeof path, dir, RUN, 3);
    FtCkptFile *f = ckpt_open(path, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    assert_all(ckpt_verify(f, err, sizeof err) == 0);
    assert_all(check_a_by_columns(f, MPI_COMM_WORLD, 5));
    ckpt_close(f);
    rmdir_all(dir);
}

static void test_async(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], path[CKPT_PATH_MAX];
    tmpdir(dir);
    write_ckpt(dir, MPI_COMM_WORLD, 1, 2, 1, 21);
    ckpt_path(path, sizeof path, dir, RUN, 1);
    FtCkptFile *f = ckpt_open(path, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    assert_all(ckpt_verify(f, err, sizeof err) == 0);
    assert_all(check_a_by_columns(f, MPI_COMM_WORLD, 21));
    ckpt_close(f);
    /* two in a row: the second begin waits for the first write */
    FtCkptOpts o = {.keep = 5, .async = true};
    FtCkpt *c = ckpt_create(dir, RUN, MPI_COMM_WORLD, &o, err, sizeof err);
    for (int s = 2; s <= 3; s++) {
        ckpt_begin(c, s);
        ckpt_put_i64(c, CKPT_DS_STEP, s, "steps", "");
        ckpt_commit(c, NULL);
    }
    ckpt_destroy(c);
    assert_all(exists(dir, 2, 0) && exists(dir, 3, 0) && !exists(dir, 3, 1));
    rmdir_all(dir);
}

/* Only the ranks that hold a slab (and rank 0) open the file, as a data-parallel job's other
 * replicas put every dataset with count 0: the file's writer_ranks attribute counts them (1 of
 * 2, 2 of 3 or 4: rank 0 and the last rank split a's rows), synchronous and asynchronous, and
 * the checkpoint verifies and reads back on every rank. */
static void test_replica_ranks_stay_out(void **state)
{
    (void)state;
    int rank = ft_test_rank(), size = ft_test_size();
    if (size < 2) skip();
    char dir[64], err[CKPT_ERR_MAX], path[CKPT_PATH_MAX];
    tmpdir(dir);
    int last = size - 1, nw = size >= 3 ? 2 : 1; /* writers: rank 0, and the last from 3 ranks */
    bool mine = rank == 0 || (nw == 2 && rank == last);
    uint64_t split = R / 2, r0 = rank == 0 ? 0 : split, n = !mine ? 0 : nw == 1 ? R
                                                   : rank == 0 ? split : R - split;
    float *a = malloc(R * C * sizeof *a), b[5 * 6];
    for (uint64_t i = 0; i < n * C; i++) a[i] = val(r0 * C + i, 7);
    for (int i = 0; i < 30; i++) b[i] = val(i, 8);
    for (int async = 0; async < 2; async++) {
        FtCkptOpts o = {.keep = 5, .async = async};
        FtCkpt *c = ckpt_create(dir, RUN, MPI_COMM_WORLD, &o, err, sizeof err);
        assert_all(c != NULL);
        ckpt_begin(c, 1 + async);
        uint64_t ga[2] = {R, C}, oa[2] = {mine ? r0 : 0, 0}, ca[2] = {n, C};
        ckpt_put_tensor(c, "params/a", CKPT_F32, 2, ga, oa, ca, a, "1", "rows: rank 0, last");
        uint64_t gb[2] = {5, 6}, ob[2] = {0, 0}, cb[2] = {rank == 0 ? 5 : 0, 6};
        ckpt_put_tensor(c, "optim/m/b", CKPT_F32, 2, gb, ob, cb, b, "1", "rank 0 writes");
        ckpt_put_i64(c, CKPT_DS_STEP, 1 + async, "steps", "steps completed");
        ckpt_commit(c, NULL);
        ckpt_wait(c);
        ckpt_destroy(c);
        ckpt_path(path, sizeof path, dir, RUN, 1 + async);
        long long w = -1;
        if (rank == 0) {
            hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
            assert_true(f >= 0);
            hid_t at = H5Aopen(f, "writer_ranks", H5P_DEFAULT);
            assert_true(at >= 0);
            int64_t v = -1;
            assert_true(H5Aread(at, H5T_NATIVE_INT64, &v) >= 0);
            w = v;
            H5Aclose(at);
            H5Fclose(f);
        }
        MPI_Bcast(&w, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        assert_all(w == nw);
        FtCkptFile *f = ckpt_open(path, MPI_COMM_WORLD, err, sizeof err);
        assert_all(f != NULL);
        assert_all(ckpt_verify(f, err, sizeof err) == 0);
        float *back = malloc(R * C * sizeof *back);
        uint64_t g[2] = {R, C}, z[2] = {0, 0};
        assert_all(ckpt_read_tensor(f, "params/a", CKPT_F32, 2, g, z, g, back, err, sizeof err) == 0);
        bool same = true;
        for (uint64_t i = 0; i < R * C; i++) {
            float want = val(i, 7);
            same &= memcmp(&want, &back[i], 4) == 0;
        }
        assert_all(same);
        free(back);
        ckpt_close(f);
    }
    free(a);
    rmdir_all(dir);
}

/* A batch of reads (ckpt_read_batch): the data are the file's (a by columns, whatever the rank
 * count wrote by rows) once its end agrees; a read that fails on one rank (the last: an
 * injected failure) returns 0 inside the batch, and the batch's end fails on every rank, naming
 * the dataset; the same failure outside a batch fails its own read on every rank; a dataset
 * the file lacks fails at once, inside a batch too (every rank sees it alike). */
static void test_read_batch(void **state)
{
    (void)state;
    int rank = ft_test_rank(), size = ft_test_size();
    char dir[64], err[CKPT_ERR_MAX], path[CKPT_PATH_MAX];
    tmpdir(dir);
    write_ckpt(dir, MPI_COMM_WORLD, 1, 2, 0, 31);
    ckpt_path(path, sizeof path, dir, RUN, 1);
    FtCkptFile *f = ckpt_open(path, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    float b[30];
    uint64_t gb[2] = {5, 6}, z[2] = {0, 0};
    long long step = -1;
    for (int fail = 0; fail < 2; fail++) {
        ckpt_read_batch(f);
        if (fail && rank == size - 1) ckpt_test_fail_read(f, "optim/m/b");
        memset(b, 0, sizeof b);
        assert_all(check_a_by_columns(f, MPI_COMM_WORLD, 31) || fail); /* before the end: any */
        assert_all(ckpt_read_tensor(f, "optim/m/b", CKPT_F32, 2, gb, z, gb, b, err, sizeof err) == 0);
        assert_all(ckpt_read_i64(f, CKPT_DS_STEP, &step, err, sizeof err) == 0);
        int rc = ckpt_read_batch_end(f, err, sizeof err);
        if (!fail) {
            assert_all(rc == 0 && step == 1);
            bool same = true;
            for (int i = 0; i < 30; i++) {
                float want = val(i, 32);
                same &= memcmp(&want, &b[i], 4) == 0;
            }
            assert_all(same);
        } else {
            assert_all(rc == -1 && strstr(err, path) && strstr(err, "dataset 'optim/m/b'") &&
                       strstr(err, "read failed") && strstr(err, "injected"));
        }
    }
    /* outside a batch: the read itself fails, on every rank */
    if (rank == size - 1) ckpt_test_fail_read(f, "optim/m/b");
    int rc = ckpt_read_tensor(f, "optim/m/b", CKPT_F32, 2, gb, z, gb, b, err, sizeof err);
    assert_all(rc == -1 && strstr(err, "dataset 'optim/m/b'") && strstr(err, "read failed"));
    /* verifying: a read that fails on one rank fails the verification on every rank, as a
     * read failure (not as the checksum mismatch its missing part would make) */
    if (rank == size - 1) ckpt_test_fail_read(f, "optim/m/b");
    rc = ckpt_verify(f, err, sizeof err);
    assert_all(rc == -1 && strstr(err, "dataset 'optim/m/b'") && strstr(err, "read failed"));
    assert_all(ckpt_verify(f, err, sizeof err) == 0);
    /* a dataset the file lacks: at once, in a batch too; the batch then ends clean */
    ckpt_read_batch(f);
    assert_all(ckpt_read_tensor(f, "optim/m/nope", CKPT_F32, 2, gb, z, gb, b, err, sizeof err) == -1);
    assert_all(strstr(err, "no dataset 'optim/m/nope'") != NULL);
    assert_all(ckpt_read_batch_end(f, err, sizeof err) == 0);
    ckpt_close(f);
    rmdir_all(dir);
}

static void test_keep_and_temporaries(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], path[CKPT_PATH_MAX];
    long long step = 0;
    tmpdir(dir);
    assert_all(ckpt_find_latest(dir, RUN, MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 0);
    for (int s = 1; s <= 4; s++) write_ckpt(dir, MPI_COMM_WORLD, s, 2, 0, s);
    assert_all(!exists(dir, 1, 0) && !exists(dir, 2, 0) && exists(dir, 3, 0) && exists(dir, 4, 0));
    /* a temporary left by a killed write: ignored by find, removed by the next begin */
    if (ft_test_rank() == 0) {
        char p[CKPT_PATH_MAX];
        ckpt_name(p, sizeof p, dir, RUN, 6, 1);
        FILE *fp = fopen(p, "w");
        fputs("partial", fp);
        fclose(fp);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    assert_all(ckpt_find_latest(dir, RUN, MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 1);
    assert_all(step == 4 && strstr(path, "step-00000004.h5"));
    write_ckpt(dir, MPI_COMM_WORLD, 5, 2, 0, 5);
    assert_all(!exists(dir, 6, 1) && exists(dir, 5, 0) && exists(dir, 4, 0) && !exists(dir, 3, 0));
    /* a restart from step 2 supersedes steps 4 and 5 */
    write_ckpt(dir, MPI_COMM_WORLD, 2, 2, 0, 2);
    assert_all(exists(dir, 2, 0) && !exists(dir, 4, 0) && !exists(dir, 5, 0));
    rmdir_all(dir);
}

/* Rank 0 changes one byte inside dataset `name`'s data (a serial HDF5 open to find it). */
static void flip_byte(const char *path, const char *name, long k)
{
    if (ft_test_rank() == 0) {
        hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t ds = H5Dopen2(fid, name, H5P_DEFAULT);
        haddr_t off = H5Dget_offset(ds);
        H5Dclose(ds);
        H5Fclose(fid);
        int fd = open(path, O_RDWR);
        unsigned char b;
        if (pread(fd, &b, 1, off + k) != 1) abort();
        b ^= 0x10;
        if (pwrite(fd, &b, 1, off + k) != 1) abort();
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_corrupt_truncated_foreign(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], path[CKPT_PATH_MAX], p[CKPT_PATH_MAX];
    long long step = 0;
    tmpdir(dir);
    for (int s = 1; s <= 4; s++) write_ckpt(dir, MPI_COMM_WORLD, s, 10, 0, s);
    /* step 4: flipped byte in params/a */
    ckpt_path(p, sizeof p, dir, RUN, 4);
    flip_byte(p, "params/a", 4 * 30 + 2);
    FtCkptFile *f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    assert_all(ckpt_verify(f, err, sizeof err) == -1);
    assert_all(strstr(err, p) && strstr(err, "dataset 'params/a'") && strstr(err, "checksum mismatch"));
    ckpt_close(f);
    assert_all(ckpt_find_latest(dir, RUN, MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 1);
    assert_all(step == 3);
    /* step 3: truncated */
    ckpt_path(p, sizeof p, dir, RUN, 3);
    if (ft_test_rank() == 0) {
        struct stat st;
        stat(p, &st);
        if (truncate(p, st.st_size / 2)) abort();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f == NULL && strstr(err, p) && strstr(err, "truncated or damaged"));
    /* step 2: a file of another format */
    ckpt_path(p, sizeof p, dir, RUN, 2);
    if (ft_test_rank() == 0) {
        FILE *fp = fopen(p, "w");
        fputs("this is not HDF5\n", fp);
        fclose(fp);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f == NULL && strstr(err, p) && strstr(err, "not an HDF5 file"));
    /* the fallback skips 4, 3 and 2 */
    assert_all(ckpt_find_latest(dir, RUN, MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 1);
    assert_all(step == 1);
    /* step 1: an HDF5 file that is not a checkpoint; then nothing verifies */
    ckpt_path(p, sizeof p, dir, RUN, 1);
    if (ft_test_rank() == 0) H5Fclose(H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    MPI_Barrier(MPI_COMM_WORLD);
    f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f == NULL && strstr(err, "not an ftllm checkpoint"));
    assert_all(ckpt_find_latest(dir, RUN, MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == -1);
    assert_all(strstr(err, "none of the 4 checkpoints") != NULL);
    /* ... and says why the newest failed */
    char newest[CKPT_PATH_MAX + 64];
    ckpt_path(p, sizeof p, dir, RUN, 4);
    snprintf(newest, sizeof newest, "(newest: %s: dataset 'params/a': checksum mismatch", p);
    assert_all(strstr(err, newest) != NULL);
    /* a missing file */
    f = ckpt_open("/nonexistent/x.h5", MPI_COMM_WORLD, err, sizeof err);
    assert_all(f == NULL && strstr(err, "No such file"));
    rmdir_all(dir);
}

/* A changed first or last element of a tensor in the file (the last is written by the last
 * rank's slab) is refused: f32 params/a and u64 state/rng, one byte of the element each; so is a
 * changed byte of a scalar (state/step) and of a text (config/resolved, the last dataset). */
static void test_corrupt_first_last(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], p[CKPT_PATH_MAX];
    tmpdir(dir);
    const struct {
        const char *name;
        long byte;
    } cases[] = {{"params/a", 0}, {"params/a", 4L * R * C - 1}, {"state/rng", 0},
                 {"state/rng", 16L * ft_test_size() - 1}, {CKPT_DS_STEP, 7}, {CKPT_DS_CONFIG, 3}};
    for (int i = 0; i < 6; i++) {
        write_ckpt(dir, MPI_COMM_WORLD, i + 1, 10, 0, 3);
        ckpt_path(p, sizeof p, dir, RUN, i + 1);
        flip_byte(p, cases[i].name, cases[i].byte);
        FtCkptFile *f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
        assert_all(f != NULL);
        int rc = ckpt_verify(f, err, sizeof err);
        if (ft_test_rank() == 0)
            printf("  %s byte %ld flipped: %s\n", cases[i].name, cases[i].byte, rc ? err : "verified (wrong)");
        char want[64];
        snprintf(want, sizeof want, "dataset '%s'", cases[i].name);
        assert_all(rc == -1 && strstr(err, want) && strstr(err, "checksum mismatch"));
        ckpt_close(f);
    }
    rmdir_all(dir);
}

static void test_manifest(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], p[CKPT_PATH_MAX];
    tmpdir(dir);
    write_ckpt(dir, MPI_COMM_WORLD, 1, 10, 0, 1);
    write_ckpt(dir, MPI_COMM_WORLD, 2, 10, 0, 2);
    /* a dataset removed */
    ckpt_path(p, sizeof p, dir, RUN, 1);
    if (ft_test_rank() == 0) {
        hid_t fid = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
        H5Ldelete(fid, "state/lr", H5P_DEFAULT);
        H5Fclose(fid);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    FtCkptFile *f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f == NULL && strstr(err, "dataset 'state/lr' listed in the manifest is missing"));
    /* a dataset added */
    ckpt_path(p, sizeof p, dir, RUN, 2);
    if (ft_test_rank() == 0) {
        hid_t fid = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
        hsize_t n = 3;
        hid_t s = H5Screate_simple(1, &n, NULL);
        H5Dclose(H5Dcreate2(fid, "params/extra", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        H5Sclose(s);
        H5Fclose(fid);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f == NULL && strstr(err, "dataset 'params/extra' is not in the manifest"));
    /* a dataset of the manifest replaced by one of an HDF5 class ftllm never writes (an 8-bit
     * bitfield, an enum): refused by name (seed 7's R13: such a class was taken, its type
     * unset) */
    static const char *const classes[] = {"bitfield", "enum"};
    for (int k = 0; k < 2; k++) {
        write_ckpt(dir, MPI_COMM_WORLD, 3 + k, 10, 0, 3 + k);
        ckpt_path(p, sizeof p, dir, RUN, 3 + k);
        if (ft_test_rank() == 0) {
            hid_t fid = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
            H5Ldelete(fid, "state/lr", H5P_DEFAULT);
            hid_t t = k == 0 ? H5Tcopy(H5T_STD_B8LE) : H5Tenum_create(H5T_NATIVE_INT);
            if (k == 1) {
                int v = 0;
                H5Tenum_insert(t, "zero", &v);
            }
            hid_t sp = H5Screate(H5S_SCALAR);
            H5Dclose(H5Dcreate2(fid, "state/lr", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
            H5Sclose(sp), H5Tclose(t);
            H5Fclose(fid);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
        if (f || !strstr(err, "dataset 'state/lr' has a type or shape ftllm does not write"))
            fprintf(stderr, "%s: %s\n", classes[k], f ? "opened" : err);
        assert_all(f == NULL &&
                   strstr(err, "dataset 'state/lr' has a type or shape ftllm does not write"));
    }
    rmdir_all(dir);
}

/* Sets the root attribute format_version of a checkpoint (rank 0, serial HDF5). */
static void set_version(const char *p, int64_t v)
{
    if (ft_test_rank() == 0) {
        hid_t fid = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t a = H5Aopen(fid, "format_version", H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT64, &v);
        H5Aclose(a);
        H5Fclose(fid);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A file of the old checksum's format (1) and one of a newer format are refused by name. */
static void test_format_version(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], p[CKPT_PATH_MAX];
    tmpdir(dir);
    write_ckpt(dir, MPI_COMM_WORLD, 1, 10, 0, 1);
    ckpt_path(p, sizeof p, dir, RUN, 1);
    FtCkptFile *f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    ckpt_close(f);
    set_version(p, 1);
    f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f == NULL && strstr(err, p) && strstr(err, "format version 1, whose checksums"));
    set_version(p, CKPT_FORMAT_VERSION + 1);
    f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f == NULL && strstr(err, "reads up to version"));
    rmdir_all(dir);
}

static void test_mismatch_messages(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], p[CKPT_PATH_MAX];
    tmpdir(dir);
    write_ckpt(dir, MPI_COMM_WORLD, 1, 2, 0, 1);
    ckpt_path(p, sizeof p, dir, RUN, 1);
    FtCkptFile *f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    float buf[R * 8];
    uint64_t g[2] = {R, 8}, o[2] = {0, 0};
    assert_all(ckpt_read_tensor(f, "params/a", CKPT_F32, 2, g, o, g, buf, err, sizeof err) == -1);
    assert_all(strstr(err, "dataset 'params/a' has shape [13,7], the model expects [13,8]") != NULL);
    g[1] = C;
    assert_all(ckpt_read_tensor(f, "params/a", CKPT_F64, 2, g, o, g, buf, err, sizeof err) == -1);
    assert_all(strstr(err, "dataset 'params/a' is f32, expected f64") != NULL);
    assert_all(ckpt_read_tensor(f, "params/zz", CKPT_F32, 2, g, o, g, buf, err, sizeof err) == -1);
    assert_all(strstr(err, "no dataset 'params/zz'") != NULL);
    ckpt_close(f);
    /* writer creation errors */
    FtCkptOpts opts = {.keep = 1};
    assert_all(ckpt_create(dir, "a/b", MPI_COMM_WORLD, &opts, err, sizeof err) == NULL &&
               strstr(err, "cannot name files"));
    /* a run name of letters, digits, '.', '_' and '-' (each class's ends); anything else not */
    static const char *const good[] = {"azAZ09._-", "0", "9", "a", "z", "A", "Z", "run-2.b_1"};
    static const char *const bad[] = {"", "a b", "a:b", "a\\b", "a*", "/", "a@b", "\x7f"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        FtCkpt *w = ckpt_create(dir, good[i], MPI_COMM_WORLD, &opts, err, sizeof err);
        if (!w) fail_msg("run name '%s' refused: %s", good[i], err);
        ckpt_destroy(w);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ckpt_create(dir, bad[i], MPI_COMM_WORLD, &opts, err, sizeof err) ||
            !strstr(err, "cannot name files"))
            fail_msg("run name '%s' taken (or another message: %s)", bad[i], err);
    assert_all(ckpt_create(p, RUN, MPI_COMM_WORLD, &opts, err, sizeof err) == NULL &&
               strstr(err, p));
    rmdir_all(dir);
}

/* ckpt_agree: 0 on every rank when all are ok; else -1 on every rank, each with the message of
 * the lowest failing rank (not its own, not rank 0's): the last rank fails alone, then the last
 * two. */
static void test_agree(void **state)
{
    (void)state;
    int rank = ft_test_rank(), size = ft_test_size();
    char err[CKPT_ERR_MAX], want[64];
    snprintf(err, sizeof err, "rank %d is fine", rank);
    assert_all(ckpt_agree(MPI_COMM_WORLD, 1, err, sizeof err) == 0);
    for (int k = 1; k <= 2 && k <= size; k++) {
        int fail = rank >= size - k;
        snprintf(err, sizeof err, fail ? "rank %d failed" : "rank %d is fine", rank);
        snprintf(want, sizeof want, "rank %d failed", size - k);
        int rc = ckpt_agree(MPI_COMM_WORLD, !fail, err, sizeof err);
        assert_all(rc == -1 && !strcmp(err, want));
    }
}

/* A checkpoint of one i64 scalar, step `step`, of run `run` (collective). */
static void write_scalar_ckpt(const char *dir, const char *run, long long step, int keep)
{
    FtCkptOpts o = {.keep = keep};
    char err[CKPT_ERR_MAX];
    FtCkpt *c = ckpt_create(dir, run, MPI_COMM_WORLD, &o, err, sizeof err);
    assert_non_null(c);
    ckpt_begin(c, step);
    ckpt_put_i64(c, CKPT_DS_STEP, step, "steps", "");
    ckpt_commit(c, NULL);
    ckpt_destroy(c);
}

/* ckpt_find_latest's edges: a folder that does not exist and a run with only a temporary (a
 * first write killed) mean "no checkpoint" (0: start afresh), not an error; two runs whose names
 * have the same length share a folder: each prunes and finds only its own files. */
static void test_find_latest_cases(void **state)
{
    (void)state;
    char dir[64], sub[128], err[CKPT_ERR_MAX], path[CKPT_PATH_MAX], p[CKPT_PATH_MAX];
    long long step = -1;
    tmpdir(dir);
    snprintf(sub, sizeof sub, "%s/missing", dir);
    assert_all(ckpt_find_latest(sub, RUN, MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 0);
    if (ft_test_rank() == 0) {
        ckpt_name(p, sizeof p, dir, "v", 1, 1);
        FILE *fp = fopen(p, "w");
        fputs("partial", fp);
        fclose(fp);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    assert_all(ckpt_find_latest(dir, "v", MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 0);
    /* run "u" at step 9: run "t" has no checkpoint yet; then "t" at steps 1-3 keeping 2: u's
     * file is neither t's newest nor t's future */
    write_scalar_ckpt(dir, "u", 9, 1);
    assert_all(ckpt_find_latest(dir, RUN, MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 0);
    for (int s = 1; s <= 3; s++) write_scalar_ckpt(dir, RUN, s, 2);
    ckpt_path(p, sizeof p, dir, "u", 9);
    assert_all(access(p, F_OK) == 0 && !exists(dir, 1, 0) && exists(dir, 2, 0) && exists(dir, 3, 0));
    assert_all(ckpt_find_latest(dir, RUN, MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 1);
    assert_all(step == 3 && strstr(path, "/t.step-00000003.h5"));
    assert_all(ckpt_find_latest(dir, "u", MPI_COMM_WORLD, path, sizeof path, &step, err, sizeof err) == 1);
    assert_all(step == 9 && !strcmp(path, p));
    rmdir_all(dir);
}

/* Checkpoint file names: RUN.step-DIGITS.h5 (or .h5.tmp, a write not yet committed), at most 18
 * digits; anything else in the folder is not a checkpoint of the run (random mutant R02 of seed
 * 6, tests/mutants/random_sample.md: a name with no digits was taken, its step unset). */
static void test_file_names(void **state)
{
    (void)state;
    long long step = -5;
    int tmp = -5;
    assert_int_equal(ckpt_parse_name("t.step-00000003.h5", "t", &step, &tmp), 1);
    assert_true(step == 3 && tmp == 0);
    assert_int_equal(ckpt_parse_name("t.step-12.h5.tmp", "t", &step, &tmp), 1);
    assert_true(step == 12 && tmp == 1);
    assert_int_equal(ckpt_parse_name("t.step-123456789012345678.h5", "t", &step, &tmp), 1);
    assert_true(step == 123456789012345678LL);
    static const char *bad[] = {"t.step-.h5", "t.step-.h5.tmp", "t.step-3", "t.step-3.h5x",
                                "t.step-3a.h5", "t.step--3.h5", "tt.step-3.h5", "t.stp-3.h5",
                                "u.step-3.h5", "t.step-1234567890123456789.h5", "t.step-3.h5.tmp2",
                                ".step-3.h5", "t"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        step = -5, tmp = -5;
        if (ckpt_parse_name(bad[i], "t", &step, &tmp))
            fail_msg("'%s' taken for a checkpoint of run t (step %lld)", bad[i], step);
        assert_true(step == -5 && tmp == -5);
    }
}

/* Metadata that no longer matches, each refused at open with its own message: no commit marker,
 * a dataset's checksum attribute unlike the manifest's, a changed byte in the manifest, a
 * dataset of another shape in place of the listed one (its checksum attribute copied). */
static void test_tampered_metadata(void **state)
{
    (void)state;
    char dir[64], err[CKPT_ERR_MAX], p[CKPT_PATH_MAX];
    tmpdir(dir);
    const char *want[5] = {NULL, "incomplete checkpoint (no commit marker 'complete')",
                           "dataset 'params/a': its checksum attribute differs from the manifest",
                           "dataset 'manifest': checksum mismatch: the manifest is corrupt",
                           "dataset 'state/rng' is u64 [%d,3] but the manifest says u64 [%d,2]"};
    for (int s = 1; s <= 4; s++) {
        write_ckpt(dir, MPI_COMM_WORLD, s, 10, 0, s);
        ckpt_path(p, sizeof p, dir, RUN, s);
        if (s == 3) {
            flip_byte(p, CKPT_MANIFEST, 0);
        } else if (ft_test_rank() == 0) {
            hid_t fid = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
            uint64_t sum = 0;
            if (s == 1) H5Adelete(fid, "complete");
            if (s == 2) { /* through the open dataset: HDF5 1.10 cannot write an attribute
                           * opened by name ("can't locate open attribute?") */
                hid_t ds = H5Dopen2(fid, "params/a", H5P_DEFAULT);
                hid_t a = H5Aopen(ds, "checksum", H5P_DEFAULT);
                H5Aread(a, H5T_NATIVE_UINT64, &sum);
                sum ^= 1;
                H5Awrite(a, H5T_NATIVE_UINT64, &sum);
                H5Aclose(a);
                H5Dclose(ds);
            }
            if (s == 4) {
                hid_t a = H5Aopen_by_name(fid, "state/rng", "checksum", H5P_DEFAULT, H5P_DEFAULT);
                H5Aread(a, H5T_NATIVE_UINT64, &sum);
                H5Aclose(a);
                H5Ldelete(fid, "state/rng", H5P_DEFAULT);
                hsize_t dims[2] = {(hsize_t)ft_test_size(), 3};
                hid_t sp = H5Screate_simple(2, dims, NULL), s0 = H5Screate(H5S_SCALAR);
                hid_t ds = H5Dcreate2(fid, "state/rng", H5T_STD_U64LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                                      H5P_DEFAULT);
                a = H5Acreate2(ds, "checksum", H5T_STD_U64LE, s0, H5P_DEFAULT, H5P_DEFAULT);
                H5Awrite(a, H5T_NATIVE_UINT64, &sum);
                H5Aclose(a);
                H5Dclose(ds);
                H5Sclose(s0);
                H5Sclose(sp);
            }
            H5Fclose(fid);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        char w[256];
        snprintf(w, sizeof w, want[s], ft_test_size(), ft_test_size());
        FtCkptFile *f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
        if (ft_test_rank() == 0) printf("  %s\n", f ? "opened (wrong)" : err);
        assert_all(f == NULL && strstr(err, p) && strstr(err, w));
        ckpt_close(f);
    }
    rmdir_all(dir);
}

/* A dataset larger than the reader's piece (ckpt_read.c checksums 64 MiB at a time per rank):
 * it verifies, and a changed element in its second piece is found. One rank, where one rank's
 * share is the whole 68 MiB (more ranks would need more disk for the same check). */
static void test_verify_in_pieces(void **state)
{
    (void)state;
    if (ft_test_size() != 1) skip();
    enum { BR = 17, BC = 1 << 20 }; /* rows of 4 MiB: pieces of 16 rows */
    char dir[64], err[CKPT_ERR_MAX], p[CKPT_PATH_MAX];
    tmpdir(dir);
    float *a = malloc(sizeof(float) * BR * BC);
    assert_non_null(a);
    for (size_t i = 0; i < (size_t)BR * BC; i++) a[i] = (float)(i % 4099) - 2049.0f;
    FtCkptOpts o = {.keep = 1};
    FtCkpt *c = ckpt_create(dir, RUN, MPI_COMM_WORLD, &o, err, sizeof err);
    assert_non_null(c);
    ckpt_begin(c, 1);
    uint64_t g[2] = {BR, BC}, off[2] = {0, 0};
    ckpt_put_tensor(c, "params/big", CKPT_F32, 2, g, off, g, a, "1", "two read pieces");
    ckpt_commit(c, NULL);
    ckpt_destroy(c);
    free(a);
    ckpt_path(p, sizeof p, dir, RUN, 1);
    FtCkptFile *f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    int rc = ckpt_verify(f, err, sizeof err);
    if (rc) printf("  %s\n", err);
    assert_all(rc == 0);
    ckpt_close(f);
    flip_byte(p, "params/big", 4L * 16 * BC + 4 * 1000 + 3); /* row 16: the second piece */
    f = ckpt_open(p, MPI_COMM_WORLD, err, sizeof err);
    assert_all(f != NULL);
    assert_all(ckpt_verify(f, err, sizeof err) == -1 && strstr(err, "checksum mismatch"));
    ckpt_close(f);
    rmdir_all(dir);
}

FT_TEST_MAIN(cmocka_unit_test(test_file_names), cmocka_unit_test(test_checksum),
             cmocka_unit_test(test_checksum_reference),
             cmocka_unit_test(test_checksum_ends), cmocka_unit_test(test_corrupt_first_last),
             cmocka_unit_test(test_format_version), cmocka_unit_test(test_roundtrip_reshard),
             cmocka_unit_test(test_write_one_read_many), cmocka_unit_test(test_async),
        cmocka_unit_test(test_replica_ranks_stay_out),
        cmocka_unit_test(test_read_batch),
             cmocka_unit_test(test_keep_and_temporaries),
             cmocka_unit_test(test_corrupt_truncated_foreign), cmocka_unit_test(test_manifest),
             cmocka_unit_test(test_mismatch_messages), cmocka_unit_test(test_agree),
             cmocka_unit_test(test_find_latest_cases), cmocka_unit_test(test_tampered_metadata),
             cmocka_unit_test(test_verify_in_pieces))
