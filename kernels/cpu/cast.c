/* cast.c — fp32 <-> bf16 conversion (`cast`) and the strided copy of bf16 buffers
 * (`copy_strided_bf16`). The scalar loops are the reference (kernels/dtype.h's er_f32_to_bf16 /
 * er_bf16_to_f32); the AVX-512F path does the same integer arithmetic 16 lanes at a time (not
 * vcvtneps2bf16, which flushes subnormals), so both give the same bits; tests/kernels/test_cast.c
 * compares them. kernels/cuda/cast.cu mirrors this file. */
#include <string.h>
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw")
#include <immintrin.h>
#define AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))

#include "kernels/cpu/vec_avx512.h" /* bf16x16_narrow, bf16x16_widen */

/* elements [i0, i1): returns the first index the vector loop did not cover */
AVX512_TARGET static int64_t cast_avx512(int64_t i0, int64_t i1, int from, const void *x, int to, void *y, int acc) {
    int64_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        __m512 v = from == ER_BF16 ? bf16x16_widen(_mm256_loadu_si256((const __m256i *)((const uint16_t *)x + i)))
                                   : _mm512_loadu_ps((const float *)x + i);
        if (to == ER_BF16) {
            uint16_t *yp = (uint16_t *)y + i;
            if (acc) v = _mm512_add_ps(v, bf16x16_widen(_mm256_loadu_si256((const __m256i *)yp)));
            _mm256_storeu_si256((__m256i *)yp, bf16x16_narrow(v));
        } else {
            float *yp = (float *)y + i;
            if (acc) v = _mm512_add_ps(_mm512_loadu_ps(yp), v);
            _mm512_storeu_ps(yp, v);
        }
    }
    return i;
}
#pragma GCC pop_options
#define HAVE_CAST_AVX512 1
#endif

/* The reference: one element at a time, through kernels/dtype.h. */
static void cast_scalar(int64_t i0, int64_t i1, int from, const void *x, int to, void *y, int acc) {
    for (int64_t i = i0; i < i1; i++) {
        float v = er_load_f32(from, x, i);
        if (acc) v = er_load_f32(to, y, i) + v;
        er_store_f32(to, y, i, v);
    }
}

/* elements [i0, i1) on the calling thread */
static void cast_range(int64_t i0, int64_t i1, int from, const void *x, int to, void *y, int accumulate) {
    int64_t i = i0;
#ifdef HAVE_CAST_AVX512
    if (cpu_simd()) i = cast_avx512(i0, i1, from, x, to, y, accumulate);
#endif
    cast_scalar(i, i1, from, x, to, y, accumulate);
}

void cpu_cast_span(int64_t n, int from, const void *x, int to, void *y, int accumulate) {
    if (n > 0) cast_range(0, n, from, x, to, y, accumulate);
}

void cpu_cast(int64_t n, int from, const void *x, int to, void *y, int accumulate) {
    if (n <= 0) return;
    #pragma omp parallel if (n > CPU_PAR_MIN)
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        cast_range(n * t / nt, n * (t + 1) / nt, from, x, to, y, accumulate);
    }
}

/* Rows of the coalesced views: a unit-stride row through cast_range (vectorised), others one element
 * at a time through the same arithmetic (cast_scalar's). */
void cpu_cast_strided(int ndim, const int64_t *shape0, int from, const void *x, const int64_t *xs0, int to, void *y,
                      const int64_t *ys0, int accumulate) {
    for (int i = 0; i < ndim; i++)
        if (shape0[i] <= 0) return;
    cpu_copy_plan p;
    cpu_copy_plan_make(&p, ndim, shape0, xs0, ys0);
    const size_t ex = from == ER_BF16 ? 2 : 4, ey = to == ER_BF16 ? 2 : 4;
    #pragma omp parallel for if (p.outer * p.inner > CPU_PAR_MIN)
    for (int64_t o = 0; o < p.outer; o++) {
        int64_t xo = 0, yo = 0, r = o;
        for (int d = p.nd - 2; d >= 0; d--) {
            xo += (r % p.shape[d]) * p.xs[d];
            yo += (r % p.shape[d]) * p.ys[d];
            r /= p.shape[d];
        }
        const char *xp = (const char *)x + xo * (int64_t)ex;
        char *yp = (char *)y + yo * (int64_t)ey;
        if (p.sx == 1 && p.sy == 1) {
            cast_range(0, p.inner, from, xp, to, yp, accumulate);
            continue;
        }
        for (int64_t i = 0; i < p.inner; i++) {
            float v = er_load_f32(from, xp, i * p.sx);
            if (accumulate) v = er_load_f32(to, yp, i * p.sy) + v;
            er_store_f32(to, yp, i * p.sy, v);
        }
    }
}

void cpu_copy_strided_bf16(int ndim, const int64_t *shape0, const uint16_t *x, const int64_t *xs0, uint16_t *y,
                           const int64_t *ys0, int accumulate) {
    cpu_copy_plan p;
    cpu_copy_plan_make(&p, ndim, shape0, xs0, ys0);
    const int64_t *shape = p.shape, *xs = p.xs, *ys = p.ys;
    const int nd = p.nd;
    const int64_t inner = p.inner, sx = p.sx, sy = p.sy, outer = p.outer;
    #pragma omp parallel for if (outer * inner > CPU_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        int64_t xo = 0, yo = 0, r = o;
        for (int d = nd - 2; d >= 0; d--) {
            xo += (r % shape[d]) * xs[d];
            yo += (r % shape[d]) * ys[d];
            r /= shape[d];
        }
        const uint16_t *xp = x + xo;
        uint16_t *yp = y + yo;
        if (!accumulate && sx == 1 && sy == 1) memcpy(yp, xp, (size_t)inner * sizeof(uint16_t));
        else if (!accumulate)
            for (int64_t i = 0; i < inner; i++) yp[i * sy] = xp[i * sx];
        else
            for (int64_t i = 0; i < inner; i++)
                yp[i * sy] = er_f32_to_bf16(er_bf16_to_f32(yp[i * sy]) + er_bf16_to_f32(xp[i * sx]));
    }
}
