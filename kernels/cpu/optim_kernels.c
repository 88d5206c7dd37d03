/* optim_kernels.c — CPU (OpenMP, vectorisable) versions of the optimizer kernels; see the header
 * for the exact update rules. Each element is updated independently, so results do not depend on
 * the thread count; sumsq_f32 reduces in double per thread, so its last bits may (harmlessly) vary
 * with the thread count but not between runs with the same count and schedule. */
#include "kernels/cpu/optim_kernels.h"

#include <math.h>
#include <stddef.h>

/* Below this size a parallel region costs more than it saves. */
#define OPTIM_PAR_MIN 32768

void adamw_scalars(adamw_args *a, int64_t t) {
    double bc1 = 1.0 - pow((double)a->beta1, (double)t);
    double bc2 = 1.0 - pow((double)a->beta2, (double)t);
    a->step_size = (float)((double)a->lr / bc1);
    a->inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
}

void adamw_update_f32(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                      int64_t n, const adamw_args *a) {
    const float decay = 1.0f - a->lr * a->weight_decay;
    const float b1 = a->beta1, b2 = a->beta2, c1 = 1.0f - a->beta1, c2 = 1.0f - a->beta2;
    const float step = a->step_size, ibc2 = a->inv_sqrt_bc2, eps = a->eps, gs = a->gscale;
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PAR_MIN)
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

void sgd_update_f32(float *restrict p, const float *restrict g, float *restrict buf, int64_t n, const sgd_args *a) {
    const float lr = a->lr, mu = a->momentum, wd = a->weight_decay, gs = a->gscale;
    if (mu == 0.0f || !buf) {
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PAR_MIN)
        for (int64_t i = 0; i < n; i++) p[i] -= lr * (g[i] * gs + wd * p[i]);
        return;
    }
    const int nesterov = a->nesterov, first = a->first;
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * gs + wd * p[i];
        float bi = first ? gi : mu * buf[i] + gi;
        buf[i] = bi;
        float d = nesterov ? gi + mu * bi : bi;
        p[i] -= lr * d;
    }
}

double sumsq_f32(const float *restrict x, int64_t n) {
    double s = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : s) if (n >= OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

void scale_f32(float *restrict x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n >= OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

int all_finite_f32(const float *restrict x, int64_t n) {
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n >= OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) bad |= !isfinite(x[i]);
    return !bad;
}

const optim_kernel_table optim_kernels_cpu = {adamw_update_f32, sgd_update_f32, sumsq_f32, scale_f32, all_finite_f32};

const optim_kernel_table *optim_kernels_get(int device) {
    if (device == 0) return &optim_kernels_cpu;
    if (device == 1 && optim_kernels_cuda) return optim_kernels_cuda();
    return NULL;
}
