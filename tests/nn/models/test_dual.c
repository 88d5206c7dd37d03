/* LoRA on the ViT (nn/models/vit_lora.h) and the dual-backbone model (nn/models/dual_model.h):
 * a fresh adapter leaves the function unchanged, merged == unmerged, PEFT adapter files round trip
 * and merge into a base file, the trainable counts of the spec, strict branch loading, save/load
 * and the merged export through the registry. */
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoints/params_st.h"
#include "checkpoints/safetensors.h"
#include "nn/base/json.h"
#include "nn/base/rng.h"
#include "nn/models/dual_model.h"
#include "nn/models/model.h"
#include "nn/models/vit_io.h"
#include "nn/models/vit_lora.h"
#include "nn/models/vit_model.h"
#include "nn/ops.h"
#include "tests/test_util.h"

int cmd_convert(int argc, char **argv);

static vit_config tiny_cfg(int registers) {
    vit_config c;
    vit_config_preset("vit_tiny", &c);
    c.dim = 32; c.heads = 2; c.depth = 2; c.patch = 8; c.img = 32; c.pos_fixed = 0;
    c.registers = registers; c.layerscale = registers ? 1.0 : 0;
    return c;
}

static float *images(int B, int S, uint64_t seed) {
    float *x = malloc(sizeof(float) * B * 3 * S * S);
    rng_t r = rng_make(seed, 2);
    for (int i = 0; i < B * 3 * S * S; i++) x[i] = 2 * rng_uniform(&r) - 1;
    return x;
}

/* the whole token output of a ViT, host copy */
static float *tokens(vit *v, const float *x, int B, int64_t *n) {
    float *out = NULL;
    NO_GRAD {
        tensor *t = vit_forward(v, &NN_EVAL, x, B, NULL, 0);
        *n = tensor_numel(t);
        out = malloc(sizeof(float) * *n);
        tensor_to_host(t, out);
    }
    nn_step_end();
    return out;
}

static void randomise_B(vit *v, uint64_t seed) {
    rng_t r = rng_make(seed, 9);
    for (int i = 0; i < v->nlora; i++)
        for (int64_t j = 0; j < tensor_numel(v->loras[i].B); j++) v->loras[i].B->data[j] = 0.2f * (rng_uniform(&r) - 0.5f);
}

static double max_rel(const float *a, const float *b, int64_t n) {
    double m = 0, s = 0;
    for (int64_t i = 0; i < n; i++) { m = fmax(m, fabs((double)a[i] - b[i])); s = fmax(s, fabs((double)b[i])); }
    return m / fmax(s, 1e-30);
}

Test(vit_lora, fresh_adapters_keep_the_function_and_freeze_the_base) {
    vit_config c = tiny_cfg(2);
    vit *a = vit_new(&c, 3), *b = vit_new(&c, 3);
    lora_config lc = lora_config_default();
    cr_assert_eq(vit_lora_attach(b, &lc, 5), ER_OK);
    cr_assert_eq(b->nlora, 1 + 4 * c.depth);
    int64_t trainable = 0;
    for (int i = 0; i < b->params.n; i++) {
        tensor *t = b->params.t[i];
        int is_lora = strstr(t->name, ".lora_") != NULL;
        cr_assert_eq(!!(t->flags & T_REQUIRES_GRAD), is_lora, "%s: only adapters train", t->name);
        if (is_lora) trainable += tensor_numel(t);
    }
    cr_assert_not_null(params_find(&b->params, "patch_embed.proj.lora_A.weight"));
    cr_assert_not_null(params_find(&b->params, "blocks.1.mlp.fc2.lora_B.weight"));
    float *x = images(2, 32, 1);
    int64_t n, n2;
    float *ya = tokens(a, x, 2, &n), *yb = tokens(b, x, 2, &n2);
    cr_assert_eq(n, n2);
    cr_assert_eq(memcmp(ya, yb, sizeof(float) * n), 0, "B = 0: the adapted ViT is bit-identical to the base");
    cr_assert_eq(vit_lora_attach(b, &lc, 5), ER_INPUT, "a second attach is refused");
    free(x); free(ya); free(yb);
    vit_free(a); vit_free(b);
}

/* the spec's count (section 2.4): 49,152 per block x 12 + 9,216 (p 16) or 7,776 (p 14) */
Test(vit_lora, trainable_counts_of_vit_small) {
    int patch[2] = {16, 14};
    int64_t want[2] = {589824 + 9216, 589824 + 7776};
    for (int k = 0; k < 2; k++) {
        vit_config c;
        vit_config_preset("vit_small", &c);
        c.patch = patch[k]; c.img = patch[k] * 2;
        vit *v = vit_new(&c, 0);
        lora_config lc = lora_config_default();
        vit_lora_attach(v, &lc, 1);
        int64_t n = 0;
        for (int i = 0; i < v->params.n; i++)
            if (v->params.t[i]->flags & T_REQUIRES_GRAD) n += tensor_numel(v->params.t[i]);
        cr_assert_eq(n, want[k], "patch %d: %lld trainable, spec %lld", patch[k], (long long)n, (long long)want[k]);
        vit_free(v);
    }
}

Test(vit_lora, merged_equals_unmerged) {
    vit_config c = tiny_cfg(1);
    vit *v = vit_new(&c, 4);
    lora_config lc = {4, 8, 0.05};
    vit_lora_attach(v, &lc, 6);
    randomise_B(v, 7);
    vit *m = vit_lora_merged_copy(v);
    cr_assert_not_null(m, "%s", er_msg());
    cr_assert_null(m->loras);
    float *x = images(3, 32, 2);
    int64_t n;
    float *yu = tokens(v, x, 3, &n), *ym = tokens(m, x, 3, &n);
    double e = max_rel(ym, yu, n);
    cr_assert(e < 2e-5, "merged vs unmerged: max rel diff %g", e);
    /* and the adapters did change the function */
    vit *base = vit_new(&c, 4);
    float *yb = tokens(base, x, 3, &n);
    cr_assert(max_rel(yb, yu, n) > 1e-3, "random B changes the output");
    free(x); free(yu); free(ym); free(yb);
    vit_free(v); vit_free(m); vit_free(base);
}

Test(vit_lora, peft_adapter_round_trip_and_file_merge) {
    const char *dir = test_tmpdir();
    vit_config c = tiny_cfg(0);
    vit *v = vit_new(&c, 4);
    lora_config lc = {4, 8, 0.05};
    vit_lora_attach(v, &lc, 6);
    randomise_B(v, 8);
    char ad[256], basef[256], outf[256], path[300];
    snprintf(ad, sizeof ad, "%s/adapter", dir);
    cr_assert_eq(vit_lora_save_adapter(v, ad), ER_OK, "%s", er_msg());
    /* PEFT names and shapes */
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", ad);
    st_file f;
    cr_assert_eq(st_open(path, &f), ER_OK);
    cr_assert_eq(f.n, 2 * v->nlora);
    const st_tensor *qa = st_find(&f, "base_model.model.blocks.0.attn.qkv.lora_A.weight");
    const st_tensor *pb = st_find(&f, "base_model.model.patch_embed.proj.lora_B.weight");
    cr_assert_not_null(qa); cr_assert_not_null(pb);
    cr_assert(qa->ndim == 2 && qa->shape[0] == 4 && qa->shape[1] == 32);
    cr_assert(pb->ndim == 4 && pb->shape[0] == 32 && pb->shape[1] == 4 && pb->shape[2] == 1 && pb->shape[3] == 1);
    st_close(&f);
    snprintf(path, sizeof path, "%s/adapter_config.json", ad);
    char *text; size_t len;
    cr_assert_eq(read_file(path, &text, &len), ER_OK);
    json_value js;
    cr_assert_eq(json_parse(text, len, path, &js), ER_OK);
    cr_assert_eq(json_get(&js, "r")->integer, 4);
    cr_assert_float_eq(json_get(&js, "lora_alpha")->number, 8.0, 0);
    cr_assert_eq(json_get(&js, "target_modules")->n, 4);
    json_free(&js); free(text);
    /* load into another ViT with fresh adapters: the same outputs */
    vit *w = vit_new(&c, 4);
    vit_lora_attach(w, &lc, 99);
    cr_assert_eq(vit_lora_load_adapter(w, ad), ER_OK, "%s", er_msg());
    float *x = images(2, 32, 3);
    int64_t n;
    float *yv = tokens(v, x, 2, &n), *yw = tokens(w, x, 2, &n);
    cr_assert_eq(memcmp(yv, yw, sizeof(float) * n), 0, "adapter round trip is exact");
    /* merge the adapter into the base weights file: equals the unmerged model */
    vit *base = vit_new(&c, 4);
    model *bm = vit_model_wrap(base);
    snprintf(basef, sizeof basef, "%s/base.safetensors", dir);
    snprintf(outf, sizeof outf, "%s/merged.safetensors", dir);
    cr_assert_eq(model_save(bm, basef, -1), ER_OK);
    cr_assert_eq(lora_merge_files(basef, ad, outf), ER_OK, "%s", er_msg());
    model *mm;
    cr_assert_eq(model_load(outf, NULL, NULL, 0, &mm), ER_OK, "%s", er_msg());
    float *ym = tokens(mm->impl, x, 2, &n);
    cr_assert(max_rel(ym, yv, n) < 2e-5, "merged file vs unmerged: %g", max_rel(ym, yv, n));
    /* the same merge through `endoret convert --merge-lora`, written in Meta's layout: the same outputs */
    char convf[600], adf[600];
    snprintf(convf, sizeof convf, "%s/converted_meta.safetensors", dir);
    snprintf(adf, sizeof adf, "%s/adapter_model.safetensors", ad);
    char *cargv[] = {"convert", "--in", basef, "--out", convf, "--to", "meta", "--merge-lora", adf, NULL};
    cr_assert_eq(cmd_convert(9, cargv), ER_OK, "%s", er_msg());
    model *cm;
    cr_assert_eq(model_load(convf, NULL, NULL, 0, &cm), ER_OK, "%s", er_msg());
    float *yc = tokens(cm->impl, x, 2, &n);
    cr_assert(max_rel(yc, yv, n) < 2e-5, "convert --merge-lora vs unmerged: %g", max_rel(yc, yv, n));
    free(yc);
    model_free(cm);
    /* a wrong rank or a foreign tensor is refused, naming it */
    vit *r2 = vit_new(&c, 4);
    lora_config l2 = {2, 4, 0};
    vit_lora_attach(r2, &l2, 1);
    cr_assert_eq(vit_lora_load_adapter(r2, ad), ER_INPUT);
    cr_assert(strstr(er_msg(), "lora_A.weight"), "%s", er_msg());
    cr_assert_eq(lora_merge_files(basef, basef, outf), ER_INPUT, "a weights file is no adapter");
    cr_assert(strstr(er_msg(), "not a LoRA"), "%s", er_msg());
    free(x); free(yv); free(yw); free(ym);
    vit_free(v); vit_free(w); vit_free(r2);
    model_free(bm); model_free(mm);
}

/* ---------------------------------------------------------------- branch files */

static void write_vit(vit *v, const char *path, const char *prefix, const char *drop, const char *rename,
                      const char *reshape, const char *extra) {
    st_writer *w = st_writer_new();
    float zero[1] = {0};
    char names[64][160];
    for (int i = 0; i < v->params.n; i++) {
        tensor *t = v->params.t[i];
        if (drop && !strcmp(t->name, drop)) continue;
        snprintf(names[i], sizeof names[i], "%s%s%s", prefix, t->name, rename && !strcmp(t->name, rename) ? "_renamed" : "");
        if (reshape && !strcmp(t->name, reshape)) { st_add(w, names[i], ST_F32, 1, SHAPE(1), zero); continue; }
        st_add(w, names[i], ST_F32, t->ndim, t->shape, t->data);
    }
    if (extra) st_add(w, extra, ST_F32, 1, SHAPE(1), zero);
    cr_assert_eq(st_write(w, path), ER_OK);
    st_writer_free(w);
}

/* through the project's strict layout maps: timm names and DINO v1 teacher checkpoints load (the
 * DINO head dropped); a missing, renamed, reshaped or foreign tensor is refused naming it */
Test(dual, strict_branch_files) {
    const char *dir = test_tmpdir();
    vit_config c = tiny_cfg(0);
    vit *v = vit_new(&c, 1);
    char p[256];
    snprintf(p, sizeof p, "%s/ok.safetensors", dir);
    write_vit(v, p, "", NULL, NULL, NULL, NULL);
    vit *l = dual_branch_load(p, 32);
    cr_assert_not_null(l, "%s", er_msg());
    cr_assert_eq(memcmp(l->blocks[1].fc2_w->data, v->blocks[1].fc2_w->data, sizeof(float) * tensor_numel(v->blocks[1].fc2_w)), 0);
    vit_free(l);
    write_vit(v, p, "teacher.backbone.", NULL, NULL, NULL, "teacher.head.mlp.0.weight");
    l = dual_branch_load(p, 32);
    cr_assert_not_null(l, "DINO v1 teacher layout: %s", er_msg());
    vit_free(l);
    write_vit(v, p, "", "blocks.1.mlp.fc1.bias", NULL, NULL, NULL);
    cr_assert_null(dual_branch_load(p, 32));
    cr_assert(strstr(er_msg(), "'blocks.1.mlp.fc1.bias' missing"), "%s", er_msg());
    write_vit(v, p, "", NULL, "blocks.1.attn.proj.weight", NULL, NULL);
    cr_assert_null(dual_branch_load(p, 32));
    cr_assert(strstr(er_msg(), "blocks.1.attn.proj.weight"), "%s", er_msg());
    write_vit(v, p, "", NULL, NULL, "blocks.1.norm2.weight", NULL);
    cr_assert_null(dual_branch_load(p, 32));
    cr_assert(strstr(er_msg(), "'blocks.1.norm2.weight' has shape"), "%s", er_msg());
    write_vit(v, p, "", NULL, NULL, NULL, "projector.weight");
    cr_assert_null(dual_branch_load(p, 32));
    cr_assert(strstr(er_msg(), "projector.weight"), "%s", er_msg());
    vit_free(v);
}

/* Meta's DINOv2 layout (register_tokens, an unused mask_token, pos_embed at another grid) loads */
Test(dual, meta_dinov2_names_and_pos_resampling) {
    model *m;
    cr_assert_eq(model_create("dual_backbone", NULL,
                              (char *[]){"model.img=28", "dual.branches=dinov2",
                                         "dual.dinov2=tests/nn/models/dinov2_reg4_meta.safetensors"},
                              3, &m), ER_OK, "%s", er_msg());
    dual_net *d = dual_model_net(m);
    cr_assert_eq(d->v[1]->cfg.registers, 4);
    cr_assert_eq(d->v[1]->cfg.img, 28);
    model_free(m);
}

/* ---------------------------------------------------------------- the model */

static char *sets_tiny[] = {"model.img=32", "dual.gastronet_arch=vit_tiny_patch16", "dual.dinov2_arch=vit_tiny_patch16",
                            "dual.depth=2", "dual.dinov2_registers=2", "dual.embed_dim=16", "dual.pool=gem"};

static void embed(model *m, const float *x, int B, float *out) { cr_assert_eq(model_embed(m, x, B, out), ER_OK, "%s", er_msg()); }

Test(dual, save_load_and_merged_export) {
    const char *dir = test_tmpdir();
    model *m;
    cr_assert_eq(model_create("dual_backbone", NULL, sets_tiny, 7, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m->dim, 16);
    dual_net *d = dual_model_net(m);
    cr_assert_not_null(params_find(&d->params, "gastronet.blocks.1.attn.proj.lora_A.weight"));
    cr_assert_not_null(params_find(&d->params, "dinov2.reg_token"));
    cr_assert_not_null(params_find(&d->params, "fusion.1.running_var"));
    cr_assert_not_null(params_find(&d->params, "dinov2.gem_p"));
    for (int i = 0; i < DUAL_NBRANCH; i++) randomise_B(d->v[i], 30 + i);
    float *x = images(3, 32, 5), e0[48], e1[48], e2[48];
    embed(m, x, 3, e0);
    for (int i = 0; i < 3; i++) {
        double s = 0;
        for (int j = 0; j < 16; j++) s += e0[i * 16 + j] * (double)e0[i * 16 + j];
        cr_assert(fabs(s - 1) < 1e-5, "unit descriptors");
    }
    char p[256], q[256];
    snprintf(p, sizeof p, "%s/ckpt.safetensors", dir);
    snprintf(q, sizeof q, "%s/dual.safetensors", dir);
    cr_assert_eq(model_save(m, p, 3), ER_OK);
    cr_assert_eq(dual_model_save_merged(m, q, 3), ER_OK, "%s", er_msg());
    model *a, *b;
    cr_assert_eq(model_load(p, NULL, NULL, 0, &a), ER_OK, "%s", er_msg());
    cr_assert_eq(model_load(q, NULL, NULL, 0, &b), ER_OK, "%s", er_msg());
    cr_assert_eq(dual_model_net(b)->cfg.lora.r, 0, "the export has no adapters");
    embed(a, x, 3, e1);
    embed(b, x, 3, e2);
    cr_assert_eq(memcmp(e0, e1, sizeof e0), 0, "save -> load is bit-exact");
    double err = max_rel(e2, e0, 48);
    cr_assert(err < 1e-4, "merged export vs unmerged: %g", err);
    st_file f;
    cr_assert_eq(st_open(q, &f), ER_OK);
    for (int i = 0; i < f.n; i++) cr_assert(!strstr(f.tensors[i].name, "lora_"), "%s in the merged export", f.tensors[i].name);
    st_close(&f);
    free(x);
    model_free(m); model_free(a); model_free(b);
}

Test(dual, bad_keys_are_named) {
    model *m;
    cr_assert_eq(model_create("dual_backbone", NULL, (char *[]){"dual.pool=max"}, 1, &m), ER_INPUT);
    cr_assert(strstr(er_msg(), "dual.pool"), "%s", er_msg());
    cr_assert_eq(model_create("dual_backbone", NULL, (char *[]){"dual.branches=three"}, 1, &m), ER_INPUT);
    cr_assert(strstr(er_msg(), "dual.branches"), "%s", er_msg());
    cr_assert_eq(model_create("dual_backbone", NULL, (char *[]){"dual.embed_dim=0"}, 1, &m), ER_INPUT);
    cr_assert(strstr(er_msg(), "dual.embed_dim"), "%s", er_msg());
    cr_assert_eq(model_create("dual_backbone", NULL, (char *[]){"dual.gastronet=/nonexistent.safetensors"}, 1, &m), ER_INPUT);
    cr_assert(strstr(er_msg(), "dual.gastronet") && strstr(er_msg(), "/nonexistent.safetensors"), "%s", er_msg());
}

/* single-backbone rows: one branch without a head (descriptor = the L2-normalised pooled branch) or
 * with the 384 -> 512-style head; lora_r = 0 trains only the head */
Test(dual, single_branch_variants_and_frozen_baseline) {
    model *m;
    char *s1[] = {"model.img=32", "dual.gastronet_arch=vit_tiny_patch16", "dual.depth=1", "dual.branches=gastronet",
                  "dual.embed_dim=0", "dual.pool=mean"};
    cr_assert_eq(model_create("dual_backbone", NULL, s1, 6, &m), ER_OK, "%s", er_msg());
    dual_net *d = dual_model_net(m);
    cr_assert_eq(m->dim, 192);
    cr_assert_null(d->v[1]);
    cr_assert(!d->has_head);
    float *x = images(2, 32, 9), e[384];
    embed(m, x, 2, e);
    /* mean pooling of the patch tokens, L2-normalised: recompute from the ViT's tokens */
    int64_t n;
    float *tok = tokens(d->v[0], x, 2, &n);
    for (int b = 0; b < 2; b++) {
        double f[192], ss = 0;
        for (int c = 0; c < 192; c++) {
            f[c] = 0;
            for (int t = 1; t < 5; t++) f[c] += tok[(b * 5 + t) * 192 + c] / 4.0;
            ss += f[c] * f[c];
        }
        for (int c = 0; c < 192; c++)
            cr_assert(fabs(e[b * 192 + c] - f[c] / sqrt(ss)) < 1e-5, "[%d,%d] %g vs %g", b, c, e[b * 192 + c], f[c] / sqrt(ss));
    }
    free(tok);
    model_free(m);
    char *s2[] = {"model.img=32", "dual.dinov2_arch=vit_tiny_patch16", "dual.depth=1", "dual.branches=dinov2",
                  "dual.embed_dim=24", "dual.lora_r=0", "dual.dinov2_registers=2"};
    cr_assert_eq(model_create("dual_backbone", NULL, s2, 7, &m), ER_OK, "%s", er_msg());
    d = dual_model_net(m);
    cr_assert_eq(m->dim, 24);
    cr_assert_eq(d->head.in, 192);
    int64_t trainable = 0;
    for (int i = 0; i < d->params.n; i++)
        if (d->params.t[i]->flags & T_REQUIRES_GRAD) {
            cr_assert(!strncmp(d->params.t[i]->name, "fusion.", 7), "%s trains with lora_r = 0", d->params.t[i]->name);
            trainable += tensor_numel(d->params.t[i]);
        }
    cr_assert_eq(trainable, 24 * 192 + 24 + 2 * 24, "Linear + BN affine");
    embed(m, x, 2, e);
    model_free(m);
    free(x);
}

/* issue 30 F10 + F14: `convert --merge-lora` killed left full-size "<out>.merged.<pid>.tmp" files
 * that no later run removed; a NaN in the adapter was reported under that temp name. The merged
 * temp is "<out>.merged.tmp.<pid>" now (the atomic writers' pattern), removed by the next merge
 * when its process is gone, and a non-finite adapter value names the adapter and the tensor. */
Test(vit_lora, convert_merge_lora_names_the_adapter_and_cleans_killed_merges) {
    const char *dir = test_tmpdir();
    vit_config c = tiny_cfg(0);
    vit *v = vit_new(&c, 4);
    lora_config lc = {4, 8, 0.05};
    vit_lora_attach(v, &lc, 6);
    randomise_B(v, 8);
    char ad[256], adf[300], nanf[300], basef[300], out[300], stale1[400], stale2[400];
    snprintf(ad, sizeof ad, "%s/adapter", dir);
    cr_assert_eq(vit_lora_save_adapter(v, ad), ER_OK, "%s", er_msg());
    snprintf(adf, sizeof adf, "%s/adapter_model.safetensors", ad);
    snprintf(nanf, sizeof nanf, "%s/nan_adapter.safetensors", ad); /* beside adapter_config.json (its alpha) */
    st_file f;
    cr_assert_eq(st_open(adf, &f), ER_OK);
    st_writer *w = st_writer_new();
    float **data = calloc((size_t)f.n, sizeof *data);
    for (int i = 0; i < f.n; i++) {
        data[i] = malloc((size_t)f.tensors[i].numel * sizeof(float));
        cr_assert_eq(st_read_f32(&f, f.tensors[i].name, data[i], f.tensors[i].numel), ER_OK);
        if (i == 0) data[i][0] = NAN;
        st_add(w, f.tensors[i].name, ST_F32, f.tensors[i].ndim, f.tensors[i].shape, data[i]);
    }
    for (int i = 0; i < f.nmeta; i++) st_add_meta(w, f.meta_keys[i], f.meta_vals[i]);
    cr_assert_eq(st_write(w, nanf), ER_OK, "%s", er_msg());
    st_writer_free(w);
    char first[256];
    snprintf(first, sizeof first, "%s", f.tensors[0].name);
    for (int i = 0; i < f.n; i++) free(data[i]);
    free(data);
    st_close(&f);
    vit *base = vit_new(&c, 4);
    model *bm = vit_model_wrap(base);
    snprintf(basef, sizeof basef, "%s/base.safetensors", dir);
    cr_assert_eq(model_save(bm, basef, -1), ER_OK);
    snprintf(out, sizeof out, "%s/out.safetensors", dir);
    /* what a killed merge leaves: the merged file, and the merged file's own temp */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(stale1, sizeof stale1, "%s.merged.tmp.%d", out, (int)dead);
    snprintf(stale2, sizeof stale2, "%s.merged.tmp.%d.tmp.%d", out, (int)dead, (int)dead);
    cr_assert_eq(write_file_atomic(stale1, "x", 1), ER_OK);
    cr_assert_eq(write_file_atomic(stale2, "x", 1), ER_OK);
    char *cargv[] = {"convert", "--in", basef, "--out", out, "--to", "timm", "--merge-lora", nanf, NULL};
    cr_expect_eq(cmd_convert(9, cargv), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), nanf) && strstr(er_msg(), first) && !strstr(er_msg(), ".merged"), "%s", er_msg());
    cr_expect_neq(access(stale1, F_OK), 0, "%s left behind", stale1);
    cr_expect_neq(access(stale2, F_OK), 0, "%s left behind", stale2);
    char mine[400];
    snprintf(mine, sizeof mine, "%s.merged.tmp.%d", out, (int)getpid());
    cr_expect_neq(access(mine, F_OK), 0, "the failed merge left %s", mine);
    vit_free(v);
    model_free(bm);
}
