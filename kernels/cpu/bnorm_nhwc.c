/* bnorm_nhwc.c — batch normalisation of channels-last activations (rows [M, C], storage ER_F32 or
 * ER_BF16) with the ResNet block's residual add and ReLU fused: the reference of batchnorm_nhwc.
 *
 * The arithmetic is cpu_batchnorm's (bnorm.c): per channel, the sums run over its M values in row
 * order, in double (mean, then the centred sum of squares), and y = x * scale + shift in fp32. So on
 * fp32 storage without z this gives batchnorm's results on the transposed data up to the order of
 * the double sums (bnorm.c's `omp simd` may split them), i.e. the same fp32 values in practice.
 * bf16 inputs are widened exactly and every bf16 output is rounded once from its fp32 value.
 *
 * Threads take blocks of BN_CB adjacent channels and walk all rows for them: each row's slice is one
 * cache line of fp32, the per-channel sums stay in registers, and the result does not depend on
 * the thread count. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dtype.h"

#define BN_CB 16

void cpu_batchnorm_nhwc(int64_t M, int64_t C, int dt, const void *x, const float *w, const float *b,
                        float *running_mean, float *running_var, int training, float momentum, float eps,
                        const void *z, int relu, void *y, float *mean, float *rstd) {
    const int64_t nblk = (C + BN_CB - 1) / BN_CB;
    #pragma omp parallel for if (M * C > CPU_PAR_MIN)
    for (int64_t blk = 0; blk < nblk; blk++) {
        const int64_t c0 = blk * BN_CB, nc = C - c0 < BN_CB ? C - c0 : BN_CB;
        float scale[BN_CB], shift[BN_CB];
        double s[BN_CB] = {0}, v[BN_CB] = {0}, m[BN_CB];
        if (training) { /* two passes, as cpu_batchnorm: the mean, then the centred sum of squares */
            for (int64_t r = 0; r < M; r++)
                for (int64_t j = 0; j < nc; j++) s[j] += er_load_f32(dt, x, r * C + c0 + j);
            for (int64_t j = 0; j < nc; j++) m[j] = s[j] / (double)M;
            for (int64_t r = 0; r < M; r++)
                for (int64_t j = 0; j < nc; j++) {
                    double d = er_load_f32(dt, x, r * C + c0 + j) - m[j];
                    v[j] += d * d;
                }
        }
        for (int64_t j = 0; j < nc; j++) {
            const int64_t c = c0 + j;
            float mu, rs;
            if (training) {
                double var = v[j] / (double)M;
                mu = (float)m[j];
                rs = (float)(1.0 / sqrt(var + eps));
                if (running_mean)
                    running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * m[j]);
                if (running_var) /* unbiased, as torch */
                    running_var[c] = (float)((1.0 - momentum) * running_var[c] +
                                             momentum * (M > 1 ? v[j] / (double)(M - 1) : var));
            } else {
                mu = running_mean[c];
                rs = (float)(1.0 / sqrt((double)running_var[c] + eps));
            }
            mean[c] = mu;
            rstd[c] = rs;
            scale[j] = rs * w[c];
            shift[j] = b[c] - mu * scale[j];
        }
        /* y = x * scale + shift (+ z), then the ReLU: fp32 throughout, one rounding at the store */
        for (int64_t r = 0; r < M; r++)
            for (int64_t j = 0; j < nc; j++) {
                const int64_t i = r * C + c0 + j;
                float t = er_load_f32(dt, x, i) * scale[j] + shift[j];
                if (z) t += er_load_f32(dt, z, i);
                if (relu) t = t > 0.0f ? t : 0.0f;
                er_store_f32(dt, y, i, t);
            }
    }
}

/* The CPU needs no scratch: a channel block's two sums stay in its thread. */
size_t cpu_batchnorm_nhwc_backward_workspace(int64_t M, int64_t C) { return 0; }

/* The masked gradient g of element i: 0 + (y > 0 ? gy : 0) with the fused ReLU (bnorm.c's masking
 * pass: a ReLU backward into a fresh buffer), gy itself without. */
static inline float masked_g(int dt, const void *gy, const void *y, int64_t i) {
    if (!y) return er_load_f32(dt, gy, i);
    return 0.0f + (er_load_f32(dt, y, i) > 0.0f ? er_load_f32(dt, gy, i) : 0.0f);
}

/* With xh = (x - mean) * rstd, per channel (cpu_batchnorm_backward's formulas and sums):
 *   gb += sum g, gw += sum g xh,
 *   training: gx (+)= w rstd (g - sum(g) / M - xh sum(g xh) / M);  eval: gx (+)= w rstd g
 * and gz (+)= g, written in the sums' pass. */
void cpu_batchnorm_nhwc_backward(int64_t M, int64_t C, int dt, const void *x, const float *w,
                                 const float *mean, const float *rstd, const void *gy, const void *y,
                                 int training, float eps, void *gx, int gx_acc, float *gw, float *gb,
                                 void *gz, int gz_acc, float *work) {
    const int64_t nblk = (C + BN_CB - 1) / BN_CB;
    const int sums = gx || gw || gb;
    #pragma omp parallel for if (M * C > CPU_PAR_MIN)
    for (int64_t blk = 0; blk < nblk; blk++) {
        const int64_t c0 = blk * BN_CB, nc = C - c0 < BN_CB ? C - c0 : BN_CB;
        const float *mu = mean + c0, *rs = rstd + c0;
        double sg[BN_CB] = {0}, sgx[BN_CB] = {0};
        if (sums || gz)
            for (int64_t r = 0; r < M; r++)
                for (int64_t j = 0; j < nc; j++) {
                    const int64_t i = r * C + c0 + j;
                    const float g = masked_g(dt, gy, y, i);
                    if (gz) er_store_f32(dt, gz, i, gz_acc ? er_load_f32(dt, gz, i) + g : g);
                    sg[j] += g;
                    sgx[j] += (double)g * ((er_load_f32(dt, x, i) - mu[j]) * rs[j]);
                }
        for (int64_t j = 0; j < nc; j++) {
            if (gb) gb[c0 + j] += (float)sg[j];
            if (gw) gw[c0 + j] += (float)sgx[j];
        }
        if (!gx) continue;
        float k[BN_CB], m1[BN_CB], m2[BN_CB];
        for (int64_t j = 0; j < nc; j++) {
            k[j] = w[c0 + j] * rs[j];
            m1[j] = training ? (float)(sg[j] / (double)M) : 0.0f;
            m2[j] = training ? (float)(sgx[j] / (double)M) : 0.0f;
        }
        for (int64_t r = 0; r < M; r++)
            for (int64_t j = 0; j < nc; j++) {
                const int64_t i = r * C + c0 + j;
                const float t = k[j] * (masked_g(dt, gy, y, i) - m1[j] - (er_load_f32(dt, x, i) - mu[j]) * rs[j] * m2[j]);
                er_store_f32(dt, gx, i, gx_acc ? er_load_f32(dt, gx, i) + t : 0.0f + t);
            }
    }
}
