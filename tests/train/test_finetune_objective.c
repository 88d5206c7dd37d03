/* `train finetune` (train/objective_finetune.h): linear evaluation keeps the loaded trunk bit-identical
 * (weights and batch-norm statistics) while the head learns; full fine-tuning moves every weight and
 * statistic; the exported classifier is a torchvision-layout ResNet with the input rule of its init
 * file; the best evaluation is kept; a share of the labels trains; bad inputs are one message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/synth.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/resnet_model.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/objective.h"
#include "train/objective_finetune.h"

typedef struct {
    char *man, *init, *out;
    objective_config oc;
    train_objective t;
} run;

/* 16 scenes x (1 view + 1 lesion-free view) of 48 px, labelled lesion / none; an init file: a resnet18 (width 8) with PGCon heads and the WCE rule */
static void inputs(const char *d, char **man, char **init) {
    char *sd = path_join(d, "synth");
    *man = path_join(sd, "manifest.csv");
    *init = path_join(d, "init.safetensors");
    FILE *f = fopen(*init, "r");
    if (f) { fclose(f); free(sd); return; }
    synth_config sc = {.scenes = 16, .views = 1, .size = 48, .seed = 5, .threads = 1, .background = 1};
    cr_assert_eq(synth_write_dataset(sd, &sc), 0, "%s", er_msg());
    free(sd);
    /* lesion vs no lesion: a task a tiny network learns in a few steps (benign / malignant is not) */
    size_t len;
    char *text;
    cr_assert_eq(read_file(*man, &text, &len), 0, "%s", er_msg());
    char *out = malloc(len + 1), *o = out;
    for (const char *p = text; *p;) {
        if (!strncmp(p, ",benign,", 8)) { memcpy(o, ",lesion,", 8); o += 8; p += 8; }
        else if (!strncmp(p, ",malignant,", 11)) { memcpy(o, ",lesion,", 8); o += 8; p += 11; }
        else *o++ = *p++;
    }
    cr_assert_eq(write_file_atomic(*man, out, (size_t)(o - out)), 0, "%s", er_msg());
    free(text); free(out);
    resnet_args a;
    resnet_arch.args_defaults(&a);
    cfg_set_str(&a.arch, "resnet18");
    a.width = 16; a.img = 32; a.proj = 16; a.jigsaw = 9;
    model *m;
    cr_assert_eq(resnet_arch.create(&a, 3, &m), 0, "%s", er_msg());
    model_input in = {{0.56f, 0.35f, 0.2f}, {0.3f, 0.24f, 0.17f}, 0.75f};
    m->input = in;
    m->has_input = 1;
    cr_assert_eq(model_save(m, *init, -1), 0, "%s", er_msg());
    model_free(m);
    resnet_arch.args_free(&a);
}

static int run_open(run *r, const char *d, const char *out, const char *e1, const char *e2) {
    memset(r, 0, sizeof *r);
    inputs(d, &r->man, &r->init);
    r->out = path_join(d, out);
    char s[16][300];
    int n = 0;
    snprintf(s[n++], 300, "data.manifest=%s", r->man);
    snprintf(s[n++], 300, "finetune.init=%s", r->init);
    snprintf(s[n++], 300, "model.img=64");
    snprintf(s[n++], 300, "data.split=");
    snprintf(s[n++], 300, "eval.split=");
    snprintf(s[n++], 300, "train.batch=8");
    snprintf(s[n++], 300, "eval.every=5");
    snprintf(s[n++], 300, "out.dir=%s", r->out);
    if (e1) snprintf(s[n++], 300, "%s", e1);
    if (e2) snprintf(s[n++], 300, "%s", e2);
    char *sets[16];
    for (int i = 0; i < n; i++) sets[i] = s[i];
    objective_config_init(&r->oc, &objective_finetune);
    int rc = objective_config_load(&r->oc, NULL, sets, n);
    if (!rc) rc = objective_create(&r->oc, &r->t);
    return rc;
}

static void run_close(run *r) {
    if (r->t.free) r->t.free(r->t.self);
    objective_config_free(&r->oc);
    free(r->man); free(r->init); free(r->out);
}

static train_loop_config loop_cfg(const run *r, int64_t steps) {
    train_loop_config lc = {.steps = steps, .lr = 0.05, .min_lr = 0.05, .weight_decay = 1e-4, .eps = 1e-8,
                            .optimizer = OPTIM_SGD, .momentum = 0.9, .accum = 1, .log_every = 1, .ckpt_every = 100,
                            .eval_every = 5, .out_dir = r->out, .config_text = "test"};
    return lc;
}

/* mean of the first and of the last 8 logged losses of <out>/log.jsonl */
static void loss_ends(const char *out, double *first, double *last) {
    char *path = path_join(out, "log.jsonl"), *text;
    size_t len;
    cr_assert_eq(read_file(path, &text, &len), 0, "%s", er_msg());
    double v[256];
    int n = 0;
    for (char *p = strstr(text, "\"loss\": "); p && n < 256; p = strstr(p + 1, "\"loss\": ")) v[n++] = atof(p + 8);
    cr_assert(n >= 16, "%d losses logged", n);
    *first = *last = 0;
    for (int i = 0; i < 8; i++) *first += v[i] / 8, *last += v[n - 8 + i] / 8;
    free(text); free(path);
}

/* linear evaluation on 8 images (25 % of the labels = one batch): the head fits them while the trunk
 * (weights and batch-norm statistics) stays bit-identical */
Test(finetune_train, linear_evaluation_keeps_the_trunk, .timeout = 120) {
    SLOW_TEST();
    run r;
    cr_assert_eq(run_open(&r, test_tmpdir(), "lin", "finetune.freeze=true", "data.label_percent=25"), 0, "%s", er_msg());
    param_list *pl = r.t.params;
    int64_t n = params_numel(pl);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *p = a;
    for (int i = 0; i < pl->n; i++) { tensor_to_host(pl->t[i], p); p += tensor_numel(pl->t[i]); }
    train_loop_config lc = loop_cfg(&r, 40);
    lc.lr = 0.01, lc.min_lr = 0;
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    double first, last;
    loss_ends(r.out, &first, &last);
    cr_log_info("linear evaluation: cross-entropy %.4f over the first 8 steps, %.4f over the last 8", first, last);
    cr_assert(last < 0.8 * first, "%.4f -> %.4f", first, last);
    p = b;
    for (int i = 0; i < pl->n; i++) { tensor_to_host(pl->t[i], p); p += tensor_numel(pl->t[i]); }
    int64_t off = 0, head_changed = 0;
    for (int i = 0; i < pl->n; i++) {
        int64_t m = tensor_numel(pl->t[i]);
        int same = !memcmp(a + off, b + off, m * sizeof(float)), head = !strncmp(pl->t[i]->name, "fc.", 3);
        if (head) head_changed += !same;
        else if (strcmp(pl->t[i]->name, "finetune.best_accuracy")) /* model selection's buffer: not a weight */
            cr_assert(same, "%s changed in linear evaluation", pl->t[i]->name);
        off += m;
    }
    cr_assert_eq(head_changed, 2, "fc weight and bias learn (%lld changed)", (long long)head_changed);
    /* best.safetensors after an evaluation; the classifier keeps the init file's input rule */
    char *best = path_join(r.out, "best.safetensors"), *cls = path_join(r.out, "classifier.safetensors");
    model *m;
    cr_assert_eq(model_load(best, NULL, NULL, 0, &m), 0, "%s", er_msg());
    model_free(m);
    cr_assert_eq(model_load(cls, NULL, NULL, 0, &m), 0, "%s", er_msg());
    cr_assert(m->has_input && fabsf(m->input.crop - 0.75f) < 1e-7 && m->arch == &resnet_arch);
    model_free(m);
    free(best); free(cls); free(a); free(b);
    run_close(&r);
}

/* full fine-tuning: every trunk weight and running statistic moves; the export is a torchvision
 * classifier (fc) without PGCon's heads; the paper's 2-fc head is head.0 / head.2 */
Test(finetune_train, full_finetuning_trains_everything_and_exports_torchvision_fc, .timeout = 120) {
    SLOW_TEST();
    run r;
    cr_assert_eq(run_open(&r, test_tmpdir(), "full", NULL, NULL), 0, "%s", er_msg());
    param_list *pl = r.t.params;
    int64_t n = params_numel(pl);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *p = a;
    for (int i = 0; i < pl->n; i++) { tensor_to_host(pl->t[i], p); p += tensor_numel(pl->t[i]); }
    train_loop_config lc = loop_cfg(&r, 5);
    lc.eval_every = 0;
    lc.lr = lc.min_lr = 0.01;
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    p = b;
    for (int i = 0; i < pl->n; i++) { tensor_to_host(pl->t[i], p); p += tensor_numel(pl->t[i]); }
    int64_t off = 0;
    for (int i = 0; i < pl->n; i++) {
        int64_t m = tensor_numel(pl->t[i]);
        cr_assert(memcmp(a + off, b + off, m * sizeof(float)) || !strcmp(pl->t[i]->name, "finetune.best_accuracy"),
                  "%s did not change in fine-tuning", pl->t[i]->name);
        off += m;
    }
    char *cls = path_join(r.out, "classifier.safetensors");
    st_file f;
    cr_assert_eq(st_open(cls, &f), 0, "%s", er_msg());
    const st_tensor *fc = st_find(&f, "fc.weight");
    cr_assert(fc && fc->shape[0] == 2 && fc->shape[1] == 128, "fc [classes, features]");
    cr_assert(!st_find(&f, "projection_original_features.weight"), "PGCon heads are not part of the classifier");
    st_close(&f);
    free(cls); free(a); free(b);
    run_close(&r);
    cr_assert_eq(run_open(&r, test_tmpdir(), "mlp", "finetune.head=mlp", NULL), 0, "%s", er_msg());
    int heads = 0;
    for (int i = 0; i < r.t.params->n; i++) heads += !strncmp(r.t.params->t[i]->name, "head.", 5);
    cr_assert_eq(heads, 4);
    run_close(&r);
}

Test(finetune_train, label_share_and_bad_inputs) {
    const char *d = test_tmpdir();
    run r;
    cr_assert_eq(run_open(&r, d, "few", "data.label_percent=25", NULL), 0, "%s", er_msg());
    cr_assert_eq(r.t.steps_per_epoch, 1); /* 8 of 32 rows, batch 8 */
    run_close(&r);
    cr_assert_eq(run_open(&r, d, "bad", "finetune.head=conv", NULL), ER_INPUT);
    cr_assert(strstr(er_msg(), "finetune.head"), "%s", er_msg());
    run_close(&r);
    cr_assert_eq(run_open(&r, d, "bad", "data.label_percent=0", NULL), ER_INPUT);
    cr_assert(strstr(er_msg(), "data.label_percent"), "%s", er_msg());
    run_close(&r);
    cr_assert_eq(run_open(&r, d, "bad", "finetune.init=/nonexistent.safetensors", NULL), ER_INPUT);
    cr_assert(strstr(er_msg(), "/nonexistent.safetensors"), "%s", er_msg());
    run_close(&r);
}

/* 8 rows, batch 8: every step starts an epoch (the sampler's permutation is rebuilt each step, once,
 * before the parallel augmentation). A run stopped after 2 of 4 steps and resumed equals the
 * uninterrupted run bit for bit. */
Test(finetune_train, resume_is_bit_exact, .timeout = 120) {
    SLOW_TEST();
    const char *d = test_tmpdir();
    run r;
    cr_assert_eq(run_open(&r, d, "a", "data.label_percent=25", NULL), 0, "%s", er_msg());
    train_loop_config lc = loop_cfg(&r, 4);
    lc.eval_every = 0;
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    int64_t na, nb;
    float *a = params_snapshot(r.t.params, &na);
    run_close(&r);
    cr_assert_eq(run_open(&r, d, "b", "data.label_percent=25", NULL), 0, "%s", er_msg());
    lc = loop_cfg(&r, 4);
    lc.eval_every = 0;
    lc.stop_after = 2;
    cr_assert_eq(train_loop_run(&lc, &r.t), ER_RUNTIME);
    run_close(&r);
    cr_assert_eq(run_open(&r, d, "b", "data.label_percent=25", NULL), 0, "%s", er_msg());
    lc = loop_cfg(&r, 4);
    lc.eval_every = 0;
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

/* the eval lines ("accuracy" .. "best") of <out>/log.jsonl from step `from` on, concatenated */
static char *eval_lines(const char *out, int from) {
    char *path = path_join(out, "log.jsonl"), *text, *acc = xcalloc(1, 1);
    size_t len, n = 0;
    cr_assert_eq(read_file(path, &text, &len), 0, "%s", er_msg());
    for (char *p = strstr(text, "\"eval\""); p; p = strstr(p + 1, "\"eval\"")) {
        char *start = p, *end = strchr(p, '\n');
        while (start > text && start[-1] != '\n') start--;
        if (atoi(start + 9) < from) continue; /* {"step": N, ... */
        size_t l = end ? (size_t)(end - start) : strlen(start);
        acc = xrealloc(acc, n + l + 2);
        memcpy(acc + n, start, l);
        n += l;
        acc[n++] = '\n';
        acc[n] = 0;
    }
    free(text); free(path);
    return acc;
}

/* model selection survives --resume: the best accuracy is in the checkpoint, so the evaluations after
 * a resume flag (and save) a new best exactly where the uninterrupted run does */
Test(finetune_train, best_survives_resume, .timeout = 120) {
    SLOW_TEST();
    const char *d = test_tmpdir();
    run r;
    cr_assert_eq(run_open(&r, d, "a", "data.label_percent=25", "eval.every=1"), 0, "%s", er_msg());
    train_loop_config lc = loop_cfg(&r, 6);
    lc.eval_every = 1;
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    char *a = eval_lines(r.out, 2);
    run_close(&r);
    cr_assert_eq(run_open(&r, d, "b", "data.label_percent=25", "eval.every=1"), 0, "%s", er_msg());
    lc = loop_cfg(&r, 6);
    lc.eval_every = 1;
    lc.stop_after = 1;
    cr_assert_eq(train_loop_run(&lc, &r.t), ER_RUNTIME);
    run_close(&r);
    cr_assert_eq(run_open(&r, d, "b", "data.label_percent=25", "eval.every=1"), 0, "%s", er_msg());
    lc = loop_cfg(&r, 6);
    lc.eval_every = 1;
    char *ck = path_join(r.out, "checkpoint.safetensors");
    lc.resume = ck;
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    char *b = eval_lines(r.out, 2);
    cr_log_info("uninterrupted:\n%sresumed after step 1:\n%s", a, b);
    cr_expect_str_eq(a, b, "the evaluations after --resume differ:\n%s-- vs --\n%s", a, b);
    free(a); free(b); free(ck);
    run_close(&r);
}
