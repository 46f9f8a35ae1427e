/* emu_runtime.cc (ftllm's CUDA emulator, cuda/emu/README.md): the host side of the emulator:
 * the fibers that run a block's threads, the launch checks, device memory, streams and events,
 * and cuBLAS's GEMMs, so that the .cu files of cuda/ run and is tested on a machine without a GPU.
 *
 * Key decisions:
 *  - Streams run late: a kernel, copy, set, GEMM, sort or NCCL operation is queued on its
 *    stream and runs only when something waits for it (cudaStreamSynchronize, an event waited
 *    for by another stream or queried by the host, a copy into pageable host memory, cudaFree),
 *    so work on another stream that is not ordered after it by an event reads what was there
 *    before, as it may on a GPU, and a test sees it; the host reading pinned memory a queued
 *    copy fills, before it waited, reads stale bytes the same way. One host thread runs
 *    everything. FTEMU_STREAMS=eager runs all at once instead (to tell such a bug apart).
 *  - Device memory is host memory from mmap, each block ending at a page whose successor is
 *    PROT_NONE (a kernel that reads past the end of a buffer faults, and the fault handler
 *    names the kernel), filled with 0xff bytes at cudaMalloc (NaN as floats, -1 as ints: what
 *    a kernel reads before anything wrote it shows), and registered: copies, sets, GEMM
 *    operands and kernels' pointer arguments must lie inside one block.
 *  - A block's threads are fibers with stacks of their own, switched by a few instructions
 *    (x86-64 only): a warp's lanes run in turn, each until it waits at a barrier or ends, the
 *    warp's shuffles resolved among them, warp after warp; then the block's __syncthreads.
 *  - A race (a missing barrier) shows only where the order of the threads matters, so the order
 *    can be turned round: FTEMU_ORDER=reverse runs the warps and their lanes last to first
 *    (make test runs the kernel tests both ways). */
#include <cblas.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace ftemu {
Thread *g_cur;
uint3 g_bid;
dim3 g_bdim, g_gdim;
uint64_t g_xchg[2][32][32];
uint32_t g_mma[2][32][32][10];
}

/* ---- errors ---------------------------------------------------------------------------------- */

static cudaError_t g_last = cudaSuccess;
static char g_detail[512];

/* An API call's error: each family (runtime, cuBLAS, NCCL) has a detail buffer that its error
   string shows; report() formats into one and returns the code. */
template <typename R, size_t N>
static R report(R code, char (&detail)[N], const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
template <typename R, size_t N>
static R report(R code, char (&detail)[N], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, N, fmt, ap);
    va_end(ap);
    return code;
}
#define fail(e, ...) (g_last = report((e), g_detail, __VA_ARGS__))

[[noreturn]] static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ftemu (CUDA emulator): ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    static char s[640];
    snprintf(s, sizeof s, "%s%s%s", e == cudaSuccess ? "no error" : "error",
             g_detail[0] && e != cudaSuccess ? ": " : "", e != cudaSuccess ? g_detail : "");
    return s;
}

/* ---- device memory ----------------------------------------------------------------------- */

struct Block {
    size_t bytes;     /* asked for */
    char *map;        /* the mapping: pages, then the guard page */
    size_t map_bytes;
    bool device;      /* cudaMalloc (else cudaMallocHost) */
};
static std::map<uintptr_t, Block> g_mem; /* by start address */
static const size_t PAGE = 4096;

static const Block *find(const void *p, uintptr_t *base)
{
    uintptr_t a = (uintptr_t)p;
    auto it = g_mem.upper_bound(a);
    if (it == g_mem.begin()) return nullptr;
    --it;
    if (a > it->first + it->second.bytes) return nullptr;
    if (base) *base = it->first;
    return &it->second;
}

extern "C" int ftemu_is_device_range(const void *p, size_t bytes)
{
    uintptr_t base;
    const Block *b = find(p, &base);
    return b && b->device && (uintptr_t)p + bytes <= base + b->bytes;
}

static cudaError_t map_block(void **p, size_t bytes, bool device)
{
    if (!p) return fail(cudaErrorInvalidValue, "a NULL pointer for the result");
    size_t body = (bytes + 255) & ~(size_t)255;
    if (!body) body = 256;
    size_t pages = (body + PAGE - 1) / PAGE * PAGE;
    char *m = (char *)mmap(NULL, pages + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
    if (m == MAP_FAILED) {
        *p = NULL;
        return fail(cudaErrorMemoryAllocation, "out of memory for %zu bytes", bytes);
    }
    mprotect(m + pages, PAGE, PROT_NONE);
    char *start = m + pages - body; /* 256-byte aligned, its rounded end at the guard page */
    if (device) memset(start, 0xff, body);
    g_mem[(uintptr_t)start] = Block{bytes, m, pages + PAGE, device};
    *p = start;
    return cudaSuccess;
}

static void flush_all(void);

static cudaError_t unmap_block(void *p, bool device)
{
    if (!p) return cudaSuccess;
    flush_all(); /* cudaFree waits for the device's work */
    auto it = g_mem.find((uintptr_t)p);
    if (it == g_mem.end() || it->second.device != device)
        return fail(cudaErrorInvalidValue, "%s(%p): not a block it allocated",
                    device ? "cudaFree" : "cudaFreeHost", p);
    munmap(it->second.map, it->second.map_bytes);
    g_mem.erase(it);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes) { return map_block(p, bytes, true); }
extern "C" cudaError_t cudaFree(void *p) { return unmap_block(p, true); }
extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes) { return map_block(p, bytes, false); }
extern "C" cudaError_t cudaFreeHost(void *p) { return unmap_block(p, false); }

extern "C" cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p)
{
    memset(a, 0, sizeof *a);
    const Block *b = find(p, NULL);
    a->type = !b ? cudaMemoryTypeUnregistered : b->device ? cudaMemoryTypeDevice
                                                          : cudaMemoryTypeHost;
    a->devicePointer = b && b->device ? (void *)p : NULL;
    a->hostPointer = b && !b->device ? (void *)p : NULL;
    return cudaSuccess;
}

/* where a copy's side must be: on the device (1), on the host (0), either (-1) */
static cudaError_t side_ok(const char *what, const void *p, size_t bytes, int device)
{
    bool dev = ftemu_is_device_range(p, bytes);
    if (device == 1 && !dev)
        return fail(cudaErrorInvalidValue, "%s: %p .. +%zu bytes is not inside one device block",
                    what, p, bytes);
    if (device == 0 && find(p, NULL) && find(p, NULL)->device)
        return fail(cudaErrorInvalidValue, "%s: %p is device memory, the kind says host", what, p);
    return cudaSuccess;
}

/* ---- device, streams, events ------------------------------------------------------------- */

struct ftemu_stream {
    int id;
    std::deque<std::function<void()>> q; /* issued, not yet run */
    long long issued, done;
    bool busy, late; /* late: its work waits until waited for; else it runs when issued */
};
struct ftemu_event { ftemu_stream *s; long long pos; }; /* complete once s has run pos items */
static std::vector<ftemu_stream *> g_streams;

/* FTEMU_STREAMS: lazy (every stream late: a consumer on another stream that does not wait
 * for its producer runs first), mixed (only the first stream made is late, the primary's of
 * the CUDA backend; the others run at once: a consumer there that does not wait for the
 * primary's work runs before it), eager (everything at once, in issue order). */
enum { LAZY, MIXED, EAGER };
static int stream_mode(void)
{
    static int m = -1;
    if (m < 0) {
        const char *v = getenv("FTEMU_STREAMS");
        m = !v || !strcmp(v, "lazy") ? LAZY : !strcmp(v, "mixed") ? MIXED
            : !strcmp(v, "eager") ? EAGER : -2;
        if (m == -2) die("FTEMU_STREAMS=%s: expected lazy (the default), mixed or eager", v);
    }
    return m;
}
static bool eager(void) { return stream_mode() == EAGER; }

/* Runs s's queued work until it has run `upto` items. */
static void advance(ftemu_stream *s, long long upto)
{
    if (s->done >= upto) return;
    if (s->busy)
        die("stream %d waits for its own later work (an event cycle: a deadlock on a GPU)", s->id);
    s->busy = true;
    while (s->done < upto) {
        std::function<void()> w = std::move(s->q.front());
        s->q.pop_front();
        w();
        s->done++;
    }
    s->busy = false;
}

static void flush_all(void)
{
    for (size_t i = 0; i < g_streams.size(); i++) advance(g_streams[i], g_streams[i]->issued);
}

void ftemu::enqueue(cudaStream_t s, std::function<void()> work)
{
    if (!s || eager()) {
        work();
        return;
    }
    s->q.push_back(std::move(work));
    s->issued++;
    if (!s->late) advance(s, s->issued);
}

static bool pinned(const void *p)
{
    const Block *b = find(p, NULL);
    return b && !b->device;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       cudaMemcpyKind kind, cudaStream_t s)
{
    if (!bytes) return cudaSuccess;
    int d = -1, r = -1;
    switch (kind) {
    case cudaMemcpyHostToDevice: d = 1, r = 0; break;
    case cudaMemcpyDeviceToHost: d = 0, r = 1; break;
    case cudaMemcpyDeviceToDevice: d = 1, r = 1; break;
    case cudaMemcpyHostToHost: d = 0, r = 0; break;
    default:
        d = ftemu_is_device_range(dst, bytes), r = ftemu_is_device_range(src, bytes);
        break;
    }
    cudaError_t e = side_ok("cudaMemcpyAsync's destination", dst, bytes, d);
    if (e == cudaSuccess) e = side_ok("cudaMemcpyAsync's source", src, bytes, r);
    if (e != cudaSuccess) return e;
    if (d == 0 && !pinned(dst)) { /* into pageable memory: the call returns when it is done */
        if (s) advance(s, s->issued);
        memmove(dst, src, bytes);
        return cudaSuccess;
    }
    if (r == 0 && !pinned(src)) { /* from pageable memory: read now, written in stream order */
        const char *from = (const char *)src;
        auto copy = std::make_shared<std::vector<char>>(from, from + bytes);
        ftemu::enqueue(s, [dst, copy] { memcpy(dst, copy->data(), copy->size()); });
        return cudaSuccess;
    }
    ftemu::enqueue(s, [dst, src, bytes] { memmove(dst, src, bytes); });
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s)
{
    if (!bytes) return cudaSuccess;
    cudaError_t e = side_ok("cudaMemsetAsync", dst, bytes, 1);
    if (e != cudaSuccess) return e;
    ftemu::enqueue(s, [dst, value, bytes] { memset(dst, value, bytes); });
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaSetDevice(int device)
{
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice, "device %d of 1", device);
}

extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (device != 0) return fail(cudaErrorInvalidDevice, "device %d of 1", device);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "ftllm CUDA emulator (host fibers)");
    memcpy(prop->uuid.bytes, "ftllm-cuda-emu\0\0", 16);
    prop->totalGlobalMem = (size_t)16 << 30;
    prop->major = 9, prop->minor = 0, prop->multiProcessorCount = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    static int next;
    ++next;
    *s = new ftemu_stream{next, {}, 0, 0, false, stream_mode() == LAZY || next == 1};
    g_streams.push_back(*s);
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s) return fail(cudaErrorInvalidValue, "cudaStreamDestroy: no stream");
    advance(s, s->issued);
    for (size_t i = 0; i < g_streams.size(); i++)
        if (g_streams[i] == s) g_streams.erase(g_streams.begin() + (long)i);
    delete s;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s) advance(s, s->issued);
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    (void)flags;
    if (!e) return fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: no event");
    ftemu_stream *es = e->s;
    long long pos = e->pos;
    ftemu::enqueue(s, [es, pos] {
        if (es) advance(es, pos);
    });
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = new ftemu_event{nullptr, 0};
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!e) return fail(cudaErrorInvalidValue, "cudaEventRecord: no event");
    e->s = eager() || (s && !s->late) ? nullptr : s; /* a stream that is not late is done */
    e->pos = s ? s->issued : 0;
    return cudaSuccess;
}
/* Not ready the first time it is asked about unfinished work (which then runs): the caller's
 * polling loop is exercised, and makes progress. */
extern "C" cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!e) return fail(cudaErrorInvalidValue, "cudaEventQuery: no event");
    if (!e->s || e->s->done >= e->pos) return cudaSuccess;
    advance(e->s, e->pos);
    return cudaErrorNotReady;
}

/* ---- fibers ------------------------------------------------------------------------------ */

namespace ftemu {

static const size_t STACK = 64 << 10;
static std::vector<Thread> g_th;
static char *g_stacks;        /* per thread: a guard page, then STACK bytes */
static size_t g_nstacks;
static void *g_sched_sp;
static const std::function<void()> *g_body;
static const char *g_kernel = "";

extern "C" void ftemu_switch(void **save, void *to);
#if defined(__x86_64__)
/* saves the callee-saved registers on the current stack, swaps stacks, restores them */
__asm__(".text\n"
        ".globl ftemu_switch\n"
        ".type ftemu_switch,@function\n"
        "ftemu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size ftemu_switch,.-ftemu_switch\n");
#else
#error "the CUDA emulator's fibers are written for x86-64"
#endif

[[noreturn]] static void fiber_main(void)
{
    (*g_body)();
    g_cur->state = DONE;
    ftemu_switch(&g_cur->sp, g_sched_sp);
    __builtin_unreachable();
}

static void fiber_start(Thread *t, size_t i)
{
    char *top = g_stacks + i * (STACK + PAGE) + PAGE + STACK; /* 16-byte aligned */
    void **sp = (void **)top;
    *--sp = NULL;                   /* fiber_main's return address: it never returns */
    *--sp = (void *)fiber_main;     /* where ftemu_switch's ret goes */
    for (int r = 0; r < 6; r++) *--sp = NULL;
    t->sp = sp;
    t->state = READY;
    t->parity = 0;
}

void yield(int state, unsigned mask)
{
    g_cur->state = state;
    g_cur->mask = mask;
    ftemu_switch(&g_cur->sp, g_sched_sp);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "ftemu (CUDA emulator): kernel %s touched %p outside device memory (signal "
                     "%d), block (%u,%u,%u) thread (%u,%u,%u)\n",
                     g_kernel, si->si_addr, sig, g_bid.x, g_bid.y, g_bid.z,
                     g_cur ? g_cur->tid.x : 0, g_cur ? g_cur->tid.y : 0, g_cur ? g_cur->tid.z : 0);
    if (write(2, msg, (size_t)n) < 0) {}
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    raise(sig);
}

/* Dynamic shared memory: a kernel may take more than 48 KiB only up to what
 * cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) allowed it, and that at most
 * the device's opt-in limit (an H100's or H200's 227 KiB) less 1 KiB for its static __shared__
 * variables (a cap of this emulator: CUDA counts the kernel's own). */
static const int SMEM_OPTIN = 227 * 1024;
static std::map<const void *, int> g_smem_max; /* by kernel */

bool config_ok(const char *name, dim3 g, dim3 b, size_t smem, const void *kernel)
{
    unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    auto it = g_smem_max.find(kernel);
    size_t smem_max = it != g_smem_max.end() && it->second > 48 * 1024 ? (size_t)it->second
                                                                        : 48 * 1024;
    if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z || nt > 1024 || b.z > 64 ||
        g.x > 2147483647u || g.y > 65535 || g.z > 65535 || smem > smem_max) {
        fail(cudaErrorInvalidConfiguration,
             "kernel %s launched with grid (%u,%u,%u), block (%u,%u,%u), %zu bytes of dynamic "
             "shared memory (at most %zu)", name, g.x, g.y, g.z, b.x, b.y, b.z, smem, smem_max);
        return false;
    }
    return true;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (device != 0) return fail(cudaErrorInvalidDevice, "device %d of 1", device);
    if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin)
        return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d", (int)attr);
    *value = SMEM_OPTIN;
    return cudaSuccess;
}

extern "C" cudaError_t ftemu_func_set_attribute(const void *kernel, enum cudaFuncAttribute attr,
                                                int value)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %d", (int)attr);
    if (value < 0 || value > SMEM_OPTIN - 1024)
        return fail(cudaErrorInvalidValue,
                    "cudaFuncSetAttribute: %d bytes of dynamic shared memory (at most %d)", value,
                    SMEM_OPTIN - 1024);
    g_smem_max[kernel] = value;
    return cudaSuccess;
}

void check_arg(const char *name, int k, const void *p)
{
    if (!p || ftemu_is_device_range(p, 0)) return;
    die("kernel %s: argument %d (%p) is not device memory (a host pointer, or past a cudaMalloc "
        "block)", name, k, p);
}

/* Runs one block: each warp's lanes until every one waits at __syncthreads or has ended (its
 * shuffles and __syncwarps resolved among its lanes), then the block's barrier. */
static bool reverse_order(void)
{
    static int rev = -1;
    if (rev < 0) {
        const char *e = getenv("FTEMU_ORDER");
        rev = e && !strcmp(e, "reverse");
        if (e && !rev && strcmp(e, "forward"))
            die("FTEMU_ORDER=%s: expected forward (the default) or reverse", e);
    }
    return rev;
}

static void run_block(const char *name, size_t n)
{
    size_t nw = (n + 31) / 32;
    bool rev = reverse_order();
    for (;;) {
        size_t at_block = 0, done = 0;
        for (size_t wi = 0; wi < nw; wi++) {
            size_t w = rev ? nw - 1 - wi : wi;
            size_t lo = w * 32, hi = lo + 32 < n ? lo + 32 : n;
            for (;;) {
                size_t at = 0, gone = 0;
                for (size_t ii = lo; ii < hi; ii++) {
                    size_t i = rev ? hi - 1 - (ii - lo) : ii;
                    Thread *t = &g_th[i];
                    if (t->state == READY) {
                        g_cur = t;
                        ftemu_switch(&g_sched_sp, t->sp);
                    }
                    at += t->state == AT_WARP, gone += t->state == DONE;
                }
                if (!at) break;
                if (at + gone != hi - lo)
                    die("kernel %s, block (%u,%u,%u), warp %zu: %zu lane(s) at a warp shuffle or "
                        "__syncwarp, %zu at __syncthreads: a barrier in divergent code", name,
                        g_bid.x, g_bid.y, g_bid.z, w, at, hi - lo - at - gone);
                for (size_t i = lo; i < hi; i++)
                    if (g_th[i].state == AT_WARP) {
                        if (gone && g_th[i].mask == 0xffffffffu)
                            die("kernel %s, block (%u,%u,%u): a full-mask warp shuffle or "
                                "__syncwarp in warp %zu, where %zu lane(s) have exited", name,
                                g_bid.x, g_bid.y, g_bid.z, w, gone);
                        g_th[i].state = READY;
                    }
            }
            for (size_t i = lo; i < hi; i++)
                at_block += g_th[i].state == AT_BLOCK, done += g_th[i].state == DONE;
        }
        g_cur = nullptr;
        if (done == n) return;
        for (size_t i = 0; i < n; i++)
            if (g_th[i].state == AT_BLOCK) g_th[i].state = READY;
    }
}

void shfl_missing_lane(int src_lane, unsigned lanes)
{
    die("kernel %s, block (%u,%u,%u), warp %d: a shuffle reads lane %d of a warp of %u lanes (a "
        "block whose size is not a multiple of 32: that lane does not exist)", g_kernel, g_bid.x,
        g_bid.y, g_bid.z, g_cur ? g_cur->warp : -1, src_lane, lanes);
}

void mma_partial_warp(unsigned lanes)
{
    die("kernel %s, block (%u,%u,%u), warp %d: an mma in a warp of %u lanes (it needs all 32)",
        g_kernel, g_bid.x, g_bid.y, g_bid.z, g_cur ? g_cur->warp : -1, lanes);
}

/* launches run so far whose kernel's name starts with prefix (ftemu_launch_count, emu_api.h) */
static std::map<std::string, long> g_launches;

/* The dynamic shared memory of the running block: a mapping whose last page is inaccessible,
 * the buffer's end (rounded up to 16 bytes) against it, so a kernel that reads or writes past its
 * launch's bytes faults; refilled with 0xff for every block (a GPU's is undefined at a block's
 * start, and NaN bytes show a read before a write). */
static char *g_dyn_map, *g_dyn;
static size_t g_dyn_map_bytes;

void *dyn_shared(void) { return g_dyn; }

static void dyn_prepare(size_t smem)
{
    size_t body = (smem + 15) & ~(size_t)15, pages = (body + PAGE - 1) / PAGE * PAGE;
    if (pages + PAGE > g_dyn_map_bytes) {
        if (g_dyn_map) munmap(g_dyn_map, g_dyn_map_bytes);
        g_dyn_map = (char *)mmap(NULL, pages + PAGE, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (g_dyn_map == MAP_FAILED) die("no memory for %zu bytes of shared memory", smem);
        g_dyn_map_bytes = pages + PAGE;
        mprotect(g_dyn_map + pages, PAGE, PROT_NONE);
    }
    g_dyn = g_dyn_map + g_dyn_map_bytes - PAGE - body;
}

void run_grid(const char *name, dim3 grid, dim3 block, size_t smem,
              const std::function<void()> &body)
{
    g_launches[name]++;
    dyn_prepare(smem);
    size_t n = (size_t)block.x * block.y * block.z;
    if (n > g_nstacks) {
        if (g_stacks) munmap(g_stacks, g_nstacks * (STACK + PAGE));
        g_stacks = (char *)mmap(NULL, n * (STACK + PAGE), PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (g_stacks == MAP_FAILED) die("no memory for %zu fiber stacks", n);
        for (size_t i = 0; i < n; i++) mprotect(g_stacks + i * (STACK + PAGE), PAGE, PROT_NONE);
        g_nstacks = n;
        static char alt[1 << 16];
        stack_t ss = {};
        ss.ss_sp = alt, ss.ss_size = sizeof alt;
        sigaltstack(&ss, NULL);
        struct sigaction sa = {};
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
    }
    g_th.resize(n);
    for (size_t i = 0; i < n; i++) {
        Thread &t = g_th[i];
        t.tid = uint3{(unsigned)(i % block.x), (unsigned)(i / block.x % block.y),
                      (unsigned)(i / ((size_t)block.x * block.y))};
        t.lane = (int)(i % 32), t.warp = (int)(i / 32), t.parity = 0;
    }
    const std::function<void()> *saved_body = g_body;
    const char *saved_kernel = g_kernel;
    g_body = &body, g_kernel = name, g_gdim = grid, g_bdim = block;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                g_bid = uint3{bx, by, bz};
                memset(g_dyn, 0xff, (smem + 15) & ~(size_t)15);
                for (size_t i = 0; i < n; i++) fiber_start(&g_th[i], i);
                run_block(name, n);
            }
    g_body = saved_body, g_kernel = saved_kernel;
}

} /* namespace ftemu */

extern "C" long ftemu_launch_count(const char *prefix)
{
    long n = 0;
    for (const auto &kv : ftemu::g_launches)
        if (!kv.first.compare(0, strlen(prefix), prefix)) n += kv.second;
    return n;
}

/* ---- cuBLAS ------------------------------------------------------------------------------ */

struct ftemu_blas { cudaStream_t stream; void *ws; size_t ws_bytes; int math; };

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = new ftemu_blas{};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t mode)
{
    (void)h, (void)mode;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (bytes && !ftemu_is_device_range(ws, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
    h->ws = ws, h->ws_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

static char g_blas_detail[512];
extern "C" const char *cublasGetStatusString(cublasStatus_t s)
{
    static char msg[640];
    snprintf(msg, sizeof msg, "%s%s%s",
             s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
             : s == CUBLAS_STATUS_INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE"
             : s == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                                : "CUBLAS_STATUS_INTERNAL_ERROR",
             g_blas_detail[0] ? ": " : "", g_blas_detail);
    return msg;
}

#define blas_fail(r, ...) report((r), g_blas_detail, __VA_ARGS__)

/* Elements a column-major (rows x cols, ld) operand spans, batch b of stride s. */
static size_t span(int rows, int cols, int ld, long long s, int batch)
{
    if (!rows || !cols) return 0;
    return (size_t)((long long)(cols - 1) * ld + rows + (long long)(batch - 1) * s);
}

/* One (batched) GEMM: checks as cuBLAS does, then every operand inside one device block, then
 * C = alpha op(A) op(B) + beta C on the host (operands widened to fp32). */
static cublasStatus_t gemm(const char *fn, cublasHandle_t h, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n, int k, float alpha, const void *A,
                           cudaDataType at, int lda, long long sa, const void *B, cudaDataType bt,
                           int ldb, long long sb, float beta, float *C, int ldc, long long sc,
                           int batch)
{
    g_blas_detail[0] = 0;
    if (!h) return blas_fail(CUBLAS_STATUS_NOT_INITIALIZED, "%s: no handle", fn);
    if (ta == CUBLAS_OP_C || tb == CUBLAS_OP_C)
        return blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: OP_C", fn);
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (ar > 1 ? ar : 1) ||
        ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1))
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                         "%s: m %d n %d k %d, lda %d (at least %d), ldb %d (at least %d), ldc %d "
                         "(at least %d), batch %d", fn, m, n, k, lda, ar, ldb, br, ldc, m, batch);
    if (!m || !n || !batch) return CUBLAS_STATUS_SUCCESS;
    size_t ea = at == CUDA_R_16BF ? 2 : 4, eb = bt == CUDA_R_16BF ? 2 : 4;
    size_t na = span(ar, ac, lda, sa, batch), nb = span(br, bc, ldb, sb, batch),
           nc = span(m, n, ldc, sc, batch);
    if ((k && (!ftemu_is_device_range(A, na * ea) || !ftemu_is_device_range(B, nb * eb))) ||
        !ftemu_is_device_range(C, nc * 4))
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                         "%s: an operand outside its device block (A %p: %zu elements, B %p: "
                         "%zu, C %p: %zu)", fn, A, na, B, nb, (void *)C, nc);
    ftemu::enqueue(h->stream, [=] {
    std::vector<float> a, b;
    for (int i = 0; i < batch; i++) {
        float *c = C + (long long)i * sc;
        if (beta == 0.0f) /* cuBLAS never reads C then: a NaN there does not count */
            for (int j = 0; j < n; j++) memset(c + (size_t)j * ldc, 0, sizeof(float) * m);
        if (!k) {
            if (beta != 0.0f)
                for (int j = 0; j < n; j++)
                    for (int r = 0; r < m; r++) c[(size_t)j * ldc + r] *= beta;
            continue;
        }
        const float *pa = (const float *)A + (long long)i * sa;
        const float *pb = (const float *)B + (long long)i * sb;
        if (at == CUDA_R_16BF) { /* widen to fp32 (exact), keeping the layout */
            size_t cnt = span(ar, ac, lda, 0, 1);
            a.resize(cnt);
            const __nv_bfloat16 *src = (const __nv_bfloat16 *)A + (long long)i * sa;
            for (size_t e = 0; e < cnt; e++) a[e] = __bfloat162float(src[e]);
            pa = a.data();
        }
        if (bt == CUDA_R_16BF) {
            size_t cnt = span(br, bc, ldb, 0, 1);
            b.resize(cnt);
            const __nv_bfloat16 *src = (const __nv_bfloat16 *)B + (long long)i * sb;
            for (size_t e = 0; e < cnt; e++) b[e] = __bfloat162float(src[e]);
            pb = b.data();
        }
        cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                    tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, alpha, pa, lda, pb,
                    ldb, beta, c, ldc);
    }
    }); /* queued on the handle's stream, alpha and beta read at the call (host pointer mode) */
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta,
                                      cublasOperation_t tb, int m, int n, int k,
                                      const float *alpha, const float *A, int lda,
                                      const float *B, int ldb, const float *beta, float *C, int ldc)
{
    return gemm("cublasSgemm", h, ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F,
                ldb, 0, *beta, C, ldc, 0, 1);
}

extern "C" cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                                    cublasOperation_t tb, int m, int n, int k,
                                                    const float *alpha, const float *A, int lda,
                                                    long long sa, const float *B, int ldb,
                                                    long long sb, const float *beta, float *C,
                                                    int ldc, long long sc, int batch)
{
    return gemm("cublasSgemmStridedBatched", h, ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, sa,
                B, CUDA_R_32F, ldb, sb, *beta, C, ldc, sc, batch);
}

static cublasStatus_t ex_types(const char *fn, cudaDataType at, cudaDataType bt, cudaDataType ct,
                               cublasComputeType_t compute)
{
    if (at != bt || (at != CUDA_R_16BF && at != CUDA_R_32F) || ct != CUDA_R_32F ||
        (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC))
        return blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: types %d %d -> %d, compute %d", fn,
                         at, bt, ct, compute);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                                       cublasOperation_t tb, int m, int n, int k,
                                       const void *alpha, const void *A, cudaDataType at, int lda,
                                       const void *B, cudaDataType bt, int ldb, const void *beta,
                                       void *C, cudaDataType ct, int ldc,
                                       cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)algo;
    cublasStatus_t s = ex_types("cublasGemmEx", at, bt, ct, compute);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    return gemm("cublasGemmEx", h, ta, tb, m, n, k, *(const float *)alpha, A, at, lda, 0, B, bt,
                ldb, 0, *(const float *)beta, (float *)C, ldc, 0, 1);
}

extern "C" cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
    cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
    long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)algo;
    cublasStatus_t s = ex_types("cublasGemmStridedBatchedEx", at, bt, ct, compute);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    return gemm("cublasGemmStridedBatchedEx", h, ta, tb, m, n, k, *(const float *)alpha, A, at,
                lda, sa, B, bt, ldb, sb, *(const float *)beta, (float *)C, ldc, sc, batch);
}

/* ---- cuBLASLt: one GEMM with fp32 output, the bias in its epilogue --------------------------- */

#include "cublasLt.h"

struct ftemu_lt { int open; };
struct ftemu_lt_desc {
    cublasComputeType_t compute;
    cudaDataType scale;
    cublasOperation_t ta, tb;
    int epilogue;
    const float *bias;
    cudaDataType bias_type;
};
struct ftemu_lt_layout { cudaDataType type; uint64_t rows, cols; int64_t ld; };
struct ftemu_lt_pref { size_t ws; };

extern "C" cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = new ftemu_lt{1};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
                                                   cublasComputeType_t compute,
                                                   cudaDataType_t scale)
{
    *d = new ftemu_lt_desc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT,
                           nullptr, CUDA_R_32F};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                                         cublasLtMatmulDescAttributes_t attr,
                                                         const void *buf, size_t bytes)
{
    g_blas_detail[0] = 0;
    size_t want = attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER ? sizeof(void *) : 4;
    if (!d || !buf || bytes != want)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                         "cublasLtMatmulDescSetAttribute: attribute %d of %zu bytes, want %zu",
                         (int)attr, bytes, want);
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: memcpy(&d->ta, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: memcpy(&d->tb, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: memcpy(&d->epilogue, buf, 4); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: memcpy(&d->bias, buf, sizeof(void *)); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: memcpy(&d->bias_type, buf, 4); break;
    default:
        return blas_fail(CUBLAS_STATUS_NOT_SUPPORTED,
                         "cublasLtMatmulDescSetAttribute: attribute %d", (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
                                                     uint64_t rows, uint64_t cols, int64_t ld)
{
    *l = new ftemu_lt_layout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = new ftemu_lt_pref{0};
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t bytes)
{
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof(uint64_t)) {
        uint64_t v;
        memcpy(&v, buf, sizeof v);
        p->ws = (size_t)v;
    } else if (bytes != sizeof(uint32_t)) {
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE,
                         "cublasLtMatmulPreferenceSetAttribute: attribute %d of %zu bytes",
                         (int)attr, bytes);
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* what both calls check: the types ftllm uses (A and B bf16 or fp32 alike, C and D fp32, fp32
 * compute and scale, bias fp32), and shapes that agree: op(A) m x k, op(B) k x n, C = D m x n */
static cublasStatus_t lt_check(const char *fn, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                               cublasLtMatrixLayout_t dd)
{
    g_blas_detail[0] = 0;
    if (!d || !a || !b || !c || !dd) return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: a NULL descriptor", fn);
    cublasStatus_t s = ex_types(fn, a->type, b->type, c->type, d->compute);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (dd->type != CUDA_R_32F || d->scale != CUDA_R_32F ||
        (d->epilogue == CUBLASLT_EPILOGUE_BIAS && d->bias_type != CUDA_R_32F) ||
        (d->epilogue != CUBLASLT_EPILOGUE_BIAS && d->epilogue != CUBLASLT_EPILOGUE_DEFAULT))
        return blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: D type %d, scale %d, epilogue %d, "
                         "bias type %d", fn, dd->type, d->scale, d->epilogue, d->bias_type);
    uint64_t m = d->ta == CUBLAS_OP_N ? a->rows : a->cols, k = d->ta == CUBLAS_OP_N ? a->cols : a->rows;
    uint64_t kb = d->tb == CUBLAS_OP_N ? b->rows : b->cols, n = d->tb == CUBLAS_OP_N ? b->cols : b->rows;
    if (k != kb || c->rows != m || c->cols != n || dd->rows != m || dd->cols != n ||
        c->ld != dd->ld || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: op(A) %llu x %llu, op(B) %llu x %llu, "
                         "C %llu x %llu (ld %lld), D %llu x %llu (ld %lld)", fn,
                         (unsigned long long)m, (unsigned long long)k, (unsigned long long)kb,
                         (unsigned long long)n, (unsigned long long)c->rows,
                         (unsigned long long)c->cols, (long long)c->ld,
                         (unsigned long long)dd->rows, (unsigned long long)dd->cols,
                         (long long)dd->ld);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p,
    int requested, cublasLtMatmulHeuristicResult_t *results, int *returned)
{
    if (!h || !p || requested < 1 || !results || !returned)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulAlgoGetHeuristic: arguments");
    *returned = 0;
    cublasStatus_t s = lt_check("cublasLtMatmulAlgoGetHeuristic", d, a, b, c, dd);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = 0x66746c74; /* the emulator's one algorithm */
    results[0].state = CUBLAS_STATUS_SUCCESS;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* D = alpha op(A) op(B) + beta C (C and D one matrix), then + bias down each column: the GEMM
 * of cublas_v2.h's calls, then the epilogue, both queued on the stream */
extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                         const void *alpha, const void *A,
                                         cublasLtMatrixLayout_t a, const void *B,
                                         cublasLtMatrixLayout_t b, const void *beta, const void *C,
                                         cublasLtMatrixLayout_t c, void *D,
                                         cublasLtMatrixLayout_t dd,
                                         const cublasLtMatmulAlgo_t *algo, void *ws,
                                         size_t ws_bytes, cudaStream_t stream)
{
    const char *fn = "cublasLtMatmul";
    if (!h || !alpha || !beta) return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: arguments", fn);
    cublasStatus_t s = lt_check(fn, d, a, b, c, dd);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (!algo || algo->data[0] != 0x66746c74)
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: an algorithm the heuristic did not give", fn);
    if (C != D) return blas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "%s: C and D apart", fn);
    if (ws_bytes && !ftemu_is_device_range(ws, ws_bytes))
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: a workspace outside device memory", fn);
    int m = (int)dd->rows, n = (int)dd->cols, k = (int)(d->ta == CUBLAS_OP_N ? a->cols : a->rows);
    bool bias = d->epilogue == CUBLASLT_EPILOGUE_BIAS;
    if (bias && (!d->bias || !ftemu_is_device_range(d->bias, sizeof(float) * (size_t)m)))
        return blas_fail(CUBLAS_STATUS_INVALID_VALUE, "%s: a bias outside device memory (%p, %d "
                         "floats)", fn, (const void *)d->bias, m);
    ftemu_blas tmp{stream, ws, ws_bytes, 0};
    ftemu::g_launches[fn]++;
    s = gemm(fn, &tmp, d->ta, d->tb, m, n, k, *(const float *)alpha, A, a->type, (int)a->ld, 0, B,
             b->type, (int)b->ld, 0, *(const float *)beta, (float *)D, (int)dd->ld, 0, 1);
    if (s != CUBLAS_STATUS_SUCCESS || !bias) return s;
    const float *bv = d->bias;
    float *out = (float *)D;
    long long ld = dd->ld;
    ftemu::enqueue(stream, [=] {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) out[j * ld + i] += bv[i];
    });
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- NCCL, one rank ---------------------------------------------------------------------- */

#include "nccl.h"

struct ftemu_nccl_comm { int nranks, rank; };
struct P2p { bool send; void *buf; size_t bytes; cudaStream_t st; };
static int g_group;            /* ncclGroupStart depth */
static std::vector<P2p> g_p2p; /* a group's sends and receives, in call order */
static char g_nccl_detail[256];

#define nccl_fail(r, ...) report((r), g_nccl_detail, __VA_ARGS__)

extern "C" const char *ncclGetErrorString(ncclResult_t r)
{
    static char s[320];
    snprintf(s, sizeof s, "%s (ftemu: %s)", r == ncclSuccess ? "no error" : "NCCL error",
             g_nccl_detail);
    return s;
}

static size_t nccl_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    memcpy(id->internal, "ftemu-nccl", 10);
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    if (memcmp(id.internal, "ftemu-nccl", 10))
        return nccl_fail(ncclInvalidArgument,
                         "ncclCommInitRank: an id ncclGetUniqueId did not make");
    if (nranks != 1 || rank != 0)
        return nccl_fail(ncclInvalidUsage, "ncclCommInitRank: %d ranks; the emulator's NCCL has "
                                           "one", nranks);
    *comm = new ftemu_nccl_comm{nranks, rank};
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    delete comm;
    return ncclSuccess;
}

/* one rank: every collective copies its send buffer to its receive buffer */
static ncclResult_t coll(const char *what, const void *s, void *r, size_t n, ncclDataType_t t,
                         ncclComm_t comm, cudaStream_t st)
{
    if (!comm) return nccl_fail(ncclInvalidArgument, "%s: no communicator", what);
    size_t bytes = n * nccl_size(t);
    if (!bytes) return ncclSuccess;
    if (!ftemu_is_device_range(s, bytes) || !ftemu_is_device_range(r, bytes))
        return nccl_fail(ncclInvalidArgument, "%s: a buffer of %zu bytes not inside device memory",
                         what, bytes);
    if (r != s) ftemu::enqueue(st, [r, s, bytes] { memmove(r, s, bytes); });
    return ncclSuccess;
}

extern "C" ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
    (void)op;
    return coll("ncclAllReduce", s, r, n, t, comm, st);
}
extern "C" ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t,
                                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
    (void)op;
    return coll("ncclReduceScatter", s, r, n, t, comm, st);
}
extern "C" ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t,
                                      ncclComm_t comm, cudaStream_t st)
{
    return coll("ncclAllGather", s, r, n, t, comm, st);
}
extern "C" ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                                      ncclComm_t comm, cudaStream_t st)
{
    if (root != 0) return nccl_fail(ncclInvalidArgument, "ncclBroadcast: root %d of 1 rank", root);
    return coll("ncclBroadcast", s, r, n, t, comm, st);
}

static ncclResult_t p2p(bool send, void *buf, size_t n, ncclDataType_t t, int peer,
                        ncclComm_t comm, cudaStream_t st)
{
    const char *what = send ? "ncclSend" : "ncclRecv";
    if (!comm || peer != 0)
        return nccl_fail(ncclInvalidArgument, "%s: peer %d of 1 rank", what, peer);
    if (!g_group)
        return nccl_fail(ncclInvalidUsage, "%s to oneself outside ncclGroupStart/End (it would "
                                           "hang)", what);
    size_t bytes = n * nccl_size(t);
    if (bytes && !ftemu_is_device_range(buf, bytes))
        return nccl_fail(ncclInvalidArgument, "%s: %zu bytes not inside device memory", what,
                         bytes);
    g_p2p.push_back(P2p{send, buf, bytes, st});
    return ncclSuccess;
}

extern "C" ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer,
                                 ncclComm_t comm, cudaStream_t st)
{
    return p2p(true, (void *)s, n, t, peer, comm, st);
}
extern "C" ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                                 cudaStream_t st)
{
    return p2p(false, r, n, t, peer, comm, st);
}

extern "C" ncclResult_t ncclGroupStart(void)
{
    g_group++;
    return ncclSuccess;
}

/* the group's k-th send to oneself meets its k-th receive: the same size, or an error */
extern "C" ncclResult_t ncclGroupEnd(void)
{
    if (!g_group) return nccl_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--g_group) return ncclSuccess;
    std::vector<P2p> sends, recvs;
    for (const P2p &p : g_p2p) (p.send ? sends : recvs).push_back(p);
    g_p2p.clear();
    if (sends.size() != recvs.size())
        return nccl_fail(ncclInvalidUsage, "a group with %zu sends and %zu receives on one rank",
                         sends.size(), recvs.size());
    for (size_t i = 0; i < sends.size(); i++) {
        if (sends[i].bytes != recvs[i].bytes)
            return nccl_fail(ncclInvalidUsage, "send %zu of %zu bytes meets a receive of %zu", i,
                             sends[i].bytes, recvs[i].bytes);
        if (!sends[i].bytes) continue;
        /* on the receive's stream, after the send's stream has reached the send */
        ftemu_stream *ss = sends[i].st;
        long long pos = ss ? ss->issued : 0;
        void *dst = recvs[i].buf, *src = sends[i].buf;
        size_t bytes = sends[i].bytes;
        ftemu::enqueue(recvs[i].st, [ss, pos, dst, src, bytes] {
            if (ss) advance(ss, pos);
            memmove(dst, src, bytes);
        });
    }
    return ncclSuccess;
}
