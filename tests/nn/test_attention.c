/* Scaled-dot-product attention against a naive materialised softmax(QK^T * scale + mask) V,
 * including packed-qkv views, additive and boolean masks, and finite-difference gradients. */
#include <math.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

typedef struct { tensor *mask; int kind; int packed; int H; } at_ctx;

/* packed: in[0] is a [B, T, 3, H, D] qkv projection, split by permute + slice views */
static tensor *f_attn(tensor **in, void *cv) {
    at_ctx *c = cv;
    if (c->packed) {
        int perm[5] = {2, 0, 3, 1, 4};
        tensor *p = op_permute(in[0], perm); /* [3, B, H, T, D] */
        tensor *q = op_squeeze(op_slice(p, 0, 0, 1), 0), *k = op_squeeze(op_slice(p, 0, 1, 2), 0),
               *v = op_squeeze(op_slice(p, 0, 2, 3), 0);
        return op_attention(q, k, v, c->mask, c->kind, 0);
    }
    return op_attention(in[0], in[1], in[2], c->mask, c->kind, 0);
}

/* naive reference in double on packed q/k/v [B, H, T, D] host arrays */
static void ref_attention(int B, int H, int Tq, int Tk, int D, const float *q, const float *k,
                          const float *v, const float *mask, int kind, double *o) {
    double *s = malloc(sizeof(double) * Tk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Tq; i++) {
                const float *qi = q + (((int64_t)b * H + h) * Tq + i) * D;
                double m = -INFINITY;
                for (int j = 0; j < Tk; j++) {
                    const float *kj = k + (((int64_t)b * H + h) * Tk + j) * D;
                    double d = 0;
                    for (int e = 0; e < D; e++) d += (double)qi[e] * kj[e];
                    d /= sqrt((double)D);
                    if (kind == MASK_ADD) d += mask[(int64_t)i * Tk + j];
                    if (kind == MASK_BOOL && mask[(int64_t)i * Tk + j] == 0) d = -INFINITY;
                    s[j] = d;
                    m = fmax(m, d);
                }
                double z = 0;
                for (int j = 0; j < Tk; j++) z += s[j] = m == -INFINITY ? 0 : exp(s[j] - m);
                double *oi = o + (((int64_t)b * H + h) * Tq + i) * D;
                for (int e = 0; e < D; e++) {
                    double acc = 0;
                    for (int j = 0; j < Tk; j++) acc += s[j] / (z > 0 ? z : 1) * v[(((int64_t)b * H + h) * Tk + j) * D + e];
                    oi[e] = m == -INFINITY ? 0 : acc;
                }
            }
    free(s);
}

static void run_case(int B, int H, int Tq, int Tk, int D, int kind, int seed, int check_grad) {
    int max_elems = Tq > 100 ? 16 : 60; /* FD over a random subset: each probe is two full forwards */
    tensor *in[3] = {gc_rand(4, SHAPE(B, H, Tq, D), seed, -1, 1), gc_rand(4, SHAPE(B, H, Tk, D), seed + 1, -1, 1),
                     gc_rand(4, SHAPE(B, H, Tk, D), seed + 2, -1, 1)};
    tensor *mask = NULL;
    if (kind != MASK_NONE) {
        mask = tensor_new(2, SHAPE(Tq, Tk)); /* broadcast over B, H */
        rng_t r = rng_make(seed, 1);
        for (int64_t i = 0; i < (int64_t)Tq * Tk; i++)
            mask->data[i] = kind == MASK_ADD ? rng_uniform(&r) - 0.5f : (rng_uniform(&r) < 0.7f);
        if (kind == MASK_BOOL) mask->data[0] = 1; /* row 0 keeps something; others may be fully masked */
    }
    at_ctx c = {mask, kind, 0, H};
    tensor *o = f_attn(in, &c);
    cr_assert_not_null(o, "%s", er_msg());
    double *ref = malloc(sizeof(double) * B * H * Tq * D);
    ref_attention(B, H, Tq, Tk, D, in[0]->data, in[1]->data, in[2]->data, mask ? mask->data : NULL, kind, ref);
    cr_assert_lt(gc_maxdiff_t(o, ref), 2e-5, "B%d H%d Tq%d Tk%d D%d kind %d", B, H, Tq, Tk, D, kind);
    if (check_grad) {
        gc_opts go = gc_default();
        go.max_elems = max_elems;
        cr_assert_eq(gradcheck("attention", f_attn, &c, 3, in, go), 0, "B%d H%d Tq%d Tk%d D%d kind %d", B, H, Tq, Tk, D, kind);
    }
    free(ref);
    tensor_free(mask);
    gc_free(3, in);
    nn_step_end();
}

Test(nn_attention, forward_matches_naive_softmax) {
    run_case(1, 1, 1, 1, 1, MASK_NONE, 1, 1);
    run_case(2, 3, 17, 17, 8, MASK_NONE, 2, 1);
    run_case(2, 3, 17, 5, 3, MASK_ADD, 3, 1);
    run_case(1, 2, 5, 17, 4, MASK_BOOL, 4, 1);
    run_case(3, 1, 3, 3, 16, MASK_NONE, 5, 1);
    /* head widths of the AVX-512 per-head products (D % 16 == 0, <= 64): row tails (not a
     * multiple of 8 or 6), column tails (not a multiple of 48 or 16), masks */
    run_case(1, 2, 9, 53, 64, MASK_NONE, 7, 1);
    run_case(2, 1, 14, 7, 32, MASK_ADD, 8, 1);
    run_case(1, 1, 50, 17, 48, MASK_BOOL, 9, 1);
    run_case(1, 1, 1, 49, 64, MASK_NONE, 10, 0);
    /* unmasked: the fused kernels (kernels/cpu/attention_avx512.c), 8- and 24-row blocks with
     * 4/2/1-row tails, 48-column tiles with 16-column tails */
    run_case(2, 2, 13, 29, 32, MASK_NONE, 11, 1);
    run_case(1, 1, 31, 7, 48, MASK_NONE, 12, 1);
    run_case(1, 3, 25, 24, 16, MASK_NONE, 13, 1);
    run_case(1, 1, 3, 50, 64, MASK_NONE, 14, 1);
}

Test(nn_attention, vit_sized_197_tokens) {
    SLOW_TEST();
    run_case(2, 3, 197, 197, 16, MASK_NONE, 6, 1);
}

static void packed_case(int B, int T, int H, int D) {
    tensor *qkv = gc_rand(5, SHAPE(B, T, 3, H, D), 9, -1, 1);
    at_ctx c = {NULL, MASK_NONE, 1, H};
    tensor *in[1] = {qkv};
    tensor *o = f_attn(in, &c);
    cr_assert_not_null(o, "%s", er_msg());
    /* reference from packed copies */
    float *q = malloc(sizeof(float) * B * H * T * D * 3), *k = q + B * H * T * D, *v = k + B * H * T * D;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++) {
                    int64_t src = ((((int64_t)b * T + t) * 3) * H + h) * D + d, dst = (((int64_t)b * H + h) * T + t) * D + d;
                    q[dst] = qkv->data[src];
                    k[dst] = qkv->data[src + H * D];
                    v[dst] = qkv->data[src + 2 * H * D];
                }
    double *ref = malloc(sizeof(double) * B * H * T * D);
    ref_attention(B, H, T, T, D, q, k, v, NULL, MASK_NONE, ref);
    cr_assert_lt(gc_maxdiff_t(o, ref), 2e-5);
    gc_opts go = gc_default();
    go.max_elems = 100;
    cr_assert_eq(gradcheck("attention_packed", f_attn, &c, 1, in, go), 0);
    free(q);
    free(ref);
    tensor_free(qkv);
    nn_step_end();
}

Test(nn_attention, packed_qkv_views_and_grad) {
    packed_case(2, 17, 2, 4);
    packed_case(2, 19, 2, 16); /* a fused-kernel width: strided q/k/v rows, gradients into the packed buffer */
}

Test(nn_attention, shape_errors) {
    tensor *q = tensor_new(4, SHAPE(1, 2, 3, 4)), *k = tensor_new(4, SHAPE(1, 2, 5, 3));
    cr_assert_null(op_attention(q, k, k, NULL, MASK_NONE, 0));
    tensor *m = tensor_new(2, SHAPE(3, 4));
    cr_assert_null(op_attention(q, q, q, m, MASK_ADD, 0));
    tensor_free(q);
    tensor_free(k);
    tensor_free(m);
}

Test(nn_attention, fully_masked_row_gives_zero_and_no_nan) {
    int B = 1, H = 2, Tq = 3, Tk = 4, D = 5;
    tensor *in[3] = {gc_rand(4, SHAPE(B, H, Tq, D), 11, -1, 1), gc_rand(4, SHAPE(B, H, Tk, D), 12, -1, 1),
                     gc_rand(4, SHAPE(B, H, Tk, D), 13, -1, 1)};
    tensor *mask = tensor_new(2, SHAPE(Tq, Tk));
    for (int j = 0; j < Tk; j++) {
        mask->data[0 * Tk + j] = 1;      /* row 0: all visible */
        mask->data[1 * Tk + j] = 0;      /* row 1: fully masked */
        mask->data[2 * Tk + j] = j == 2; /* row 2: one key */
    }
    at_ctx c = {mask, MASK_BOOL, 0, H};
    tensor *o = f_attn(in, &c);
    double *ref = malloc(sizeof(double) * B * H * Tq * D);
    ref_attention(B, H, Tq, Tk, D, in[0]->data, in[1]->data, in[2]->data, mask->data, MASK_BOOL, ref);
    cr_assert_lt(gc_maxdiff_t(o, ref), 2e-5);
    float h[2 * 3 * 5];
    tensor_to_host(o, h);
    for (int hh = 0; hh < H; hh++)
        for (int d = 0; d < D; d++) cr_assert_eq(h[(hh * Tq + 1) * D + d], 0.0f);
    cr_assert_eq(gradcheck("attention_masked_rows", f_attn, &c, 3, in, gc_default()), 0);
    for (int i = 0; i < 3; i++)
        for (int64_t e = 0; e < tensor_numel(in[i]); e++) cr_assert(isfinite(in[i]->grad->data[e]));
    free(ref);
    tensor_free(mask);
    gc_free(3, in);
}

/* q/k/v gradients go straight into the packed qkv gradient when they are pure views of it
 * (ops_attention.c grad_dest); here the views also feed other ops, recorded before and after the
 * attention, so the direct write and the views' own backward both add into the same buffers:
 * finite differences check the sum. */
static tensor *f_attn_shared_views(tensor **in, void *cv) {
    int mode = *(int *)cv, perm[5] = {2, 0, 3, 1, 4};
    tensor *p = op_permute(in[0], perm);
    tensor *pp = mode == 1 ? op_sum_all(op_mul(p, p)) : NULL; /* before: p's gradient comes later */
    tensor *q = op_squeeze(op_slice(p, 0, 0, 1), 0), *k = op_squeeze(op_slice(p, 0, 1, 2), 0),
           *v = op_squeeze(op_slice(p, 0, 2, 3), 0);
    tensor *o = op_attention(q, k, v, NULL, MASK_NONE, 0);
    if (mode == 0) return op_add(o, op_mul(q, q));                    /* after: q used again */
    if (mode == 1) return op_add(o, pp);
    return op_add(op_attention(q, q, v, NULL, MASK_NONE, 0), o);      /* q as query and key */
}

Test(nn_attention, packed_qkv_grad_shared_with_other_ops) {
    int B = 2, T = 5, H = 2, D = 4;
    for (int mode = 0; mode < 3; mode++) {
        tensor *qkv = gc_rand(5, SHAPE(B, T, 3, H, D), 21 + mode, -1, 1);
        tensor *in[1] = {qkv};
        gc_opts go = gc_default();
        go.max_elems = 120;
        cr_assert_eq(gradcheck("attention_shared_views", f_attn_shared_views, &mode, 1, in, go), 0, "mode %d", mode);
        tensor_free(qkv);
    }
}

/* q, k and v all add straight into the packed qkv gradient (ops_attention.c grad_dest): the
 * permute / slice views in between get no gradient buffer, so no zero fill and no copies. q given
 * as the key too must not (gq and gk would alias): it takes its own buffer. */
Test(nn_attention, packed_qkv_gradients_skip_the_views) {
    int B = 2, T = 7, H = 2, D = 16, perm[5] = {2, 0, 3, 1, 4};
    for (int same = 0; same < 2; same++) {
        tensor *qkv = gc_rand(5, SHAPE(B, T, 3, H, D), 31, -1, 1);
        tensor *p = op_permute(qkv, perm);
        tensor *q = op_squeeze(op_slice(p, 0, 0, 1), 0), *k = op_squeeze(op_slice(p, 0, 1, 2), 0),
               *v = op_squeeze(op_slice(p, 0, 2, 3), 0);
        tensor *o = op_attention(q, same ? q : k, v, NULL, MASK_NONE, 0);
        cr_assert_eq(backward(op_sum_all(op_mul(o, o))), ER_OK, "%s", er_msg());
        cr_assert_not_null(qkv->grad);
        if (!same) cr_assert_null(p->grad, "the permute view got a gradient buffer");
        else cr_assert_not_null(q->grad, "q as key too: its own buffer");
        tensor_free(qkv);
        nn_step_end();
    }
}
