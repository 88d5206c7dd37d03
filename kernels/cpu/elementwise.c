/* elementwise.c — broadcasting binary ops, unary maps and dropout on the CPU.
 * Strided operands are coalesced first, so the common cases (same shape, row broadcast of a bias,
 * scalar) run as unit-stride inner loops the compiler vectorises. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/philox.h"

#define INNER_CHUNK 4096

/* Iterate the output in (outer, inner-chunk) blocks; BODY sees pa, pb, py (block starts), sa, sb
 * (inner strides) and len (block length). Inner strides of y are 1 (y contiguous). */
#define STRIDED_BLOCKS(BODY)                                                                   \
    do {                                                                                       \
        int64_t shape[ER_MAX_DIMS + 1], xa[ER_MAX_DIMS + 1], xb[ER_MAX_DIMS + 1],             \
            ys[ER_MAX_DIMS + 1], acc = 1;                                                      \
        for (int i = ndim - 1; i >= 0; i--) {                                                  \
            shape[i] = shape0[i];                                                              \
            xa[i] = as0[i];                                                                    \
            xb[i] = bs0[i];                                                                    \
            ys[i] = acc;                                                                       \
            acc *= shape0[i];                                                                  \
        }                                                                                      \
        if (ndim == 0) { shape[0] = 1; xa[0] = xb[0] = ys[0] = 1; }                            \
        int64_t *st[3] = {xa, xb, ys};                                                         \
        int nd = cpu_coalesce(ndim ? ndim : 1, shape, st, 3);                                  \
        int64_t inner = shape[nd - 1], sa = xa[nd - 1], sb = xb[nd - 1], outer = 1;            \
        for (int i = 0; i < nd - 1; i++) outer *= shape[i];                                    \
        int64_t nchunk = (inner + INNER_CHUNK - 1) / INNER_CHUNK;                              \
        _Pragma("omp parallel for if (outer * inner > CPU_PAR_MIN)")                           \
        for (int64_t blk = 0; blk < outer * nchunk; blk++) {                                   \
            int64_t o = blk / nchunk, c0 = (blk % nchunk) * INNER_CHUNK;                       \
            int64_t len = inner - c0 < INNER_CHUNK ? inner - c0 : INNER_CHUNK;                 \
            int64_t ao = c0 * sa, bo = c0 * sb, yo = c0, r = o;                                \
            for (int d = nd - 2; d >= 0; d--) {                                                \
                int64_t cc = r % shape[d];                                                     \
                r /= shape[d];                                                                 \
                ao += cc * xa[d];                                                              \
                bo += cc * xb[d];                                                              \
                yo += cc * ys[d];                                                              \
            }                                                                                  \
            const float *pa = a + ao, *pb = b + bo;                                            \
            BODY                                                                               \
        }                                                                                      \
    } while (0)

/* One inner loop per stride pattern so the unit-stride cases vectorise. */
#define LOOP(EXPR)                                                                             \
    if (sa == 1 && sb == 1) {                                                                  \
        _Pragma("omp simd") for (int64_t i = 0; i < len; i++) { float va = pa[i], vb = pb[i]; EXPR; } \
    } else if (sa == 1 && sb == 0) {                                                           \
        const float vb = pb[0];                                                                \
        _Pragma("omp simd") for (int64_t i = 0; i < len; i++) { float va = pa[i]; EXPR; }      \
    } else if (sa == 0 && sb == 1) {                                                           \
        const float va = pa[0];                                                                \
        _Pragma("omp simd") for (int64_t i = 0; i < len; i++) { float vb = pb[i]; EXPR; }      \
    } else {                                                                                   \
        for (int64_t i = 0; i < len; i++) { float va = pa[i * sa], vb = pb[i * sb]; EXPR; }    \
    }

void cpu_binary(int op, int ndim, const int64_t *shape0, const float *a, const int64_t *as0,
                const float *b, const int64_t *bs0, float *y) {
    STRIDED_BLOCKS({
        float *py = y + yo;
        switch (op) {
        case BIN_ADD: LOOP(py[i] = va + vb) break;
        case BIN_SUB: LOOP(py[i] = va - vb) break;
        case BIN_MUL: LOOP(py[i] = va * vb) break;
        default: LOOP(py[i] = va / vb) break;
        }
    });
}

#define OUT(VAL) { t = (VAL); po[i] = accumulate ? po[i] + t : t; }
/* g = dy/d(side) * gy, written or accumulated into a contiguous buffer over the full shape. */
void cpu_binary_grad(int op, int side, int ndim, const int64_t *shape0, const float *a,
                     const int64_t *as0, const float *b, const int64_t *bs0, const float *gy, float *g,
                     int accumulate) {
    int code = op * 2 + side;
    STRIDED_BLOCKS({
        const float *pg = gy + yo;
        float *po = g + yo;
        float t;
        (void)t;
        switch (code) {
        case BIN_ADD * 2: case BIN_ADD * 2 + 1: case BIN_SUB * 2: LOOP(OUT(pg[i]); (void)va; (void)vb) break;
        case BIN_SUB * 2 + 1: LOOP(OUT(-pg[i]); (void)va; (void)vb) break;
        case BIN_MUL * 2: LOOP(OUT(pg[i] * vb); (void)va) break;
        case BIN_MUL * 2 + 1: LOOP(OUT(pg[i] * va); (void)vb) break;
        case BIN_DIV * 2: LOOP(OUT(pg[i] / vb); (void)va) break;
        default: LOOP(OUT(-pg[i] * va / (vb * vb))) break;
        }
    });
}

#undef OUT

/* GELU (gelu_f / gelu_d of cpu_kernels.h, the references of gelu_*_avx512 in simd_avx512.c). */

#define SIMD_CHUNK 8192 /* elements per parallel block (a multiple of 16) */

void cpu_unary(int op, int64_t n, const float *x, float *y, float alpha, float beta) {
    if (op == UN_GELU && (cpu_simd() || cpu_simd_avx2())) {
        int64_t nb = (n + SIMD_CHUNK - 1) / SIMD_CHUNK;
        int wide = cpu_simd();
        #pragma omp parallel for if (n > CPU_PAR_MIN)
        for (int64_t b = 0; b < nb; b++) {
            int64_t i0 = b * SIMD_CHUNK, len = n - i0 < SIMD_CHUNK ? n - i0 : SIMD_CHUNK;
            if (wide) gelu_forward_avx512(len, x + i0, y + i0);
            else gelu_forward_avx2(len, x + i0, y + i0);
        }
        return;
    }
#define MAP(EXPR)                                                                        \
    _Pragma("omp parallel for simd if (n > CPU_PAR_MIN)") for (int64_t i = 0; i < n; i++) { \
        float v = x[i];                                                                  \
        y[i] = (EXPR);                                                                   \
    }                                                                                    \
    break;
    switch (op) {
    case UN_AFFINE: MAP(alpha * v + beta)
    case UN_EXP: MAP(expf(v))
    case UN_LOG: MAP(logf(v))
    case UN_SQRT: MAP(sqrtf(v))
    case UN_ABS: MAP(fabsf(v))
    case UN_POW: MAP(powf(v, alpha))
    case UN_CLAMP: MAP(v < alpha ? alpha : (v > beta ? beta : v))
    case UN_GELU: MAP(gelu_f(v))
    case UN_RELU: MAP(v > 0 ? v : 0.0f)
    case UN_SIGMOID: MAP(1.0f / (1.0f + expf(-v)))
    case UN_TANH: MAP(tanhf(v))
    default: break;
    }
#undef MAP
}

void cpu_unary_backward(int op, int64_t n, const float *x, const float *y, const float *gy, float *gx,
                        float alpha, float beta, int accumulate) {
    if (op == UN_GELU && (cpu_simd() || cpu_simd_avx2())) {
        int64_t nb = (n + SIMD_CHUNK - 1) / SIMD_CHUNK;
        int wide = cpu_simd();
        #pragma omp parallel for if (n > CPU_PAR_MIN)
        for (int64_t b = 0; b < nb; b++) {
            int64_t i0 = b * SIMD_CHUNK, len = n - i0 < SIMD_CHUNK ? n - i0 : SIMD_CHUNK;
            if (!accumulate) memset(gx + i0, 0, (size_t)len * sizeof(float)); /* the chunk, cache-hot */
            if (wide) gelu_backward_avx512(len, x + i0, gy + i0, gx + i0);
            else gelu_backward_avx2(len, x + i0, gy + i0, gx + i0);
        }
        return;
    }
    /* accumulate 0: gx = 0 + the term, the bits of a zero-filled buffer added to, gx not read */
#define MAPB(EXPR)                                                                           \
    if (accumulate) {                                                                        \
        _Pragma("omp parallel for simd if (n > CPU_PAR_MIN)") for (int64_t i = 0; i < n; i++) { \
            float v = x[i], w = y[i], g = gy[i];                                             \
            (void)v; (void)w;                                                                \
            gx[i] += (EXPR);                                                                 \
        }                                                                                    \
    } else {                                                                                 \
        _Pragma("omp parallel for simd if (n > CPU_PAR_MIN)") for (int64_t i = 0; i < n; i++) { \
            float v = x[i], w = y[i], g = gy[i];                                             \
            (void)v; (void)w;                                                                \
            gx[i] = 0.0f + (EXPR);                                                           \
        }                                                                                    \
    }                                                                                        \
    break;
    switch (op) {
    case UN_AFFINE: MAPB(alpha * g)
    case UN_EXP: MAPB(g * w)
    case UN_LOG: MAPB(g / v)
    case UN_SQRT: MAPB(g * 0.5f / w)
    case UN_ABS: MAPB(v > 0 ? g : (v < 0 ? -g : 0.0f))
    case UN_POW: MAPB(g * alpha * powf(v, alpha - 1.0f))
    case UN_CLAMP: MAPB(v > alpha && v < beta ? g : 0.0f)
    case UN_GELU: MAPB(g * gelu_d(v))
    case UN_RELU: MAPB(v > 0 ? g : 0.0f)
    case UN_SIGMOID: MAPB(g * w * (1.0f - w))
    case UN_TANH: MAPB(g * (1.0f - w * w))
    default: break;
    }
#undef MAPB
}

/* Element i is kept iff its Philox word >= p * 2^32; the word of i depends only on (seed, stream,
 * offset + i), so any split of the work (threads, GPU blocks) gives the same mask. */
void cpu_dropout(int64_t n, const float *x, float *y, float p, uint64_t seed, uint64_t stream,
                 uint64_t offset, int accumulate) {
    const double thr_d = (double)p * 4294967296.0;
    const uint64_t thr = thr_d >= 4294967296.0 ? 4294967296ull : (uint64_t)thr_d;
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    /* one Philox call per aligned group of 4 indices (a group's 4 words are its 4 elements) */
    int64_t first = (int64_t)(offset / 4), last = (int64_t)((offset + (uint64_t)n + 3) / 4);
    #pragma omp parallel for if (n > CPU_PAR_MIN / 4)
    for (int64_t g = first; g < last; g++) {
        uint32_t out[4];
        philox_block(seed, stream, (uint64_t)g, out);
        for (int w = 0; w < 4; w++) {
            int64_t i = g * 4 + w - (int64_t)offset;
            if (i < 0 || i >= n) continue;
            float v = x[i] * ((uint64_t)out[w] >= thr ? scale : 0.0f);
            y[i] = accumulate ? y[i] + v : v;
        }
    }
}
