/* mixup.c — ContrastiveMixup "elem" mode (ClassyVision/SSCD): per-element MixUp or CutMix with
 * the reversed batch as partner (see augment.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "nn/base/base.h"

const mixup_config MIXUP_SSCD = {0.05f, 2.0f, 2.0f, 0.5f};

/* Marsaglia-Tsang gamma(a, 1); a < 1 through the boost gamma(a+1) * U^(1/a). */
static double rng_gamma(rng_t *r, double a) {
    if (a < 1) {
        double u = rng_uniform_double(r);
        return rng_gamma(r, a + 1) * pow(u > 0 ? u : 1e-300, 1.0 / a);
    }
    double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = rng_normal(r), v = 1 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = rng_uniform_double(r);
        if (u < 1 - 0.0331 * x * x * x * x) return d * v;
        if (log(u > 0 ? u : 1e-300) < 0.5 * x * x + d * (1 - v + log(v))) return d * v;
    }
}

float rng_beta(rng_t *r, float a, float b) {
    double x = rng_gamma(r, a), y = rng_gamma(r, b);
    return (float)(x / (x + y));
}

void mixup_batch(rng_t *r, const mixup_config *cfg, float *x, int M, int c, int h, int w, float *lambda,
                 int *partner) {
    size_t per = (size_t)c * h * w;
    float *orig = xmalloc_aligned(per * M * sizeof(float));
    memcpy(orig, x, per * M * sizeof(float));
    for (int i = 0; i < M; i++) {
        int j = M - 1 - i;
        partner[i] = j;
        lambda[i] = 1;
        if (rng_uniform(r) >= cfg->mix_prob) continue;
        int cutmix = rng_uniform(r) < cfg->switch_prob;
        float lam = rng_beta(r, cutmix ? cfg->cutmix_alpha : cfg->mixup_alpha, cutmix ? cfg->cutmix_alpha : cfg->mixup_alpha);
        float *xi = x + per * i;
        const float *xj = orig + per * j;
        if (!cutmix) {
            for (size_t k = 0; k < per; k++) xi[k] = lam * xi[k] + (1 - lam) * xj[k];
            lambda[i] = lam;
            continue;
        }
        float cut = sqrtf(1 - lam);
        int ch = (int)(h * cut), cw = (int)(w * cut);
        int cy = (int)rng_below(r, (uint32_t)h), cx = (int)rng_below(r, (uint32_t)w);
        int y0 = cy - ch / 2 < 0 ? 0 : cy - ch / 2, y1 = cy + ch / 2 > h ? h : cy + ch / 2;
        int x0 = cx - cw / 2 < 0 ? 0 : cx - cw / 2, x1 = cx + cw / 2 > w ? w : cx + cw / 2;
        for (int k = 0; k < c; k++)
            for (int y = y0; y < y1; y++)
                memcpy(xi + ((size_t)k * h + y) * w + x0, xj + ((size_t)k * h + y) * w + x0, sizeof(float) * (x1 - x0));
        lambda[i] = 1 - (float)((y1 - y0) * (x1 - x0)) / (float)(h * w);
    }
    free(orig);
}

void mixup_match_matrix(const float *lambda, const int *partner, int M, int n, uint8_t *match) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < M; j++) {
            /* label supports: {t_i (if lambda_i > 0), t_partner(i) (if lambda_i < 1)} */
            int ti[2] = {lambda[i] > 0 ? i % n : -1, lambda[i] < 1 ? partner[i] % n : -1};
            int tj[2] = {lambda[j] > 0 ? j % n : -1, lambda[j] < 1 ? partner[j] % n : -1};
            int m = 0;
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++) m |= ti[a] >= 0 && ti[a] == tj[b];
            match[(size_t)i * M + j] = (uint8_t)m;
        }
}
