/* End-to-end: tape autograd (core's ops), optimizers, initialisers and the per-step arena working
 * together. A 2-layer MLP learns a 2-class spiral, a 2-block pre-norm transformer learns to reverse
 * a token sequence; both must cut the loss by a stated factor. Determinism (same seed => same bits
 * after N steps, same thread count) and exact resume through a checkpoint on the real model. */
#include <math.h>
#include <string.h>

#include "checkpoints/checkpoint.h"
#include "nn/arena.h"
#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "tests/test_util.h"

/* ---------------- MLP on a 2-class spiral ---------------- */

enum { SP_N = 256, SP_HID = 32 };

static void spiral(float *x, int32_t *y) {
    rng_t r = rng_make(5, rng_stream(RNG_SYNTH, 0, 0));
    for (int i = 0; i < SP_N; i++) {
        int c = i & 1;
        double t = 0.25 + 2.75 * (double)(i / 2) / (SP_N / 2); /* radius / angle parameter */
        double a = 2.2 * t + M_PI * c;
        x[2 * i] = (float)(t * cos(a) + 0.03 * rng_normal(&r));
        x[2 * i + 1] = (float)(t * sin(a) + 0.03 * rng_normal(&r));
        y[i] = c;
    }
}

static void linear_params(param_list *pl, const char *name, int in, int out, uint64_t seed, int idx) {
    char n[64];
    snprintf(n, sizeof n, "%s.weight", name);
    tensor *w = tensor_param(n, 2, SHAPE(out, in));
    rng_t r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)idx, 0));
    init_xavier_uniform(w->data, tensor_numel(w), in, out, 1.0f, &r);
    snprintf(n, sizeof n, "%s.bias", name);
    params_add(pl, w);
    params_add(pl, tensor_param(n, 1, SHAPE(out))); /* zeros, as MAE's _init_weights */
}

static tensor *mlp_forward(const param_list *pl, tensor *x) {
    tensor *h = op_gelu(op_linear(x, pl->t[0], pl->t[1]));
    h = op_gelu(op_linear(h, pl->t[2], pl->t[3]));
    return op_linear(h, pl->t[4], pl->t[5]);
}

static void mlp_build(param_list *pl, uint64_t seed) {
    linear_params(pl, "fc1", 2, SP_HID, seed, 0);
    linear_params(pl, "fc2", SP_HID, SP_HID, seed, 1);
    linear_params(pl, "head", SP_HID, 2, seed, 2);
}

/* Trains steps [from, from + steps) full-batch; returns the last loss. */
static float mlp_train(const param_list *pl, optimizer *o, int64_t from, int steps, const float *xs, const int32_t *ys) {
    lr_schedule s = {.base_lr = 0.02, .min_lr = 0.001, .warmup_steps = 10, .total_steps = 200};
    float loss_v = NAN;
    for (int64_t k = from; k < from + steps; k++) {
        tensor *x = tensor_from_host(2, SHAPE(SP_N, 2), xs);
        tensor *loss = op_cross_entropy(mlp_forward(pl, x), ys);
        cr_assert_not_null(loss, "forward: %s", er_msg());
        loss_v = tensor_item(loss);
        cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
        optim_set_lr(o, lr_at(&s, k));
        optim_clip_grad_norm(o, 5.0);
        cr_assert_eq(optim_step(o), ER_OK, "%s", er_msg());
        optim_zero_grad(o);
        nn_step_end();
    }
    return loss_v;
}

static float mlp_loss(const param_list *pl, const float *xs, const int32_t *ys, double *acc) {
    float l = NAN;
    NO_GRAD {
        tensor *x = tensor_from_host(2, SHAPE(SP_N, 2), xs);
        tensor *logits = mlp_forward(pl, x);
        l = tensor_item(op_cross_entropy(logits, ys));
        float out[2 * SP_N];
        tensor_to_host(logits, out);
        int right = 0;
        for (int i = 0; i < SP_N; i++) right += (out[2 * i + 1] > out[2 * i]) == (ys[i] == 1);
        *acc = (double)right / SP_N;
    }
    nn_step_end();
    return l;
}

Test(optim_learning, mlp_learns_spiral) {
    SLOW_TEST();
    float xs[2 * SP_N];
    int32_t ys[SP_N];
    spiral(xs, ys);
    param_list pl = {0};
    mlp_build(&pl, 1);
    optim_config cfg = {.kind = OPTIM_ADAMW, .lr = 0.02, .weight_decay = 1e-4};
    optimizer *o = optim_new(&cfg, &pl);
    double acc0, acc1;
    float l0 = mlp_loss(&pl, xs, ys, &acc0);
    mlp_train(&pl, o, 0, 200, xs, ys);
    float l1 = mlp_loss(&pl, xs, ys, &acc1);
    cr_log_info("spiral MLP: loss %.4f -> %.4f (x%.1f), accuracy %.3f -> %.3f", l0, l1, l0 / l1, acc0, acc1);
    cr_expect_gt(l0 / l1, 20.0, "loss %.4f -> %.4f: expected a 20x drop", l0, l1);
    cr_expect_gt(acc1, 0.99, "train accuracy %.3f", acc1);
    optim_free(o);
    params_free(&pl);
    arena_default_free_all();
}

/* Same seed, same thread count => bit-identical weights; another seed => different weights.
 * Exact resume: 10 steps, save, 6 more == load the save, 6 steps. */
Test(optim_learning, mlp_determinism_and_exact_resume) {
    float xs[2 * SP_N];
    int32_t ys[SP_N];
    spiral(xs, ys);
    param_list a = {0}, b = {0}, c = {0};
    mlp_build(&a, 7);
    mlp_build(&b, 7);
    mlp_build(&c, 8);
    optim_config cfg = {.kind = OPTIM_ADAMW, .lr = 0.02, .weight_decay = 0.05};
    optimizer *oa = optim_new(&cfg, &a), *ob = optim_new(&cfg, &b), *oc = optim_new(&cfg, &c);
    mlp_train(&a, oa, 0, 10, xs, ys);
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "mlp.safetensors");
    ckpt_state sa = {.params = &a, .opt = oa, .step = 10};
    cr_assert_eq(ckpt_save(path, &sa), ER_OK, "%s", er_msg());
    mlp_train(&a, oa, 10, 6, xs, ys);
    mlp_train(&b, ob, 0, 16, xs, ys);
    mlp_train(&c, oc, 0, 16, xs, ys);
    for (int i = 0; i < a.n; i++) {
        cr_expect_eq(memcmp(a.t[i]->data, b.t[i]->data, sizeof(float) * tensor_numel(a.t[i])), 0,
                     "%s differs between two runs with the same seed", a.t[i]->name);
    }
    cr_expect_neq(memcmp(a.t[0]->data, c.t[0]->data, sizeof(float) * tensor_numel(a.t[0])), 0, "seed has no effect");
    /* resume into c (other seed, other state) */
    ckpt_state sc = {.params = &c, .opt = oc};
    cr_assert_eq(ckpt_load(path, &sc, CKPT_STRICT, NULL), ER_OK, "%s", er_msg());
    cr_expect_eq(sc.step, 10);
    mlp_train(&c, oc, sc.step, 6, xs, ys);
    for (int i = 0; i < a.n; i++)
        cr_expect_eq(memcmp(a.t[i]->data, c.t[i]->data, sizeof(float) * tensor_numel(a.t[i])), 0,
                     "%s: resumed run differs from the uninterrupted one", a.t[i]->name);
    optim_free(oa); optim_free(ob); optim_free(oc);
    params_free(&a); params_free(&b); params_free(&c);
    arena_default_free_all();
    free(path);
}

/* ---------------- tiny transformer: reverse a sequence ---------------- */

enum { TF_V = 6, TF_T = 6, TF_D = 32, TF_H = 2, TF_B = 32, TF_DEPTH = 2 };

typedef struct {
    param_list pl;
    tensor *tok, *pos, *norm_w, *norm_b, *head_w, *head_b;
    tensor *blk[TF_DEPTH][12]; /* n1w n1b qkvw qkvb projw projb n2w n2b fc1w fc1b fc2w fc2b */
} tiny_tf;

static tensor *tf_param(tiny_tf *m, const char *name, int ndim, const int64_t *shape) {
    tensor *p = tensor_param(name, ndim, shape);
    params_add(&m->pl, p);
    return p;
}

static void tf_build(tiny_tf *m, uint64_t seed) {
    memset(m, 0, sizeof *m);
    int idx = 0;
    rng_t r;
#define TRUNC(p) (r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)idx++, 0)), init_trunc_normal(p->data, tensor_numel(p), 0, 0.02f, -2, 2, &r))
#define XAV(p, in, out) (r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)idx++, 0)), init_xavier_uniform(p->data, tensor_numel(p), in, out, 1, &r))
    m->tok = tf_param(m, "tok_embed.weight", 2, SHAPE(TF_V, TF_D));
    TRUNC(m->tok);
    m->pos = tf_param(m, "pos_embed", 3, SHAPE(1, TF_T, TF_D));
    TRUNC(m->pos);
    for (int l = 0; l < TF_DEPTH; l++) {
        const char *names[12] = {"norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
                                 "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"};
        const int64_t shapes[12][2] = {{TF_D}, {TF_D}, {3 * TF_D, TF_D}, {3 * TF_D}, {TF_D, TF_D}, {TF_D},
                                       {TF_D}, {TF_D}, {4 * TF_D, TF_D}, {4 * TF_D}, {TF_D, 4 * TF_D}, {TF_D}};
        for (int j = 0; j < 12; j++) {
            char n[64];
            snprintf(n, sizeof n, "blocks.%d.%s", l, names[j]);
            int nd = shapes[j][1] ? 2 : 1;
            tensor *p = tf_param(m, n, nd, shapes[j]);
            if (nd == 2) XAV(p, shapes[j][1], shapes[j][0]);
            else if (j == 0 || j == 6) init_ones(p->data, tensor_numel(p));
            m->blk[l][j] = p;
        }
    }
    m->norm_w = tf_param(m, "norm.weight", 1, SHAPE(TF_D));
    init_ones(m->norm_w->data, TF_D);
    m->norm_b = tf_param(m, "norm.bias", 1, SHAPE(TF_D));
    m->head_w = tf_param(m, "head.weight", 2, SHAPE(TF_V, TF_D));
    XAV(m->head_w, TF_D, TF_V);
    m->head_b = tf_param(m, "head.bias", 1, SHAPE(TF_V));
#undef TRUNC
#undef XAV
}

static tensor *tf_block(tensor *x, tensor *const *p) {
    const int dh = TF_D / TF_H;
    tensor *h = op_layernorm(x, p[0], p[1], 1e-6f);
    tensor *qkv = op_reshape(op_linear(h, p[2], p[3]), 5, SHAPE(TF_B, TF_T, 3, TF_H, dh));
    tensor *qkvp = op_permute(qkv, (const int[]){2, 0, 3, 1, 4}); /* [3, B, H, T, dh] */
    tensor *q = op_squeeze(op_slice(qkvp, 0, 0, 1), 0);
    tensor *k = op_squeeze(op_slice(qkvp, 0, 1, 2), 0);
    tensor *v = op_squeeze(op_slice(qkvp, 0, 2, 3), 0);
    tensor *a = op_attention(q, k, v, NULL, MASK_NONE, 0.0f);                     /* [B, H, T, dh] */
    a = op_reshape(op_permute(a, (const int[]){0, 2, 1, 3}), 3, SHAPE(TF_B, TF_T, TF_D));
    x = op_add(x, op_linear(a, p[4], p[5]));
    h = op_layernorm(x, p[6], p[7], 1e-6f);
    h = op_linear(op_gelu(op_linear(h, p[8], p[9])), p[10], p[11]);
    return op_add(x, h);
}

static tensor *tf_loss(tiny_tf *m, const int32_t *tokens, const int32_t *targets) {
    tensor *x = op_reshape(op_index_select(m->tok, 0, tokens, TF_B * TF_T), 3, SHAPE(TF_B, TF_T, TF_D));
    x = op_add(x, m->pos);
    for (int l = 0; l < TF_DEPTH; l++) x = tf_block(x, m->blk[l]);
    x = op_layernorm(x, m->norm_w, m->norm_b, 1e-6f);
    tensor *logits = op_reshape(op_linear(x, m->head_w, m->head_b), 2, SHAPE(TF_B * TF_T, TF_V));
    return op_cross_entropy(logits, targets);
}

static void tf_batch(rng_t *r, int32_t *tokens, int32_t *targets) {
    for (int b = 0; b < TF_B; b++)
        for (int t = 0; t < TF_T; t++) tokens[b * TF_T + t] = (int32_t)rng_below(r, TF_V);
    for (int b = 0; b < TF_B; b++)
        for (int t = 0; t < TF_T; t++) targets[b * TF_T + t] = tokens[b * TF_T + (TF_T - 1 - t)];
}

Test(optim_learning, tiny_transformer_learns_reversal, .timeout = 120) {
    SLOW_TEST();
    tiny_tf m;
    tf_build(&m, 3);
    optim_config cfg = {.kind = OPTIM_ADAMW, .lr = 3e-3, .weight_decay = 0.05};
    optimizer *o = optim_new(&cfg, &m.pl);
    cr_assert_not_null(o, "%s", er_msg());
    const int steps = 150;
    lr_schedule s = {.base_lr = 3e-3, .min_lr = 1e-4, .warmup_steps = 15, .total_steps = steps};
    rng_t data = rng_make(1, rng_stream(RNG_SAMPLING, 0, 0));
    int32_t tokens[TF_B * TF_T], targets[TF_B * TF_T];
    double first = 0, last = 0;
    for (int k = 0; k < steps; k++) {
        tf_batch(&data, tokens, targets);
        tensor *loss = tf_loss(&m, tokens, targets);
        cr_assert_not_null(loss, "forward: %s", er_msg());
        float l = tensor_item(loss);
        if (k < 10) first += l / 10;
        if (k >= steps - 10) last += l / 10;
        cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
        optim_set_lr(o, lr_at(&s, k));
        optim_clip_grad_norm(o, 1.0);
        optim_step(o);
        optim_zero_grad(o);
        nn_step_end();
    }
    cr_log_info("tiny transformer (reverse %d tokens of %d): loss %.4f -> %.4f (x%.1f), chance %.4f", TF_T, TF_V, first, last,
                first / last, log((double)TF_V));
    cr_expect_gt(first / last, 20.0, "mean loss of the first/last 10 steps %.4f -> %.4f: expected a 20x drop", first, last);
    optim_free(o);
    params_free(&m.pl);
    arena_default_free_all();
}
