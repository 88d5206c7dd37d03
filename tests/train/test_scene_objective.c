/* `train scene`: on a tiny frozen ViT and synthetic 4-view scenes, 20 steps lower the loss of a fixed
 * batch; a run stopped after 3 steps and resumed ends bit-identical to an uninterrupted one; the
 * paper's variants (one reconstruction per scene, shared view encodings) run; the exported
 * scene_encoder.safetensors loads through the registry and gives the trained model's descriptors;
 * bad configs are one message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/embed_scene.h"
#include "datasets/synth.h"
#include "nn/autograd.h"
#include "datasets/augment.h"
#include "datasets/image.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/vit_model.h"
#include "nn/ops.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/objective.h"
#include "train/objective_scene.h"

typedef struct {
    char *man, *enc, *out;
    objective_config oc;
    train_objective t;
} run;

/* 8 synthetic scenes x 4 views and a 1-block ViT (width 32, 16x16 images, patch 4) saved as a file. */
static void make_inputs(const char *d, char **man, char **enc) {
    synth_config sc = {.scenes = 8, .views = 4, .size = 32, .seed = 3, .threads = 1};
    cr_assert_eq(synth_write_dataset(d, &sc), 0, "%s", er_msg());
    *man = path_join(d, "manifest.csv");
    *enc = path_join(d, "enc.safetensors");
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_tiny", &c), 0);
    c.img = 16; c.patch = 4; c.dim = 32; c.depth = 1; c.heads = 2;
    model *m = vit_model_wrap(vit_new(&c, 7));
    cr_assert_eq(model_save(m, *enc, -1), 0, "%s", er_msg());
    model_free(m);
}

static void run_open(run *r, const char *d, const char *out, const char *extra1, const char *extra2) {
    memset(r, 0, sizeof *r);
    make_inputs(d, &r->man, &r->enc);
    r->out = path_join(d, out);
    char s[12][300];
    int n = 0;
    snprintf(s[n++], 300, "scene.image_encoder=%s", r->enc);
    snprintf(s[n++], 300, "data.manifest=%s", r->man);
    snprintf(s[n++], 300, "data.split=");
    snprintf(s[n++], 300, "data.cache_side=20");
    snprintf(s[n++], 300, "model.scene_heads=2");
    snprintf(s[n++], 300, "model.decoder_dim=16");
    snprintf(s[n++], 300, "model.decoder_heads=2");
    snprintf(s[n++], 300, "train.batch=4");
    snprintf(s[n++], 300, "scene.encode_batch=20");
    snprintf(s[n++], 300, "out.dir=%s", r->out);
    if (extra1) snprintf(s[n++], 300, "%s", extra1);
    if (extra2) snprintf(s[n++], 300, "%s", extra2);
    char *sets[12];
    for (int i = 0; i < n; i++) sets[i] = s[i];
    objective_config_init(&r->oc, &objective_scene);
    cr_assert_eq(objective_config_load(&r->oc, NULL, sets, n), 0, "%s", er_msg());
    cr_assert_eq(objective_create(&r->oc, &r->t), 0, "%s", er_msg());
}

static void run_close(run *r) {
    r->t.free(r->t.self);
    objective_config_free(&r->oc);
    free(r->man); free(r->enc); free(r->out);
}

static train_loop_config loop_cfg(const run *r, int64_t steps) {
    train_loop_config lc = {.steps = steps, .warmup_steps = 2, .lr = 2e-3, .min_lr = 2e-3, .weight_decay = 0.05,
                            .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .clip = 5, .accum = 1, .log_every = 1,
                            .ckpt_every = 100, .out_dir = r->out, .config_text = "test"};
    return lc;
}

static double fixed_batch_loss(run *r, loss_terms *terms) {
    double v;
    NO_GRAD {
        tensor *l = r->t.step(r->t.self, 0, 0, terms);
        loss_terms_resolve(terms);
        cr_assert(l, "%s", er_msg());
        v = tensor_item(l);
    }
    nn_step_end();
    return v;
}

Test(scene_train, twenty_steps_lower_the_loss_and_export_loads, .timeout = 180) {
    SLOW_TEST();
    run r;
    run_open(&r, test_tmpdir(), "run", NULL, NULL);
    loss_terms t0 = {0}, t1 = {0};
    double before = fixed_batch_loss(&r, &t0);
    cr_assert(isfinite(before) && t0.n == 4, "terms: %d", t0.n); /* infonce, entropy, pos_sim, mse */
    train_loop_config lc = loop_cfg(&r, 20);
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    double after = fixed_batch_loss(&r, &t1);
    cr_log_info("fixed-batch scene loss %.4f -> %.4f after 20 steps", before, after);
    cr_assert(after < before * 0.9, "loss %.4f -> %.4f did not go down", before, after);
    /* the image encoder stayed frozen: the exported file's ViT equals the input file's */
    char *path = path_join(r.out, "scene_encoder.safetensors");
    model *m, *e;
    cr_assert_eq(model_load(path, NULL, NULL, 0, &m), 0, "%s", er_msg());
    cr_assert_eq(model_load(r.enc, NULL, NULL, 0, &e), 0, "%s", er_msg());
    char d[300];
    model_describe(m, d, sizeof d);
    cr_assert(strstr(d, "endofinder scene"), "%s", d);
    /* per-view descriptors of the scene model = the frozen encoder's */
    int S = 16;
    float *x = malloc(sizeof(float) * 3 * 3 * S * S), a[3 * 32], b[3 * 32], z[32];
    rng_t g = rng_make(1, 0);
    for (int i = 0; i < 3 * 3 * S * S; i++) x[i] = rng_normal(&g);
    cr_assert_eq(model_embed(m, x, 3, a), 0, "%s", er_msg());
    cr_assert_eq(model_embed(e, x, 3, b), 0, "%s", er_msg());
    cr_assert(memcmp(a, b, sizeof a) == 0, "the frozen encoder changed in training");
    /* a scene descriptor of 1..3 views: unit length; the ViT family cannot fuse */
    for (int v = 1; v <= 3; v++) {
        cr_assert_eq(model_embed_scene(m, x, v, z), 0, "%s", er_msg());
        double n = 0;
        for (int i = 0; i < 32; i++) n += z[i] * z[i];
        cr_assert(fabs(n - 1) < 1e-5);
    }
    cr_assert_eq(model_embed_scene(e, x, 2, z), ER_INPUT);
    cr_assert(strstr(er_msg(), "--fusion mean"), "%s", er_msg());
    /* embed --scene: one row per scene (8 x 4 views), per group with names "0+1" / "2+3"; mean fusion
     * = the average of the view descriptors */
    manifest man;
    cr_assert_eq(manifest_load(r.man, &man), 0, "%s", er_msg());
    int *rows = malloc(man.n * sizeof(int)), sk = 0;
    for (int i = 0; i < man.n; i++) rows[i] = i;
    emb_set all, grp, avg;
    embed_scene_opts so = {.fusion = "transformer", .groups = NULL, .max_views = 8};
    cr_assert_eq(embed_scenes(m, &man, r.man, rows, man.n, &so, &all, &sk), 0, "%s", er_msg());
    cr_assert_eq(all.n, 8);
    cr_assert(all.scene && !all.view && sk == 0);
    so.groups = "0,1;2,3";
    cr_assert_eq(embed_scenes(m, &man, r.man, rows, man.n, &so, &grp, &sk), 0, "%s", er_msg());
    cr_assert_eq(grp.n, 16);
    cr_assert(grp.nview_names == 2 && !strcmp(grp.view_names[0], "0+1") && !strcmp(grp.view_names[1], "2+3"));
    so.fusion = "mean";
    cr_assert_eq(embed_scenes(m, &man, r.man, rows, man.n, &so, &avg, &sk), 0, "%s", er_msg());
    /* row 0: scene of manifest row 0, views 0 and 1: the mean of their descriptors */
    float *im = malloc(sizeof(float) * 2 * 3 * S * S), dv[2 * 32];
    image src = {0}, dst = {0};
    aug_workspace ws = {0};
    for (int v = 0, k = 0; k < man.n && v < 2; k++) {
        if (strcmp(man.rows[k].scene, man.rows[0].scene)) continue;
        char *p = manifest_image_path(&man, k);
        cr_assert_eq(image_load(p, 3, &src), 0);
        cr_assert_eq(aug_eval(&src, S, &ws, &dst), 0);
        memcpy(im + (size_t)v++ * 3 * S * S, dst.data, sizeof(float) * 3 * S * S);
        free(p);
    }
    cr_assert_eq(model_embed(m, im, 2, dv), 0);
    for (int j = 0; j < 32; j++)
        cr_assert(fabsf(avg.x[j] - 0.5f * (dv[j] + dv[32 + j])) < 1e-6, "mean fusion [%d]", j);
    so.groups = "0,9";
    emb_set none;
    cr_assert_eq(embed_scenes(m, &man, r.man, rows, man.n, &so, &none, &sk), ER_INPUT);
    cr_assert(strstr(er_msg(), "no scene has every view"), "%s", er_msg());
    image_free(&src); image_free(&dst); aug_workspace_free(&ws); free(im);
    emb_free(&all); emb_free(&grp); emb_free(&avg); free(rows);
    manifest_free(&man);
    model_free(m); model_free(e);
    free(x); free(path);
    run_close(&r);
}

/* model.scene_base = mean: the gate (0 at the start) is trained and saved; the file loads as a mean-based
 * scene model whose descriptor is near, not at, the normalised mean of its views' descriptors. */
Test(scene_train, mean_base_trains_its_gate_and_loads, .timeout = 180) {
    run r;
    run_open(&r, test_tmpdir(), "mean", "model.scene_base=mean", NULL);
    train_loop_config lc = loop_cfg(&r, 5);
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    char *path = path_join(r.out, "scene_encoder.safetensors");
    model *m;
    cr_assert_eq(model_load(path, NULL, NULL, 0, &m), 0, "%s", er_msg());
    char d[300];
    model_describe(m, d, sizeof d);
    cr_assert(strstr(d, "base: mean of the views"), "%s", d);
    int S = 16;
    float *x = malloc(sizeof(float) * 2 * 3 * S * S), dv[2 * 32], z[32], mean[32];
    rng_t g = rng_make(2, 0);
    for (int i = 0; i < 2 * 3 * S * S; i++) x[i] = rng_normal(&g);
    cr_assert_eq(model_embed(m, x, 2, dv), 0, "%s", er_msg());
    cr_assert_eq(model_embed_scene(m, x, 2, z), 0, "%s", er_msg());
    double n = 0, dot = 0;
    for (int j = 0; j < 32; j++) { mean[j] = 0.5f * (dv[j] + dv[32 + j]); n += (double)mean[j] * mean[j]; }
    for (int j = 0; j < 32; j++) dot += z[j] * mean[j] / sqrt(n);
    cr_log_info("mean base after 5 steps: cosine to the views' mean %.6f", dot);
    cr_assert(dot < 1 - 1e-7, "the gate did not move: the descriptor is still the mean (cosine %.9f)", dot);
    cr_assert(dot > 0.9, "5 steps from averaging went far from it (cosine %.4f)", dot);
    model_free(m);
    free(x); free(path);
    run_close(&r);
}

Test(scene_train, resume_is_bit_exact, .timeout = 180) {
    SLOW_TEST();
    const char *d = test_tmpdir();
    run r;
    run_open(&r, d, "a", NULL, NULL);
    train_loop_config lc = loop_cfg(&r, 6);
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    int64_t na, nb;
    float *a = params_snapshot(r.t.params, &na);
    run_close(&r);
    run_open(&r, d, "b", NULL, NULL);
    lc = loop_cfg(&r, 6);
    lc.stop_after = 3;
    cr_assert_eq(train_loop_run(&lc, &r.t), ER_RUNTIME);
    run_close(&r);
    run_open(&r, d, "b", NULL, NULL);
    lc = loop_cfg(&r, 6);
    char *ck = path_join(r.out, "checkpoint.safetensors");
    lc.resume = ck;
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    float *b = params_snapshot(r.t.params, &nb);
    cr_assert_eq(na, nb);
    int64_t diff = 0;
    for (int64_t i = 0; i < na; i++) diff += memcmp(&a[i], &b[i], 4) != 0;
    cr_assert_eq(diff, 0, "%lld of %lld values differ after resume", (long long)diff, (long long)na);
    free(a); free(b); free(ck);
    run_close(&r);
}

Test(scene_train, paper_variants_run_and_differ) {
    const char *d = test_tmpdir();
    run r;
    loss_terms t0 = {0}, t1 = {0}, t2 = {0};
    run_open(&r, d, "code", NULL, NULL);
    double code = fixed_batch_loss(&r, &t0);
    run_close(&r);
    run_open(&r, d, "one", "scene.recon=one", NULL);
    double one = fixed_batch_loss(&r, &t1);
    run_close(&r);
    run_open(&r, d, "shared", "scene.share_views=true", "scene.aug=advanced");
    double shared = fixed_batch_loss(&r, &t2);
    run_close(&r);
    cr_assert(isfinite(code) && isfinite(one) && isfinite(shared));
    /* same scenes and masks: the contrastive part of code and one is identical, the MSE differs */
    cr_assert_float_eq(t0.value[0], t1.value[0], 1e-9, "infonce %g vs %g", t0.value[0], t1.value[0]);
    cr_assert(fabs(t0.value[3] - t1.value[3]) > 1e-7, "mse over every combination vs one per scene: %g %g",
              t0.value[3], t1.value[3]);
    cr_assert(fabs(code - shared) > 1e-6, "shared views gave the same loss");
}

Test(scene_train, bad_config_is_one_message) {
    objective_config oc;
    objective_config_init(&oc, &objective_scene);
    char *bad[] = {"scene.views=1"};
    cr_assert_eq(objective_config_load(&oc, NULL, bad, 1), ER_INPUT);
    cr_assert(strstr(er_msg(), "scene.views"), "%s", er_msg());
    char *nomodel[] = {"data.manifest=/nonexistent.csv"};
    cr_assert_eq(objective_config_load(&oc, NULL, nomodel, 1), 0, "%s", er_msg());
    train_objective t;
    cr_assert_eq(objective_create(&oc, &t), ER_INPUT);
    cr_assert(strstr(er_msg(), "scene.image_encoder is not set"), "%s", er_msg());
    objective_config_free(&oc);
    /* an image encoder that is not a ViT file */
    const char *d = test_tmpdir();
    char *f = path_join(d, "junk.safetensors");
    cr_assert_eq(write_file_atomic(f, "not a safetensors file", 22), 0);
    objective_config_init(&oc, &objective_scene);
    char s[300];
    snprintf(s, sizeof s, "scene.image_encoder=%s", f);
    char *sets[] = {s, "data.manifest=/nonexistent.csv"};
    cr_assert_eq(objective_config_load(&oc, NULL, sets, 2), 0, "%s", er_msg());
    cr_assert_eq(objective_create(&oc, &t), ER_INPUT);
    cr_assert(strstr(er_msg(), "junk.safetensors"), "%s", er_msg());
    objective_config_free(&oc);
    free(f);
}
