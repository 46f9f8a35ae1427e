/* emu_device.h (ftllm's CUDA emulator, cuda/emu/README.md): CUDA C++'s device side on the
 * host, for the .cu files of cuda/ compiled by g++ (make CUDA=emu): the keywords, threadIdx
 * and friends, __syncthreads, the warp shuffles, the device math ftllm uses, and launches.
 *
 * A launch `k<<<grid, block, smem, stream>>>(args)` reaches here rewritten (Makefile, one sed)
 * as `ftemu::launch("k", grid, block, smem, stream, k)(args)`. It checks the configuration as
 * CUDA does (an error for cudaGetLastError) and every pointer argument (inside a cudaMalloc
 * block, or the launch dies naming the kernel and the argument), then runs the blocks one after
 * another; a block's threads are fibers (emu_runtime.cc) that run until they reach a barrier:
 * __syncthreads waits for every thread of the block still running, a shuffle for every lane of
 * its warp. Threads that wait at different barriers (a barrier in divergent code) or a full-mask
 * shuffle with a lane that has exited end the run with a message: both are undefined on a GPU.
 * __shared__ variables are static: one block runs at a time. Dynamic shared memory (the launch's
 * third argument) is one buffer, refilled with 0xff bytes for every block and ending at an
 * inaccessible page: ftemu::dyn_shared() (cuda_common.cuh's FT_DYN_SHARED). */
#ifndef FTEMU_DEVICE_H
#define FTEMU_DEVICE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

typedef struct ftemu_stream *cudaStream_t; /* as cuda_runtime.h's (this header comes first) */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __noinline__

struct uint3 { unsigned x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

namespace ftemu {

struct Thread {
    void *sp;         /* saved stack pointer while switched out */
    int state;        /* READY, AT_BLOCK, AT_WARP, DONE */
    unsigned mask;    /* the mask of the shuffle it waits at */
    uint3 tid;
    int lane, warp;
    int parity;       /* which of the two exchange buffers its next shuffle uses */
};
enum { READY = 0, AT_BLOCK = 1, AT_WARP = 2, DONE = 3 };

extern Thread *g_cur;
extern uint3 g_bid;
extern dim3 g_bdim, g_gdim;
extern uint64_t g_xchg[2][32][32]; /* the shuffles' exchange words: two sets, per warp, lane */

void yield(int state, unsigned mask);
/* Puts work on a stream (emu_runtime.cc: run when something waits for it; at once on the NULL
 * stream or under FTEMU_STREAMS=eager). */
void enqueue(cudaStream_t s, std::function<void()> work);
void run_grid(const char *name, dim3 grid, dim3 block, size_t smem,
              const std::function<void()> &body);
bool config_ok(const char *name, dim3 grid, dim3 block, size_t smem, const void *kernel);
/* the running block's dynamic shared memory (its launch's bytes; none: the guard page) */
void *dyn_shared(void);
void check_arg(const char *name, int k, const void *p);
[[noreturn]] void shfl_missing_lane(int src_lane, unsigned lanes);

template <typename T> inline void check_args(const char *, int, const T &) {}
template <typename T> inline void check_args(const char *name, int k, T *const &p)
{
    check_arg(name, k, (const void *)p);
}

template <typename... P> struct Launcher {
    const char *name;
    dim3 grid, block;
    size_t smem;
    bool ok;
    cudaStream_t stream;
    void (*k)(P...);
    template <typename... A> void operator()(A &&...a)
    {
        if (!ok) return;
        std::tuple<typename std::decay<P>::type...> args(std::forward<A>(a)...);
        int i = 0;
        std::apply([&](const auto &...v) { (check_args(name, i++, v), ...); }, args);
        const char *nm = name;
        dim3 g = grid, b = block;
        size_t sm = smem;
        void (*kern)(P...) = k;
        enqueue(stream, [nm, g, b, sm, kern, args] {
            run_grid(nm, g, b, sm, [&] { std::apply(kern, args); });
        });
    }
};

template <typename... P>
Launcher<P...> launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      void (*k)(P...))
{
    bool ok = config_ok(name, grid, block, smem, (const void *)k);
    return Launcher<P...>{name, grid, block, smem, ok, stream, k};
}
template <typename... P>
Launcher<P...> launch(const char *name, dim3 grid, dim3 block, void (*k)(P...))
{
    return launch(name, grid, block, 0, (cudaStream_t) nullptr, k);
}
template <typename... P>
Launcher<P...> launch(const char *name, dim3 grid, dim3 block, size_t smem, void (*k)(P...))
{
    return launch(name, grid, block, smem, (cudaStream_t) nullptr, k);
}

/* a shuffle: every lane of the warp puts its word, waits for the others, and reads its source
 * lane's (its own where the source is outside the warp). Shuffles alternate between two sets
 * of words: a lane can only reach the next-but-one shuffle after every lane has arrived at the
 * next one, that is after every lane has read this one, so one barrier per shuffle suffices. */
template <typename T> inline T shfl(unsigned mask, T v, int src_lane, bool in_range)
{
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    Thread *me = g_cur;
    uint64_t(*x)[32] = g_xchg[me->parity];
    me->parity ^= 1;
    uint64_t w = 0;
    memcpy(&w, &v, sizeof v);
    x[me->warp][me->lane] = w;
    yield(AT_WARP, mask);
    T r = v;
    if (in_range) {
        unsigned n = g_bdim.x * g_bdim.y * g_bdim.z, lanes = n - 32u * (unsigned)me->warp;
        if ((unsigned)src_lane >= (lanes < 32 ? lanes : 32)) shfl_missing_lane(src_lane, lanes);
        memcpy(&r, &x[me->warp][src_lane], sizeof r);
    }
    return r;
}

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA, "Matrix Fragments for
 * mma.m16n8k16 with floating point type"), d += a b: every lane of a full warp puts its
 * fragments (a: 4 words of two bf16, low half first; b: 2 words; d: 4 floats), waits for the
 * others, and computes its own four outputs from the whole warp's fragments laid out as the ISA
 * says (g = lane / 4, t = lane % 4):
 *   A (16 x 16): word j of lane (g, t) holds row g + 8 (j & 1), columns 2t + 8 (j >> 1) + {0, 1};
 *   B (16 x 8):  word j holds rows 2t + 8 j + {0, 1} of column g;
 *   D (16 x 8):  d[i] is row g + 8 (i >> 1), column 2t + (i & 1).
 * So a kernel that loads a fragment in another layout gets wrong results here, as on a GPU. The
 * sums run in fp32 in k order (products of bf16 are exact in fp32); a GPU's tensor cores add
 * in their own order, so only tolerances carry over. Exchange words alternate by parity, as
 * the shuffles' (one barrier per operation). */
extern uint32_t g_mma[2][32][32][10];
[[noreturn]] void mma_partial_warp(unsigned lanes);
/* the bf16 in the low (half 0) or high (half 1) 16 bits of w, as a float (exact) */
inline float bf16_word(uint32_t w, int half)
{
    uint32_t u = half ? w & 0xffff0000u : w << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    Thread *me = g_cur;
    unsigned n = g_bdim.x * g_bdim.y * g_bdim.z, lanes = n - 32u * (unsigned)me->warp;
    if (lanes < 32) mma_partial_warp(lanes);
    uint32_t(*x)[10] = g_mma[me->parity][me->warp];
    me->parity ^= 1;
    memcpy(x[me->lane], a, 16);
    memcpy(x[me->lane] + 4, b, 8);
    memcpy(x[me->lane] + 6, d, 16);
    yield(AT_WARP, 0xffffffffu);
    int g = me->lane >> 2, t = me->lane & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        float acc;
        memcpy(&acc, &x[me->lane][6 + i], 4);
        for (int k = 0; k < 16; k++) {
            int la = (row & 7) * 4 + (k & 7) / 2, lb = col * 4 + (k & 7) / 2; /* source lanes */
            float av = bf16_word(x[la][(row >> 3) + 2 * (k >> 3)], k & 1);
            float bv = bf16_word(x[lb][4 + (k >> 3)], k & 1);
            acc += av * bv;
        }
        d[i] = acc;
    }
}

} /* namespace ftemu */

#define threadIdx (::ftemu::g_cur->tid)
#define blockIdx (::ftemu::g_bid)
#define blockDim (::ftemu::g_bdim)
#define gridDim (::ftemu::g_gdim)
#define warpSize 32

static inline void __syncthreads(void) { ftemu::yield(ftemu::AT_BLOCK, 0); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { ftemu::yield(ftemu::AT_WARP, mask); }

template <typename T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32)
{
    int lane = ftemu::g_cur->lane, seg = lane / width * width;
    return ftemu::shfl(mask, v, lane + (int)d, lane + (int)d < seg + width);
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32)
{
    int lane = ftemu::g_cur->lane, seg = lane / width * width;
    return ftemu::shfl(mask, v, lane - (int)d, lane - (int)d >= seg);
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32)
{
    int lane = ftemu::g_cur->lane;
    return ftemu::shfl(mask, v, lane ^ m, (lane ^ m) / width == lane / width);
}
template <typename T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    int lane = ftemu::g_cur->lane;
    return ftemu::shfl(mask, v, lane / width * width + src % width, true);
}

/* one host thread runs every kernel: an atomic is a plain read-modify-write */
template <typename T> inline T atomicAdd(T *p, T v)
{
    T old = *p;
    *p = old + v;
    return old;
}
template <typename T> inline T atomicMax(T *p, T v)
{
    T old = *p;
    *p = old > v ? old : v;
    return old;
}

static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __fdividef(float a, float b) { return a / b; }
template <typename T> inline T __ldg(const T *p) { return *p; }
/* CUDA's device min and max for integers and floats */
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }

#endif
