/* rng.h — Philox4x32-10, the one counter-based RNG of endoret (CPU and CUDA compute the same bits).
 *
 * Stream/offset scheme. A random number is a pure function of (seed, stream, index):
 *   key     = (seed low 32 bits, seed high 32 bits)
 *   counter = (block low, block high, stream low, stream high), block = index / 4
 *   value   = philox4x32_10(counter, key)[index % 4]
 * so the GPU can compute element i of a dropout mask or of a masking noise vector without any
 * sequential state, and the CPU gets the same bits. `stream` separates independent uses; build it
 * with rng_stream(purpose, a, b) from a purpose tag and up to two indices (e.g. epoch and sample),
 * which keeps masks and augmentations of sample i identical however the batch is split across
 * threads or devices.
 *
 * A sequential generator (rng_t) is the same function with a moving index; its full state is
 * (seed, stream, index) and is saved in checkpoints for exact resume. */
#ifndef ENDORET_RNG_H
#define ENDORET_RNG_H

#include <stdint.h>

void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Purpose tags for rng_stream (add new ones at the end; values are part of the file format of
 * saved RNG states, so never renumber). */
enum {
    RNG_INIT = 1,      /* parameter initialisation */
    RNG_DROPOUT = 2,   /* dropout masks */
    RNG_MASKING = 3,   /* MAE patch masking noise */
    RNG_AUGMENT = 4,   /* image augmentations */
    RNG_SHUFFLE = 5,   /* data order */
    RNG_SYNTH = 6,     /* synthetic scene generation */
    RNG_SAMPLING = 7,  /* pair drawing, k-means init, misc sampling */
};

uint64_t rng_stream(uint32_t purpose, uint32_t a, uint32_t b);
/* The index-th 32-bit value of (seed, stream). */
uint32_t rng_at(uint64_t seed, uint64_t stream, uint64_t index);

typedef struct {
    uint64_t seed, stream, index;
    uint32_t buf[4];
    uint64_t buf_block; /* block held in buf, or UINT64_MAX */
} rng_t;

rng_t rng_make(uint64_t seed, uint64_t stream);
uint32_t rng_u32(rng_t *r);
uint64_t rng_u64(rng_t *r);
float rng_uniform(rng_t *r);              /* [0, 1), 24 random bits */
double rng_uniform_double(rng_t *r);      /* [0, 1), 53 random bits */
float rng_normal(rng_t *r);               /* N(0,1), Box-Muller on two uniforms */
uint32_t rng_below(rng_t *r, uint32_t n); /* uniform integer in [0, n), unbiased; n > 0 */
void rng_shuffle(rng_t *r, int *v, int n);/* Fisher-Yates */

#endif
