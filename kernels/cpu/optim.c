/* optim.c — CPU (OpenMP, vectorisable) optimizer ops of kernels/ops.def; kernels/optim_args.h
 * gives the exact update rules. Each element is updated independently, so results do not depend on
 * the thread count. sumsq_one sums fixed-size chunks (the size depends only on n) and adds the
 * chunk sums in order, so the gradient norm, and with it clipping, is bit-identical for any thread
 * count too. */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

/* Below this size a parallel region costs more than it saves. */
#define OPTIM_PAR_MIN 32768

void adamw_scalars(adamw_args *a, int64_t t) {
    double bc1 = 1.0 - pow((double)a->beta1, (double)t);
    double bc2 = 1.0 - pow((double)a->beta2, (double)t);
    a->step_size = (float)((double)a->lr / bc1);
    a->inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
}

/* Reference loop for one chunk (and the tail of the vector path). */
static void adamw_chunk_scalar(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                               int64_t n, const adamw_args *a) {
    const float decay = 1.0f - a->lr * a->weight_decay;
    const float b1 = a->beta1, b2 = a->beta2, c1 = 1.0f - a->beta1, c2 = 1.0f - a->beta2;
    const float step = a->step_size, ibc2 = a->inv_sqrt_bc2, eps = a->eps, gs = a->gscale;
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * gs;
        float mi = b1 * m[i] + c1 * gi;
        float vi = b2 * v[i] + c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) * ibc2 + eps;
        p[i] = p[i] * decay - step * (mi / denom);
    }
}

/* GCC does not vectorise the loop above under the default errno semantics of sqrtf (it keeps a
 * branch to the library call; measured ~5x slower), and the build's flags are shared, so the AVX-512
 * path is written out. Same operations in the same order, no FMA: bit-identical to the scalar loop. */
static void adamw_chunk(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t n,
                        const adamw_args *a) {
    int64_t i = 0;
#ifdef __AVX512F__
    const __m512 decay = _mm512_set1_ps(1.0f - a->lr * a->weight_decay);
    const __m512 b1 = _mm512_set1_ps(a->beta1), b2 = _mm512_set1_ps(a->beta2);
    const __m512 c1 = _mm512_set1_ps(1.0f - a->beta1), c2 = _mm512_set1_ps(1.0f - a->beta2);
    const __m512 step = _mm512_set1_ps(a->step_size), ibc2 = _mm512_set1_ps(a->inv_sqrt_bc2);
    const __m512 eps = _mm512_set1_ps(a->eps), gs = _mm512_set1_ps(a->gscale);
    for (; i + 16 <= n; i += 16) {
        __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(c1, gi));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(_mm512_mul_ps(c2, gi), gi));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        __m512 denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), ibc2), eps);
        __m512 pi = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(p + i), decay), _mm512_mul_ps(step, _mm512_div_ps(mi, denom)));
        _mm512_storeu_ps(p + i, pi);
    }
#endif
    adamw_chunk_scalar(p + i, g + i, m + i, v + i, n - i, a);
}

#define OPTIM_CHUNK 16384

/* The SGD rule on one chunk; buf unused when mu == 0 or buf is NULL. */
static void sgd_chunk(float *restrict p, const float *restrict g, float *restrict buf, int64_t n, const sgd_args *a) {
    const float lr = a->lr, mu = a->momentum, wd = a->weight_decay, gs = a->gscale;
    if (mu == 0.0f || !buf) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) p[i] -= lr * (g[i] * gs + wd * p[i]);
        return;
    }
    const int nesterov = a->nesterov, first = a->first;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * gs + wd * p[i];
        float bi = first ? gi : mu * buf[i] + gi;
        buf[i] = bi;
        float d = nesterov ? gi + mu * bi : bi;
        p[i] -= lr * d;
    }
}

/* ---- multi-tensor forms: one parallel region over the chunks of all tensors ----
 * Tensor i is cut into OPTIM_CHUNK pieces at fixed offsets, and each piece gets the chunk function
 * with tensor i's args, so its bits do not depend on the other tensors of the list.
 * The chunks of all tensors, in order, are split into one contiguous range per thread (the chunk
 * count is known up front; nothing is allocated). */
typedef void (*many_chunk_fn)(const void *ctx, int t, int64_t off, int64_t len);

static int64_t chunks_of(int64_t n) { return n > 0 ? (n + OPTIM_CHUNK - 1) / OPTIM_CHUNK : 0; }

/* Run fn on chunks [c0, c1) of the concatenated chunk lists. */
static void many_range(int count, const int64_t *n, many_chunk_fn fn, const void *ctx, int64_t c0, int64_t c1) {
    int64_t base = 0; /* index of tensor t's first chunk */
    for (int t = 0; t < count && base < c1; t++) {
        const int64_t nc = chunks_of(n[t]);
        const int64_t lo = c0 > base ? c0 - base : 0, hi = c1 < base + nc ? c1 - base : nc;
        for (int64_t c = lo; c < hi; c++) {
            const int64_t off = c * OPTIM_CHUNK, len = n[t] - off < OPTIM_CHUNK ? n[t] - off : OPTIM_CHUNK;
            fn(ctx, t, off, len);
        }
        base += nc;
    }
}

static void many_run(int count, const int64_t *n, many_chunk_fn fn, const void *ctx) {
    int64_t chunks = 0, elems = 0;
    for (int t = 0; t < count; t++) {
        chunks += chunks_of(n[t]);
        elems += n[t] > 0 ? n[t] : 0;
    }
#pragma omp parallel if (elems >= OPTIM_PAR_MIN)
    {
        const int64_t nth = omp_get_num_threads(), id = omp_get_thread_num();
        many_range(count, n, fn, ctx, chunks * id / nth, chunks * (id + 1) / nth);
    }
}

typedef struct {
    float *const *p, *const *m, *const *v, *const *buf;
    uint16_t *const *p16;
    const float *const *g;
    const adamw_args *adamw;
    const sgd_args *sgd;
    float *const *y;
    float value;
    float gs; /* gscale_dev's value (1 without one) */
} many_ctx;

static void adamw_piece(const void *ctx, int t, int64_t off, int64_t len) {
    const many_ctx *c = ctx;
    adamw_args a = c->adamw[t];
    a.gscale *= c->gs;
    adamw_chunk(c->p[t] + off, c->g[t] + off, c->m[t] + off, c->v[t] + off, len, &a);
    if (c->p16 && c->p16[t]) cpu_cast_span(len, ER_F32, c->p[t] + off, ER_BF16, c->p16[t] + off, 0); /* chunk still in cache */
}

static void sgd_piece(const void *ctx, int t, int64_t off, int64_t len) {
    const many_ctx *c = ctx;
    sgd_args a = c->sgd[t];
    a.gscale *= c->gs;
    sgd_chunk(c->p[t] + off, c->g[t] + off, c->buf[t] ? c->buf[t] + off : NULL, len, &a);
    if (c->p16 && c->p16[t]) cpu_cast_span(len, ER_F32, c->p[t] + off, ER_BF16, c->p16[t] + off, 0);
}

static void fill_piece(const void *ctx, int t, int64_t off, int64_t len) {
    const many_ctx *c = ctx;
    float *restrict y = c->y[t] + off;
    const float v = c->value;
#pragma omp simd
    for (int64_t i = 0; i < len; i++) y[i] = v;
}

void cpu_adamw_many(int count, float *const *p, const float *const *g, float *const *m, float *const *v,
                    const int64_t *n, const adamw_args *a, uint16_t *const *p16, const float *gscale_dev) {
    const float gs = gscale_dev ? *gscale_dev : 1.0f;
    if (isnan(gs)) return; /* the step guard's verdict: no update */
    const many_ctx c = {.p = p, .g = g, .m = m, .v = v, .adamw = a, .p16 = p16, .gs = gs};
    many_run(count, n, adamw_piece, &c);
}

void cpu_sgd_many(int count, float *const *p, const float *const *g, float *const *buf, const int64_t *n,
                  const sgd_args *a, uint16_t *const *p16, const float *gscale_dev) {
    const float gs = gscale_dev ? *gscale_dev : 1.0f;
    if (isnan(gs)) return;
    const many_ctx c = {.p = p, .g = g, .buf = buf, .sgd = a, .p16 = p16, .gs = gs};
    many_run(count, n, sgd_piece, &c);
}

void cpu_fill_many(int count, float *const *y, const int64_t *n, float v) {
    const many_ctx c = {.y = y, .value = v, .gs = 1.0f};
    many_run(count, n, fill_piece, &c);
}

static double sumsq_chunk(const float *restrict x, int64_t n) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

#define SUMSQ_MAX_CHUNKS 1024

static double sumsq_one(const float *restrict x, int64_t n) {
    if (n <= 0) return 0.0;
    int64_t chunk = (n + SUMSQ_MAX_CHUNKS - 1) / SUMSQ_MAX_CHUNKS;
    if (chunk < 8192) chunk = 8192;
    const int64_t nchunks = (n + chunk - 1) / chunk;
    double part[SUMSQ_MAX_CHUNKS];
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t b = c * chunk;
        part[c] = sumsq_chunk(x + b, n - b < chunk ? n - b : chunk);
    }
    double s = 0.0;
    for (int64_t c = 0; c < nchunks; c++) s += part[c];
    return s;
}

void cpu_sumsq_many(int count, const float *const *xs, const int64_t *ns, double *out) {
    for (int i = 0; i < count; i++) out[i] = sumsq_one(xs[i], ns[i]);
}

/* The arithmetic of nn/optim.c's host clip (optim_clip_grad_norm), in the same order. */
void cpu_step_guard(int count, const float *const *xs, const int64_t *ns, const float *losses, int nl,
                    double max_norm, double *norm, float *gscale) {
    double sumsq = 0.0;
    for (int i = 0; i < count; i++) sumsq += sumsq_one(xs[i], ns[i]);
    const double nrm = sqrt(sumsq);
    int finite = isfinite(nrm);
    for (int i = 0; i < nl; i++) finite &= isfinite(losses[i]);
    *norm = nrm;
    *gscale = !finite ? NAN : max_norm > 0 && nrm > max_norm ? (float)(max_norm / (nrm + 1e-6)) : 1.0f;
}

void cpu_scale(float *restrict x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

int cpu_all_finite(const float *restrict x, int64_t n) {
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n >= OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) bad |= !isfinite(x[i]);
    return !bad;
}
