/* init.c — timm / MAE initialisers; see init.h. */
#include "nn/init.h"

#include <math.h>

#include "nn/base/base.h"

#define INIT_PAR_MIN 65536

/* Uniform in [0, 1) from the values (index, index+1) of the generator's stream: 53 bits. */
static inline double uniform_at(const rng_t *r, int64_t i) {
    uint64_t lo = rng_at(r->seed, r->stream, r->index + 2 * (uint64_t)i);
    uint64_t hi = rng_at(r->seed, r->stream, r->index + 2 * (uint64_t)i + 1);
    return (double)((lo | (hi << 32)) >> 11) * (1.0 / 9007199254740992.0);
}

static inline void advance(rng_t *r, int64_t n) { r->index += 2 * (uint64_t)n; }

static double normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

double normal_icdf(double p) {
    /* Acklam's rational approximation (rel. error 1.2e-9) refined by one Halley step on
     * erfc, which brings it to about machine precision. */
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    if (p <= 0.0) return -INFINITY;
    if (p >= 1.0) return INFINITY;
    const double plow = 0.02425;
    double x;
    if (p < plow) {
        double q = sqrt(-2.0 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    } else if (p <= 1.0 - plow) {
        double q = p - 0.5, t = q * q;
        x = (((((a[0] * t + a[1]) * t + a[2]) * t + a[3]) * t + a[4]) * t + a[5]) * q /
            (((((b[0] * t + b[1]) * t + b[2]) * t + b[3]) * t + b[4]) * t + 1.0);
    } else {
        double q = sqrt(-2.0 * log(1.0 - p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    }
    double e = normal_cdf(x) - p;
    double u = e * sqrt(2.0 * M_PI) * exp(x * x / 2.0);
    return x - u / (1.0 + x * u / 2.0);
}

void init_trunc_normal(float *x, int64_t n, float mean, float std, float a, float b, rng_t *r) {
    double lo = normal_cdf(((double)a - mean) / std), hi = normal_cdf(((double)b - mean) / std);
#pragma omp parallel for schedule(static) if (n >= INIT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        double p = lo + (hi - lo) * uniform_at(r, i);
        double z = normal_icdf(p);
        double v = mean + std * z;
        /* p may round onto a bound; the clamp keeps the result inside [a, b] as timm's clamp_. */
        if (v < a) v = a;
        if (v > b) v = b;
        x[i] = (float)v;
    }
    advance(r, n);
}

void init_trunc_normal_std(float *x, int64_t n, float mean, float std, float k, rng_t *r) {
    init_trunc_normal(x, n, mean, std, mean - k * std, mean + k * std, r);
}

void init_uniform(float *x, int64_t n, float lo, float hi, rng_t *r) {
#pragma omp parallel for schedule(static) if (n >= INIT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(lo + ((double)hi - lo) * uniform_at(r, i));
        x[i] = v < hi ? v : lo; /* rounding to float may reach hi; keep the interval half-open */
    }
    advance(r, n);
}

void init_normal(float *x, int64_t n, float mean, float std, rng_t *r) {
#pragma omp parallel for schedule(static) if (n >= INIT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        double u = uniform_at(r, i);
        if (u <= 0.0) u = 0x1p-54; /* keep the tail finite */
        x[i] = (float)(mean + std * normal_icdf(u));
    }
    advance(r, n);
}

void init_xavier_uniform(float *x, int64_t n, int64_t fan_in, int64_t fan_out, float gain, rng_t *r) {
    float bound = (float)(gain * sqrt(6.0 / (double)(fan_in + fan_out)));
    init_uniform(x, n, -bound, bound, r);
}

void init_constant(float *x, int64_t n, float value) {
    for (int64_t i = 0; i < n; i++) x[i] = value;
}
void init_zeros(float *x, int64_t n) { init_constant(x, n, 0.0f); }
void init_ones(float *x, int64_t n) { init_constant(x, n, 1.0f); }

int init_sincos_pos_embed_2d(float *out, int dim, int gh, int gw, int cls_token) {
    if (dim <= 0 || dim % 4 != 0 || gh <= 0 || gw <= 0)
        return er_fail(ER_INPUT, "sincos position embedding: dim %d must be a positive multiple of 4, grid %dx%d positive",
                       dim, gh, gw);
    const int half = dim / 2, quarter = dim / 4;
    float *row = out;
    if (cls_token) {
        init_zeros(row, dim);
        row += dim;
    }
    for (int i = 0; i < gh; i++)
        for (int j = 0; j < gw; j++, row += dim) {
            /* MAE: meshgrid(w, h) puts the column index first, so the first half encodes j. */
            const double pos[2] = {(double)j, (double)i};
            for (int h = 0; h < 2; h++)
                for (int d = 0; d < quarter; d++) {
                    double omega = 1.0 / pow(10000.0, (double)d / (double)quarter);
                    double t = pos[h] * omega;
                    row[h * half + d] = (float)sin(t);
                    row[h * half + quarter + d] = (float)cos(t);
                }
        }
    return ER_OK;
}
