/* One pre-norm ViT block built from endoret ops against PyTorch (tests/ref/make_vit_block_ref.py,
 * float64 reference stored as F32): forward output and the gradients of sum(out * R) with respect
 * to the input and every parameter. Tolerance: |ours - torch| <= 1e-4 + 1e-3 * |torch| per element
 * (fp32 forward/backward over ~10 ops; observed absolute errors are <= 3e-6). */
#include <math.h>

#include "checkpoints/safetensors.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

#define B 2
#define T 17
#define C 32
#define H 4
#define HID 128

static const char *names[] = {"norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias",
                              "attn.proj.weight", "attn.proj.bias", "norm2.weight", "norm2.bias",
                              "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"};

static tensor *P(param_list *pl, const char *n) { return params_find(pl, n); }

/* timm Block.forward with drop_path = 0 and ls = identity */
static tensor *vit_block(param_list *pl, tensor *x) {
    tensor *h = op_layernorm(x, P(pl, "norm1.weight"), P(pl, "norm1.bias"), 1e-6f);
    tensor *qkv = op_linear(h, P(pl, "attn.qkv.weight"), P(pl, "attn.qkv.bias"));
    qkv = op_reshape(qkv, 5, SHAPE(B, T, 3, H, C / H));
    tensor *p = op_permute(qkv, (int[]){2, 0, 3, 1, 4}); /* [3, B, H, T, D] views */
    tensor *q = op_squeeze(op_slice(p, 0, 0, 1), 0), *k = op_squeeze(op_slice(p, 0, 1, 2), 0),
           *v = op_squeeze(op_slice(p, 0, 2, 3), 0);
    tensor *a = op_attention(q, k, v, NULL, MASK_NONE, 0);                /* [B, H, T, D] */
    a = op_reshape(op_transpose(a, 1, 2), 3, SHAPE(B, T, C));
    tensor *y = op_add(x, op_linear(a, P(pl, "attn.proj.weight"), P(pl, "attn.proj.bias")));
    h = op_layernorm(y, P(pl, "norm2.weight"), P(pl, "norm2.bias"), 1e-6f);
    h = op_gelu(op_linear(h, P(pl, "mlp.fc1.weight"), P(pl, "mlp.fc1.bias")));
    return op_add(y, op_linear(h, P(pl, "mlp.fc2.weight"), P(pl, "mlp.fc2.bias")));
}

static tensor *load(const st_file *f, const char *name, int is_param) {
    const st_tensor *st = st_find(f, name);
    cr_assert_not_null(st, "%s missing from the reference file", name);
    int64_t shape[T_MAX_DIMS];
    for (int i = 0; i < st->ndim; i++) shape[i] = st->shape[i];
    tensor *t = is_param ? tensor_param(name, st->ndim, shape) : tensor_new(st->ndim, shape);
    cr_assert_eq(st_read_f32(f, name, t->data, tensor_numel(t)), ER_OK, "%s", er_msg());
    return t;
}

static void expect_close(const char *what, const tensor *ours, const tensor *ref) {
    cr_assert_eq(tensor_numel(ours), tensor_numel(ref), "%s: size", what);
    float *h = malloc(sizeof(float) * tensor_numel(ours));
    tensor_to_host(ours, h);
    double worst = 0;
    for (int64_t i = 0; i < tensor_numel(ref); i++) {
        double err = fabs(h[i] - ref->data[i]), tol = 1e-4 + 1e-3 * fabs(ref->data[i]);
        worst = fmax(worst, err / tol);
    }
    free(h);
    cr_expect_leq(worst, 1.0, "%s: worst err/tol %.3g", what, worst);
}

Test(nn_vit_block, forward_and_gradients_match_pytorch) {
    st_file f;
    cr_assert_eq(st_open("tests/ref/vit_block.safetensors", &f), ER_OK, "%s", er_msg());
    param_list pl = {0};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) params_add(&pl, load(&f, names[i], 1));
    tensor *x = load(&f, "x", 0), *R = load(&f, "r", 0), *out_ref = load(&f, "out", 0);
    tensor_set_requires_grad(x, 1);
    tensor *out = vit_block(&pl, x);
    cr_assert_not_null(out, "%s", er_msg());
    expect_close("out", out, out_ref);
    cr_assert_eq(backward(op_sum_all(op_mul(out, R))), ER_OK, "%s", er_msg());
    char gname[64];
    tensor *gx = load(&f, "grad.x", 0);
    expect_close("grad.x", x->grad, gx);
    for (int i = 0; i < pl.n; i++) {
        snprintf(gname, sizeof gname, "grad.%s", pl.t[i]->name);
        tensor *g = load(&f, gname, 0);
        expect_close(gname, pl.t[i]->grad, g);
        tensor_free(g);
    }
    /* inference runs the same ops, records nothing, gives the same output */
    nn_step_end();
    NO_GRAD {
        tensor *o2 = vit_block(&pl, x);
        cr_assert_eq(tape_size(), 0);
        expect_close("out (no_grad)", o2, out_ref);
    }
    tensor_free(gx);
    tensor_free(x);
    tensor_free(R);
    tensor_free(out_ref);
    params_free(&pl);
    st_close(&f);
}
