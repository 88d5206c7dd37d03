/* EndoFinder-Scene's scene encoder and scene-aware decoder: the forward, the losses and every
 * parameter's gradient against an independent float64 torch computation (make_scene_refs.py ->
 * scene_ref.safetensors); the cross-attention layer against finite differences; order invariance and
 * any number of views; the model file round trip. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/params_st.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/losses/mae_loss.h"
#include "nn/losses/sscd.h"
#include "nn/models/scene.h"
#include "nn/ops.h"
#include "nn/precision.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

#define REF "tests/nn/models/scene_ref.safetensors"
enum { D = 16, S_ = 3, V = 3, N = 9, K = 2, L = 4, PD = 48 };

static scene_config ref_config(void) {
    scene_config c;
    scene_config_default(&c, D, 2, 8, 4);
    c.head_dim = 8; c.mlp = 32;
    c.dec_dim = 8; c.dec_depth = 2; c.dec_heads = 2; c.dec_head_dim = 5; c.dec_mlp = 32;
    return c;
}

static float *read(const st_file *f, const char *name, int64_t n) {
    float *x = malloc(n * sizeof(float));
    cr_assert_eq(st_read_f32(f, name, x, n), 0, "%s", er_msg());
    return x;
}

/* max |a - b| relative to the largest |b|, or to 1e-4 when b is all but zero (the decoder's query
 * path: with one key/value token the softmax is constant, so its gradients are 0 up to rounding). */
static double maxrel(const float *a, const float *b, int64_t n) {
    double scale = 0, d = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d / fmax(scale, 1e-4);
}

Test(scene, forward_losses_and_gradients_match_torch) {
    st_file f;
    cr_assert_eq(st_open(REF, &f), 0, "%s", er_msg());
    scene_config c = ref_config();
    param_list pl = {0};
    scene_net s;
    cr_assert_eq(scene_net_init(&s, &c, 1, 5, &pl), 0, "%s", er_msg());
    /* our fixed sin-cos decoder positions are the reference's before the file overwrites them */
    float *pos = read(&f, "decoder_pos_embed", (1 + L) * 8);
    cr_assert(maxrel(s.pos_embed->data, pos, (1 + L) * 8) < 1e-6, "decoder_pos_embed differs");
    free(pos);
    cr_assert_eq(params_load_st(&pl, &f, "", 1), 0, "%s", er_msg());
    float *views = read(&f, "in.views", N * (V - 1) * D), *lat = read(&f, "in.latent", N * (1 + K) * D);
    float *restf = read(&f, "in.restore", N * L), *mask = read(&f, "in.mask", N * L);
    float *target = read(&f, "in.target", N * L * PD), *zr = read(&f, "out.z", N * D);
    float *pr = read(&f, "out.pred", N * L * PD), *lr = read(&f, "out.losses", 4);
    int32_t restore[N * L];
    for (int i = 0; i < N * L; i++) restore[i] = (int32_t)restf[i];
    nn_ctx ctx = nn_ctx_train(0, 0, 0, 0);
    tensor *z = scene_net_encode(&s, &ctx, tensor_from_host(3, SHAPE(N, V - 1, D), views));
    tensor *pred = scene_net_decode(&s, &ctx, z, tensor_from_host(3, SHAPE(N, 1 + K, D), lat), 0, restore);
    cr_assert(z && pred, "%s", er_msg());
    float zh[N * D], *ph = malloc(sizeof(float) * N * L * PD);
    tensor_to_host(z, zh);
    tensor_to_host(pred, ph);
    cr_assert(maxrel(zh, zr, N * D) < 1e-5, "scene descriptors: rel diff %g", maxrel(zh, zr, N * D));
    cr_assert(maxrel(ph, pr, N * L * PD) < 1e-5, "prediction: rel diff %g", maxrel(ph, pr, N * L * PD));
    int ids[N];
    for (int i = 0; i < N; i++) ids[i] = i / V;
    uint8_t match[N * N];
    sscd_match_from_ids(ids, N, match);
    sscd_stats st;
    tensor *mse = mae_loss(pred, target, mask);
    tensor *con = sscd_loss(z, match, 0.05, 5, 0, &st);
    tensor *total = op_add(op_mul_scalar(mse, 0.5f), con);
    cr_assert(total, "%s", er_msg());
    cr_assert(fabs(tensor_item(mse) - lr[0]) < 1e-5 * fabs(lr[0]), "mse %g vs %g", tensor_item(mse), lr[0]);
    cr_assert(fabs(st.infonce - lr[1]) < 1e-5 * fabs(lr[1]), "infonce %g vs %g", st.infonce, lr[1]);
    cr_assert(fabs(st.entropy - lr[2]) < 1e-5 * fabs(lr[2]) + 1e-6, "entropy %g vs %g", st.entropy, lr[2]);
    cr_assert(fabs(tensor_item(total) - lr[3]) < 1e-5 * fabs(lr[3]), "total %g vs %g", tensor_item(total), lr[3]);
    cr_assert_eq(backward(total), 0, "%s", er_msg());
    int checked = 0;
    for (int i = 0; i < pl.n; i++) {
        tensor *p = pl.t[i];
        if (!(p->flags & T_REQUIRES_GRAD)) continue;
        char name[200];
        snprintf(name, sizeof name, "grad.%s", p->name);
        int64_t n = tensor_numel(p);
        float *g = read(&f, name, n), *ours = malloc(n * sizeof(float));
        cr_assert(p->grad, "no gradient reached %s", p->name);
        tensor_to_host(p->grad, ours);
        cr_assert(maxrel(ours, g, n) < 2e-4, "%s: gradient rel diff %g", p->name, maxrel(ours, g, n));
        free(g); free(ours);
        checked++;
    }
    cr_assert_eq(checked, pl.n - 1, "every parameter but the fixed positions has a gradient (%d of %d)", checked, pl.n);
    nn_step_end();
    free(views); free(lat); free(restf); free(mask); free(target); free(zr); free(pr); free(lr); free(ph);
    for (int i = 0; i < pl.n; i++) tensor_free(pl.t[i]);
    free(pl.t);
    scene_net_free(&s);
    st_close(&f);
}

/* ---- the cross-attention layer against finite differences (several key/value tokens) ---- */

typedef struct { prenorm_layer l; } xa_ctx;

static tensor *xa_fn(tensor **in, void *ctx) {
    xa_ctx *c = ctx;
    c->l.q_w = in[2];
    c->l.kv_w = in[3];
    c->l.out_w = in[4];
    return prenorm_layer_forward(&c->l, &NN_EVAL, in[0], in[1]);
}

Test(scene, cross_attention_layer_gradcheck) {
    xa_ctx c;
    param_list pl = {0};
    prenorm_layer_init(&c.l, "x", 8, 2, 3, 12, 6, 1e-5f, 1, 3, &pl);
    tensor *in[5] = {gc_rand(3, SHAPE(2, 5, 8), 1, -1, 1), gc_rand(3, SHAPE(2, 3, 6), 2, -1, 1),
                     gc_rand(2, SHAPE(6, 8), 3, -0.5f, 0.5f), gc_rand(2, SHAPE(12, 6), 4, -0.5f, 0.5f),
                     gc_rand(2, SHAPE(8, 6), 5, -0.5f, 0.5f)};
    cr_assert_eq(gradcheck("cross-attention", xa_fn, &c, 5, in, gc_default()), 0);
    gc_free(5, in);
    for (int i = 0; i < pl.n; i++) tensor_free(pl.t[i]);
    free(pl.t);
}

static tensor *sa_fn(tensor **in, void *ctx) {
    xa_ctx *c = ctx;
    c->l.qkv_w = in[1];
    return prenorm_layer_forward(&c->l, &NN_EVAL, in[0], NULL);
}

Test(scene, self_attention_layer_gradcheck) {
    xa_ctx c;
    param_list pl = {0};
    prenorm_layer_init(&c.l, "s", 8, 2, 5, 12, 0, 1e-5f, 1, 3, &pl);
    tensor *in[2] = {gc_rand(3, SHAPE(2, 4, 8), 6, -1, 1), gc_rand(2, SHAPE(30, 8), 7, -0.5f, 0.5f)};
    cr_assert_eq(gradcheck("self-attention", sa_fn, &c, 2, in, gc_default()), 0);
    gc_free(2, in);
    for (int i = 0; i < pl.n; i++) tensor_free(pl.t[i]);
    free(pl.t);
}

/* ---- scene encoder: no view order, any number of views ---- */

static void encode(scene_net *s, const float *v, int S, int nv, float *out) {
    NO_GRAD {
        tensor *z = scene_net_encode(s, &NN_EVAL, tensor_from_host(3, SHAPE(S, nv, D), v));
        cr_assert(z, "%s", er_msg());
        tensor_to_host(z, out);
    }
    nn_step_end();
}

Test(scene, encoder_ignores_view_order_and_takes_any_view_count) {
    scene_config c = ref_config();
    param_list pl = {0};
    scene_net s;
    cr_assert_eq(scene_net_init(&s, &c, 0, 9, &pl), 0, "%s", er_msg());
    cr_assert_eq(s.n_encoder_params, pl.n);
    float v[4 * D], w[4 * D], a[D], b[D];
    rng_t r = rng_make(3, 0);
    for (int i = 0; i < 4 * D; i++) v[i] = rng_normal(&r);
    const int perm[4] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++) memcpy(w + i * D, v + perm[i] * D, D * sizeof(float));
    encode(&s, v, 1, 4, a);
    encode(&s, w, 1, 4, b);
    double d = 0, n = 0;
    for (int i = 0; i < D; i++) { d = fmax(d, fabs(a[i] - b[i])); n += a[i] * a[i]; }
    cr_assert(d < 1e-6, "permuting the views changed the descriptor by %g", d);
    cr_assert(fabs(n - 1) < 1e-5, "descriptor norm^2 %g", n);
    for (int nv = 1; nv <= 4; nv++) {
        encode(&s, v, 1, nv, a);
        n = 0;
        for (int i = 0; i < D; i++) n += a[i] * a[i];
        cr_assert(fabs(n - 1) < 1e-5, "%d views: norm^2 %g", nv, n);
    }
    /* a view that differs changes the descriptor */
    memcpy(w, v, sizeof v);
    w[5] += 1.0f;
    encode(&s, v, 1, 4, a);
    encode(&s, w, 1, 4, b);
    d = 0;
    for (int i = 0; i < D; i++) d = fmax(d, fabs(a[i] - b[i]));
    cr_assert(d > 1e-4, "the descriptor ignores its views");
    for (int i = 0; i < pl.n; i++) tensor_free(pl.t[i]);
    free(pl.t);
    scene_net_free(&s);
}

/* ---- model.scene_base = mean: starts as averaging, and its gradient is right ---- */

static void mean_base_net(scene_net *s, param_list *pl) {
    scene_config c = ref_config();
    c.base_mean = 1;
    cr_assert_eq(scene_net_init(s, &c, 0, 9, pl), 0, "%s", er_msg());
}

static void net_free(scene_net *s, param_list *pl) {
    for (int i = 0; i < pl->n; i++) tensor_free(pl->t[i]);
    free(pl->t);
    scene_net_free(s);
}

Test(scene, mean_base_starts_as_averaging_the_views) {
    param_list pl = {0};
    scene_net s;
    mean_base_net(&s, &pl);
    cr_assert_eq(s.n_encoder_params, pl.n, "the gate is an encoder tensor (saved with it)");
    cr_assert_str_eq(pl.t[pl.n - 1]->name, "scene_mean_gate");
    cr_assert_eq(s.mean_gate->data[0], 0.0f);
    enum { S = 2, NV = 3 };
    float v[S * NV * D], z[S * D];
    rng_t r = rng_make(4, 0);
    for (int i = 0; i < S * NV * D; i++) v[i] = 3 * rng_normal(&r); /* not unit: the mean is of normalised views */
    encode(&s, v, S, NV, z);
    for (int q = 0; q < S; q++) { /* independent: L2(mean of L2(view)) in double */
        double m[D] = {0}, n2 = 0;
        for (int k = 0; k < NV; k++) {
            const float *x = v + (q * NV + k) * D;
            double nx = 0;
            for (int i = 0; i < D; i++) nx += (double)x[i] * x[i];
            for (int i = 0; i < D; i++) m[i] += x[i] / sqrt(nx) / NV;
        }
        for (int i = 0; i < D; i++) n2 += m[i] * m[i];
        for (int i = 0; i < D; i++)
            cr_assert(fabs(z[q * D + i] - m[i] / sqrt(n2)) < 1e-6, "scene %d dim %d: %g, averaging gives %g", q, i,
                      z[q * D + i], m[i] / sqrt(n2));
    }
    /* with the gate open the token moves the descriptor */
    s.mean_gate->data[0] = 0.5f;
    float z2[S * D];
    encode(&s, v, S, NV, z2);
    double d = 0;
    for (int i = 0; i < S * D; i++) d = fmax(d, fabs(z2[i] - z[i]));
    cr_assert(d > 1e-3, "gate 0.5 left the descriptor at the mean (max change %g)", d);
    net_free(&s, &pl);
}

typedef struct { scene_net *s; } mb_ctx;

static tensor *mb_fn(tensor **in, void *ctx) {
    mb_ctx *c = ctx;
    c->s->mean_gate = in[1];
    c->s->scene_token = in[2];
    return scene_net_encode(c->s, &NN_EVAL, in[0]);
}

Test(scene, mean_base_gradcheck) {
    param_list pl = {0};
    scene_net s;
    mean_base_net(&s, &pl);
    tensor *gate0 = s.mean_gate, *tok0 = s.scene_token;
    mb_ctx m = {&s};
    tensor *in[3] = {gc_rand(3, SHAPE(2, 3, D), 11, -1, 1), gc_rand(1, SHAPE(1), 12, 0.3f, 0.8f),
                     gc_rand(3, SHAPE(1, 1, D), 13, -0.5f, 0.5f)};
    cr_assert_eq(gradcheck("scene encoder, mean base", mb_fn, &m, 3, in, gc_default()), 0);
    gc_free(3, in);
    s.mean_gate = gate0;
    s.scene_token = tok0;
    net_free(&s, &pl);
}

/* The mean base in bf16 (autocast: the token layer's products and norms on bf16) against fp32, with
 * the gate open so both terms count: descriptor and the gradients of views and gate within llm.c's
 * thr + |ref| eps (eps 2^-8 for bf16 storage; thr 2^-6 of the tensor's scale forward, 2^-4 backward,
 * where the rounding goes through the attention layer's backward too). */
static void mean_base_run(scene_net *s, const float *v, int prec, float *z, float *gv, float *gg) {
    const nn_ctx ctx = {1, 1, 0, 0, prec};
    tensor *vt = tensor_from_host_new(3, SHAPE(2, 3, D), v);
    tensor_set_requires_grad(vt, 1);
    tensor_fill(s->mean_gate->grad, 0.0f);
    tensor *out = scene_net_encode(s, &ctx, vt);
    cr_assert_not_null(out, "%s", er_msg());
    tensor_to_host(out, z);
    float w[2 * D]; /* L = sum(z * w), w fixed: not z itself, whose direction a unit z has no gradient along */
    rng_t rw = rng_make(22, 0);
    for (int i = 0; i < 2 * D; i++) w[i] = rng_normal(&rw);
    cr_assert_eq(backward(op_sum_all(op_mul(out, tensor_from_host(2, SHAPE(2, D), w)))), 0, "%s", er_msg());
    tensor_to_host(vt->grad, gv);
    tensor_to_host(s->mean_gate->grad, gg);
    nn_step_end();
    tensor_free(vt);
}

static double excess(const float *got, const float *ref, int n, double thr_frac) {
    double scale = 0, worst = -1e30;
    for (int i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - ref[i]) - (thr_frac * scale + fabs(ref[i]) / 256));
    return worst;
}

Test(scene, mean_base_bf16_tracks_fp32) {
    param_list pl = {0};
    scene_net s;
    mean_base_net(&s, &pl);
    s.mean_gate->data[0] = 0.5f;
    float v[2 * 3 * D], z32[2 * D], z16[2 * D], g32[2 * 3 * D], g16[2 * 3 * D], gg32, gg16;
    rng_t r = rng_make(21, 0);
    for (int i = 0; i < 2 * 3 * D; i++) v[i] = rng_normal(&r);
    mean_base_run(&s, v, ER_PREC_FP32, z32, g32, &gg32);
    mean_base_run(&s, v, ER_PREC_BF16, z16, g16, &gg16);
    double ez = excess(z16, z32, 2 * D, 1.0 / 64), eg = excess(g16, g32, 2 * 3 * D, 1.0 / 16),
           egate = excess(&gg16, &gg32, 1, 1.0 / 16);
    cr_log_info("mean base bf16 vs fp32: excess over tolerance z %.3g, dviews %.3g, dgate %.3g (gate grad %g vs %g)", ez,
                eg, egate, gg16, gg32);
    cr_assert(ez <= 0 && eg <= 0 && egate <= 0, "bf16 off fp32: z %g, dviews %g, dgate %g", ez, eg, egate);
    double d = 0;
    for (int i = 0; i < 2 * D; i++) d = fmax(d, fabs(z16[i] - z32[i]));
    cr_assert(d > 0, "bf16 gave the fp32 bits: autocast did not run");
    net_free(&s, &pl);
}
