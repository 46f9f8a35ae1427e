/* cub/device/device_radix_sort.cuh (ftllm's CUDA emulator): CUB's DeviceRadixSort::SortPairs,
 * a stable sort by key on the host, queued on its stream, with CUB's two-call protocol (a NULL
 * temporary storage first asks for its size) and the emulator's checks (every array inside
 * device memory, the temporary storage at least the size it gave). */
#ifndef FTEMU_CUB_DEVICE_RADIX_SORT_CUH
#define FTEMU_CUB_DEVICE_RADIX_SORT_CUH

#include <stdint.h>

#include <algorithm>
#include <vector>

#include "../../cuda_runtime.h"

namespace cub {

struct DeviceRadixSort {
    template <typename K, typename V>
    static cudaError_t SortPairs(void *temp, size_t &temp_bytes, const K *keys_in, K *keys_out,
                                 const V *values_in, V *values_out, int n, int begin_bit = 0,
                                 int end_bit = (int)(sizeof(K) * 8), cudaStream_t stream = 0)
    {
        size_t need = 256 + sizeof(K) * (size_t)(n > 0 ? n : 0); /* what CUB would ask, roughly */
        if (!temp) {
            temp_bytes = need;
            return cudaSuccess;
        }
        if (n < 0 || begin_bit < 0 || end_bit > (int)(sizeof(K) * 8) || begin_bit >= end_bit ||
            temp_bytes < need || !ftemu_is_device_range(temp, temp_bytes))
            return cudaErrorInvalidValue;
        size_t m = (size_t)n;
        if (!ftemu_is_device_range(keys_in, sizeof(K) * m) ||
            !ftemu_is_device_range(keys_out, sizeof(K) * m) ||
            !ftemu_is_device_range(values_in, sizeof(V) * m) ||
            !ftemu_is_device_range(values_out, sizeof(V) * m))
            return cudaErrorInvalidValue;
        ftemu::enqueue(stream, [=] { sort(keys_in, keys_out, values_in, values_out, m, begin_bit,
                                          end_bit); });
        return cudaSuccess;
    }

  private:
    template <typename K, typename V>
    static void sort(const K *keys_in, K *keys_out, const V *values_in, V *values_out, size_t m,
                     int begin_bit, int end_bit)
    {
        /* CUB orders signed keys by flipping the sign bit, then compares the chosen bits */
        auto bits = [&](K k) {
            uint64_t u = 0;
            memcpy(&u, &k, sizeof k);
            if (std::is_signed<K>::value) u ^= (uint64_t)1 << (sizeof(K) * 8 - 1);
            u >>= begin_bit;
            if (end_bit - begin_bit < 64) u &= ((uint64_t)1 << (end_bit - begin_bit)) - 1;
            return u;
        };
        std::vector<size_t> idx(m);
        for (size_t i = 0; i < m; i++) idx[i] = i;
        std::stable_sort(idx.begin(), idx.end(),
                         [&](size_t a, size_t b) { return bits(keys_in[a]) < bits(keys_in[b]); });
        std::vector<K> k(m);
        std::vector<V> v(m);
        for (size_t i = 0; i < m; i++) k[i] = keys_in[idx[i]], v[i] = values_in[idx[i]];
        std::copy(k.begin(), k.end(), keys_out);
        std::copy(v.begin(), v.end(), values_out);
    }
};

} /* namespace cub */

#endif
