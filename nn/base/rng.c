/* rng.c — Philox4x32-10 (Salmon et al., SC'11) and the sequential wrapper; see rng.h. */
#include "nn/base/rng.h"

#include <math.h>

#include "nn/base/philox.h"

void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    philox4x32_10_rounds(ctr, key, out);
}

uint64_t rng_stream(uint32_t purpose, uint32_t a, uint32_t b) {
    /* purpose in the top 16 bits, a in the next 24, b in the low 24: distinct for the ranges we
     * use (epochs, sample indices < 16.7M). Wider values are folded in with a mix step. */
    uint64_t s = ((uint64_t)(purpose & 0xFFFF) << 48) | ((uint64_t)(a & 0xFFFFFF) << 24) | (b & 0xFFFFFF);
    uint64_t hi = ((uint64_t)(a >> 24) << 8) | (b >> 24);
    if (hi) s ^= hi * 0x9E3779B97F4A7C15ull;
    return s;
}

uint32_t rng_at(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t out[4];
    philox_block(seed, stream, index >> 2, out);
    return out[index & 3];
}

rng_t rng_make(uint64_t seed, uint64_t stream) {
    rng_t r = {seed, stream, 0, {0, 0, 0, 0}, UINT64_MAX};
    return r;
}

uint32_t rng_u32(rng_t *r) {
    uint64_t block = r->index >> 2;
    if (block != r->buf_block) {
        philox_block(r->seed, r->stream, block, r->buf);
        r->buf_block = block;
    }
    return r->buf[r->index++ & 3];
}

uint64_t rng_u64(rng_t *r) {
    uint64_t lo = rng_u32(r);
    return lo | ((uint64_t)rng_u32(r) << 32);
}

float rng_uniform(rng_t *r) { return (float)(rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

double rng_uniform_double(rng_t *r) { return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

float rng_normal(rng_t *r) {
    /* u1 in (0,1] so log() is finite. */
    double u1 = 1.0 - rng_uniform_double(r);
    double u2 = rng_uniform_double(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint32_t rng_below(rng_t *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection: unbiased, one multiply on the common path. */
    uint64_t m = (uint64_t)rng_u32(r) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)rng_u32(r) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void rng_shuffle(rng_t *r, int *v, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)i + 1);
        int t = v[i]; v[i] = v[j]; v[j] = t;
    }
}
