/* The optimizer object over parameter lists: weight-decay groups by name, layer-wise lr decay,
 * AdamW / SGD updates through the object against torch.optim trajectories (tests/ref), global-norm
 * clipping against torch.nn.utils.clip_grad_norm_, frozen parameters. */
#include <math.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/optim.h"
#include "tests/ref/optim_refs.h"
#include "tests/test_util.h"

Test(optim_object, weight_decay_groups_by_name) {
    param_list pl = {0};
    const char *decay[] = {"blocks.0.attn.qkv.weight", "patch_embed.proj.weight", "head.weight", "blocks.1.mlp.fc1.weight"};
    const char *no_decay[] = {"pos_embed", "cls_token", "reg_token", "register_tokens", "decoder_pos_embed", "mask_token",
                              "encoder.cls_token", "dist_token"};
    for (size_t i = 0; i < 4; i++) params_add(&pl, tensor_param(decay[i], 2, SHAPE(3, 4)));
    for (size_t i = 0; i < 8; i++) params_add(&pl, tensor_param(no_decay[i], 3, SHAPE(1, 2, 4)));
    params_add(&pl, tensor_param("norm.weight", 1, SHAPE(4)));           /* 1-D: exempt */
    params_add(&pl, tensor_param("blocks.0.attn.qkv.bias", 1, SHAPE(4)));
    params_add(&pl, tensor_param("conv.bias", 2, SHAPE(2, 2)));         /* ".bias" whatever its rank */
    params_add(&pl, tensor_param("my_token_proj.weight", 2, SHAPE(2, 2))); /* not a token: decays */
    optim_config cfg = {.kind = OPTIM_ADAMW, .lr = 1e-3, .weight_decay = 0.05};
    optimizer *o = optim_new(&cfg, &pl);
    cr_assert_not_null(o, "%s", er_msg());
    cr_assert_eq(o->n, pl.n);
    for (int i = 0; i < o->n; i++) {
        const char *name = o->ps[i].p->name;
        int should_decay = i < 4 || !strcmp(name, "my_token_proj.weight");
        cr_expect_eq(o->ps[i].wd, should_decay ? 0.05f : 0.0f, "%s: wd %g", name, o->ps[i].wd);
        cr_expect_eq(o->ps[i].lr_scale, 1.0f);
    }
    cr_expect_float_eq(o->cfg.beta2, 0.999, 1e-12); /* defaults filled */
    optim_free(o);
    params_free(&pl);
}

Test(optim_object, layer_decay_scales) {
    param_list pl = {0};
    params_add(&pl, tensor_param("cls_token", 3, SHAPE(1, 1, 4)));
    params_add(&pl, tensor_param("blocks.0.attn.qkv.weight", 2, SHAPE(4, 4)));
    params_add(&pl, tensor_param("blocks.1.attn.qkv.weight", 2, SHAPE(4, 4)));
    params_add(&pl, tensor_param("head.weight", 2, SHAPE(2, 4)));
    optim_config cfg = {.kind = OPTIM_ADAMW, .lr = 1e-3, .layer_decay = 0.5, .depth = 2};
    optimizer *o = optim_new(&cfg, &pl);
    cr_assert_not_null(o, "%s", er_msg());
    const float want[] = {0.125f, 0.25f, 0.5f, 1.0f};
    for (int i = 0; i < 4; i++) cr_expect_eq(o->ps[i].lr_scale, want[i], "%s: %g", o->ps[i].p->name, o->ps[i].lr_scale);
    optim_free(o);
    cfg.depth = 0;
    cr_expect_null(optim_new(&cfg, &pl));
    cr_expect(strstr(er_msg(), "depth") != NULL, "%s", er_msg());
    params_free(&pl);
}

Test(optim_object, bad_configs_rejected) {
    param_list pl = {0};
    params_add(&pl, tensor_param("w", 2, SHAPE(2, 2)));
    optim_config bad1 = {.kind = OPTIM_ADAMW, .lr = 1e-3, .beta1 = 1.0, .beta2 = 0.9, .eps = 1e-8};
    cr_expect_null(optim_new(&bad1, &pl));
    optim_config bad2 = {.kind = OPTIM_SGD, .lr = 0.1, .nesterov = 1};
    cr_expect_null(optim_new(&bad2, &pl));
    optim_config bad3 = {.kind = OPTIM_SGD, .lr = -1};
    cr_expect_null(optim_new(&bad3, &pl));
    params_free(&pl);
}

/* One parameter [1, N] (2-D so weight decay applies), gradients from the reference file. */
static void run_object(const optim_config *cfg, const double *ref, const char *what) {
    param_list pl = {0};
    tensor *w = tensor_param("fc.weight", 2, SHAPE(1, REF_OPT_N));
    params_add(&pl, w);
    memcpy(w->data, REF_OPT_P0, sizeof(float) * REF_OPT_N);
    optimizer *o = optim_new(cfg, &pl);
    cr_assert_not_null(o, "%s", er_msg());
    for (int t = 0; t < REF_OPT_T; t++) {
        memcpy(w->grad->data, REF_OPT_GRADS + t * REF_OPT_N, sizeof(float) * REF_OPT_N);
        cr_assert_eq(optim_step(o), ER_OK, "%s", er_msg());
        optim_zero_grad(o);
        for (int i = 0; i < REF_OPT_N; i++) {
            double want = ref[t * REF_OPT_N + i];
            cr_expect(fabs(w->data[i] - want) <= 2e-6 * fmax(1, fabs(want)), "%s step %d elem %d: %.9g vs %.9g", what,
                      t + 1, i, (double)w->data[i], want);
            cr_expect_eq(w->grad->data[i], 0.0f);
        }
    }
    cr_expect_eq(o->step, REF_OPT_T);
    optim_free(o);
    params_free(&pl);
}

Test(optim_object, adamw_and_sgd_match_torch) {
    optim_config adamw = {.kind = OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.05, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    run_object(&adamw, REF_ADAMW, "adamw");
    optim_config sgd = {.kind = OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3};
    run_object(&sgd, REF_SGD_MOM, "sgd");
    optim_config nag = {.kind = OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = 1};
    run_object(&nag, REF_SGD_NESTEROV, "nesterov");
}

Test(optim_object, set_lr_and_per_param_scale) {
    /* SGD with lr 0 leaves the parameters exactly as they are; then a per-parameter lr scale */
    param_list pl = {0};
    tensor *w = tensor_param("w", 2, SHAPE(2, 3));
    params_add(&pl, w);
    for (int i = 0; i < 6; i++) { w->data[i] = (float)i - 2.5f; w->grad->data[i] = 1.0f; }
    optim_config cfg = {.kind = OPTIM_SGD, .lr = 0.5};
    optimizer *o = optim_new(&cfg, &pl);
    optim_set_lr(o, 0.0);
    optim_step(o);
    for (int i = 0; i < 6; i++) cr_expect_eq(w->data[i], (float)i - 2.5f);
    optim_set_lr(o, 0.1);
    o->ps[0].lr_scale = 0.5f;
    optim_step(o);
    for (int i = 0; i < 6; i++) cr_expect_float_eq(w->data[i], (float)i - 2.5f - 0.05f, 1e-7);
    optim_free(o);
    params_free(&pl);
}

Test(optim_object, clip_grad_norm_matches_torch) {
    param_list pl = {0};
    tensor *a = tensor_param("a.weight", 1, SHAPE(REF_OPT_N)), *b = tensor_param("b.weight", 1, SHAPE(5));
    params_add(&pl, a);
    params_add(&pl, b);
    memcpy(a->grad->data, REF_OPT_GRADS, sizeof(float) * REF_OPT_N);
    memcpy(b->grad->data, REF_OPT_GRADS + REF_OPT_N, sizeof(float) * 5);
    optim_config cfg = {.kind = OPTIM_SGD, .lr = 0.1};
    optimizer *o = optim_new(&cfg, &pl);
    double big = optim_clip_grad_norm(o, 100.0); /* above the norm: untouched */
    cr_expect(fabs(big - REF_CLIP_NORM) < 1e-6 * REF_CLIP_NORM);
    cr_expect_eq(a->grad->data[0], REF_OPT_GRADS[0]);
    double norm = optim_clip_grad_norm(o, 1.0);
    cr_expect(fabs(norm - REF_CLIP_NORM) < 1e-6 * REF_CLIP_NORM, "norm %.9g want %.9g", norm, REF_CLIP_NORM);
    for (int i = 0; i < REF_OPT_N; i++) cr_expect(fabs(a->grad->data[i] - REF_CLIP_A[i]) < 1e-6, "a[%d]", i);
    for (int i = 0; i < 5; i++) cr_expect(fabs(b->grad->data[i] - REF_CLIP_B[i]) < 1e-6, "b[%d]", i);
    double after = optim_clip_grad_norm(o, 0.0); /* 0 = measure only */
    cr_expect(fabs(after - 1.0) < 1e-5, "norm after clipping %.9g", after);
    b->grad->data[2] = NAN;
    double bad = optim_clip_grad_norm(o, 1.0);
    cr_expect(isnan(bad));
    cr_expect_eq(a->grad->data[0], (float)REF_CLIP_A[0]); /* not scaled by a NaN coefficient */
    optim_free(o);
    params_free(&pl);
}

/* optim_guard (the loop's one-wait step): the norm, the clip and the update of the host clip, bit for bit,
 * for AdamW and SGD; the gradients left unscaled; a NaN loss or gradient makes the update write nothing. */
static void guard_case(optim_kind kind) {
    param_list pl[2] = {{0}};
    optimizer *o[2];
    for (int k = 0; k < 2; k++) {
        tensor *a = tensor_param("a.weight", 1, SHAPE(REF_OPT_N)), *b = tensor_param("b.weight", 1, SHAPE(5));
        tensor_fill(a, 0.5f);
        tensor_fill(b, -0.25f);
        params_add(&pl[k], a);
        params_add(&pl[k], b);
        optim_config cfg = {.kind = kind, .lr = 0.1, .weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                            .momentum = kind == OPTIM_SGD ? 0.9 : 0};
        o[k] = optim_new(&cfg, &pl[k]);
        cr_assert_not_null(o[k], "%s", er_msg());
    }
    double norm = 0;
    float gs = 0, losses[2] = {1.0f, 2.0f};
    for (int step = 0; step < 3; step++) {
        for (int k = 0; k < 2; k++) {
            memcpy(pl[k].t[0]->grad->data, REF_OPT_GRADS, sizeof(float) * REF_OPT_N);
            memcpy(pl[k].t[1]->grad->data, REF_OPT_GRADS + REF_OPT_N, sizeof(float) * 5);
        }
        double host = optim_clip_grad_norm(o[0], 1.0);
        cr_assert_eq(optim_step(o[0]), ER_OK);
        cr_assert_eq(optim_guard(o[1], DEV_CPU, 1.0, losses, 2, &norm, &gs), ER_OK);
        cr_assert(memcmp(&host, &norm, sizeof norm) == 0, "norm %.17g, host clip %.17g", norm, host);
        cr_assert(gs < 1.0f, "the clip is active: scale %g", gs);
        cr_assert_eq(pl[1].t[0]->grad->data[0], REF_OPT_GRADS[0], "the guard does not scale the gradients");
        cr_assert_eq(optim_step(o[1]), ER_OK);
        for (int t = 0; t < 2; t++)
            cr_assert(memcmp(pl[0].t[t]->data, pl[1].t[t]->data, (size_t)tensor_numel(pl[0].t[t]) * sizeof(float)) == 0,
                      "step %d: %s differs from the host clip's update", step, pl[0].t[t]->name);
    }
    /* a NaN loss, then an Inf gradient: nothing written */
    float before[REF_OPT_N];
    memcpy(before, pl[1].t[0]->data, sizeof before);
    losses[1] = NAN;
    cr_assert_eq(optim_guard(o[1], DEV_CPU, 1.0, losses, 2, &norm, &gs), ER_OK);
    cr_assert(isnan(gs) && isfinite(norm));
    cr_assert_eq(optim_step(o[1]), ER_OK);
    cr_assert(memcmp(before, pl[1].t[0]->data, sizeof before) == 0, "a NaN loss updated the weights");
    losses[1] = 2.0f;
    pl[1].t[1]->grad->data[3] = INFINITY;
    cr_assert_eq(optim_guard(o[1], DEV_CPU, 0.0, losses, 2, &norm, &gs), ER_OK);
    cr_assert(isnan(gs) && isinf(norm));
    cr_assert_eq(optim_step(o[1]), ER_OK);
    cr_assert(memcmp(before, pl[1].t[0]->data, sizeof before) == 0, "an Inf gradient updated the weights");
    for (int k = 0; k < 2; k++) {
        optim_free(o[k]);
        params_free(&pl[k]);
    }
}

Test(optim_object, guard_equals_the_host_clip_and_skips_non_finite_steps) {
    guard_case(OPTIM_ADAMW);
    guard_case(OPTIM_SGD);
}

Test(optim_object, frozen_parameters_are_skipped) {
    param_list pl = {0};
    tensor *frozen = tensor_param("backbone.weight", 2, SHAPE(2, 2)), *lora = tensor_param("lora_A.weight", 2, SHAPE(2, 2));
    tensor_set_requires_grad(frozen, 0);
    params_add(&pl, frozen);
    params_add(&pl, lora);
    for (int i = 0; i < 4; i++) { frozen->data[i] = 1.0f; lora->data[i] = 1.0f; lora->grad->data[i] = 1.0f; }
    if (frozen->grad) for (int i = 0; i < 4; i++) frozen->grad->data[i] = 1.0f;
    optim_config cfg = {.kind = OPTIM_ADAMW, .lr = 0.1};
    optimizer *o = optim_new(&cfg, &pl);
    cr_assert_eq(o->n, 1);
    cr_expect_eq(optim_find(o, "lora_A.weight"), 0);
    cr_expect_eq(optim_find(o, "backbone.weight"), -1);
    optim_step(o);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(frozen->data[i], 1.0f);
        cr_expect_lt(lora->data[i], 1.0f);
    }
    optim_free(o);
    params_free(&pl);
}
