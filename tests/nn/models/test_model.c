/* The model interface and registry (nn/models/model.h): files rebuild through model_load exactly
 * as through the ViT's own path, model_save round trips bit-exactly, model_create reads a model's
 * keys out of a whole training config, and bad files are rejected naming the file and the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/params_st.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/vit_io.h"
#include "nn/models/vit_model.h"
#include "nn/ops.h"
#include "tests/nn/models/vit_refs.h"
#include "tests/test_util.h"

#define REF_FILE "tests/nn/models/vit_tiny_timm.safetensors"

/* The descriptor as today's embed computed it: L2-normalised [CLS] of the encoder. */
static void direct_embed(vit *v, const float *x, int B, float *out) {
    NO_GRAD {
        tensor *c = op_l2_normalize(vit_cls(v, &NN_EVAL, x, B), -1, 1e-12f);
        cr_assert(c, "%s", er_msg());
        tensor_to_host(c, out);
    }
    nn_step_end();
}

/* A tiny random-init ViT (16x16 images, patch 4, width 32, 2 blocks, 4 heads) as a model. */
static model *tiny_model(uint64_t seed) {
    vit_args a;
    vit_args_defaults(&a);
    cfg_set_str(&a.arch, "vit_tiny");
    a.img = 16; a.patch = 4; a.dim = 32; a.depth = 2; a.heads = 4; a.pos_learned = 1;
    model *m = NULL;
    cr_assert_eq(vit_arch.create(&a, seed, &m), 0, "%s", er_msg());
    vit_args_free(&a);
    return m;
}

/* Rewrite the tensors of m to `path` with a hook that may rename / reshape / drop one of them. */
static void write_edited(model *m, const char *path, const char *drop, const char *reshape, const char *arch_meta) {
    st_writer *w = st_writer_new();
    for (int i = 0; i < m->params->n; i++) {
        tensor *t = m->params->t[i];
        if (drop && !strcmp(t->name, drop)) continue;
        if (reshape && !strcmp(t->name, reshape)) {
            int64_t shape[1] = {tensor_numel(t) - 1}; /* one element short */
            st_add(w, t->name, ST_F32, 1, shape, t->data);
        } else {
            st_add(w, t->name, ST_F32, t->ndim, t->shape, t->data);
        }
    }
    vit_config_add_meta(&((vit *)m->impl)->cfg, w);
    if (arch_meta) st_add_meta(w, "endoret.arch", arch_meta);
    cr_assert_eq(st_write(w, path), 0, "%s", er_msg());
    st_writer_free(w);
}

Test(models_registry, save_load_round_trip_is_bit_exact) {
    model *m = tiny_model(3);
    char *p = path_join(test_tmpdir(), "enc.safetensors");
    cr_assert_eq(model_save(m, p, 7), 0, "%s", er_msg());
    model *u = NULL;
    cr_assert_eq(model_load(p, NULL, NULL, 0, &u), 0, "%s", er_msg());
    cr_assert_eq(u->arch, &vit_arch);
    cr_assert_eq(u->dim, 32); cr_assert_eq(u->img, 16);
    cr_assert_eq(((vit *)u->impl)->cfg.heads, 4, "heads come back from the metadata");
    cr_assert_eq(u->params->n, m->params->n);
    for (int i = 0; i < m->params->n; i++) {
        tensor *a = m->params->t[i], *b = u->params->t[i];
        cr_assert_str_eq(a->name, b->name);
        cr_assert(memcmp(a->data, b->data, tensor_numel(a) * sizeof(float)) == 0, "%s differs after the round trip", a->name);
    }
    st_file f;
    cr_assert_eq(st_open(p, &f), 0);
    cr_assert_str_eq(st_meta(&f, "endoret.step"), "7");
    cr_assert_str_eq(st_meta(&f, "endoret.kind"), "weights");
    cr_assert_null(st_meta(&f, "endoret.arch"), "ViT files keep their format (endoret.vit.* metadata only)");
    st_close(&f);
    model_free(u);
    model_free(m);
    free(p);
}

Test(models_registry, encoder_file_embeds_as_the_direct_path) {
    model *m = tiny_model(5);
    char *p = path_join(test_tmpdir(), "enc.safetensors");
    cr_assert_eq(model_save(m, p, -1), 0, "%s", er_msg());
    model_free(m);
    float x[2 * 3 * 16 * 16], a[2 * 32], b[2 * 32];
    for (int i = 0; i < 2 * 3 * 16 * 16; i++) x[i] = sinf(0.37f * i);
    st_file f;
    cr_assert_eq(st_open(p, &f), 0);
    vit *v = vit_load(&f, "");
    cr_assert(v, "%s", er_msg());
    st_close(&f);
    direct_embed(v, x, 2, a);
    vit_free(v);
    model *u = NULL;
    cr_assert_eq(model_load(p, NULL, NULL, 0, &u), 0, "%s", er_msg());
    cr_assert_eq(model_embed(u, x, 2, b), 0, "%s", er_msg());
    cr_assert(memcmp(a, b, sizeof a) == 0, "the registry path embeds differently");
    double n0 = 0;
    for (int k = 0; k < 32; k++) n0 += (double)b[k] * b[k];
    cr_assert(fabs(n0 - 1) < 1e-5, "descriptors are L2-normalised");
    model_free(u);
    free(p);
}

Test(models_registry, timm_file_recognised_from_tensor_names) {
    /* the direct path: vit_load + the test model's 4 heads (a timm file does not store them) */
    st_file f;
    cr_assert_eq(st_open(REF_FILE, &f), 0, "%s", er_msg());
    vit *v = vit_load(&f, "");
    cr_assert(v, "%s", er_msg());
    st_close(&f);
    v->cfg.heads = VREF_HEADS;
    float a[2 * 32], b[2 * 32];
    direct_embed(v, VREF_X, 2, a);
    vit_free(v);
    char heads[] = "model.heads=4", *sets[] = {heads};
    model *u = NULL;
    cr_assert_eq(model_load(REF_FILE, NULL, sets, 1, &u), 0, "%s", er_msg());
    cr_assert_eq(u->arch, &vit_arch);
    cr_assert_eq(model_embed(u, VREF_X, 2, b), 0, "%s", er_msg());
    cr_assert(memcmp(a, b, sizeof a) == 0, "the registry path embeds the timm file differently");
    model_free(u);
    /* --arch names the family too; a preset of another width is refused */
    cr_assert_eq(model_load(REF_FILE, "vit_small", NULL, 0, &u), ER_INPUT);
    cr_assert(strstr(er_msg(), REF_FILE) && strstr(er_msg(), "vit_small"), "%s", er_msg());
    char bad[] = "model.depth=3", *bad_sets[] = {bad};
    cr_assert_eq(model_load(REF_FILE, NULL, bad_sets, 1, &u), ER_INPUT);
    cr_assert(strstr(er_msg(), "model.depth"), "%s", er_msg());
}

Test(models_registry, unknown_arch_missing_tensor_and_wrong_shape_are_rejected) {
    model *m = tiny_model(1);
    const char *d = test_tmpdir();
    char *p = path_join(d, "bad.safetensors");
    model *u = NULL;
    write_edited(m, p, NULL, NULL, "convnext_tiny");
    cr_assert_eq(model_load(p, NULL, NULL, 0, &u), ER_INPUT);
    cr_assert(strstr(er_msg(), p) && strstr(er_msg(), "convnext_tiny"), "names the file and the arch: %s", er_msg());
    write_edited(m, p, "blocks.1.mlp.fc2.bias", NULL, NULL);
    cr_assert_eq(model_load(p, NULL, NULL, 0, &u), ER_INPUT);
    cr_assert(strstr(er_msg(), p) && strstr(er_msg(), "'blocks.1.mlp.fc2.bias' missing"), "%s", er_msg());
    write_edited(m, p, NULL, "norm.bias", NULL);
    cr_assert_eq(model_load(p, NULL, NULL, 0, &u), ER_INPUT);
    cr_assert(strstr(er_msg(), p) && strstr(er_msg(), "'norm.bias'"), "%s", er_msg());
    cr_assert_null(u);
    /* a file nobody recognises: no metadata, foreign names */
    st_writer *w = st_writer_new();
    float one = 1;
    st_add(w, "fc.weight", ST_F32, 1, (int64_t[]){1}, &one);
    cr_assert_eq(st_write(w, p), 0);
    st_writer_free(w);
    cr_assert_eq(model_load(p, NULL, NULL, 0, &u), ER_INPUT);
    cr_assert(strstr(er_msg(), p) && strstr(er_msg(), "--arch"), "%s", er_msg());
    cr_assert_eq(model_load(p, "vit_tiny", NULL, 0, &u), ER_INPUT);
    cr_assert(strstr(er_msg(), p) && strstr(er_msg(), "patch_embed.proj.weight"), "%s", er_msg());
    model_free(m);
    free(p);
}

/* issue 17 #6: `embed` accepted weights holding NaN and wrote NaN descriptors. Every load of weights
 * (params_load_st) refuses a non-finite value, naming the file and the tensor. */
Test(models_registry, non_finite_weights_are_rejected_naming_the_tensor) {
    const float bad[] = {NAN, INFINITY, -INFINITY};
    char *p = path_join(test_tmpdir(), "nan.safetensors");
    for (int k = 0; k < 3; k++) {
        model *m = tiny_model(2);
        tensor *t = NULL;
        for (int i = 0; i < m->params->n; i++)
            if (!strcmp(m->params->t[i]->name, "blocks.1.attn.qkv.weight")) t = m->params->t[i];
        cr_assert(t);
        ((float *)t->data)[5] = bad[k];
        cr_assert_eq(model_save(m, p, -1), 0, "%s", er_msg());
        model_free(m);
        model *u = NULL;
        cr_assert_eq(model_load(p, NULL, NULL, 0, &u), ER_INPUT, "weights with %g loaded", bad[k]);
        cr_assert(strstr(er_msg(), p) && strstr(er_msg(), "blocks.1.attn.qkv.weight") && strstr(er_msg(), "finite"), "%s",
                  er_msg());
        cr_assert_null(u);
    }
    free(p);
}

/* issue 17 #9: config values that are wrong name their key (and the config file when it holds them). */
Test(models_registry, bad_model_values_name_the_key) {
    char *cfg = path_join(test_tmpdir(), "run.cfg");
    FILE *f = fopen(cfg, "w");
    fprintf(f, "[model]\narch = vit_ti\n");
    fclose(f);
    model *m = NULL;
    cr_assert_eq(model_create(NULL, cfg, NULL, 0, &m), ER_INPUT);
    cr_expect(strstr(er_msg(), cfg) && strstr(er_msg(), "model.arch") && strstr(er_msg(), "vit_ti"), "%s", er_msg());
    char *sets[] = {"model.arch=vit_tiny", "model.img=12", "model.patch=8"};
    cr_assert_eq(model_create(NULL, NULL, sets, 3, &m), ER_INPUT);
    cr_expect(strstr(er_msg(), "model.img") && strstr(er_msg(), "model.patch") && strstr(er_msg(), "12"), "%s", er_msg());
    char *arch_set[] = {"model.arch=vit_ti"};
    cr_assert_eq(model_create(NULL, NULL, arch_set, 1, &m), ER_INPUT);
    cr_expect(strstr(er_msg(), "--set") && strstr(er_msg(), "model.arch"), "%s", er_msg());
    /* a --set model key the family lacks is refused by name (it was ignored); other sections pass */
    char *typo[] = {"model.arch=resnet18", "model.widht=4"}, *other[] = {"model.arch=resnet18", "model.width=4", "data.split=x"};
    cr_assert_eq(model_create(NULL, NULL, typo, 2, &m), ER_INPUT);
    cr_expect(strstr(er_msg(), "unknown key 'model.widht'") && strstr(er_msg(), "model.width"), "%s", er_msg());
    cr_assert_eq(model_create(NULL, NULL, other, 3, &m), ER_OK, "%s", er_msg());
    model_free(m);
    free(cfg);
}

Test(models_registry, create_reads_the_model_keys_of_a_training_config) {
    const char *d = test_tmpdir();
    char *cfg = path_join(d, "run.cfg");
    FILE *f = fopen(cfg, "w");
    fprintf(f, "[model]\narch = vit_tiny\nimg = 16\npatch = 4\ndim = 32\ndepth = 2\nheads = 4\npos_learned = true\n"
               "head_dim = 16   # the objective's key: not the model's\n[train]\nseed = 5\nlr = 1e-3\n[data]\nmanifest = x.csv\n");
    fclose(f);
    model *a = NULL, *b = tiny_model(5);
    cr_assert_eq(model_create(NULL, cfg, NULL, 0, &a), 0, "%s", er_msg());
    cr_assert_eq(a->params->n, b->params->n);
    for (int i = 0; i < a->params->n; i++)
        cr_assert(memcmp(a->params->t[i]->data, b->params->t[i]->data, tensor_numel(b->params->t[i]) * sizeof(float)) == 0,
                  "%s: not the seed-5 init", b->params->t[i]->name);
    model_free(a);
    /* --set overrides the file; a bad value names --set */
    char s1[] = "model.depth=1", *sets[] = {s1};
    cr_assert_eq(model_create(NULL, cfg, sets, 1, &a), 0, "%s", er_msg());
    cr_assert_eq(((vit *)a->impl)->cfg.depth, 1);
    model_free(a);
    char s2[] = "model.img=abc", *bad[] = {s2};
    cr_assert_eq(model_create(NULL, cfg, bad, 1, &a), ER_INPUT);
    cr_assert(strstr(er_msg(), "--set") && strstr(er_msg(), "model.img"), "%s", er_msg());
    cr_assert_eq(model_create("resnet9000", cfg, NULL, 0, &a), ER_INPUT);
    cr_assert(strstr(er_msg(), "resnet9000") && strstr(er_msg(), "vit_tiny"), "%s", er_msg());
    model_free(b);
    free(cfg);
}

Test(models_registry, checkpoint_config_rebuilds_the_encoder) {
    model *m = tiny_model(9);
    char *p = path_join(test_tmpdir(), "ckpt.safetensors");
    st_writer *w = st_writer_new();
    params_add_st(m->params, w, "");
    float extra[4] = {1, 2, 3, 4};
    st_add(w, "decoder_embed.bias", ST_F32, 1, (int64_t[]){4}, extra); /* the rest of the training state */
    st_add_meta(w, "endoret.config", "model.arch = vit_tiny\nmodel.img = 16\nmodel.patch = 4\nmodel.dim = 32\n"
                                     "model.depth = 2\nmodel.heads = 4\nmodel.pos_learned = true\nmodel.head_dim = 16\n"
                                     "train.lr = 0.001\n");
    cr_assert_eq(st_write(w, p), 0, "%s", er_msg());
    st_writer_free(w);
    model *u = NULL;
    cr_assert_eq(model_load(p, NULL, NULL, 0, &u), 0, "%s", er_msg());
    cr_assert_eq(((vit *)u->impl)->cfg.heads, 4, "heads from the stored config");
    for (int i = 0; i < m->params->n; i++)
        cr_assert(memcmp(m->params->t[i]->data, u->params->t[i]->data, tensor_numel(m->params->t[i]) * sizeof(float)) == 0);
    model_free(u);
    model_free(m);
    free(p);
}

Test(models_registry, registry_lists_the_vit) {
    cr_assert_geq(model_arch_count(), 1);
    cr_assert_eq(model_arch_find("vit_large_patch14"), &vit_arch);
    cr_assert_eq(model_arch_find("vit_small"), &vit_arch);
    cr_assert_null(model_arch_find("vit_gigantic"));
    cr_assert(strstr(er_msg(), "vit_gigantic"), "%s", er_msg());
    model *m = tiny_model(2);
    cr_assert_eq(model_set_img(m, 18), ER_INPUT, "18 is not a multiple of the patch");
    cr_assert_eq(model_set_img(m, 32), 0, "%s", er_msg());
    cr_assert_eq(m->img, 32);
    model_free(m);
}

/* The input rule (model.h model_input): saved as endoret.input.* metadata and read back for any family;
 * metadata out of range is one message naming the file and the values. */
Test(models_registry, input_rule_round_trip_and_bad_metadata) {
    model *m = NULL, *back = NULL;
    char *sets[] = {"model.dim=32", "model.depth=1", "model.heads=2", "model.img=32", "model.patch=8"};
    cr_assert_eq(model_create("vit_tiny", NULL, sets, 5, &m), ER_OK, "%s", er_msg());
    model_input def = model_input_of(m);
    cr_assert(!m->has_input && def.crop == 1.0f && fabsf(def.mean[0] - 0.485f) < 1e-7, "ImageNet rule by default");
    model_input in = {{0.56f, 0.35f, 0.2f}, {0.3f, 0.24f, 0.17f}, 0.8333f};
    m->input = in;
    m->has_input = 1;
    char *p = path_join(test_tmpdir(), "in.safetensors");
    cr_assert_eq(model_save(m, p, -1), ER_OK, "%s", er_msg());
    cr_assert_eq(model_load(p, NULL, NULL, 0, &back), ER_OK, "%s", er_msg());
    cr_assert(back->has_input && !memcmp(&back->input, &in, sizeof in), "input rule did not round-trip");
    model_free(back);
    m->input.crop = 1.5f; /* outside (0, 1] */
    cr_assert_eq(model_save(m, p, -1), ER_OK, "%s", er_msg());
    cr_assert_eq(model_load(p, NULL, NULL, 0, &back), ER_INPUT);
    cr_assert(strstr(er_msg(), "in.safetensors") && strstr(er_msg(), "endoret.input") && strstr(er_msg(), "1.5"), "%s",
              er_msg());
    model_free(m);
    free(p);
}
