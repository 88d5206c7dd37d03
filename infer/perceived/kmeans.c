/* kmeans.c — see kmeans.h. */
#include "infer/perceived/kmeans.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/base/rng.h"

static float sqdist(const float *a, const float *b, int dim) {
    float s = 0;
    #pragma omp simd reduction(+ : s) /* lets the compiler vectorise the float sum */
    for (int j = 0; j < dim; j++) { float d = a[j] - b[j]; s += d * d; }
    return s;
}

void kmeans_assign(const float *x, int n, int dim, const float *c, int k, int *label, float *d2) {
    /* threads only when there is enough work: on a busy machine small parallel regions cost more
     * than they save */
    #pragma omp parallel for schedule(static) if ((double)n * k * dim > 4e6)
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * dim;
        float best = FLT_MAX;
        int bi = 0;
        for (int j = 0; j < k; j++) {
            float d = sqdist(xi, c + (size_t)j * dim, dim);
            if (d < best) { best = d; bi = j; }
        }
        label[i] = bi;
        if (d2) d2[i] = best;
    }
}

void kmeans_pp_init(const float *x, int n, int dim, int k, uint64_t seed, float *c) {
    rng_t r = rng_make(seed, rng_stream(RNG_SAMPLING, 0x6b6d, 0));
    float *d2 = xmalloc((size_t)n * sizeof(float));
    int first = (int)rng_below(&r, (uint32_t)n);
    memcpy(c, x + (size_t)first * dim, dim * sizeof(float));
    #pragma omp parallel for schedule(static) if ((double)n * dim > 4e6)
    for (int i = 0; i < n; i++) d2[i] = sqdist(x + (size_t)i * dim, c, dim);
    for (int j = 1; j < k; j++) {
        double tot = 0;
        for (int i = 0; i < n; i++) tot += d2[i];
        int pick = n - 1;
        if (tot > 0) {
            double u = rng_uniform_double(&r) * tot, acc = 0;
            for (int i = 0; i < n; i++) { acc += d2[i]; if (acc > u) { pick = i; break; } }
        } else {
            pick = (int)rng_below(&r, (uint32_t)n); /* all points already on a centre */
        }
        float *cj = c + (size_t)j * dim;
        memcpy(cj, x + (size_t)pick * dim, dim * sizeof(float));
        #pragma omp parallel for schedule(static) if ((double)n * dim > 4e6)
        for (int i = 0; i < n; i++) {
            float d = sqdist(x + (size_t)i * dim, cj, dim);
            if (d < d2[i]) d2[i] = d;
        }
    }
    free(d2);
}

int kmeans_fit(const float *x, int n, int dim, int k, int max_iter, uint64_t seed, float *c, double *inertia) {
    kmeans_pp_init(x, n, dim, k, seed, c);
    int *lab = xmalloc((size_t)n * sizeof(int)), *prev = xmalloc((size_t)n * sizeof(int)), *cnt = xmalloc(k * sizeof(int));
    float *d2 = xmalloc((size_t)n * sizeof(float));
    double *sum = xmalloc((size_t)k * dim * sizeof(double));
    int it = 0;
    kmeans_assign(x, n, dim, c, k, lab, d2);
    for (it = 0; it < max_iter; it++) {
        memset(sum, 0, (size_t)k * dim * sizeof(double));
        memset(cnt, 0, k * sizeof(int));
        for (int i = 0; i < n; i++) {
            const float *xi = x + (size_t)i * dim;
            double *s = sum + (size_t)lab[i] * dim;
            for (int j = 0; j < dim; j++) s[j] += xi[j];
            cnt[lab[i]]++;
        }
        for (int j = 0; j < k; j++) {
            float *cj = c + (size_t)j * dim;
            if (cnt[j] > 0) {
                for (int t = 0; t < dim; t++) cj[t] = (float)(sum[(size_t)j * dim + t] / cnt[j]);
            } else { /* empty: take the worst-served point */
                int far = 0;
                for (int i = 1; i < n; i++) if (d2[i] > d2[far]) far = i;
                memcpy(cj, x + (size_t)far * dim, dim * sizeof(float));
                d2[far] = 0;
            }
        }
        memcpy(prev, lab, (size_t)n * sizeof(int));
        kmeans_assign(x, n, dim, c, k, lab, d2);
        if (!memcmp(prev, lab, (size_t)n * sizeof(int))) { it++; break; }
    }
    if (inertia) {
        double s = 0;
        for (int i = 0; i < n; i++) s += d2[i];
        *inertia = s;
    }
    free(lab); free(prev); free(cnt); free(d2); free(sum);
    return it;
}
