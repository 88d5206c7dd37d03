/* philox.h — Philox4x32-10 (Salmon et al., SC'11), the one implementation for host C and CUDA
 * device code: nn/base/rng.c, kernels/cpu (dropout) and kernels/cuda (dropout) all include it, so
 * every backend draws the same bits (rng.h gives the stream/offset scheme). */
#ifndef ENDORET_PHILOX_H
#define ENDORET_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define ER_HOST_DEVICE __host__ __device__
#else
#define ER_HOST_DEVICE
#endif

/* out = Philox4x32-10(counter ctr, key key) */
static inline ER_HOST_DEVICE void philox4x32_10_rounds(const uint32_t ctr[4], const uint32_t key[2],
                                                       uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* The 4 words of block `block` of (seed, stream): indices 4*block .. 4*block+3 of rng_at. */
static inline ER_HOST_DEVICE void philox_block(uint64_t seed, uint64_t stream, uint64_t block,
                                               uint32_t out[4]) {
    const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream,
                             (uint32_t)(stream >> 32)};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    philox4x32_10_rounds(ctr, key, out);
}

#endif
