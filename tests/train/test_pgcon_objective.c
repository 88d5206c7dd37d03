/* `train pgcon` (train/objective_pgcon.h) on synthetic scenes and a tiny ResNet-18: 20 steps lower
 * the loss of a fixed batch and fill / update the memory bank with unit rows; a run stopped after 3
 * steps and resumed ends bit-identical (bank included); WINCon runs; the exported encoder loads with
 * its 128-d projection descriptor and the WCE input rule; bad configs are one message naming the key;
 * cosine with warm restarts follows torch's CosineAnnealingWarmRestarts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/synth.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/ops.h"
#include "nn/schedule.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/objective.h"
#include "train/objective_pgcon.h"

typedef struct {
    char *man, *out;
    objective_config oc;
    train_objective t;
} run;

static void run_open(run *r, const char *d, const char *out, const char *extra1, const char *extra2) {
    memset(r, 0, sizeof *r);
    char *sd = path_join(d, "synth");
    r->man = path_join(sd, "manifest.csv");
    FILE *f = fopen(r->man, "r");
    if (f) fclose(f);
    else { /* 12 scenes x 4 views of 48 px: 48 rows, both labels */
        synth_config sc = {.scenes = 12, .views = 4, .size = 48, .seed = 3, .threads = 1};
        cr_assert_eq(synth_write_dataset(sd, &sc), 0, "%s", er_msg());
    }
    free(sd);
    r->out = path_join(d, out);
    char s[24][300];
    int n = 0;
    snprintf(s[n++], 300, "data.manifest=%s", r->man);
    snprintf(s[n++], 300, "data.split=");
    snprintf(s[n++], 300, "model.arch=resnet18");
    snprintf(s[n++], 300, "model.width=8");
    snprintf(s[n++], 300, "model.img=32");
    snprintf(s[n++], 300, "model.proj=16");
    snprintf(s[n++], 300, "pgcon.prior_out=16");
    snprintf(s[n++], 300, "pgcon.tile_out=16");
    snprintf(s[n++], 300, "pgcon.win_out=24");
    snprintf(s[n++], 300, "pgcon.negatives=20");
    snprintf(s[n++], 300, "train.batch=8");
    snprintf(s[n++], 300, "eval.manifest=%s", r->man);
    snprintf(s[n++], 300, "eval.split=");
    snprintf(s[n++], 300, "eval.bank_split=");
    snprintf(s[n++], 300, "eval.knn_k=5");
    snprintf(s[n++], 300, "out.dir=%s", r->out);
    if (extra1) snprintf(s[n++], 300, "%s", extra1);
    if (extra2) snprintf(s[n++], 300, "%s", extra2);
    char *sets[24];
    for (int i = 0; i < n; i++) sets[i] = s[i];
    objective_config_init(&r->oc, &objective_pgcon);
    cr_assert_eq(objective_config_load(&r->oc, NULL, sets, n), 0, "%s", er_msg());
    cr_assert_eq(objective_create(&r->oc, &r->t), 0, "%s", er_msg());
}

static void run_close(run *r) {
    r->t.free(r->t.self);
    objective_config_free(&r->oc);
    free(r->man); free(r->out);
}

static train_loop_config loop_cfg(const run *r, int64_t steps) {
    train_loop_config lc = {.steps = steps, .lr = 0.05, .min_lr = 0.05, .weight_decay = 1e-4, .eps = 1e-8,
                            .optimizer = OPTIM_SGD, .momentum = 0.9, .accum = 1, .log_every = 1, .ckpt_every = 100,
                            .out_dir = r->out, .config_text = "test"};
    return lc;
}

static tensor *bank(const run *r) {
    const param_list *pl = r->t.params;
    tensor *m = pl->t[pl->n - 1];
    cr_assert(!strcmp(m->name, "memory_bank") && !(m->flags & T_REQUIRES_GRAD));
    return m;
}

/* the loss of step 0's batch, leaving the bank as it was (a step also updates it) */
static double fixed_batch_loss(run *r, loss_terms *terms) {
    tensor *m = bank(r);
    size_t bytes = tensor_numel(m) * sizeof(float);
    float *keep = malloc(bytes);
    double v;
    int had = 0;
    for (int64_t i = 0; i < tensor_numel(m); i++) had |= m->data[i] != 0;
    memcpy(keep, m->data, bytes);
    NO_GRAD {
        tensor *l = r->t.step(r->t.self, 0, 0, terms);
        loss_terms_resolve(terms);
        cr_assert(l, "%s", er_msg());
        v = tensor_item(l);
    }
    nn_step_end();
    if (had) memcpy(m->data, keep, bytes); /* a first call fills the bank: keep that */
    free(keep);
    return v;
}

static void rows_are_unit(const tensor *m) {
    for (int64_t i = 0; i < m->shape[0]; i++) {
        double s = 0;
        for (int64_t d = 0; d < m->shape[1]; d++) s += (double)m->data[i * m->shape[1] + d] * m->data[i * m->shape[1] + d];
        cr_assert(fabs(s - 1) < 1e-5, "bank row %lld has norm^2 %g", (long long)i, s);
    }
}

Test(pgcon_train, twenty_steps_lower_the_loss_and_export_loads, .timeout = 180) {
    SLOW_TEST();
    run r;
    run_open(&r, test_tmpdir(), "run", NULL, NULL);
    loss_terms t0 = {0}, t1 = {0};
    double before = fixed_batch_loss(&r, &t0); /* also fills the bank: one pass, unit rows */
    rows_are_unit(bank(&r));
    cr_assert(isfinite(before) && t0.n == 4, "terms: %d", t0.n); /* jigsaw, memory, pos_jig, pos_mem */
    float *filled = malloc(tensor_numel(bank(&r)) * sizeof(float));
    memcpy(filled, bank(&r)->data, tensor_numel(bank(&r)) * sizeof(float));
    train_loop_config lc = loop_cfg(&r, 20);
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    double after = fixed_batch_loss(&r, &t1);
    cr_log_info("fixed-batch PGCon loss %.4f -> %.4f after 20 steps (jigsaw %.3f -> %.3f, memory %.3f -> %.3f)", before,
                after, t0.value[0], t1.value[0], t0.value[1], t1.value[1]);
    cr_assert(after < before * 0.9, "loss %.4f -> %.4f did not go down", before, after);
    /* 20 steps x 8 images touched rows of the 48-row bank; they stay unit vectors */
    rows_are_unit(bank(&r));
    int changed = 0;
    for (int64_t i = 0; i < bank(&r)->shape[0]; i++)
        changed += memcmp(filled + i * 16, bank(&r)->data + i * 16, 16 * sizeof(float)) != 0;
    cr_assert_eq(changed, 48, "%d of 48 bank rows updated by 160 draws over 3+ epochs", changed);
    /* the eval hook: weighted kNN accuracy in [0, 1] */
    char buf[256];
    cr_assert_eq(r.t.eval(r.t.self, 20, buf, sizeof buf), 0, "%s", er_msg());
    cr_assert(strstr(buf, "\"knn_acc\": "), "%s", buf);
    /* the export: the ResNet with both heads, descriptor = normalised 16-d projection, WCE input rule */
    char *path = path_join(r.out, "encoder.safetensors");
    model *m;
    cr_assert_eq(model_load(path, NULL, NULL, 0, &m), 0, "%s", er_msg());
    cr_assert_eq(m->dim, 16);
    cr_assert_eq(m->img, 32);
    model_input in = model_input_of(m);
    cr_assert(m->has_input && fabsf(in.mean[0] - 0.56f) < 1e-7 && fabsf(in.std[2] - 0.17f) < 1e-7 &&
              fabsf(in.crop - 280.0f / 336.0f) < 1e-6, "input rule %g %g %g", in.mean[0], in.std[2], in.crop);
    char d[300];
    model_describe(m, d, sizeof d);
    cr_assert(strstr(d, "PGCon projection 16-d + jigsaw head"), "%s", d);
    float x[2 * 3 * 32 * 32], e[2 * 16];
    rng_t g = rng_make(1, 0);
    for (int i = 0; i < 2 * 3 * 32 * 32; i++) x[i] = rng_normal(&g);
    cr_assert_eq(model_embed(m, x, 2, e), 0, "%s", er_msg());
    double n0 = 0;
    for (int i = 0; i < 16; i++) n0 += e[i] * e[i];
    cr_assert(fabs(n0 - 1) < 1e-5);
    model_free(m);
    free(path); free(filled);
    run_close(&r);
}

static void resume_case(const char *variant) {
    const char *d = test_tmpdir();
    run r;
    run_open(&r, d, "a", variant, NULL);
    train_loop_config lc = loop_cfg(&r, 6);
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    int64_t na, nb;
    float *a = params_snapshot(r.t.params, &na);
    run_close(&r);
    run_open(&r, d, "b", variant, NULL);
    lc = loop_cfg(&r, 6);
    lc.stop_after = 3;
    cr_assert_eq(train_loop_run(&lc, &r.t), ER_RUNTIME);
    run_close(&r);
    run_open(&r, d, "b", variant, NULL);
    lc = loop_cfg(&r, 6);
    char *ck = path_join(r.out, "checkpoint.safetensors");
    lc.resume = ck;
    cr_assert_eq(train_loop_run(&lc, &r.t), 0, "%s", er_msg());
    float *b = params_snapshot(r.t.params, &nb);
    cr_assert_eq(na, nb);
    int64_t diff = 0;
    for (int64_t i = 0; i < na; i++) diff += memcmp(&a[i], &b[i], 4) != 0;
    cr_assert_eq(diff, 0, "%s: %lld of %lld values (bank included) differ after resume", variant, (long long)diff,
                 (long long)na);
    free(a); free(b); free(ck);
    run_close(&r);
}

Test(pgcon_train, resume_is_bit_exact, .timeout = 180) {
    SLOW_TEST();
    resume_case("pgcon.variant=pgcon");
}

/* WINCon: the batch's WIN views join the negatives (more negatives: a higher loss at the same
 * weights), and the run resumes bit-exactly too */
Test(pgcon_train, wincon_adds_win_negatives_and_resumes, .timeout = 180) {
    SLOW_TEST();
    const char *d = test_tmpdir();
    run r;
    loss_terms tp = {0}, tw = {0};
    run_open(&r, d, "p", "pgcon.variant=pgcon", NULL);
    double p = fixed_batch_loss(&r, &tp);
    run_close(&r);
    run_open(&r, d, "w", "pgcon.variant=wincon", NULL);
    double w = fixed_batch_loss(&r, &tw);
    run_close(&r);
    cr_log_info("step-0 loss: PGCon %.4f, WINCon %.4f", p, w);
    cr_assert(w > p, "WIN negatives did not raise the loss: %g vs %g", w, p);
    cr_assert(tw.value[2] == tp.value[2], "same views and weights: same positive similarity");
    resume_case("pgcon.variant=wincon");
}

Test(pgcon_train, bad_config_is_one_message) {
    const char *d = test_tmpdir();
    synth_config sc = {.scenes = 2, .views = 4, .size = 48, .seed = 3, .threads = 1};
    char *sd = path_join(d, "s");
    cr_assert_eq(synth_write_dataset(sd, &sc), 0, "%s", er_msg());
    char man[400];
    snprintf(man, sizeof man, "data.manifest=%s/manifest.csv", sd);
    struct { const char *set, *want; int at_load; } cases[] = {
        {"pgcon.variant=pirl", "pgcon.variant", 1},
        {"pgcon.negatives=0", "pgcon.negatives", 1},
        {"model.jigsaw=4", "model.jigsaw = 4", 0},
        {"model.proj=0", "model.proj = 0", 0},
        {"pgcon.negatives=8", "pgcon.negatives = 8", 0}, /* 8 images: at most 7 others */
        {"train.schedule=step", "train.schedule", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        objective_config oc;
        objective_config_init(&oc, &objective_pgcon);
        char *sets[] = {man, "data.split=", "model.arch=resnet18", "model.width=8", (char *)cases[i].set};
        int rc = objective_config_load(&oc, NULL, sets, 5);
        if (!cases[i].at_load) {
            cr_assert_eq(rc, 0, "%s", er_msg());
            train_objective t;
            rc = objective_create(&oc, &t);
        } else if (!rc && !strncmp(cases[i].set, "train.", 6)) {
            train_loop_config lc;
            rc = loop_keys_to_config(&oc.loop, &lc);
        }
        cr_assert_eq(rc, ER_INPUT, "%s: rc %d", cases[i].set, rc);
        cr_assert(strstr(er_msg(), cases[i].want), "%s: %s", cases[i].set, er_msg());
        objective_config_free(&oc);
    }
    free(sd);
}

/* torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(T_0 = 50, T_mult = 2, eta_min = 1.2e-4),
 * stepped per iteration with the fractional epoch, at 10 steps per epoch: restarts at epochs 50, 150,
 * 350; mid-cycle = (base + min) / 2 */
Test(pgcon_train, cosine_with_warm_restarts) {
    lr_schedule s = {0.012, 1.2e-4, 0, 100, 500, 2};
    double mid = (0.012 + 1.2e-4) / 2;
    cr_assert_float_eq(lr_at(&s, 0), 0.012, 1e-15);
    cr_assert_float_eq(lr_at(&s, 250), mid, 1e-12);            /* half of cycle 0 (500 steps) */
    cr_assert_float_eq(lr_at(&s, 500), 0.012, 1e-15);          /* restart 1 */
    cr_assert_float_eq(lr_at(&s, 1000), mid, 1e-12);           /* half of cycle 1 (1000 steps) */
    cr_assert_float_eq(lr_at(&s, 1500), 0.012, 1e-15);         /* restart 2 */
    cr_assert_float_eq(lr_at(&s, 3500), 0.012, 1e-15);         /* restart 3 */
    cr_assert(lr_at(&s, 1499) < 1.3e-4 && lr_at(&s, 1499) > 1.2e-4);
    /* torch's closed form at an arbitrary step: epoch 73.4 -> cycle 1, T_cur 23.4, T_i 100 */
    double want = 1.2e-4 + (0.012 - 1.2e-4) * (1 + cos(M_PI * 23.4 / 100)) / 2;
    cr_assert_float_eq(lr_at(&s, 734), want, 1e-12);
    lr_schedule one = {1, 0, 0, 100, 10, 1}; /* T_mult 1: period 10 */
    cr_assert_float_eq(lr_at(&one, 25), 0.5, 1e-12);
    /* with a warm-up, the cycles start after it */
    lr_schedule w = {1, 0, 10, 100, 20, 2};
    cr_assert_float_eq(lr_at(&w, 5), 0.5, 1e-15);
    cr_assert_float_eq(lr_at(&w, 30), 1, 1e-15);
}
