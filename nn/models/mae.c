/* mae.c — MAE masking (random / lesion-guided), decoder and masked-patch MSE. */
#include "nn/models/mae.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/init.h"
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

static tensor *named_param(param_list *pl, const char *name, int ndim, const int64_t *shape) {
    tensor *t = tensor_param(name, ndim, shape);
    params_add(pl, t);
    return t;
}

int mae_decoder_init(mae_decoder *d, const vit_config *enc, int dim, int depth, int heads, uint64_t seed,
                     param_list *pl) {
    memset(d, 0, sizeof *d);
    if (dim < 4 || dim % 4 || heads < 1 || dim % heads || depth < 0)
        return er_fail(ER_INPUT, "mae decoder: dim %d must be a multiple of 4 and of heads %d", dim, heads);
    d->dim = dim; d->depth = depth; d->heads = heads; d->eps = (float)enc->eps;
    d->grid = enc->img / enc->patch;
    d->L = d->grid * d->grid;
    d->patch_dim = enc->patch * enc->patch * enc->in_chans;
    /* MAE init: xavier-uniform linears, zero bias, N(0, 0.02) mask token, fixed sin-cos positions */
    d->embed_w = named_param(pl, "decoder_embed.weight", 2, SHAPE(dim, enc->dim));
    d->embed_b = named_param(pl, "decoder_embed.bias", 1, SHAPE(dim));
    { rng_t r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)pl->n, 1));
      init_xavier_uniform(d->embed_w->data, tensor_numel(d->embed_w), enc->dim, dim, 1.0f, &r); }
    d->mask_token = named_param(pl, "mask_token", 3, SHAPE(1, 1, dim));
    { rng_t r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)pl->n, 1));
      init_normal(d->mask_token->data, dim, 0, 0.02f, &r); }
    d->pos_embed = named_param(pl, "decoder_pos_embed", 3, SHAPE(1, 1 + d->L, dim));
    init_sincos_pos_embed_2d(d->pos_embed->data, dim, d->grid, d->grid, 1);
    tensor_set_requires_grad(d->pos_embed, 0);
    d->blocks = xcalloc(depth ? depth : 1, sizeof(vit_block));
    for (int i = 0; i < depth; i++) {
        char prefix[40];
        snprintf(prefix, sizeof prefix, "decoder_blocks.%d", i);
        vit_block_init(&d->blocks[i], prefix, dim, 4.0, 1, 0, seed ^ 0x9e3779b97f4a7c15ull, pl);
    }
    d->norm_w = named_param(pl, "decoder_norm.weight", 1, SHAPE(dim));
    init_ones(d->norm_w->data, dim);
    d->norm_b = named_param(pl, "decoder_norm.bias", 1, SHAPE(dim));
    d->pred_w = named_param(pl, "decoder_pred.weight", 2, SHAPE(d->patch_dim, dim));
    d->pred_b = named_param(pl, "decoder_pred.bias", 1, SHAPE(d->patch_dim));
    { rng_t r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)pl->n, 1));
      init_xavier_uniform(d->pred_w->data, tensor_numel(d->pred_w), dim, d->patch_dim, 1.0f, &r); }
    return ER_OK;
}

int mae_decoder_init_on(int device, mae_decoder *d, const vit_config *enc, int dim, int depth, int heads,
                        uint64_t seed, param_list *pl) {
    int first = pl->n;
    int rc = mae_decoder_init(d, enc, dim, depth, heads, seed, pl);
    for (int i = first; !rc && i < pl->n; i++) rc = tensor_to_device(pl->t[i], device);
    return rc;
}

void mae_decoder_free(mae_decoder *d) {
    free(d->blocks);
    d->blocks = NULL;
}

tensor *mae_decoder_forward(const mae_decoder *d, tensor *latent, int registers, const int32_t *ids_restore) {
    if (!latent) return NULL;
    int64_t B = latent->shape[0], T = latent->shape[1], K = T - 1 - registers, L = d->L, D = d->dim;
    tensor *x = op_linear(latent, d->embed_w, d->embed_b);               /* [B,T,Dd] */
    tensor *cls = op_slice(x, 1, 0, 1);
    tensor *vis = op_slice(x, 1, 1 + registers, T);                      /* [B,K,Dd] */
    tensor *parts[2] = {vis, NULL};
    int np = 1;
    if (L > K) parts[np++] = op_add(tensor_zeros(x ? x->device : DEV_CPU, 3, SHAPE(B, L - K, D)), d->mask_token);
    tensor *full = np == 2 ? op_concat(2, parts, 1) : vis;                /* shuffled order */
    full = op_gather(full, 1, ids_restore, (int)L);                      /* original order */
    tensor *both[2] = {cls, full};
    x = op_concat(2, both, 1);
    x = op_add(x, d->pos_embed);
    for (int i = 0; i < d->depth; i++) x = vit_block_forward(&d->blocks[i], x, d->heads, d->eps);
    x = op_layernorm(x, d->norm_w, d->norm_b, d->eps);
    x = op_linear(x, d->pred_w, d->pred_b);
    return op_slice(x, 1, 1, 1 + L);
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
