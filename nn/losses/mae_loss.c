/* mae_loss.c — MAE masking (random / lesion-guided), reconstruction target and masked-patch MSE. */
#include "nn/losses/mae_loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/ops.h"
#include "nn/base/rng.h"

int mae_len_keep(int L, double mask_ratio) {
    int k = (int)(L * (1.0 - mask_ratio));
    return k < 0 ? 0 : k > L ? L : k;
}

typedef struct { double key; int32_t idx; } keyed;

static int cmp_keyed(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->key < y->key) return -1;
    if (x->key > y->key) return 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

void mae_masking(int B, int L, int K, const float *scores, const uint8_t *has_mask, uint64_t seed,
                 uint64_t step, int32_t *ids_shuffle, int32_t *ids_restore, float *mask) {
    keyed *kv = xmalloc((size_t)L * sizeof *kv);
    for (int b = 0; b < B; b++) {
        rng_t r = rng_make(seed, rng_stream(RNG_MASKING, (uint32_t)step, (uint32_t)b));
        int guided = scores && (!has_mask || has_mask[b]);
        for (int l = 0; l < L; l++) {
            double u = rng_uniform_double(&r);
            if (guided) {
                double s = scores[(size_t)b * L + l];
                /* background score in [0.01, 1), lesion score = pixel mass (>= 1 pixel > 0);
                 * sort ascending on -score keeps the largest scores first */
                kv[l].key = s > 0 ? -(1.0 + s) : -(u * 0.99 + 0.01);
            } else {
                kv[l].key = u;
            }
            kv[l].idx = l;
        }
        qsort(kv, L, sizeof *kv, cmp_keyed);
        int32_t *sh = ids_shuffle + (size_t)b * L, *re = ids_restore + (size_t)b * L;
        float *m = mask + (size_t)b * L;
        for (int j = 0; j < L; j++) {
            sh[j] = kv[j].idx;
            re[kv[j].idx] = j;
            m[kv[j].idx] = j < K ? 0.0f : 1.0f;
        }
    }
    free(kv);
}

void mae_patch_scores(const float *masks, int B, int H, int W, int p, float *scores) {
    int gh = H / p, gw = W / p;
    for (int b = 0; b < B; b++)
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++) {
                double s = 0;
                for (int dy = 0; dy < p; dy++)
                    for (int dx = 0; dx < p; dx++) {
                        float v = masks[((size_t)b * H + (size_t)gy * p + dy) * W + (size_t)gx * p + dx];
                        if (v > 0) s += v;
                    }
                scores[(size_t)b * gh * gw + (size_t)gy * gw + gx] = (float)s;
            }
}

void mae_target(const float *img, int B, int C, int H, int W, int p, int norm_pix, float *out) {
    int gh = H / p, gw = W / p;
    size_t pd = (size_t)p * p * C;
    for (int b = 0; b < B; b++)
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++) {
                float *dst = out + ((size_t)b * gh * gw + (size_t)gy * gw + gx) * pd;
                for (int dy = 0; dy < p; dy++)
                    for (int dx = 0; dx < p; dx++)
                        for (int c = 0; c < C; c++)
                            dst[((size_t)dy * p + dx) * C + c] =
                                img[(((size_t)b * C + c) * H + (size_t)gy * p + dy) * W + (size_t)gx * p + dx];
                if (norm_pix) {
                    double mean = 0, var = 0;
                    for (size_t j = 0; j < pd; j++) mean += dst[j];
                    mean /= pd;
                    for (size_t j = 0; j < pd; j++) var += (dst[j] - mean) * (dst[j] - mean);
                    var /= (pd > 1 ? pd - 1 : 1); /* torch.var default: unbiased */
                    double inv = 1.0 / sqrt(var + 1e-6);
                    for (size_t j = 0; j < pd; j++) dst[j] = (float)((dst[j] - mean) * inv);
                }
            }
}

tensor *mae_target_t(tensor *img, int p, int norm_pix) {
    if (!img) return NULL;
    if (img->ndim != 4 || p < 1 || img->shape[2] % p || img->shape[3] % p) {
        char b[96];
        er_fail(ER_INPUT, "mae_target: image %s is not [B, C, H, W] with H, W multiples of %d", tensor_shape_str(img, b, sizeof b), p);
        return NULL;
    }
    int64_t B = img->shape[0], C = img->shape[1], gh = img->shape[2] / p, gw = img->shape[3] / p, P = (int64_t)p * p * C;
    tensor *x = op_reshape(img, 6, SHAPE(B, C, gh, p, gw, p));
    x = op_permute(x, (const int[]){0, 2, 4, 3, 5, 1});                 /* (b, gy, gx, dy, dx, c) */
    x = op_reshape(op_contiguous(x), 3, SHAPE(B, gh * gw, P));
    if (!norm_pix) return x;
    tensor *d = op_sub(x, op_mean(x, -1, 1));
    tensor *var = op_mul_scalar(op_sum(op_mul(d, d), -1, 1), (float)(1.0 / (P > 1 ? P - 1 : 1))); /* unbiased */
    return op_div(d, op_sqrt(op_add_scalar(var, 1e-6f)));
}

tensor *mae_loss_t(tensor *pred, tensor *target, const float *mask) {
    if (!pred || !target) return NULL;
    if (!tensor_same_shape(pred, target) || pred->ndim != 3 || pred->device != target->device) {
        char a[96], b[96];
        er_fail(ER_INPUT, "mae_loss: prediction %s and target %s differ (shape or device)", tensor_shape_str(pred, a, sizeof a),
                tensor_shape_str(target, b, sizeof b));
        return NULL;
    }
    int64_t B = pred->shape[0], L = pred->shape[1];
    double msum = 0; /* B*L host floats: the normaliser needs no device round trip */
    for (int64_t i = 0; i < B * L; i++) msum += mask[i];
    tensor *m = tensor_upload(pred->device, 2, SHAPE(B, L), mask);
    tensor *diff = op_sub(pred, target);
    tensor *per_patch = op_mean(op_mul(diff, diff), -1, 0);              /* [B,L] */
    tensor *loss = op_sum_all(op_mul(per_patch, m));
    return op_mul_scalar(loss, msum > 0 ? (float)(1.0 / msum) : 0.0f);
}

tensor *mae_loss(tensor *pred, const float *target, const float *mask) {
    if (!pred) return NULL;
    return mae_loss_t(pred, tensor_upload(pred->device, pred->ndim, pred->shape, target), mask);
}
