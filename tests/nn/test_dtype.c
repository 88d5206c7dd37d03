/* test_dtype.c — bf16 storage through the op layer (nn/tensor.h, op_cast, the shape ops) and the
 * safetensors files: values at the host boundary, cast's backward (the analytic identity: the
 * gradient cast back to the input's dtype), shape ops on bf16 giving the bits of the fp32 path
 * then cast, BF16 checkpoints bit-exact, and the refusal of every fp32-only op. */
#include <math.h>
#include <string.h>

#include "checkpoints/checkpoint.h"
#include "checkpoints/params_st.h"
#include "checkpoints/safetensors.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float ffrom(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* bf16 bits of a tensor, packed (malloc'd) */
static uint16_t *bits16(const tensor *t) {
    cr_assert_eq(t->dtype, DT_BF16);
    uint16_t *h = xmalloc(2 * (size_t)(tensor_numel(t) ? tensor_numel(t) : 1));
    tensor_to_host_raw(t, h);
    return h;
}

static void expect_same_bits(const tensor *a, const tensor *b, const char *what) {
    cr_assert(tensor_same_shape(a, b), "%s: shapes differ", what);
    uint16_t *ha = bits16(a), *hb = bits16(b);
    for (int64_t i = 0; i < tensor_numel(a); i++)
        cr_assert_eq(ha[i], hb[i], "%s: element %lld 0x%04x vs 0x%04x", what, (long long)i, ha[i], hb[i]);
    free(ha);
    free(hb);
}

Test(nn_dtype, host_boundary_widens_and_rounds) {
    const float vals[6] = {1.0f, ffrom(0x3F808000u), ffrom(0x3F818000u), -0.0f, ffrom(0x00018000u), ffrom(0x7F7FFFFFu)};
    tensor *t = tensor_new_dt(DEV_CPU, DT_BF16, 1, SHAPE(6));
    cr_assert_not_null(t);
    cr_assert_null(t->data, "a bf16 tensor has no float view");
    cr_assert_eq(tensor_elsize(t), 2);
    tensor_copy_from_host(t, vals);
    uint16_t *h = bits16(t);
    const uint16_t want[6] = {0x3F80, 0x3F80, 0x3F82, 0x8000, 0x0002, 0x7F80};
    for (int i = 0; i < 6; i++) cr_assert_eq(h[i], want[i], "element %d: 0x%04x", i, h[i]);
    float back[6];
    tensor_to_host(t, back);
    for (int i = 0; i < 6; i++) cr_assert_eq(fbits(back[i]), (uint32_t)want[i] << 16, "widened %d", i);
    cr_assert_eq(tensor_item(t), 1.0f);
    tensor_fill(t, 2.0f);
    free(h);
    h = bits16(t);
    for (int i = 0; i < 6; i++) cr_assert_eq(h[i], 0x4000);
    tensor *c = tensor_clone_new(t);
    cr_assert_eq(c->dtype, DT_BF16);
    expect_same_bits(c, t, "clone");
    free(h);
    tensor_free(c);
    tensor_free(t);
    nn_step_end();
}

/* tensor_fill on bf16: +0 takes the paired fill (even and odd counts, a view starting at an odd
 * element, which is not 4-byte aligned and takes the strided copy); other values and -0 the strided
 * copy. Every element, and nothing outside the view, gets written. */
Test(nn_dtype, fill_bf16_writes_exactly_the_view) {
    const int64_t ns[3] = {2, 7, 9};
    for (int c = 0; c < 3; c++) {
        const int64_t n = ns[c];
        tensor *t = tensor_new_dt(DEV_CPU, DT_BF16, 1, SHAPE(n + 2));
        for (int k = 0; k < 3; k++) {
            const float v[3] = {0.0f, -0.0f, 3.0f};
            const uint16_t want = v[k] == 0.0f ? (signbit(v[k]) ? 0x8000 : 0x0000) : 0x4040;
            uint16_t *h = t->raw;
            for (int64_t i = 0; i < n + 2; i++) h[i] = 0x7F81; /* a NaN pattern: any stray write shows */
            tensor *view = op_slice(t, 0, c == 2 ? 1 : 0, (c == 2 ? 1 : 0) + n); /* c 2: odd offset */
            cr_assert_not_null(view);
            cr_assert(tensor_is_contiguous(view));
            tensor_fill(view, v[k]);
            const int64_t lo = c == 2 ? 1 : 0;
            for (int64_t i = 0; i < n + 2; i++) {
                const uint16_t expect = i >= lo && i < lo + n ? want : 0x7F81;
                cr_assert_eq(h[i], expect, "n %lld value %g element %lld: 0x%04x", (long long)n, v[k], (long long)i, h[i]);
            }
        }
        tensor_free(t);
        nn_step_end();
    }
}

/* loss = sum(cast(cast(x, bf16), fp32) * c): dloss/dx = widen(bf16(c)) exactly, the gradient
 * passing through the bf16 tensor in its dtype; x used twice gets the two added in fp32. */
Test(nn_dtype, cast_backward_is_the_identity_in_the_inputs_dtype) {
    tensor *x = gc_rand(2, SHAPE(3, 37), 11, -2, 2);
    tensor *c = gc_rand(2, SHAPE(3, 37), 12, -2, 2);
    tensor_set_requires_grad(c, 0);
    tensor *xb = op_cast(x, DT_BF16);
    cr_assert_eq(xb->dtype, DT_BF16);
    cr_assert_eq(op_cast(xb, DT_BF16), xb, "a cast to the same dtype is the tensor itself");
    tensor *z = op_cast(xb, DT_F32);
    tensor *loss = op_add(op_sum_all(op_mul(z, c)), op_sum_all(op_mul(x, c)));
    cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
    for (int64_t i = 0; i < tensor_numel(x); i++) {
        float through = ffrom((uint32_t)er_f32_to_bf16(c->data[i]) << 16);
        cr_assert_eq(fbits(x->grad->data[i]), fbits(through + c->data[i]), "grad %lld: %g vs %g + %g", (long long)i,
                     x->grad->data[i], through, c->data[i]);
        /* forward: the value rounded once */
        cr_assert_eq(fbits(z->data[i]), (uint32_t)er_f32_to_bf16(x->data[i]) << 16);
    }
    tensor_free(x);
    tensor_free(c);
    nn_step_end();
}

/* the same chain of moves on bf16 and on fp32 then cast: permute, slice, contiguous, reshape,
 * concat, split, clone, squeeze/unsqueeze */
static tensor *moves(tensor *x, tensor *y) {
    int perm[4] = {2, 0, 3, 1};
    tensor *p = op_permute(x, perm);            /* [5, 2, 4, 3] */
    tensor *s = op_slice(p, 0, 1, 4);           /* [3, 2, 4, 3] strided */
    tensor *t = op_transpose(s, 1, 3);          /* [3, 3, 4, 2] */
    tensor *r = op_reshape(t, 3, SHAPE(3, -1, 2)); /* a copy (not packed) */
    tensor *u = op_unsqueeze(op_squeeze(op_unsqueeze(r, 1), 1), 0);
    tensor *parts[2] = {op_squeeze(u, 0), op_slice(op_permute(y, (int[]){0, 2, 1}), 1, 0, 7)};
    tensor *cat = op_concat(2, parts, 1);       /* [3, 12 + 7, 2] */
    tensor *halves[2];
    if (op_split(cat, 1, 2, SHAPE(9, 10), halves)) return NULL;
    return op_clone(op_contiguous(halves[1]));
}

Test(nn_dtype, shape_ops_on_bf16_give_the_bits_of_fp32_then_cast) {
    tensor *x = gc_rand(4, SHAPE(2, 3, 5, 4), 21, -3, 3);
    tensor *y = gc_rand(3, SHAPE(3, 2, 9), 22, -3, 3);
    tensor *via_bf16 = moves(op_cast(x, DT_BF16), op_cast(y, DT_BF16));
    cr_assert_not_null(via_bf16, "%s", er_msg());
    cr_assert_eq(via_bf16->dtype, DT_BF16);
    tensor *via_f32 = op_cast(moves(x, y), DT_BF16);
    expect_same_bits(via_bf16, via_f32, "moves");
    /* gradients: a bf16 seed pushed back through the bf16 moves lands where the fp32 path puts the
     * same (bf16-valued) seed, rounded to bf16: every element is moved or added to 0 once */
    tensor *seed = tensor_new_dt(DEV_CPU, DT_F32, via_f32->ndim, via_f32->shape);
    tensor_copy(seed, op_cast(via_f32, DT_F32)); /* bf16-valued fp32 seed */
    tensor *seed_b = op_cast(seed, DT_BF16);
    cr_assert_eq(backward_with(via_bf16, seed_b), ER_OK, "%s", er_msg());
    float *g_bf = xmalloc(sizeof(float) * tensor_numel(x)), *g_fy = xmalloc(sizeof(float) * tensor_numel(y));
    memcpy(g_bf, x->grad->data, sizeof(float) * tensor_numel(x));
    memcpy(g_fy, y->grad->data, sizeof(float) * tensor_numel(y));
    tensor_fill(x->grad, 0);
    tensor_fill(y->grad, 0);
    tensor *again = moves(x, y);
    cr_assert_eq(backward_with(again, seed), ER_OK, "%s", er_msg());
    for (int64_t i = 0; i < tensor_numel(x); i++) cr_assert_eq(fbits(g_bf[i]), fbits(x->grad->data[i]), "x grad %lld", (long long)i);
    for (int64_t i = 0; i < tensor_numel(y); i++) cr_assert_eq(fbits(g_fy[i]), fbits(y->grad->data[i]), "y grad %lld", (long long)i);
    free(g_bf);
    free(g_fy);
    tensor_free(seed);
    tensor_free(x);
    tensor_free(y);
    nn_step_end();
}

static void expect_refused(tensor *got, const char *op) {
    cr_assert_null(got, "%s accepted a bf16 tensor", op);
    cr_assert(strstr(er_msg(), op) && strstr(er_msg(), "bf16"), "%s: message '%s' names neither", op, er_msg());
}

Test(nn_dtype, fp32_only_ops_refuse_bf16_naming_the_op) {
    tensor *x = gc_rand(2, SHAPE(4, 6), 31, -1, 1), *w = gc_rand(2, SHAPE(6, 6), 32, -1, 1);
    tensor *b = op_cast(x, DT_BF16);
    expect_refused(op_add(b, x), "add");
    expect_refused(op_mul(x, b), "mul");
    expect_refused(op_gelu(b), "gelu");
    expect_refused(op_exp(b), "exp");
    expect_refused(op_matmul(b, w, 0, 0), "matmul");
    expect_refused(op_linear(x, op_cast(w, DT_BF16), NULL), "linear");
    /* layernorm and bias_gelu take bf16 activations (test_ops_bf16.c) but fp32 weights only */
    tensor *w1 = gc_rand(1, SHAPE(6), 33, -1, 1);
    expect_refused(op_layernorm(b, op_cast(w1, DT_BF16), NULL, 1e-5f), "layernorm");
    expect_refused(op_bias_gelu(b, op_cast(w1, DT_BF16)), "bias_gelu");
    expect_refused(op_softmax(b, -1), "softmax");
    expect_refused(op_sum(b, 0, 0), "sum");
    expect_refused(op_mean_all(b), "mean_all");
    expect_refused(op_dropout(b, 0.5f, 1, 2, 1), "dropout");
    expect_refused(op_expand(op_slice(b, 0, 0, 1), 2, SHAPE(4, 6)), "expand");
    expect_refused(op_gather(b, 1, (const int32_t[]){0, 1, 0, 1, 0, 1, 0, 1}, 2), "gather");
    expect_refused(op_cross_entropy(b, (const int32_t[]){0, 1, 2, 3}), "cross_entropy");
    tensor *mixed[2] = {x, b};
    expect_refused(op_concat(2, mixed, 0), "concat");
    /* the loss, the optimizer and tensor_copy too */
    cr_assert_neq(backward(op_sum_all(op_cast(op_cast(b, DT_F32), DT_BF16))), ER_OK);
    cr_assert(strstr(er_msg(), "backward"), "%s", er_msg());
    tensor *dst = tensor_new(2, SHAPE(4, 6));
    cr_assert_neq(tensor_copy(dst, b), ER_OK);
    param_list pl = {0};
    tensor *pb = tensor_new_dt(DEV_CPU, DT_BF16, 1, SHAPE(3));
    pb->name = xstrdup("p");
    tensor_set_requires_grad(pb, 1);
    params_add(&pl, pb);
    optim_config cfg = {.kind = OPTIM_ADAMW, .lr = 0.1};
    cr_assert_null(optim_new(&cfg, &pl));
    cr_assert(strstr(er_msg(), "'p'") && strstr(er_msg(), "bf16"), "%s", er_msg());
    params_free(&pl);
    tensor_free(dst);
    tensor_free(x);
    tensor_free(w);
    tensor_free(w1);
    nn_step_end();
}

static const uint16_t PATTERN[7] = {0x3F80, 0x8000, 0x0001, 0x007F, 0xC2F7, 0x7F7F, 0x3C01};

Test(nn_dtype, bf16_tensors_save_as_BF16_and_load_bit_exact) {
    char path[512];
    snprintf(path, sizeof path, "%s/bf16.safetensors", test_tmpdir());
    param_list pl = {0}, back = {0};
    tensor *p = tensor_param("w", 2, SHAPE(2, 3));
    for (int i = 0; i < 6; i++) p->data[i] = 0.1f * (float)i - 0.2f;
    tensor *b = tensor_new_dt(DEV_CPU, DT_BF16, 1, SHAPE(7));
    b->name = xstrdup("buf");
    tensor_copy_from_host_raw(b, PATTERN);
    params_add(&pl, p);
    params_add(&pl, b);
    ckpt_state s = {.params = &pl};
    cr_assert_eq(ckpt_save(path, &s), ER_OK, "%s", er_msg());
    st_file f;
    cr_assert_eq(st_open(path, &f), ER_OK, "%s", er_msg());
    cr_assert_eq(st_find(&f, "buf")->dtype, ST_BF16);
    cr_assert_eq(st_find(&f, "buf")->nbytes, 14);
    cr_assert_eq(st_find(&f, "w")->dtype, ST_F32);
    st_close(&f);
    tensor *p2 = tensor_param("w", 2, SHAPE(2, 3)), *b2 = tensor_new_dt(DEV_CPU, DT_BF16, 1, SHAPE(7));
    b2->name = xstrdup("buf");
    params_add(&back, p2);
    params_add(&back, b2);
    ckpt_state s2 = {.params = &back};
    cr_assert_eq(ckpt_load(path, &s2, CKPT_WEIGHTS_ONLY, NULL), ER_OK, "%s", er_msg());
    expect_same_bits(b2, b, "checkpoint");
    cr_assert_eq(memcmp(p2->data, p->data, 6 * sizeof(float)), 0, "the fp32 tensor as before");
    /* the weights-file path (params_add_st / params_load_st) */
    st_writer *w = st_writer_new();
    void *host = params_add_st(&pl, w, "m.");
    cr_assert_eq(st_write(w, path), ER_OK, "%s", er_msg());
    st_writer_free(w);
    free(host);
    tensor_fill(b2, 0);
    cr_assert_eq(st_open(path, &f), ER_OK, "%s", er_msg());
    cr_assert_eq(st_find(&f, "m.buf")->dtype, ST_BF16);
    cr_assert_eq(params_load_st(&back, &f, "m.", 1), ER_OK, "%s", er_msg());
    st_close(&f);
    expect_same_bits(b2, b, "params_st");
    /* an fp32 file into a bf16 tensor: rounded to nearest even */
    float vals[7] = {1.0f, ffrom(0x3F808000u), ffrom(0x3F818000u), -1.5f, 0, 2, 3};
    w = st_writer_new();
    st_add(w, "buf", ST_F32, 1, SHAPE(7), vals);
    cr_assert_eq(st_write(w, path), ER_OK);
    st_writer_free(w);
    cr_assert_eq(st_open(path, &f), ER_OK, "%s", er_msg());
    param_list only = {0};
    params_add(&only, b2);
    cr_assert_eq(params_load_st(&only, &f, "", 1), ER_OK, "%s", er_msg());
    st_close(&f);
    uint16_t *h = bits16(b2);
    cr_assert_eq(h[1], 0x3F80);
    cr_assert_eq(h[2], 0x3F82);
    cr_assert_eq(h[3], 0xBFC0);
    free(h);
    free(only.t);
    params_free(&pl);
    params_free(&back);
    nn_step_end();
}
