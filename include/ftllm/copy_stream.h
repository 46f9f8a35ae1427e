/* copy_stream.h: a host copy whose destination is not read again soon (DMR's kept inputs: read
 * at the deferred check's replay, after many other ops). Its stores go past the caches
 * (non-temporal), so the destination's lines are neither read from memory first nor left in the
 * cache in place of the primary's working set. Measured on the 2-core Intel Xeon VM of
 * perf/README.md ("a streaming copy for kept inputs"): 17-22 GB/s into uncached memory against
 * 9-10 GB/s for memcpy, which streams only above a size glibc picks (the cache size). Bytes are
 * copied exactly; memcpy where the CPU has no such stores (not x86-64). */
#ifndef FTLLM_COPY_STREAM_H
#define FTLLM_COPY_STREAM_H

#include <stddef.h>

/* Copies bytes from src to dst (not overlapping), any sizes and alignments; returns after a
 * store fence, so the bytes are visible to any later load or copy on any thread. */
void ft_copy_stream(void *dst, const void *src, size_t bytes);

#endif
