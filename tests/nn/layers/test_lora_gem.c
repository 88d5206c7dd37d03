/* LoRA adapter, GeM / mean / [CLS] pooling and the fusion head (nn/layers): forwards against naive
 * double computations, backwards against finite differences (tests/nn/gradcheck.h). */
#include <math.h>

#include "nn/layers/fusion_head.h"
#include "nn/layers/layer_params.h"
#include "nn/layers/lora.h"
#include "nn/layers/pooling.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------- LoRA */

typedef struct { lora l; tensor *w, *b; nn_ctx ctx; } lora_case;

static tensor *lora_fn(tensor **in, void *p) {
    lora_case *c = p;
    c->l.A = in[1];
    c->l.B = in[2];
    return lora_linear(&c->l, &c->ctx, in[0], c->w, c->b);
}

static void lora_case_make(lora_case *c, param_list *pl, int in, int out, int r) {
    lora_config cfg = {r, 2.0 * r, 0.0};
    lora_init(&c->l, "m", in, out, 0, 0, &cfg, 3, 11, pl);
    c->w = gc_rand(2, SHAPE(out, in), 1, -0.5f, 0.5f);
    c->b = gc_rand(1, SHAPE(out), 2, -0.5f, 0.5f);
    tensor_set_requires_grad(c->w, 0); /* frozen, as on a LoRA-adapted model */
    tensor_set_requires_grad(c->b, 0);
    c->ctx = NN_EVAL;
}

Test(lora, init_is_peft) {
    param_list pl = {0};
    lora_config cfg = lora_config_default();
    lora l;
    lora_init(&l, "blocks.0.attn.qkv", 384, 1152, 0, 0, &cfg, 1, 5, &pl);
    cr_assert_str_eq(l.A->name, "blocks.0.attn.qkv.lora_A.weight");
    cr_assert_str_eq(l.B->name, "blocks.0.attn.qkv.lora_B.weight");
    cr_assert_eq(l.A->shape[0], 8); cr_assert_eq(l.A->shape[1], 384);
    cr_assert_eq(l.B->shape[0], 1152); cr_assert_eq(l.B->shape[1], 8);
    cr_assert_float_eq(l.scale, 2.0f, 0, "alpha / r");
    double bound = 1 / sqrt(384.0), mx = 0, sum = 0;
    for (int64_t i = 0; i < tensor_numel(l.A); i++) { mx = fmax(mx, fabs(l.A->data[i])); sum += l.A->data[i]; }
    cr_assert(mx <= bound && mx > 0.95 * bound, "A in U(-1/sqrt(in), 1/sqrt(in)): max %g bound %g", mx, bound);
    cr_assert(fabs(sum / tensor_numel(l.A)) < 0.05 * bound, "A centred");
    for (int64_t i = 0; i < tensor_numel(l.B); i++) cr_assert_eq(l.B->data[i], 0.0f, "B starts at zero");
    lora pc;
    lora_init(&pc, "patch_embed.proj", 3 * 16 * 16, 384, 3, 16, &cfg, 0, 5, &pl);
    cr_assert_eq(pc.A->ndim, 4); cr_assert_eq(pc.A->shape[1], 3); cr_assert_eq(pc.A->shape[3], 16);
    cr_assert_eq(pc.B->ndim, 4); cr_assert_eq(pc.B->shape[0], 384); cr_assert_eq(pc.B->shape[2], 1);
    params_free(&pl);
}

Test(lora, gradcheck) {
    param_list pl = {0};
    lora_case c;
    lora_case_make(&c, &pl, 6, 5, 3);
    tensor *x = gc_rand(3, SHAPE(2, 4, 6), 3, -1, 1);
    tensor *A = gc_rand(2, SHAPE(3, 6), 4, -0.5f, 0.5f), *B = gc_rand(2, SHAPE(5, 3), 5, -0.5f, 0.5f);
    tensor *in[3] = {x, A, B};
    cr_assert_eq(gradcheck("lora_linear", lora_fn, &c, 3, in, gc_default()), 0);
    /* the frozen weight gets no gradient */
    cr_assert(c.w->grad == NULL || c.w->grad->data[0] == 0, "frozen W received a gradient");
    gc_free(3, in);
    tensor_free(c.w); tensor_free(c.b);
    params_free(&pl);
}

/* y = W x + b + s B A x against a double loop, and the merged weight gives the same outputs */
Test(lora, forward_and_merge) {
    param_list pl = {0};
    lora_case c;
    int in = 7, out = 5, r = 2, N = 3;
    lora_case_make(&c, &pl, in, out, r);
    rng_t g = rng_make(9, 1);
    for (int i = 0; i < out * r; i++) c.l.B->data[i] = rng_uniform(&g) - 0.5f;
    tensor *x = gc_rand(2, SHAPE(N, in), 6, -1, 1);
    float y[15];
    NO_GRAD { tensor_to_host(lora_linear(&c.l, &c.ctx, x, c.w, c.b), y); }
    nn_step_end();
    float *Wm = malloc(sizeof(float) * out * in);
    memcpy(Wm, c.w->data, sizeof(float) * out * in);
    lora_merge_host(Wm, c.l.A->data, c.l.B->data, out, in, r, c.l.scale);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            double ref = c.b->data[o], merged = c.b->data[o];
            for (int i = 0; i < in; i++) {
                ref += (double)c.w->data[o * in + i] * x->data[n * in + i];
                merged += (double)Wm[o * in + i] * x->data[n * in + i];
            }
            for (int k = 0; k < r; k++) {
                double ax = 0;
                for (int i = 0; i < in; i++) ax += (double)c.l.A->data[k * in + i] * x->data[n * in + i];
                ref += c.l.scale * c.l.B->data[o * r + k] * ax;
            }
            cr_assert(fabs(y[n * out + o] - ref) < 1e-5, "unmerged [%d,%d] %g vs %g", n, o, y[n * out + o], ref);
            cr_assert(fabs(merged - ref) < 1e-5, "merged [%d,%d] %g vs %g", n, o, merged, ref);
        }
    free(Wm);
    tensor_free(x); tensor_free(c.w); tensor_free(c.b);
    params_free(&pl);
}

/* dropout only in training, on the adapter input, the same mask for the same (seed, step, micro) */
Test(lora, dropout_is_training_only_and_deterministic) {
    param_list pl = {0};
    lora_case c;
    lora_case_make(&c, &pl, 16, 8, 4);
    c.l.dropout = 0.5f;
    for (int i = 0; i < 32; i++) c.l.B->data[i] = 0.1f * (i % 7) - 0.3f;
    tensor *x = gc_rand(2, SHAPE(4, 16), 8, -1, 1);
    float e[32], t1[32], t2[32], t3[32];
    nn_ctx tr = nn_ctx_train(1, 5, 0, 0), tr2 = nn_ctx_train(1, 6, 0, 0);
    NO_GRAD {
        tensor_to_host(lora_delta(&c.l, &NN_EVAL, x), e);
        tensor_to_host(lora_delta(&c.l, &tr, x), t1);
        tensor_to_host(lora_delta(&c.l, &tr, x), t2);
        tensor_to_host(lora_delta(&c.l, &tr2, x), t3);
    }
    nn_step_end();
    int same_e = 1, same12 = 1, same13 = 1;
    for (int i = 0; i < 32; i++) { same_e &= e[i] == t1[i]; same12 &= t1[i] == t2[i]; same13 &= t1[i] == t3[i]; }
    cr_assert(!same_e, "training draws a dropout mask");
    cr_assert(same12, "same step: same mask");
    cr_assert(!same13, "another step: another mask");
    tensor_free(x); tensor_free(c.w); tensor_free(c.b);
    params_free(&pl);
}

/* ---------------------------------------------------------------- pooling */

static tensor *gem_fn(tensor **in, void *ctx) { (void)ctx; return gem_pool(in[0], in[1], 1e-6f); }

Test(pooling, gem_gradcheck) {
    tensor *x = gc_rand(3, SHAPE(2, 5, 3), 12, 0.2f, 1.5f), *p = gc_rand(1, SHAPE(1), 13, 2.5f, 3.5f);
    tensor *in[2] = {x, p};
    cr_assert_eq(gradcheck("gem", gem_fn, NULL, 2, in, gc_default()), 0);
    gc_free(2, in);
}

Test(pooling, gem_forward_against_naive) {
    tensor *x = gc_rand(3, SHAPE(2, 6, 4), 14, -1, 2), *p = tensor_new(1, SHAPE(1));
    p->data[0] = 3;
    float y[8];
    NO_GRAD { tensor_to_host(gem_pool(x, p, 1e-6f), y); }
    nn_step_end();
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 4; c++) {
            double s = 0;
            for (int n = 0; n < 6; n++) s += pow(fmax(x->data[(b * 6 + n) * 4 + c], 1e-6), 3.0);
            double ref = pow(s / 6, 1.0 / 3);
            cr_assert(fabs(y[b * 4 + c] - ref) < 1e-5 * fmax(1, ref), "gem[%d,%d] %g vs %g", b, c, y[b * 4 + c], ref);
        }
    tensor_free(x); tensor_free(p);
}

/* [CLS] is token 0; mean and GeM see only the tokens after [CLS] and the registers */
Test(pooling, token_pool_excludes_prefix) {
    int B = 2, T = 1 + 2 + 3, C = 2;
    tensor *t = tensor_new(3, SHAPE(B, T, C)), *p = tensor_new(1, SHAPE(1));
    p->data[0] = 1; /* GeM with p = 1 on positive values = the mean */
    for (int i = 0; i < B * T * C; i++) t->data[i] = 1 + i;
    float cls[4], mean[4], gem[4];
    NO_GRAD {
        tensor_to_host(token_pool(POOL_CLS, t, 3, p, 1e-6f), cls);
        tensor_to_host(token_pool(POOL_MEAN, t, 3, p, 1e-6f), mean);
        tensor_to_host(token_pool(POOL_GEM, t, 3, p, 1e-6f), gem);
    }
    nn_step_end();
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            cr_assert_float_eq(cls[b * C + c], t->data[(b * T) * C + c], 0);
            double m = 0;
            for (int n = 3; n < T; n++) m += t->data[(b * T + n) * C + c];
            m /= 3;
            cr_assert(fabs(mean[b * C + c] - m) < 1e-5, "mean %g vs %g", mean[b * C + c], m);
            cr_assert(fabs(gem[b * C + c] - m) < 1e-4, "gem(p=1) %g vs %g", gem[b * C + c], m);
        }
    pool_kind k;
    cr_assert_eq(pool_parse("max", "dual.pool", &k), ER_INPUT);
    cr_assert(strstr(er_msg(), "dual.pool"), "%s", er_msg());
    tensor_free(t); tensor_free(p);
}

/* ---------------------------------------------------------------- fusion head */

typedef struct { fusion_head h; nn_ctx ctx; } head_case;

static tensor *head_fn(tensor **in, void *p) {
    head_case *c = p;
    c->h.w = in[2];
    tensor *br[2] = {in[0], in[1]};
    return fusion_head_forward(&c->h, &c->ctx, br, 2);
}

Test(fusion_head, gradcheck_train_mode) {
    param_list pl = {0};
    head_case c;
    fusion_head_init(&c.h, "fusion", 6, 4, 3, &pl);
    c.ctx = nn_ctx_train(1, 0, 0, 0);
    tensor *a = gc_rand(2, SHAPE(5, 3), 21, -1, 1), *b = gc_rand(2, SHAPE(5, 3), 22, -1, 1),
           *w = gc_rand(2, SHAPE(4, 6), 23, -1, 1);
    tensor *in[3] = {a, b, w};
    gc_opts o = gc_default();
    o.eps = 3e-3;
    cr_assert_eq(gradcheck("fusion_head", head_fn, &c, 3, in, o), 0);
    gc_free(3, in); /* the head's own weight stays in pl */
    params_free(&pl);
}

/* eval: running statistics, unit-norm output, against a double computation */
Test(fusion_head, eval_forward_against_naive) {
    param_list pl = {0};
    fusion_head h;
    fusion_head_init(&h, "fusion", 4, 3, 7, &pl);
    cr_assert_str_eq(h.bn_var->name, "fusion.1.running_var");
    cr_assert(!(h.bn_mean->flags & T_REQUIRES_GRAD) && !(h.bn_var->flags & T_REQUIRES_GRAD), "running stats are buffers");
    for (int i = 0; i < 3; i++) { h.bn_mean->data[i] = 0.1f * i; h.bn_var->data[i] = 1 + i; h.bn_w->data[i] = 1 + 0.5f * i; h.bn_b->data[i] = 0.2f; }
    tensor *a = gc_rand(2, SHAPE(2, 2), 31, -1, 1), *b = gc_rand(2, SHAPE(2, 2), 32, -1, 1);
    float y[6];
    NO_GRAD { tensor *br[2] = {a, b}; tensor_to_host(fusion_head_forward(&h, &NN_EVAL, br, 2), y); }
    nn_step_end();
    for (int n = 0; n < 2; n++) {
        double f[4], z[3], na = 0, nb = 0, nz = 0;
        for (int i = 0; i < 2; i++) { na += a->data[n * 2 + i] * (double)a->data[n * 2 + i]; nb += b->data[n * 2 + i] * (double)b->data[n * 2 + i]; }
        for (int i = 0; i < 2; i++) { f[i] = a->data[n * 2 + i] / sqrt(na); f[2 + i] = b->data[n * 2 + i] / sqrt(nb); }
        for (int o = 0; o < 3; o++) {
            double s = h.b->data[o];
            for (int i = 0; i < 4; i++) s += h.w->data[o * 4 + i] * f[i];
            s = (s - h.bn_mean->data[o]) / sqrt(h.bn_var->data[o] + 1e-5) * h.bn_w->data[o] + h.bn_b->data[o];
            z[o] = 0.5 * s * (1 + erf(s / sqrt(2)));
            nz += z[o] * z[o];
        }
        for (int o = 0; o < 3; o++)
            cr_assert(fabs(y[n * 3 + o] - z[o] / sqrt(nz)) < 1e-5, "out[%d,%d] %g vs %g", n, o, y[n * 3 + o], z[o] / sqrt(nz));
    }
    tensor_free(a); tensor_free(b);
    params_free(&pl);
}
