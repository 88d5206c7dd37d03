/* test_model_prepack.c — model_prepack / tensor_prepack (frozen weights for inference): the
 * descriptors are bit-identical with and without it, in fp32 and bf16 (and after a precision change
 * since packing); writes through the tensor API and optimizer steps drop the packed copies, so a
 * trained-after-packing model embeds exactly as one that was never packed. */
#include <string.h>

#include "kernels/gemm.h"
#include "nn/precision.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/vit_model.h"
#include "nn/optim.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static model *tiny(uint64_t seed) {
    vit_args a;
    vit_args_defaults(&a);
    cfg_set_str(&a.arch, "vit_tiny");
    a.img = 32; a.patch = 8; a.dim = 48; a.depth = 2; a.heads = 3;
    model *m = NULL;
    cr_assert_eq(vit_arch.create(&a, seed, &m), 0, "%s", er_msg());
    vit_args_free(&a);
    return m;
}

static float *images(int B, int S) {
    float *x = xmalloc(sizeof(float) * B * 3 * S * S);
    rng_t r = rng_make(5, rng_stream(61, 0, 0));
    for (long i = 0; i < (long)B * 3 * S * S; i++) x[i] = 2.0f * rng_uniform(&r) - 1.0f;
    return x;
}

static int packed_count(const model *m) {
    int c = 0;
    for (int i = 0; i < m->params->n; i++) c += m->params->t[i]->packed != NULL;
    return c;
}

static void expect_same_embedding(model *a, model *b, const float *x, int B, const char *what) {
    int D = a->dim;
    float *ea = xmalloc(sizeof(float) * B * D), *eb = xmalloc(sizeof(float) * B * D);
    cr_assert_eq(model_embed(a, x, B, ea), 0, "%s", er_msg());
    cr_assert_eq(model_embed(b, x, B, eb), 0, "%s", er_msg());
    cr_assert(memcmp(ea, eb, sizeof(float) * B * D) == 0, "%s: descriptors differ", what);
    free(ea), free(eb);
}

Test(models_prepack, descriptors_bit_identical_fp32_bf16_and_after_a_precision_change) {
    const int B = 3;
    model *plain = tiny(11), *frozen = tiny(11);
    float *x = images(B, plain->img);
    for (int prec = SGEMM_FP32; prec <= SGEMM_BF16; prec++) {
        model_set_precision(plain, prec == SGEMM_BF16 ? ER_PREC_BF16 : ER_PREC_FP32);
        model_set_precision(frozen, prec == SGEMM_BF16 ? ER_PREC_BF16 : ER_PREC_FP32);
        cr_assert_eq(model_prepack(frozen), 0, "%s", er_msg());
        /* every 2-D weight (qkv, proj, fc1, fc2 of 2 blocks; the patch embedding is 4-D) */
        cr_assert_geq(packed_count(frozen), 8, "only %d weights packed", packed_count(frozen));
        for (int i = 0; i < frozen->params->n; i++)
            if (frozen->params->t[i]->ndim != 2) cr_assert_null(frozen->params->t[i]->packed, "%s", frozen->params->t[i]->name);
        expect_same_embedding(plain, frozen, x, B, prec ? "bf16" : "fp32");
        expect_same_embedding(plain, frozen, x, 1, prec ? "bf16 batch 1" : "fp32 batch 1");
    }
    /* packed for bf16 above; an fp32 forward (the field set directly, so the copies stay) must not
     * read them: the packed form is keyed on its compute */
    model_set_precision(plain, ER_PREC_FP32);
    frozen->precision = ER_PREC_FP32;
    cr_assert_geq(packed_count(frozen), 8);
    expect_same_embedding(plain, frozen, x, B, "fp32 after a bf16 pack");
    for (int i = 0; i < frozen->params->n; i++) /* a bias, a norm, the 4-D patch weight: refused */
        if (frozen->params->t[i]->ndim != 2) cr_assert_eq(tensor_prepack(frozen->params->t[i], GEMM_COMPUTE_FP32), ER_INPUT);
    cr_assert_eq(tensor_prepack(NULL, GEMM_COMPUTE_FP32), ER_INPUT);
    free(x);
    model_free(plain), model_free(frozen);
}

Test(models_prepack, writes_and_optimizer_steps_drop_the_packed_copies) {
    const int B = 2;
    model *plain = tiny(12), *frozen = tiny(12);
    float *x = images(B, plain->img);
    cr_assert_eq(model_prepack(frozen), 0, "%s", er_msg());
    int n0 = packed_count(frozen);
    cr_assert_gt(n0, 0);
    /* a write through the API drops that weight's copy, and the product sees the new values */
    tensor *w = NULL, *wp = NULL;
    for (int i = 0; i < frozen->params->n && !w; i++)
        if (frozen->params->t[i]->packed) w = frozen->params->t[i], wp = plain->params->t[i];
    float *h = xmalloc(sizeof(float) * tensor_numel(w));
    tensor_to_host(w, h);
    h[0] += 0.5f;
    tensor_copy_from_host(w, h);
    tensor_copy_from_host(wp, h);
    cr_assert_null(w->packed);
    cr_assert_eq(packed_count(frozen), n0 - 1);
    expect_same_embedding(plain, frozen, x, B, "after tensor_copy_from_host");
    tensor_fill(wp, 0.25f), tensor_prepack(w, GEMM_COMPUTE_FP32), tensor_fill(w, 0.25f);
    cr_assert_null(w->packed);
    expect_same_embedding(plain, frozen, x, B, "after tensor_fill");
    /* an optimizer step writes every parameter with a gradient: all copies go */
    cr_assert_eq(model_prepack(frozen), 0);
    optim_config oc = {.kind = OPTIM_SGD, .lr = 0.1};
    optimizer *oa = optim_new(&oc, plain->params), *ob = optim_new(&oc, frozen->params);
    for (int i = 0; i < plain->params->n; i++) {
        if (plain->params->t[i]->grad) tensor_fill(plain->params->t[i]->grad, 0.01f * (float)(i % 5 + 1));
        if (frozen->params->t[i]->grad) tensor_fill(frozen->params->t[i]->grad, 0.01f * (float)(i % 5 + 1));
    }
    cr_assert_eq(optim_step(oa), 0);
    cr_assert_eq(optim_step(ob), 0);
    cr_assert_eq(packed_count(frozen), 0, "%d packed copies survived a step", packed_count(frozen));
    expect_same_embedding(plain, frozen, x, B, "after an optimizer step");
    optim_free(oa), optim_free(ob);
    free(h), free(x);
    model_free(plain), model_free(frozen);
}
