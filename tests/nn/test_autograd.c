/* Tape, grad modes, gradient accumulation, arena steady state, views/params, and a tiny MLP that
 * learns (tape + arena + SGD updates working together). */
#include <math.h>
#include <string.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

typedef struct {
    param_list params;
    tensor *w1, *b1, *w2, *b2;
} mlp;

static void mlp_init(mlp *m, int in, int hid, int out, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->w1 = tensor_param("fc1.weight", 2, SHAPE(hid, in));
    m->b1 = tensor_param("fc1.bias", 1, SHAPE(hid));
    m->w2 = tensor_param("fc2.weight", 2, SHAPE(out, hid));
    m->b2 = tensor_param("fc2.bias", 1, SHAPE(out));
    tensor *ps[4] = {m->w1, m->b1, m->w2, m->b2};
    rng_t r = rng_make(seed, rng_stream(RNG_INIT, 0, 0));
    for (int i = 0; i < 4; i++) {
        params_add(&m->params, ps[i]);
        float fan = (float)ps[i]->shape[ps[i]->ndim - 1];
        if (ps[i]->ndim == 2)
            for (int64_t j = 0; j < tensor_numel(ps[i]); j++) ps[i]->data[j] = rng_normal(&r) / sqrtf(fan);
    }
}

static tensor *mlp_forward(mlp *m, tensor *x) {
    return op_linear(op_gelu(op_linear(x, m->w1, m->b1)), m->w2, m->b2);
}

Test(nn_autograd, no_grad_records_nothing) {
    mlp m;
    mlp_init(&m, 3, 5, 2, 1);
    tensor *x = tensor_zeros(DEV_CPU, 2, SHAPE(4, 3));
    NO_GRAD {
        tensor *y = mlp_forward(&m, x);
        cr_assert_eq(tape_size(), 0);
        cr_assert_null(y->node);
        cr_assert_eq(y->flags & T_REQUIRES_GRAD, 0);
        cr_assert_neq(backward(op_sum_all(y)), ER_OK);
    }
    cr_assert(grad_enabled());
    tensor *y = mlp_forward(&m, x);
    cr_assert_gt(tape_size(), 0);
    cr_assert_not_null(y->node);
    params_free(&m.params);
}

Test(nn_autograd, gradient_accumulates_over_two_backwards) {
    mlp m;
    mlp_init(&m, 3, 17, 2, 2);
    tensor *x = gc_rand(2, SHAPE(5, 3), 3, -1, 1);
    int32_t labels[5] = {0, 1, 1, 0, 1};
    tensor *loss1 = op_cross_entropy(mlp_forward(&m, x), labels);
    cr_assert_eq(backward(loss1), ER_OK);
    cr_assert_eq(tape_size(), 0, "backward consumes the tape");
    cr_assert_eq(backward(loss1), ER_INPUT, "a second backward on a consumed graph is an error");
    cr_assert(strstr(er_msg(), "consumed"), "%s", er_msg());
    int64_t n = params_numel(&m.params);
    float *g1 = malloc(sizeof(float) * n);
    for (int i = 0, o = 0; i < m.params.n; o += (int)tensor_numel(m.params.t[i]), i++)
        memcpy(g1 + o, m.params.t[i]->grad->data, sizeof(float) * tensor_numel(m.params.t[i]));
    float gx1 = x->grad->data[0];
    nn_step_end();
    cr_assert_eq(backward(op_cross_entropy(mlp_forward(&m, x), labels)), ER_OK);
    double worst = 0, mag = 0;
    for (int i = 0, o = 0; i < m.params.n; o += (int)tensor_numel(m.params.t[i]), i++)
        for (int64_t j = 0; j < tensor_numel(m.params.t[i]); j++) {
            worst = fmax(worst, fabs(m.params.t[i]->grad->data[j] - 2 * g1[o + j]));
            mag = fmax(mag, fabs(g1[o + j]));
        }
    cr_assert_gt(mag, 1e-3);
    cr_assert_lt(worst, 1e-6, "accumulated = 2x single (max diff %g)", worst);
    cr_assert_float_eq(x->grad->data[0], 2 * gx1, 1e-6);
    zero_grad(&m.params);
    for (int i = 0; i < m.params.n; i++)
        for (int64_t j = 0; j < tensor_numel(m.params.t[i]); j++) cr_assert_eq(m.params.t[i]->grad->data[j], 0.0f);
    free(g1);
    tensor_free(x);
    params_free(&m.params);
}

Test(nn_autograd, arena_steady_state_no_growth) {
    mlp m;
    mlp_init(&m, 8, 64, 3, 4);
    tensor *x = gc_rand(2, SHAPE(32, 8), 5, -1, 1);
    int32_t labels[32];
    for (int i = 0; i < 32; i++) labels[i] = i % 3;
    arena *a = arena_default(DEV_CPU);
    long allocs = 0;
    size_t cap = 0, used = 0;
    for (int step = 0; step < 6; step++) {
        tensor *loss = op_cross_entropy(mlp_forward(&m, x), labels);
        cr_assert_eq(backward(loss), ER_OK);
        if (step == 2) {
            allocs = arena_sys_allocs(a);
            cap = arena_capacity(a);
            used = arena_used(a);
        }
        if (step > 2) {
            cr_assert_eq(arena_sys_allocs(a), allocs, "step %d made system allocations", step);
            cr_assert_eq(arena_capacity(a), cap);
            cr_assert_eq(arena_used(a), used);
        }
        zero_grad(&m.params);
        nn_step_end();
        cr_assert_eq(arena_used(a), 0);
    }
    tensor_free(x);
    params_free(&m.params);
}

Test(nn_autograd, arena_coalesces_chunks) {
    arena *a = arena_new(DEV_CPU, 1024);
    for (int i = 0; i < 10; i++) arena_alloc(a, 1000);
    long before = arena_sys_allocs(a);
    cr_assert_gt(before, 2);
    arena_reset(a);
    long after_reset = arena_sys_allocs(a);
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 10; i++) memset(arena_alloc(a, 1000), 1, 1000);
        arena_reset(a);
    }
    cr_assert_eq(arena_sys_allocs(a), after_reset, "one coalesced chunk serves the same load");
    arena_free(a);
}

Test(nn_autograd, tiny_mlp_learns_xor_like_task) {
    /* 2-D points, label = sign(x0 * x1) (not linearly separable); manual SGD */
    mlp m;
    mlp_init(&m, 2, 32, 2, 6);
    int N = 64;
    tensor *x = tensor_new(2, SHAPE(N, 2));
    int32_t labels[64];
    rng_t r = rng_make(7, 0);
    for (int i = 0; i < N; i++) {
        x->data[2 * i] = 2 * rng_uniform(&r) - 1;
        x->data[2 * i + 1] = 2 * rng_uniform(&r) - 1;
        labels[i] = x->data[2 * i] * x->data[2 * i + 1] > 0;
    }
    float first = 0, last = 0;
    for (int step = 0; step < 300; step++) {
        tensor *loss = op_cross_entropy(mlp_forward(&m, x), labels);
        if (step == 0) first = tensor_item(loss);
        last = tensor_item(loss);
        cr_assert_eq(backward(loss), ER_OK);
        for (int i = 0; i < m.params.n; i++) {
            tensor *p = m.params.t[i];
            for (int64_t j = 0; j < tensor_numel(p); j++) p->data[j] -= 0.5f * p->grad->data[j];
        }
        zero_grad(&m.params);
        nn_step_end();
    }
    cr_assert_lt(last, first / 3, "loss %g -> %g", first, last);
    tensor_free(x);
    params_free(&m.params);
}

Test(nn_autograd, views_params_and_host_transfer) {
    tensor *p = tensor_param("blocks.0.norm1.weight", 1, SHAPE(4));
    cr_assert_str_eq(p->name, "blocks.0.norm1.weight");
    cr_assert(p->flags & T_PARAM && p->flags & T_REQUIRES_GRAD && p->flags & T_NO_DECAY);
    cr_assert_not_null(p->grad);
    tensor *w = tensor_param("head.weight", 2, SHAPE(2, 3));
    cr_assert_eq(w->flags & T_NO_DECAY, 0);
    param_list pl = {0};
    params_add(&pl, p);
    params_add(&pl, w);
    cr_assert_eq(params_find(&pl, "head.weight"), w);
    cr_assert_null(params_find(&pl, "nope"));
    cr_assert_eq(params_numel(&pl), 10);
    float h[6] = {1, 2, 3, 4, 5, 6}, back[6];
    tensor_copy_from_host(w, h);
    tensor *t = op_transpose(w, 0, 1);
    cr_assert(!tensor_is_contiguous(t));
    tensor_to_host(t, back);
    const float want[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++) cr_assert_eq(back[i], want[i]);
    tensor *c = tensor_clone_new(t);
    cr_assert(tensor_is_contiguous(c));
    for (int i = 0; i < 6; i++) cr_assert_eq(c->data[i], want[i]);
    tensor_free(c);
    params_free(&pl);
    arena_default_free_all();
}

/* Backward reuses the gradient buffers of activations it has finished with (nn/autograd.c): a chain
 * of 40 tanh ops over 64k floats needs the gradients of its frontier, not 40 of them; the values are
 * those of the chain rule. */
Test(autograd, finished_activation_gradients_are_reused) {
    enum { L = 40, N = 65536 };
    float *h = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) h[i] = (float)(i % 97) / 97.0f - 0.5f;
    tensor *x = tensor_from_host_new(1, SHAPE(N), h);
    x->flags |= T_REQUIRES_GRAD;
    tensor *y = x;
    for (int l = 0; l < L; l++) y = op_tanh(y);
    tensor *loss = op_sum_all(y);
    size_t before = arena_used(arena_default(DEV_CPU));
    cr_assert_eq(backward(loss), 0, "%s", er_msg());
    size_t grads = arena_used(arena_default(DEV_CPU)) - before;
    cr_log_info("backward of %d ops over %d floats took %zu bytes of activation gradients (%.1f buffers)", L, N, grads,
                (double)grads / (N * sizeof(float)));
    cr_assert(grads < 4 * N * sizeof(float), "%zu bytes: the finished gradients were not reused", grads);
    /* d/dx of sum(tanh^L(x)): the product of (1 - tanh^2) along the chain, in double */
    tensor_to_host(x->grad, g);
    for (int i = 0; i < N; i += 997) {
        double v = h[i], d = 1;
        for (int l = 0; l < L; l++) { v = tanh(v); d *= 1 - v * v; }
        cr_assert(fabs(g[i] - d) < 1e-5 * (1 + fabs(d)), "x[%d]: %g vs %g", i, g[i], d);
    }
    nn_step_end();
    tensor_free(x);
    free(h); free(g);
}
