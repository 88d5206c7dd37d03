/* pgcon_loss.c — PGCon / WINCon InfoNCE with a memory bank (see pgcon_loss.h). */
#include "nn/losses/pgcon_loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/ops.h"

tensor *pgcon_infonce(tensor *a, tensor *p, tensor *negs, tensor *extra, float tau, tensor **pos_sim) {
    if (!a || !p || !negs) return NULL;
    int64_t B = a->shape[0], D = a->shape[1], k = negs->shape[1];
    if (a->ndim != 2 || p->ndim != 2 || p->shape[0] != B || p->shape[1] != D || negs->ndim != 3 || negs->shape[0] != B ||
        negs->shape[2] != D || (extra && (extra->ndim != 2 || extra->shape[1] != D))) {
        er_fail(ER_INPUT, "pgcon_infonce: need a, p [B, D], negs [B, k, D], extra [E, D]");
        return NULL;
    }
    tensor *pos = op_sum(op_mul(a, p), 1, 1);                                        /* [B, 1] */
    tensor *neg = op_reshape(op_matmul(op_unsqueeze(a, 1), negs, 0, 1), 2, SHAPE(B, k)); /* [B, k] */
    tensor *parts[3] = {pos, neg, extra ? op_matmul(a, extra, 0, 1) : NULL};        /* + [B, E] */
    tensor *logits = op_mul_scalar(op_concat(extra ? 3 : 2, parts, 1), 1.0f / tau);
    if (!logits) return NULL;
    int32_t *zero = xcalloc((size_t)B, sizeof(int32_t));
    tensor *loss = op_cross_entropy(logits, zero);
    free(zero);
    if (pos_sim && loss) {
        NO_GRAD { *pos_sim = op_mean_all(pos); }
        if (!*pos_sim) return NULL;
    }
    return loss;
}

/* ---------------------------------------------------------------- reference */

static double norm(const float *x, int D) {
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)x[d] * x[d];
    return sqrt(s);
}

/* cos(x, y) and, when gx/gy are given, g * d cos / dx and d cos / dy added into them. */
static double cosine(const float *x, const float *y, int D, double g, double *gx, double *gy) {
    double nx = norm(x, D), ny = norm(y, D), dot = 0;
    for (int d = 0; d < D; d++) dot += (double)x[d] * y[d];
    double c = dot / (nx * ny);
    for (int d = 0; d < D && g != 0; d++) {
        if (gx) gx[d] += g * (y[d] / (nx * ny) - c * x[d] / (nx * nx));
        if (gy) gy[d] += g * (x[d] / (nx * ny) - c * y[d] / (ny * ny));
    }
    return c;
}

double pgcon_infonce_host(const float *a, const float *p, const float *negs, int k, const float *extra, int E, int B,
                          int D, double tau, double *grad_a, double *grad_p, double *grad_extra) {
    if (grad_a) memset(grad_a, 0, sizeof(double) * B * D);
    if (grad_p) memset(grad_p, 0, sizeof(double) * B * D);
    if (grad_extra) memset(grad_extra, 0, sizeof(double) * E * D);
    int C = 1 + k + E;
    double *z = xmalloc(sizeof(double) * C), total = 0;
    for (int i = 0; i < B; i++) {
        const float *ai = a + (size_t)i * D;
        for (int c = 0; c < C; c++) {
            const float *y = c == 0 ? p + (size_t)i * D : c <= k ? negs + ((size_t)i * k + c - 1) * D : extra + (size_t)(c - 1 - k) * D;
            z[c] = cosine(ai, y, D, 0, NULL, NULL) / tau;
        }
        double mx = z[0], s = 0;
        for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
        for (int c = 0; c < C; c++) s += exp(z[c] - mx);
        total += -(z[0] - mx - log(s));
        /* d loss_i / d z_c = softmax_c - [c == 0], each over B (the mean) */
        for (int c = 0; c < C; c++) {
            double g = (exp(z[c] - mx) / s - (c == 0)) / B / tau;
            const float *y = c == 0 ? p + (size_t)i * D : c <= k ? negs + ((size_t)i * k + c - 1) * D : extra + (size_t)(c - 1 - k) * D;
            double *gy = c == 0 ? (grad_p ? grad_p + (size_t)i * D : NULL)
                       : c <= k ? NULL : (grad_extra ? grad_extra + (size_t)(c - 1 - k) * D : NULL);
            cosine(ai, y, D, g, grad_a ? grad_a + (size_t)i * D : NULL, gy);
        }
    }
    free(z);
    return total / B;
}

/* ---------------------------------------------------------------- memory bank */

void pgcon_sample_negatives(rng_t *r, int N, int i, int k, uint8_t *seen, int32_t *out) {
    /* Floyd: for j = n-k .. n-1 draw t in [0, j]; take t unless taken, else j. Values live in
     * {0..n-1} with n = N - 1 and map v -> v + (v >= i), which skips i. */
    int n = N - 1;
    for (int j = n - k, m = 0; j < n; j++, m++) {
        int t = (int)rng_below(r, (uint32_t)j + 1);
        if (seen[t]) t = j;
        seen[t] = 1;
        out[m] = t + (t >= i);
    }
    for (int m = 0; m < k; m++) seen[out[m] - (out[m] > i)] = 0;
}

void pgcon_memory_update(float *M, int D, const int *idx, const float *z, int B, float mu) {
    for (int b = 0; b < B; b++) {
        float *m = M + (size_t)idx[b] * D;
        const float *zb = z + (size_t)b * D;
        double nz = norm(zb, D), s = 0;
        nz = nz > 1e-12 ? nz : 1e-12;
        for (int d = 0; d < D; d++) {
            m[d] = (float)(mu * m[d] + (1.0 - mu) * zb[d] / nz);
            s += (double)m[d] * m[d];
        }
        double nm = sqrt(s) > 1e-12 ? sqrt(s) : 1e-12;
        for (int d = 0; d < D; d++) m[d] = (float)(m[d] / nm);
    }
}

void pgcon_memory_rows(const float *M, int D, const int32_t *idx, int n, float *out) {
    for (int j = 0; j < n; j++) memcpy(out + (size_t)j * D, M + (size_t)idx[j] * D, sizeof(float) * D);
}
