/* pos_interp.c — torch's bicubic resampling of a position table (plain, antialiased, scale-factor
 * form), written to follow ATen's CPU kernels (UpSampleKernel.cpp) step for step in fp32: the same
 * coordinates and weights (with the fused multiply-adds the compiler made of them), the same summation
 * order, so results agree with torch 1.13 to 1-2 ulp (test_pos_interp.c). */
#include "nn/models/pos_interp.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

static const char *const NAMES[POS_INTERP_COUNT] = {"bicubic", "bicubic_aa", "bicubic_offset"};

const char *pos_interp_name(int rule) { return rule >= 0 && rule < POS_INTERP_COUNT ? NAMES[rule] : "?"; }

int pos_interp_rule(const char *name) {
    for (int i = 0; name && i < POS_INTERP_COUNT; i++)
        if (!strcmp(name, NAMES[i])) return i;
    return -1;
}

/* One axis: for each of `out` outputs, `n[o]` taps starting at `first[o]` (clamped indices in idx
 * for the plain kernel) with weights w[o * K + j]. */
typedef struct {
    int K;
    int *idx;  /* [out * K] source indices */
    float *w;  /* [out * K] weights */
    int *n;    /* [out] taps used */
} axis_taps;

static void taps_free(axis_taps *t) {
    free(t->idx);
    free(t->w);
    free(t->n);
}

/* ATen cubic_convolution1/2 with A = -0.75 (get_cubic_upsample_coefficients), in float with the fused
 * multiply-adds the compiler makes of torch's expressions (without them the results differ from torch
 * 1.13 by up to 1.5e-6 instead of 5e-7 on the offset rule, measured) */
static float cc1(float x, float A) { return fmaf(fmaf(A + 2, x, -(A + 3)) * x, x, 1.0f); }
static float cc2(float x, float A) { return fmaf(fmaf(fmaf(A, x, -(5 * A)), x, 8 * A), x, -(4 * A)); }

/* Plain bicubic: src = scale * (dst + 0.5) - 0.5 (in double: rounding it to float moves results by
 * up to 4e-6, measured against torch 1.13), scale = in / out, or 1 / factor when a
 * scale factor was given (area_pixel_compute_scale); 4 taps around floor(src), indices clamped. */
static axis_taps plain_taps(int in, int out, double factor) {
    axis_taps t = {4, xmalloc(sizeof(int) * 4 * (size_t)out), xmalloc(sizeof(float) * 4 * (size_t)out),
                   xmalloc(sizeof(int) * (size_t)out)};
    float scale = factor > 0 ? (float)(1.0 / factor) : (float)in / (float)out;
    for (int o = 0; o < out; o++) {
        double real = (double)scale * (o + 0.5) - 0.5; /* scale * (dst_index + 0.5) - 0.5, kept in double */
        int64_t i0 = (int64_t)floor(real);
        float l = (float)(real - (double)i0), A = -0.75f;
        float c[4] = {cc2(l + 1.0f, A), cc1(l, A), cc1(1.0f - l, A), cc2((1.0f - l) + 1.0f, A)};
        for (int j = 0; j < 4; j++) {
            int64_t k = i0 - 1 + j;
            t.idx[o * 4 + j] = (int)(k < 0 ? 0 : k > in - 1 ? in - 1 : k);
            t.w[o * 4 + j] = c[j];
        }
        t.n[o] = 4;
    }
    return t;
}

/* Keys' cubic with a = -0.5, the antialias filter (HelperInterpCubic::aa_filter) in float with fused
 * multiply-adds: evaluating it in double, or in float without them, leaves 5e-7 / 6e-7 against torch
 * 1.13 on 37 -> 16 instead of 1.8e-7 (measured) */
static float aa_filter(float xf) {
    float x = fabsf(xf), a = -0.5f;
    if (x < 1.0f) return fmaf(fmaf(a + 2.0f, x, -(a + 3.0f)) * x, x, 1.0f);
    if (x < 2.0f) return fmaf(fmaf(x - 5, x, 8), x, -4) * a;
    return 0.0f;
}

/* Antialiased bicubic (_compute_indices_min_size_weights_aa): support 2 * max(scale, 1), the filter
 * stretched by the scale when shrinking, taps limited to the grid, weights normalised. */
static axis_taps aa_taps(int in, int out, double factor) {
    float scale = factor > 0 ? (float)(1.0 / factor) : (float)in / (float)out;
    float support = scale >= 1.0f ? (float)(4 * 0.5 * (double)scale) : (float)(4 * 0.5);
    int K = (int)ceil((double)support) * 2 + 1;
    axis_taps t = {K, xcalloc((size_t)out * K, sizeof(int)), xcalloc((size_t)out * K, sizeof(float)),
                   xcalloc((size_t)out, sizeof(int))};
    float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
    for (int o = 0; o < out; o++) {
        float center = (float)((double)scale * (o + 0.5));
        int64_t xmin = (int64_t)((double)(center - support) + 0.5);
        if (xmin < 0) xmin = 0;
        int64_t xmax = (int64_t)((double)(center + support) + 0.5);
        if (xmax > in) xmax = in;
        int64_t xsize = xmax - xmin;
        if (xsize > K) xsize = K;
        float total = 0.0f, *w = t.w + (size_t)o * K;
        for (int64_t j = 0; j < xsize; j++) {
            float arg = (float)(((double)((float)(j + xmin) - center) + 0.5) * (double)invscale);
            w[j] = aa_filter(arg);
            total += w[j];
        }
        if (total != 0.0f)
            for (int64_t j = 0; j < xsize; j++) w[j] /= total;
        for (int64_t j = 0; j < xsize; j++) t.idx[(size_t)o * K + j] = (int)(xmin + j);
        t.n[o] = (int)xsize;
    }
    return t;
}

void pos_interp_grid(int rule, const float *src, int gs, float *dst, int gd, int D) {
    /* DINO's kludge: scale_factor = (g + 0.1) / M, output size floor(M * factor) = g */
    double factor = rule == POS_INTERP_BICUBIC_OFFSET ? ((double)gd + 0.1) / gs : 0;
    if (rule == POS_INTERP_BICUBIC_AA) {
        /* torch skips a pass whose size does not change; the weights would be the identity anyway */
        axis_taps t = aa_taps(gs, gd, 0);
        float *mid = xmalloc(sizeof(float) * (size_t)gs * gd * D); /* [gs rows, gd cols, D] */
#pragma omp parallel for schedule(static)
        for (int y = 0; y < gs; y++)
            for (int ox = 0; ox < gd; ox++) {
                const int *ix = t.idx + (size_t)ox * t.K;
                const float *w = t.w + (size_t)ox * t.K;
                float *o = mid + ((size_t)y * gd + ox) * D;
                for (int d = 0; d < D; d++) {
                    float acc = src[((size_t)y * gs + ix[0]) * D + d] * w[0];
                    for (int j = 1; j < t.n[ox]; j++) acc = fmaf(src[((size_t)y * gs + ix[j]) * D + d], w[j], acc);
                    o[d] = gs == gd ? src[((size_t)y * gs + ox) * D + d] : acc;
                }
            }
#pragma omp parallel for schedule(static)
        for (int oy = 0; oy < gd; oy++)
            for (int ox = 0; ox < gd; ox++) {
                const int *iy = t.idx + (size_t)oy * t.K;
                const float *w = t.w + (size_t)oy * t.K;
                float *o = dst + ((size_t)oy * gd + ox) * D;
                for (int d = 0; d < D; d++) {
                    float acc = mid[((size_t)iy[0] * gd + ox) * D + d] * w[0];
                    for (int j = 1; j < t.n[oy]; j++) acc = fmaf(mid[((size_t)iy[j] * gd + ox) * D + d], w[j], acc);
                    o[d] = gs == gd ? mid[((size_t)oy * gd + ox) * D + d] : acc;
                }
            }
        free(mid);
        taps_free(&t);
        return;
    }
    /* plain / scale factor: out = sum_a wy[a] * (sum_b wx[b] * src[a][b]), height outer (ATen's
     * Interpolate<2>), both axes the same size */
    axis_taps t = plain_taps(gs, gd, factor);
#pragma omp parallel for schedule(static)
    for (int oy = 0; oy < gd; oy++)
        for (int ox = 0; ox < gd; ox++) {
            const int *iy = t.idx + (size_t)oy * 4, *ix = t.idx + (size_t)ox * 4;
            const float *wy = t.w + (size_t)oy * 4, *wx = t.w + (size_t)ox * 4;
            float *o = dst + ((size_t)oy * gd + ox) * D;
            for (int d = 0; d < D; d++) {
                float out = 0;
                for (int a = 0; a < 4; a++) {
                    const float *row = src + (size_t)iy[a] * gs * D + d;
                    float in = row[(size_t)ix[0] * D] * wx[0];
                    for (int b = 1; b < 4; b++) in += row[(size_t)ix[b] * D] * wx[b];
                    out = a ? out + in * wy[a] : in * wy[a];
                }
                o[d] = out;
            }
        }
    taps_free(&t);
}
