/* test_cuda_parity_attention_bf16.c — op_attention on bf16 q, k, v (nn/ops_attention_bf16.c) on the
 * device. Two checks per case:
 *   - on the device itself, bit for bit: the bf16 op's o is the rounding of the fp32-storage op's o
 *     in bf16 compute on the same values (the widening, copy_strided_bf16 and cast kernels on the
 *     device change nothing but the one rounding);
 *   - against the CPU table, forward and backward: both compute in bf16 but round P and sum in
 *     other orders (test_cuda_parity_attention.c's tensor-core case), so 2e-2 of the scale, as the
 *     other bf16 parity tests.
 * q/k/v are sliced out of a permuted [B, T, 3, H, D] projection (the ViT block) or separate. */
#include <math.h>

#include "nn/autograd.h"
#include "nn/ops.h"
#include "tests/cuda/parity_util.h"

typedef struct {
    int B, H, Tq, Tk, D, packed, mask_kind;
} acase;

static int64_t leaf_numel(const acase *a, int i) {
    if (a->packed) return (int64_t)a->B * a->Tq * 3 * a->H * a->D;
    return (int64_t)a->B * a->H * (i == 0 ? a->Tq : a->Tk) * a->D;
}

/* o (host, widened, [B, H, Tq, D]) of the attention on `dev` from the host leaves; bf16: q, k, v
 * cast to bf16 (the run's precision fp32), and the leaves' gradients of L = sum(o * r) into g;
 * else the fp32 op in bf16 compute, forward only. */
static float *attn_on(int dev, const acase *a, float *const *xh, const float *maskh, const float *rh, int bf16,
                      float **g) {
    const int nleaf = a->packed ? 1 : 3;
    tensor *leaf[3], *qkv[3], *mask = NULL;
    for (int i = 0; i < nleaf; i++) {
        leaf[i] = a->packed ? tensor_new_on(dev, 5, SHAPE(a->B, a->Tq, 3, a->H, a->D))
                            : tensor_new_on(dev, 4, SHAPE(a->B, a->H, i ? a->Tk : a->Tq, a->D));
        tensor_copy_from_host(leaf[i], xh[i]);
        tensor_set_requires_grad(leaf[i], 1);
    }
    if (a->mask_kind != MASK_NONE) {
        mask = tensor_new_on(dev, 2, SHAPE(a->Tq, a->Tk));
        tensor_copy_from_host(mask, maskh);
    }
    tensor *r = tensor_new_on(dev, 4, SHAPE(a->B, a->H, a->Tq, a->D));
    tensor_copy_from_host(r, rh);
    if (a->packed) {
        int perm[5] = {2, 0, 3, 1, 4};
        tensor *p = op_permute(bf16 ? op_cast(leaf[0], DT_BF16) : leaf[0], perm);
        for (int i = 0; i < 3; i++) qkv[i] = op_squeeze(op_slice(p, 0, i, i + 1), 0);
    } else {
        for (int i = 0; i < 3; i++) qkv[i] = bf16 ? op_cast(leaf[i], DT_BF16) : leaf[i];
    }
    if (!bf16) cr_assert_eq(er_set_precision("bf16"), ER_OK);
    tensor *o = op_attention(qkv[0], qkv[1], qkv[2], mask, a->mask_kind, 0);
    cr_assert_not_null(o, "%s", er_msg());
    cr_assert_eq(o->dtype, bf16 ? DT_BF16 : DT_F32);
    float *oh = malloc(sizeof(float) * tensor_numel(o));
    tensor_to_host(o, oh);
    if (bf16) {
        cr_assert_eq(backward(op_sum_all(op_mul(op_cast(o, DT_F32), r))), ER_OK, "%s", er_msg());
        for (int i = 0; i < nleaf; i++) {
            g[i] = malloc(sizeof(float) * tensor_numel(leaf[i]));
            tensor_to_host(leaf[i]->grad, g[i]);
        }
    }
    er_set_precision("fp32");
    nn_step_end();
    for (int i = 0; i < nleaf; i++) tensor_free(leaf[i]);
    tensor_free(mask), tensor_free(r);
    return oh;
}

static void attention_bf16_case(const acase *a, uint32_t tag) {
    const int nleaf = a->packed ? 1 : 3;
    const int64_t no = (int64_t)a->B * a->H * a->Tq * a->D;
    float *xh[3], *gc[3], *gg[3];
    for (int i = 0; i < nleaf; i++) {
        xh[i] = rnd(leaf_numel(a, i), -2, 2, tag + i);
        for (int64_t j = 0; j < leaf_numel(a, i); j++) xh[i][j] = er_bf16_to_f32(er_f32_to_bf16(xh[i][j]));
    }
    float *maskh = rnd((int64_t)a->Tq * a->Tk, -1, 1, tag + 5), *rh = rnd(no, -1, 1, tag + 6);
    for (int64_t j = 0; j < no; j++) rh[j] = er_bf16_to_f32(er_f32_to_bf16(rh[j]));
    float *oc = attn_on(DEV_CPU, a, xh, maskh, rh, 1, gc), *og = attn_on(GPU_DEV, a, xh, maskh, rh, 1, gg);
    float *of = attn_on(GPU_DEV, a, xh, maskh, rh, 0, NULL);
    gpu_ok("bf16 attention");
    for (int64_t i = 0; i < no; i++)
        cr_assert_eq(er_f32_to_bf16(og[i]), er_f32_to_bf16(of[i]),
                     "D %d: device o[%lld] %.9g, the device's fp32-storage op gives %.9g", a->D, (long long)i, og[i], of[i]);
    float *d = devf(og, no);
    expect_close("bf16 attention o", oc, d, no, 2e-2);
    GPU->free(d);
    for (int i = 0; i < nleaf; i++) {
        d = devf(gg[i], leaf_numel(a, i));
        expect_close(i == 0 ? "bf16 attention dL/dq (or dL/dqkv)" : i == 1 ? "bf16 attention dL/dk" : "bf16 attention dL/dv",
                     gc[i], d, leaf_numel(a, i), 2e-2);
        GPU->free(d);
        free(gc[i]), free(gg[i]), free(xh[i]);
    }
    free(oc), free(og), free(of), free(maskh), free(rh);
}

Test(cuda, attention_bf16_storage) {
    require_gpu();
    attention_bf16_case(&(acase){2, 3, 13, 13, 64, 1, MASK_NONE}, 800); /* ViT layout, head dim 64 */
    attention_bf16_case(&(acase){1, 3, 9, 5, 24, 0, MASK_ADD}, 810);    /* Tq != Tk, D 24, additive mask */
    attention_bf16_case(&(acase){2, 2, 20, 20, 32, 1, MASK_NONE}, 820);
}
