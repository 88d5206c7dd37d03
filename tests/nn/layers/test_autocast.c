/* The autocast policy (nn/layers/autocast.h): under fp32 each helper is exactly its op (fp32 runs
 * unchanged, bit for bit); under bf16 each stores what the policy says (products' activations and
 * the block's hidden tensors bf16; heads, the residual stream and convolutions fp32) with the
 * bits of the op it stands for; and a ViT block's bf16 forward and gradients track its fp32 ones
 * within the bf16 tolerance (llm.c's thr + eps |ref|, eps = 2^-8; thr 2^-6 of the scale: the
 * roundings of its chain, as tests/nn/test_ops_bf16.c's MLP). */
#include <math.h>
#include <string.h>

#include "nn/autograd.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/layers/lora.h"
#include "nn/layers/vit_block.h"
#include "nn/precision.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static const nn_ctx F32 = {1, 1, 0, 0, ER_PREC_FP32}, B16 = {1, 1, 0, 0, ER_PREC_BF16};

static float *host(const tensor *t) {
    float *h = xmalloc((size_t)tensor_numel(t) * sizeof(float));
    tensor_to_host(t, h);
    return h;
}

static void expect_same(const tensor *a, const tensor *b, const char *what) {
    cr_assert_not_null(a, "%s: %s", what, er_msg());
    cr_assert_not_null(b, "%s: %s", what, er_msg());
    cr_assert_eq(a->dtype, b->dtype, "%s: dtypes differ", what);
    float *x = host(a), *y = host(b);
    cr_assert_eq(memcmp(x, y, (size_t)tensor_numel(a) * 4), 0, "%s: bits differ", what);
    free(x), free(y);
}

Test(nn_autocast, fp32_is_each_op_and_bf16_stores_what_the_policy_says) {
    tensor *x = gc_rand(3, SHAPE(2, 5, 32), 1, -1, 1), *w = gc_rand(2, SHAPE(24, 32), 2, -0.3f, 0.3f);
    tensor *b = gc_rand(1, SHAPE(24), 3, -0.1f, 0.1f), *res = gc_rand(3, SHAPE(2, 5, 24), 4, -1, 1);
    tensor *lw = gc_rand(1, SHAPE(32), 5, 0.5f, 1.5f), *lb = gc_rand(1, SHAPE(32), 6, -0.1f, 0.1f);
    tensor *img = gc_rand(4, SHAPE(2, 3, 9, 9), 7, -1, 1), *cw = gc_rand(4, SHAPE(4, 3, 3, 3), 8, -0.3f, 0.3f);
    tensor *q = gc_rand(4, SHAPE(2, 2, 5, 16), 9, -1, 1);
    /* fp32: the ops themselves */
    expect_same(ac_linear(&F32, x, w, b), op_linear(x, w, b), "fp32 linear");
    expect_same(ac_linear_act(&F32, x, w, b), op_linear(x, w, b), "fp32 linear_act");
    expect_same(ac_linear_add(&F32, x, w, b, res), op_linear_add(x, w, b, res), "fp32 linear_add");
    expect_same(ac_layernorm(&F32, x, lw, lb, 1e-6f), op_layernorm(x, lw, lb, 1e-6f), "fp32 layernorm");
    expect_same(ac_attention(&F32, q, q, q), op_attention(q, q, q, NULL, MASK_NONE, 0), "fp32 attention");
    expect_same(ac_conv2d(&F32, img, cw, NULL, 2, 1, 1, 1), op_conv2d(img, cw, NULL, 2, 1, 1, 1), "fp32 conv2d");
    cr_assert_eq(ac_act(&F32, x), x, "fp32: an fp32 activation is itself");
    cr_assert_eq(ac_act(NULL, x), x, "no context: fp32");
    /* bf16: the dtypes of the policy, the bits of the ops on the cast operands */
    tensor *xb = op_cast(x, DT_BF16);
    expect_same(ac_linear(&B16, x, w, b), op_linear_to(xb, w, b, DT_F32), "bf16 linear (fp32 store)");
    expect_same(ac_linear_act(&B16, x, w, b), op_linear(xb, w, b), "bf16 linear_act (bf16 store)");
    cr_assert_eq(ac_linear_act(&B16, x, w, b)->dtype, DT_BF16);
    expect_same(ac_linear_add(&B16, x, w, b, res), op_linear_add(xb, w, b, res), "bf16 linear_add");
    cr_assert_eq(ac_linear_add(&B16, x, w, b, res)->dtype, DT_F32, "the residual stream stays fp32");
    expect_same(ac_layernorm(&B16, x, lw, lb, 1e-6f), op_layernorm_to(x, lw, lb, 1e-6f, DT_BF16), "bf16 layernorm");
    tensor *qb = op_cast(q, DT_BF16);
    expect_same(ac_attention(&B16, q, q, q), op_attention(qb, qb, qb, NULL, MASK_NONE, 0), "bf16 attention");
    const int s[2] = {2, 2}, p[2] = {1, 1}, d[2] = {1, 1};
    tensor *cy = ac_conv2d(&B16, img, cw, NULL, 2, 1, 1, 1);
    expect_same(cy, op_conv2d_ex(img, cw, NULL, s, p, d, 1, GEMM_COMPUTE_BF16), "bf16 conv2d");
    cr_assert_eq(cy->dtype, DT_F32, "a convolution stores fp32 (batch norm follows)");
    float *c32 = host(op_conv2d(img, cw, NULL, 2, 1, 1, 1)), *c16 = host(cy);
    cr_assert_neq(memcmp(c32, c16, (size_t)tensor_numel(cy) * 4), 0, "bf16 conv has fp32's bits: compute not passed");
    free(c32), free(c16);
    cr_assert_eq(ac_f32(xb)->dtype, DT_F32);
    nn_step_end();
    tensor *all[] = {x, w, b, res, lw, lb, img, cw, q};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tensor_free(all[i]);
}

/* largest |got - ref| - (thr + 2^-8 |ref|) over n: <= 0 passes */
static void expect_tracks(const float *got, const float *ref, int64_t n, const char *what) {
    double scale = 0, worst = -INFINITY;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
    const double thr = scale / 64;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) - (thr + fabs(ref[i]) / 256);
        if (e > worst) worst = e, at = i;
    }
    cr_assert_leq(worst, 0.0, "%s: element %lld bf16 %.6g, fp32 %.6g (thr %.3g)", what, (long long)at, got[at], ref[at], thr);
}

/* A ViT block (dim 64, 4 heads: head width 16, the fused attention path) in bf16 against fp32:
 * output and the gradients of x and of every weight. with_lora: adapters on qkv and fc1 (B set
 * nonzero, dropout on: its fp32-only op sees a bf16 input under bf16), the LoRA fine-tuning path. */
static void block_case(int with_lora) {
    param_list pl = {0};
    vit_block blk;
    vit_block_init(&blk, "blk", 64, 4.0, 1, 0.0, 7, &pl);
    lora ad[2];
    if (with_lora) {
        const lora_config lc = {4, 8.0, 0.1};
        lora_init(&ad[0], "blk.attn.qkv", 64, 192, 0, 0, &lc, 0, 7, &pl);
        lora_init(&ad[1], "blk.mlp.fc1", 64, 256, 0, 0, &lc, 1, 7, &pl);
        for (int i = 0; i < 2; i++) {
            float *h = host(ad[i].B);
            for (int64_t j = 0; j < tensor_numel(ad[i].B); j++) h[j] = 0.05f * cosf((float)(3 * j + i));
            tensor_copy_from_host(ad[i].B, h);
            free(h);
        }
        blk.lora[VIT_LORA_QKV] = &ad[0], blk.lora[VIT_LORA_FC1] = &ad[1];
    }
    for (int i = 0; i < pl.n; i++) /* nonzero biases and norm weights: every term counts */
        if (pl.t[i]->ndim == 1) {
            float *h = host(pl.t[i]);
            for (int64_t j = 0; j < tensor_numel(pl.t[i]); j++) h[j] += 0.05f * sinf((float)(i * 7 + j));
            tensor_copy_from_host(pl.t[i], h);
            free(h);
        }
    tensor *x = gc_rand(3, SHAPE(2, 17, 64), 11, -1, 1), *r = gc_rand(3, SHAPE(2, 17, 64), 12, -1, 1);
    float *y[2], *gx[2], **gw[2];
    for (int v = 0; v < 2; v++) {
        tensor *out = vit_block_forward(&blk, v ? &B16 : &F32, x, 4, 1e-6f);
        cr_assert_not_null(out, "%s", er_msg());
        cr_assert_eq(out->dtype, DT_F32, "the block's output is the fp32 residual stream");
        y[v] = host(out);
        cr_assert_eq(backward(op_sum_all(op_mul(out, r))), ER_OK, "%s", er_msg());
        gx[v] = host(x->grad);
        tensor_fill(x->grad, 0.0f);
        gw[v] = xmalloc((size_t)pl.n * sizeof(float *));
        for (int i = 0; i < pl.n; i++) {
            gw[v][i] = host(pl.t[i]->grad);
            tensor_fill(pl.t[i]->grad, 0.0f);
        }
        nn_step_end();
    }
    cr_assert_neq(memcmp(y[0], y[1], sizeof(float) * 2 * 17 * 64), 0, "bf16 gave fp32's bits: autocast not applied");
    expect_tracks(y[1], y[0], 2 * 17 * 64, "block output");
    expect_tracks(gx[1], gx[0], 2 * 17 * 64, "dL/dx");
    for (int i = 0; i < pl.n; i++) expect_tracks(gw[1][i], gw[0][i], tensor_numel(pl.t[i]), pl.t[i]->name);
    for (int v = 0; v < 2; v++) {
        for (int i = 0; i < pl.n; i++) free(gw[v][i]);
        free(gw[v]), free(y[v]), free(gx[v]);
    }
    tensor_free(x), tensor_free(r);
    params_free(&pl);
}

Test(nn_autocast, vit_block_bf16_tracks_fp32) { block_case(0); }
Test(nn_autocast, vit_block_with_lora_bf16_tracks_fp32) { block_case(1); }
