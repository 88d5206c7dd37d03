/* Training: 20 steps of MAE+SSCD on a tiny ViT lower the loss on a fixed batch; a run stopped after
 * 3 steps and resumed from its checkpoint ends bit-identical to an uninterrupted run; a NaN loss
 * stops with a message naming the step and the last good checkpoint. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "datasets/synth.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/ops.h"
#include "tests/train/tiny_image_cfg.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/objective_image.h"

static char *make_data(const char *dir) {
    synth_config sc = {.scenes = 8, .views = 2, .size = 32, .seed = 3, .threads = 1};
    cr_assert_eq(synth_write_dataset(dir, &sc), 0, "%s", er_msg());
    return path_join(dir, "manifest.csv");
}

static void tiny_cfg(image_cfg *c, loop_keys *k, const char *manifest, const char *out) { tiny_image_cfg(c, k, manifest, out); }

static train_loop_config loop_cfg(const loop_keys *k, int64_t steps) {
    train_loop_config lc = {.steps = steps, .warmup_steps = 2, .lr = 2e-3, .min_lr = 2e-3, .weight_decay = 0.05,
                            .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .clip = 5, .accum = 1, .log_every = 1,
                            .ckpt_every = 100, .out_dir = k->out, .config_text = "test"};
    return lc;
}

/* Loss of micro-batch (step 0, micro 0) without recording. */
static double fixed_batch_loss(image_objective *o) {
    train_objective t = image_objective_iface(o);
    loss_terms terms = {0};
    double v;
    NO_GRAD {
        tensor *l = t.step(t.self, 0, 0, &terms);
        cr_assert(l, "%s", er_msg());
        v = tensor_item(l);
    }
    nn_step_end();
    return v;
}

/* The tiny objective on fresh synthetic data, training into <tmp>/run. */
typedef struct {
    char *man, *out;
    image_cfg c;
    loop_keys k;
    image_objective *o;
} tiny_run;

static void tiny_run_open(tiny_run *r) {
    const char *d = test_tmpdir();
    r->man = make_data(d);
    r->out = path_join(d, "run");
    tiny_cfg(&r->c, &r->k, r->man, r->out);
    cr_assert_eq(image_objective_new(&r->c, &r->k, &r->o), 0, "%s", er_msg());
}

static void tiny_run_close(tiny_run *r) {
    image_objective_free(r->o);
    image_cfg_free(&r->c);
    loop_keys_free(&r->k);
    free(r->man); free(r->out);
}

Test(endofinder_train, twenty_steps_lower_the_loss, .timeout = 120) {
    SLOW_TEST();
    tiny_run r;
    tiny_run_open(&r);
    image_objective *o = r.o;
    const char *out = r.out;
    double before = fixed_batch_loss(o);
    train_objective t = image_objective_iface(o);
    train_loop_config lc = loop_cfg(&r.k, 20);
    cr_assert_eq(train_loop_run(&lc, &t), 0, "%s", er_msg());
    double after = fixed_batch_loss(o);
    cr_log_info("fixed-batch loss %.4f -> %.4f after 20 steps", before, after);
    cr_assert(after < before * 0.9, "loss %.4f -> %.4f did not go down", before, after);
    /* outputs of the loop */
    char *p = path_join(out, "log.jsonl");
    char *text; size_t len;
    cr_assert_eq(read_file(p, &text, &len), 0);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    cr_assert_eq(lines, 20);
    cr_assert(strstr(text, "\"loss_mae\"") && strstr(text, "\"loss_infonce\""));
    free(text); free(p);
    p = path_join(out, "loss.svg");
    cr_assert_eq(read_file(p, &text, &len), 0);
    cr_assert(strstr(text, "<polyline"));
    free(text); free(p);
    tiny_run_close(&r);
}

Test(endofinder_train, resume_is_bit_exact, .timeout = 120) {
    SLOW_TEST();
    const char *d = test_tmpdir();
    char *man = make_data(d);
    char *out_a = path_join(d, "a"), *out_b = path_join(d, "b");
    image_cfg c;
    loop_keys k;
    /* uninterrupted: 6 steps */
    tiny_cfg(&c, &k, man, out_a);
    image_objective *o;
    cr_assert_eq(image_objective_new(&c, &k, &o), 0, "%s", er_msg());
    train_objective t = image_objective_iface(o);
    train_loop_config lc = loop_cfg(&k, 6);
    cr_assert_eq(train_loop_run(&lc, &t), 0, "%s", er_msg());
    int64_t na, nb;
    float *a = params_snapshot(image_objective_params(o), &na);
    image_objective_free(o);
    image_cfg_free(&c);
    loop_keys_free(&k);
    /* interrupted after 3 steps (checkpoint written), then a fresh process-like restart */
    tiny_cfg(&c, &k, man, out_b);
    cr_assert_eq(image_objective_new(&c, &k, &o), 0, "%s", er_msg());
    t = image_objective_iface(o);
    lc = loop_cfg(&k, 6);
    lc.stop_after = 3;
    cr_assert_eq(train_loop_run(&lc, &t), ER_RUNTIME);
    cr_assert(strstr(er_msg(), "interrupted at step 3/6"), "%s", er_msg());
    image_objective_free(o);
    cr_assert_eq(image_objective_new(&c, &k, &o), 0, "%s", er_msg());
    t = image_objective_iface(o);
    lc = loop_cfg(&k, 6);
    char *ck = path_join(out_b, "checkpoint.safetensors");
    lc.resume = ck;
    cr_assert_eq(train_loop_run(&lc, &t), 0, "%s", er_msg());
    float *b = params_snapshot(image_objective_params(o), &nb);
    cr_assert_eq(na, nb);
    int64_t diff = 0;
    for (int64_t i = 0; i < na; i++) diff += memcmp(&a[i], &b[i], 4) != 0;
    cr_assert_eq(diff, 0, "%lld of %lld parameters differ after resume", (long long)diff, (long long)na);
    /* the resumed log continues the first one: 6 lines, steps 1..6 */
    char *p = path_join(out_b, "log.jsonl");
    char *text; size_t len;
    cr_assert_eq(read_file(p, &text, &len), 0);
    cr_assert(strstr(text, "\"step\": 3,") && strstr(text, "\"step\": 6,"));
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    cr_assert_eq(lines, 6);
    free(text); free(p);
    free(a); free(b); free(ck);
    image_objective_free(o);
    image_cfg_free(&c);
    loop_keys_free(&k);
    free(man); free(out_a); free(out_b);
}

/* data.prefetch = on augments micro-batch g + 1 on a worker thread while g trains: the same
 * batches, so the same weights, bit for bit (also across gradient accumulation). */
Test(endofinder_train, prefetch_gives_identical_weights, .timeout = 120) {
    const char *d = test_tmpdir();
    char *man = make_data(d);
    float *w[2];
    int64_t n[2];
    for (int on = 0; on <= 1; on++) {
        char *out = path_join(d, on ? "pf_on" : "pf_off");
        image_cfg c;
        loop_keys k;
        tiny_cfg(&c, &k, man, out);
        cfg_set_str(&k.prefetch, on ? "on" : "off");
        image_objective *o;
        cr_assert_eq(image_objective_new(&c, &k, &o), 0, "%s", er_msg());
        train_objective t = image_objective_iface(o);
        train_loop_config lc = loop_cfg(&k, 4);
        lc.accum = 2;
        cr_assert_eq(train_loop_run(&lc, &t), 0, "%s", er_msg());
        w[on] = params_snapshot(image_objective_params(o), &n[on]);
        image_objective_free(o);
        image_cfg_free(&c);
        loop_keys_free(&k);
        free(out);
    }
    cr_assert_eq(n[0], n[1]);
    int64_t diff = 0;
    for (int64_t i = 0; i < n[0]; i++) diff += memcmp(&w[0][i], &w[1][i], 4) != 0;
    cr_assert_eq(diff, 0, "%lld of %lld parameters differ with data.prefetch = on", (long long)diff, (long long)n[0]);
    free(w[0]); free(w[1]); free(man);
}

/* An objective whose loss becomes NaN at step 2. Its term is deferred (read by the loop at the step's
 * end), so the update of step 2 has been queued before the host sees the NaN: the step guard must have
 * skipped it. */
typedef struct { tensor *w; param_list pl; float w_at_2[3]; } nan_obj;
static tensor *nan_step(void *self, int64_t step, int micro, loss_terms *terms) {
    nan_obj *o = self;
    (void)micro;
    tensor *l = op_sum_all(op_mul(o->w, o->w));
    if (step == 2) {
        tensor_to_host(o->w, o->w_at_2);
        l = op_mul_scalar(op_log(op_mul_scalar(l, 0)), 0); /* 0 * log 0 = NaN */
    }
    loss_terms_defer(terms, "sq", l);
    loss_terms_set(terms, "host", 1.5);
    return l;
}

Test(endofinder_train, nan_loss_stops_naming_step_and_checkpoint) {
    const char *d = test_tmpdir();
    nan_obj o = {0};
    o.w = tensor_param("w", 1, SHAPE(3));
    tensor_fill(o.w, 1.0f);
    params_add(&o.pl, o.w);
    train_objective t = {.name = "nan", .self = &o, .params = &o.pl, .steps_per_epoch = 10, .images_per_step = 1,
                         .step = nan_step};
    train_loop_config lc = {.steps = 5, .warmup_steps = 0, .lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                            .accum = 1, .log_every = 1, .ckpt_every = 1, .out_dir = d};
    int rc = train_loop_run(&lc, &t);
    cr_assert_eq(rc, ER_RUNTIME);
    cr_assert(strstr(er_msg(), "step 2: loss is NaN (sq=") && strstr(er_msg(), "nan host=1.5)"), "%s", er_msg());
    cr_assert(strstr(er_msg(), "checkpoint.safetensors"), "names the last good checkpoint: %s", er_msg());
    float w[3];
    tensor_to_host(o.w, w);
    cr_assert(memcmp(w, o.w_at_2, sizeof w) == 0, "the NaN step changed w: %g -> %g", o.w_at_2[0], w[0]);
    cr_assert(w[0] != 1.0f, "steps 0 and 1 updated w");
    /* the log holds steps 1 and 2 with the deferred term's value */
    char *log = path_join(d, "log.jsonl"), *text = NULL;
    size_t len = 0;
    cr_assert_eq(read_file(log, &text, &len), ER_OK);
    cr_assert(strstr(text, "\"step\": 2,") && !strstr(text, "\"step\": 3,"), "%s", text);
    cr_assert(strstr(text, "\"loss_sq\": 3,") || strstr(text, "\"loss_sq\": 3\n"), "step 1's term: %s", text);
    free(text);
    free(log);
    params_free(&o.pl);
}

/* issue 17 #7: the real model driven to NaN (lr 1e30, no warmup) stops with ER_RUNTIME; in `make asan`
 * it also runs every CPU kernel (exp in softmax, GELU...) on NaN and inf inputs, which UBSan checks. */
Test(endofinder_train, huge_lr_nan_loss_stops_cleanly, .timeout = 60) {
    tiny_run r;
    tiny_run_open(&r);
    train_objective t = image_objective_iface(r.o);
    train_loop_config lc = loop_cfg(&r.k, 6);
    lc.lr = lc.min_lr = 1e30;
    lc.warmup_steps = 0;
    int rc = train_loop_run(&lc, &t);
    cr_assert_eq(rc, ER_RUNTIME, "rc %d: %s", rc, er_msg());
    cr_assert(strstr(er_msg(), "NaN") || strstr(er_msg(), "finite"), "%s", er_msg());
    tiny_run_close(&r);
}

Test(endofinder_train, bad_objective_config_is_rejected) {
    image_cfg c;
    loop_keys k;
    tiny_cfg(&c, &k, "/nonexistent/manifest.csv", "/tmp/x");
    int nk; /* a value out of its key's range: refused by the key table, where it is given */
    const cfg_spec *sp = image_cfg_specs(&c, &nk);
    cr_assert_eq(cfg_set("mae.masking=center", "--set", sp, nk), ER_INPUT);
    cr_assert(strstr(er_msg(), "mae.masking"), "%s", er_msg());
    image_objective *o;
    c.view.rotate = 30; /* aug.rotate under aug.preset = mae: refused, not ignored */
    cr_assert_eq(image_objective_new(&c, &k, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "aug.rotate") && strstr(er_msg(), "views"), "%s", er_msg());
    cfg_set_str(&c.aug, "views");
    cr_assert_eq(image_objective_new(&c, &k, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "/nonexistent/manifest.csv"), "%s", er_msg());
    image_cfg_free(&c);
    loop_keys_free(&k);
}

/* aug.preset = views trains (finite, falling loss on a fixed batch) with the mask carried to the
 * guided masking. */
Test(endofinder_train, views_preset_trains, .timeout = 120) {
    tiny_run r;
    const char *d = test_tmpdir();
    r.man = make_data(d);
    r.out = path_join(d, "run");
    tiny_cfg(&r.c, &r.k, r.man, r.out);
    cfg_set_str(&r.c.aug, "views");
    r.c.view.rotate = 25;
    cr_assert_eq(image_objective_new(&r.c, &r.k, &r.o), 0, "%s", er_msg());
    double before = fixed_batch_loss(r.o);
    train_objective t = image_objective_iface(r.o);
    train_loop_config lc = loop_cfg(&r.k, 20);
    cr_assert_eq(train_loop_run(&lc, &t), 0, "%s", er_msg());
    double after = fixed_batch_loss(r.o);
    cr_assert(isfinite(before) && isfinite(after) && after < before, "loss %f -> %f", before, after);
    tiny_run_close(&r);
}

/* data.positives = views: the second copy of an image is another view of its scene. Scenes of two
 * flat-colour views (black|white, red|blue) make it visible: with crops the two copies are the same
 * flat image (positive similarity exactly 1), with views they differ. */
Test(endofinder_train, positives_from_other_views_of_the_scene) {
    const char *d = test_tmpdir();
    const unsigned char col[4][3] = {{0, 0, 0}, {255, 255, 255}, {255, 0, 0}, {0, 0, 255}};
    char *man = path_join(d, "m.csv");
    FILE *f = fopen(man, "w");
    cr_assert(f);
    fprintf(f, "path,scene,view\n");
    unsigned char px[32 * 32 * 3];
    for (int i = 0; i < 4; i++) {
        for (int p = 0; p < 32 * 32; p++) memcpy(px + 3 * p, col[i], 3);
        char name[32];
        snprintf(name, sizeof name, "%s/c%d.png", d, i);
        cr_assert_eq(png_save_u8(name, px, 3, 32, 32), 0, "%s", er_msg());
        fprintf(f, "c%d.png,s%d,%d\n", i, i / 2, i % 2);
    }
    fclose(f);
    double pos[2];
    for (int v = 0; v < 2; v++) {
        image_cfg c;
        loop_keys k;
        tiny_cfg(&c, &k, man, d);
        c.mix_prob = 0;
        c.w_mae = 0;
        c.mask_ratio = 0;
        cfg_set_str(&c.positives, v ? "views" : "crops");
        image_objective *o;
        cr_assert_eq(image_objective_new(&c, &k, &o), 0, "%s", er_msg());
        loss_terms terms = {0};
        NO_GRAD {
            train_objective t = image_objective_iface(o);
            cr_assert(t.step(t.self, 0, 0, &terms), "%s", er_msg());
            loss_terms_resolve(&terms);
        }
        nn_step_end();
        pos[v] = -1;
        for (int i = 0; i < terms.n; i++) if (!strcmp(terms.name[i], "pos_sim")) pos[v] = terms.value[i];
        image_objective_free(o);
        image_cfg_free(&c);
        loop_keys_free(&k);
    }
    cr_assert(fabs(pos[0] - 1) < 1e-5, "crops of a flat image: positive similarity %g", pos[0]);
    cr_assert(pos[1] < 0.999, "views: the positive is the scene's other colour, similarity %g", pos[1]);
    /* no scene column: one message */
    char *plain = path_join(d, "p.csv");
    f = fopen(plain, "w");
    fprintf(f, "path\nc0.png\nc1.png\n");
    fclose(f);
    image_cfg c;
    loop_keys k;
    tiny_cfg(&c, &k, plain, d);
    cfg_set_str(&c.positives, "views");
    image_objective *o;
    cr_assert_eq(image_objective_new(&c, &k, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "data.positives = views") && strstr(er_msg(), "no scene column"), "%s", er_msg());
    image_cfg_free(&c);
    loop_keys_free(&k);
    free(man); free(plain);
}
