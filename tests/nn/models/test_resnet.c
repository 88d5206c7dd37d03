/* ResNet (torchvision layout) against PyTorch on two tiny networks (tests/ref/resnet_tiny.safetensors,
 * written by tests/ref/make_resnet_ref.py): eval logits, train logits, running statistics after the
 * train forward, parameter gradients; plus torchvision's names and shapes for resnet18/50. */
#include <math.h>
#include <string.h>

#include "checkpoints/params_st.h"
#include "checkpoints/safetensors.h"
#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/context.h"
#include "nn/precision.h"
#include "nn/models/resnet.h"
#include "nn/models/resnet_model.h"
#include "nn/ops.h"
#include "tests/test_util.h"

/* max |got - ref| <= tol * max |ref| */
static void expect_ref(const st_file *f, const char *name, const float *got, int64_t n, double tol) {
    const st_tensor *t = st_find(f, name);
    cr_assert_not_null(t, "reference has no %s", name);
    float *ref = malloc(sizeof(float) * n);
    cr_assert_eq(st_read_f32(f, name, ref, n), ER_OK, "%s: %s", name, er_msg());
    double scale = 0, worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)got[i] - ref[i]) > worst) {
            worst = fabs((double)got[i] - ref[i]);
            at = i;
        }
    cr_assert(worst <= tol * scale, "%s: element %lld: ours %.8g, torch %.8g (scale %g)", name, (long long)at,
              got[at], ref[at], scale);
    free(ref);
}

static void run_case(const char *prefix, int depth, const int blocks[4], int64_t H, int64_t W) {
    st_file f;
    cr_assert_eq(st_open("tests/ref/resnet_tiny.safetensors", &f), ER_OK, "%s", er_msg());
    resnet_config c = {.depth = depth, .width = 4, .num_classes = 5, .bn_momentum = 0.1f, .bn_eps = 1e-5f};
    memcpy(c.blocks, blocks, sizeof c.blocks);
    resnet *r = resnet_new(&c, 1);
    cr_assert_not_null(r, "%s", er_msg());
    cr_assert_eq(params_load_st(&r->params, &f, prefix, 1), ER_OK, "%s", er_msg());
    char name[160];
    const int64_t xs[4] = {2, 3, H, W};
    float *x = malloc(sizeof(float) * 2 * 3 * H * W), y[10];
    snprintf(name, sizeof name, "%sx", prefix);
    cr_assert_eq(st_read_f32(&f, name, x, 2 * 3 * H * W), ER_OK, "%s", er_msg());
    /* eval */
    tensor *xt = tensor_from_host(4, xs, x);
    tensor *ye = resnet_forward(r, &NN_EVAL, xt);
    cr_assert_not_null(ye, "%s", er_msg());
    cr_assert(ye->ndim == 2 && ye->shape[0] == 2 && ye->shape[1] == 5);
    tensor_to_host(ye, y);
    snprintf(name, sizeof name, "%seval", prefix);
    expect_ref(&f, name, y, 10, 1e-4);
    nn_step_end();
    /* train: batch statistics, running-stat updates, gradients */
    nn_ctx tr = nn_ctx_train(1, 0, 0, 0);
    xt = tensor_from_host(4, xs, x);
    tensor *yt = resnet_forward(r, &tr, xt);
    tensor_to_host(yt, y);
    snprintf(name, sizeof name, "%strain", prefix);
    expect_ref(&f, name, y, 10, 1e-4);
    float rw[10];
    snprintf(name, sizeof name, "%sr", prefix);
    cr_assert_eq(st_read_f32(&f, name, rw, 10), ER_OK);
    cr_assert_eq(backward_with(yt, tensor_from_host(2, yt->shape, rw)), ER_OK, "%s", er_msg());
    int ngrad = 0, nstat = 0;
    for (int i = 0; i < r->params.n; i++) {
        tensor *p = r->params.t[i];
        if (strstr(p->name, "running_")) {
            snprintf(name, sizeof name, "%safter.%s", prefix, p->name);
            expect_ref(&f, name, p->data, tensor_numel(p), 1e-5);
            nstat++;
            continue;
        }
        snprintf(name, sizeof name, "%sgrad.%s", prefix, p->name);
        if (!st_find(&f, name)) continue;
        cr_assert_not_null(p->grad, "%s has no gradient", p->name);
        expect_ref(&f, name, p->grad->data, tensor_numel(p), 2e-4);
        ngrad++;
    }
    cr_assert(ngrad >= 10 && nstat >= 20, "checked %d gradients, %d running stats", ngrad, nstat);
    nn_step_end();
    free(x);
    resnet_free(r);
    st_close(&f);
}

Test(nn_resnet, tiny_basic_block_net_matches_torch) {
    const int blocks[4] = {2, 1, 1, 1};
    run_case("r18.", 18, blocks, 40, 36);
}

Test(nn_resnet, tiny_bottleneck_net_matches_torch) {
    const int blocks[4] = {1, 2, 1, 1};
    run_case("r50.", 50, blocks, 33, 35);
}

/* The full-size presets have torchvision's tensor names, shapes and parameter counts
 * (resnet18 11,689,512 and resnet50 25,557,032 trainable; + 2 floats of running stats per BN channel). */
Test(nn_resnet, presets_have_torchvision_names_and_sizes) {
    SLOW_TEST(); /* initialises 37M parameters */
    const struct {
        const char *name;
        int64_t trainable;
        const char *probe;
        int64_t probe_shape[4];
    } P[] = {{"resnet18", 11689512, "layer3.0.downsample.0.weight", {256, 128, 1, 1}},
             {"resnet50", 25557032, "layer4.2.conv2.weight", {512, 512, 3, 3}}};
    for (int i = 0; i < 2; i++) {
        resnet_config c;
        cr_assert_eq(resnet_config_preset(P[i].name, &c), ER_OK);
        resnet *r = resnet_new(&c, 3);
        int64_t trainable = 0;
        for (int k = 0; k < r->params.n; k++)
            if (r->params.t[k]->flags & T_REQUIRES_GRAD) trainable += tensor_numel(r->params.t[k]);
            else cr_assert(strstr(r->params.t[k]->name, "running_"), "%s is a buffer", r->params.t[k]->name);
        cr_assert_eq(trainable, P[i].trainable, "%s: %lld trainable", P[i].name, (long long)trainable);
        cr_assert_eq((int64_t)resnet_param_count(&c), trainable, "%s: resnet_param_count", P[i].name);
        tensor *t = params_find(&r->params, P[i].probe);
        cr_assert_not_null(t, "%s: no %s", P[i].name, P[i].probe);
        for (int d = 0; d < 4; d++) cr_assert_eq(t->shape[d], P[i].probe_shape[d], "%s dim %d", P[i].probe, d);
        cr_assert_not_null(params_find(&r->params, "bn1.running_var"));
        cr_assert_not_null(params_find(&r->params, "fc.bias"));
        resnet_free(r);
    }
    resnet_config bad;
    resnet_config_preset("resnet50", &bad);
    bad.depth = 20;
    cr_assert_null(resnet_new(&bad, 1));
    cr_assert(strstr(er_msg(), "depth 20"), "%s", er_msg());
    cr_assert_neq(resnet_config_preset("resnet20", &bad), ER_OK);
}

/* ---- the registry entry (nn/models/resnet_model.c) ---- */

Test(nn_resnet, registry_create_embed_save_load) {
    cr_assert_eq(model_arch_find("resnet50"), &resnet_arch);
    cr_assert_eq(model_arch_find("resnet18"), &resnet_arch);
    cr_assert_null(model_arch_find("resnet20"));
    char *sets[] = {"model.width=4", "model.img=48"};
    model *m = NULL;
    cr_assert_eq(model_create("resnet18", NULL, sets, 2, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m->dim, 32);
    cr_assert_eq(m->img, 48);
    const int B = 2, n = B * 3 * 48 * 48;
    float *img = malloc(sizeof(float) * n), e1[64], e2[64];
    for (int i = 0; i < n; i++) img[i] = sinf(0.37f * i) + 0.1f * (i % 7);
    cr_assert_eq(model_embed(m, img, B, e1), ER_OK, "%s", er_msg());
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int j = 0; j < 32; j++) s += e1[b * 32 + j] * e1[b * 32 + j];
        cr_assert_float_eq(s, 1.0, 1e-5, "descriptor %d is not unit length", b);
    }
    char desc[256];
    model_describe(m, desc, sizeof desc);
    cr_assert(strstr(desc, "resnet18 (basic blocks 2/2/2/2) width 4 img 48"), "%s", desc);
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/r.safetensors", dir);
    cr_assert_eq(model_save(m, path, -1), ER_OK, "%s", er_msg());
    model *m2 = NULL;
    cr_assert_eq(model_load(path, NULL, NULL, 0, &m2), ER_OK, "%s", er_msg());
    cr_assert_eq(m2->arch, &resnet_arch);
    cr_assert_eq(m2->img, 48);
    cr_assert_eq(model_embed(m2, img, B, e2), ER_OK, "%s", er_msg());
    cr_assert(memcmp(e1, e2, sizeof(float) * B * 32) == 0, "save -> load changed the descriptor");
    /* a plain file (torchvision names, no metadata) with one buffer missing: refused, naming it */
    st_writer *w = st_writer_new();
    for (int i = 0; i < m->params->n; i++) {
        tensor *t = m->params->t[i];
        if (strcmp(t->name, "layer2.0.downsample.1.running_var"))
            st_add(w, t->name, ST_F32, t->ndim, t->shape, t->data);
    }
    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    cr_assert_eq(st_write(w, path), ER_OK);
    st_writer_free(w);
    model *m3 = NULL;
    cr_assert_eq(model_load(path, NULL, NULL, 0, &m3), ER_INPUT);
    cr_assert(strstr(er_msg(), "layer2.0.downsample.1.running_var"), "%s", er_msg());
    cr_assert_eq(model_load(path, "resnet50", NULL, 0, &m3), ER_INPUT);
    cr_assert(strstr(er_msg(), "basic blocks, but resnet50 has bottleneck blocks"), "%s", er_msg());
    free(img);
    model_free(m);
    model_free(m2);
}

/* FLOPs of the convolutions at 224 px: torchvision's model cards say 1.81 and 4.09 GMACs (fc and
 * the rest included, a few MMACs). */
Test(nn_resnet, forward_flops_match_torchvision_cards) {
    SLOW_TEST(); /* initialises 37M parameters */
    const char *names[2] = {"resnet18", "resnet50"};
    const double gmac[2] = {1.81, 4.09};
    for (int i = 0; i < 2; i++) {
        model *m = NULL;
        cr_assert_eq(model_create(names[i], NULL, NULL, 0, &m), ER_OK, "%s", er_msg());
        double g = m->arch->forward_flops(m, 1) / 2e9;
        cr_assert(fabs(g - gmac[i]) < 0.02, "%s: %.3f GMACs", names[i], g);
        model_free(m);
    }
}

/* The training-memory estimate against a measurement: peak RSS of `endoret bench train --model
 * resnet50 --batch 16` (two warm-up steps and 2 timed ones, 2026-11-27, with backward recycling the
 * finished activation gradients, and BN + ReLU and a block's add + ReLU each one tensor, the BN
 * backward masking gy in a transient scratch; 3.26 GB before those fusions) was 2.73 GB with weights,
 * gradients, AdamW state and the inputs (about 0.5 GB of those); the estimate of the activations alone
 * must be within 15 % of the rest, and scale linearly with the batch. With PGCon's heads the parameter
 * count grows by exactly the two Linear layers. */
Test(nn_resnet, training_memory_estimate_matches_a_measurement) {
    resnet_config c;
    cr_assert_eq(resnet_config_preset("resnet50", &c), ER_OK);
    double est = resnet_train_bytes(&c, 16, 224, 224), measured = 2728376.0 * 1024 - 0.5e9;
    cr_assert(fabs(est - measured) < 0.15 * measured, "estimate %.2f GB vs measured %.2f GB", est / 1e9, measured / 1e9);
    cr_assert(fabs(resnet_train_bytes(&c, 32, 224, 224) - 2 * est) < 1e-6 * est);
    double plain = resnet_param_count(&c);
    c.num_classes = 0, c.proj_dim = 128, c.jigsaw_tiles = 9;
    cr_assert_eq(resnet_param_count(&c) - plain, -1000.0 * 2049 + 128.0 * 2049 + 128.0 * (9 * 128 + 1));
}

/* Without grad, each block's activations are released once its output is copied out
 * (resnet_feature_map): the arena after a no-grad forward of [2, 2, 2, 2] blocks equals the arena
 * after [1, 1, 1, 1], where keeping them grew with the blocks; the features are bit-equal to a
 * forward with the tape on, fp32 and bf16, basic and bottleneck blocks. */
static size_t no_grad_feature_bytes(int depth, int nb, int prec, float *out, int64_t nout) {
    resnet_config c = {.depth = depth, .width = 4, .num_classes = 0, .bn_momentum = 0.1f, .bn_eps = 1e-5f,
                       .blocks = {nb, nb, nb, nb}};
    resnet *r = resnet_new(&c, 7);
    cr_assert_not_null(r, "%s", er_msg());
    float x[2 * 3 * 32 * 32], ref[2 * 128];
    for (int i = 0; i < 2 * 3 * 32 * 32; i++) x[i] = sinf(0.41f * i);
    const nn_ctx ctx = nn_ctx_eval(prec);
    nn_step_end();
    tensor *f = resnet_features(r, &ctx, tensor_from_host(4, SHAPE(2, 3, 32, 32), x)); /* the tape on */
    cr_assert(f && tensor_numel(f) == nout, "%s", er_msg());
    tensor_to_host(f, ref);
    nn_step_end();
    size_t used;
    NO_GRAD {
        f = resnet_features(r, &ctx, tensor_from_host(4, SHAPE(2, 3, 32, 32), x));
        cr_assert_not_null(f, "%s", er_msg());
        used = arena_used(arena_default(DEV_CPU));
        tensor_to_host(f, out);
    }
    nn_step_end();
    for (int64_t i = 0; i < nout; i++)
        cr_assert(out[i] == ref[i], "resnet%d x%d: no-grad feature [%lld] %.9g, with the tape %.9g", depth, nb, (long long)i,
                  out[i], ref[i]);
    resnet_free(r);
    return used;
}

Test(nn_resnet, no_grad_forward_holds_one_block) {
    float a[2 * 128], b[2 * 128];
    for (int prec = ER_PREC_FP32; prec <= ER_PREC_BF16; prec++) {
        size_t basic1 = no_grad_feature_bytes(18, 1, prec, a, 2 * 32), basic2 = no_grad_feature_bytes(18, 2, prec, b, 2 * 32);
        cr_assert_eq(basic2, basic1, "basic blocks, precision %d: arena %zu bytes with 2 per stage, %zu with 1", prec, basic2, basic1);
        size_t bott1 = no_grad_feature_bytes(50, 1, prec, a, 2 * 128), bott2 = no_grad_feature_bytes(50, 2, prec, b, 2 * 128);
        cr_assert_eq(bott2, bott1, "bottlenecks, precision %d: arena %zu bytes with 2 per stage, %zu with 1", prec, bott2, bott1);
    }
}
