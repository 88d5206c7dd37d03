/* philox.cuh — device Philox4x32-10, bit-identical to philox4x32_10/rng_at in nn/base/rng.c
 * (counter = (block lo, block hi, stream lo, stream hi), key = (seed lo, seed hi)). */
#ifndef ENDORET_PHILOX_CUH
#define ENDORET_PHILOX_CUH

#include <stdint.h>

__device__ __forceinline__ uint4 cu_philox_block(uint64_t seed, uint64_t stream, uint64_t block) {
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32);
    uint32_t c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int round = 0; round < 10; round++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return make_uint4(c0, c1, c2, c3);
}

/* rng_at(seed, stream, index) */
__device__ __forceinline__ uint32_t cu_rng_at(uint64_t seed, uint64_t stream, uint64_t index) {
    uint4 r = cu_philox_block(seed, stream, index >> 2);
    switch (index & 3) {
    case 0: return r.x;
    case 1: return r.y;
    case 2: return r.z;
    default: return r.w;
    }
}

#endif
