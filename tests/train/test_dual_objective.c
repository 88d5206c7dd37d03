/* `train dual` through the objective registry on tiny synthetic scenes (class = scene): 20 steps
 * lower the loss on a fixed batch, the frozen backbone stays bit-identical while the adapters move,
 * stop + --resume ends bit-identical to an uninterrupted run, the exports load through the model
 * registry, and bad config values are one ER_INPUT naming the key. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "datasets/synth.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/dual_model.h"
#include "nn/models/model.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/objective.h"

int cmd_train(int argc, char **argv); /* cli/cmd_train.c: ER_INPUT is exit 2 in main */

static char *make_data(const char *dir) {
    synth_config sc = {.scenes = 12, .views = 4, .size = 40, .seed = 5, .threads = 1};
    cr_assert_eq(synth_write_dataset(dir, &sc), 0, "%s", er_msg());
    return path_join(dir, "manifest.csv");
}

typedef struct {
    objective_config oc;
    train_objective t;
    train_loop_config lc;
} run;

static char sets_buf[16][300];

/* the tiny dual model: two depth-1 ViTs of width 32 at 28 px, LoRA r 4, a 16-d head */
static int open_run(run *r, const char *man, const char *out, int nextra, char **extra) {
    const objective_def *def = objective_find("dual");
    cr_assert_not_null(def);
    char *sets[24];
    int n = 0;
    const char *base[] = {"model.img=28", "dual.gastronet_arch=vit_tiny_patch14", "dual.dinov2_arch=vit_tiny_patch14",
                          "dual.depth=1", "dual.dinov2_registers=2", "dual.embed_dim=16", "dual.lora_r=4",
                          "data.label=scene", "train.batch=12", "train.lr=2e-3", "eval.every=0"};
    for (int i = 0; i < (int)(sizeof base / sizeof *base); i++) sets[n++] = (char *)base[i];
    snprintf(sets_buf[0], sizeof sets_buf[0], "data.manifest=%s", man);
    snprintf(sets_buf[1], sizeof sets_buf[1], "out.dir=%s", out);
    sets[n++] = sets_buf[0];
    sets[n++] = sets_buf[1];
    for (int i = 0; i < nextra; i++) sets[n++] = extra[i];
    objective_config_init(&r->oc, def);
    int rc = objective_config_load(&r->oc, "configs/dual_backbone.cfg", sets, n);
    if (!rc) rc = objective_create(&r->oc, &r->t);
    if (rc) { objective_config_free(&r->oc); return rc; }
    cr_assert_eq(loop_keys_to_config(&r->oc.loop, &r->lc), ER_OK, "%s", er_msg());
    r->lc.progress = 0;
    r->lc.log_every = 1;
    return ER_OK;
}

static void close_run(run *r) {
    r->t.free(r->t.self);
    objective_config_free(&r->oc);
}

static double fixed_batch_loss(run *r) {
    loss_terms terms = {0};
    double v = 0;
    NO_GRAD {
        tensor *l = r->t.step(r->t.self, 0, 0, &terms);
        cr_assert(l, "%s", er_msg());
        v = tensor_item(l);
    }
    nn_step_end();
    return v;
}

static float *snapshot(const param_list *pl, int64_t *n) {
    *n = params_numel(pl);
    float *buf = malloc(sizeof(float) * (size_t)*n), *p = buf;
    for (int i = 0; i < pl->n; i++) { tensor_to_host(pl->t[i], p); p += tensor_numel(pl->t[i]); }
    return buf;
}

/* miner = all: the semihard / hard losses average over the triplets the miner keeps, a set that
 * changes as the model learns (their fixed-batch value moved 0.486 -> 0.471 and 0.923 -> 0.908 here),
 * so only the all-triplets loss measures progress on a fixed batch */
Test(dual_train, twenty_steps_lower_the_loss_and_keep_the_backbone, .timeout = 240) {
    SLOW_TEST();
    const char *d = test_tmpdir();
    char *man = make_data(d), *out = path_join(d, "run");
    run r;
    cr_assert_eq(open_run(&r, man, out, 4, (char *[]){"train.steps=20", "data.aug=none", "loss.miner=all", "train.lr=2e-3"}), ER_OK, "%s", er_msg());
    int64_t n0;
    float *before_p = snapshot(r.t.params, &n0);
    double before = fixed_batch_loss(&r);
    cr_assert_eq(train_loop_run(&r.lc, &r.t), ER_OK, "%s", er_msg());
    double after = fixed_batch_loss(&r);
    cr_log_info("dual: fixed-batch triplet loss %.4f -> %.4f after 20 steps", before, after);
    cr_assert(after < 0.8 * before, "loss %.4f -> %.4f did not go down", before, after);
    int64_t n1;
    float *after_p = snapshot(r.t.params, &n1);
    cr_assert_eq(n0, n1);
    /* every tensor without a gradient (backbone, BN running stats, best map) except the BN stats is
     * bit-identical; every adapter B and the head moved */
    int64_t off = 0, frozen = 0, moved_lora = 0;
    for (int i = 0; i < r.t.params->n; i++) {
        tensor *t = r.t.params->t[i];
        int64_t m = tensor_numel(t);
        int same = !memcmp(before_p + off, after_p + off, sizeof(float) * (size_t)m);
        if (!(t->flags & T_REQUIRES_GRAD) && !strstr(t->name, "running_")) {
            cr_assert(same, "frozen tensor %s changed", t->name);
            frozen += m;
        }
        if (strstr(t->name, "lora_B")) { cr_assert(!same, "%s did not train", t->name); moved_lora++; }
        if (!strcmp(t->name, "fusion.0.weight")) cr_assert(!same, "the head did not train");
        off += m;
    }
    cr_assert(frozen > 10000 && moved_lora == 2 * (1 + 4 * 1), "frozen %lld values, %lld adapters moved", (long long)frozen,
              (long long)moved_lora);
    /* the exports */
    const char *files[] = {"dual.safetensors", "gastronet_adapter/adapter_model.safetensors",
                           "dinov2_adapter/adapter_config.json", "checkpoint.safetensors"};
    for (int i = 0; i < 4; i++) {
        char *p = path_join(out, files[i]);
        struct stat sb;
        cr_assert_eq(stat(p, &sb), 0, "%s missing", p);
        free(p);
    }
    char *p = path_join(out, "dual.safetensors");
    model *m;
    cr_assert_eq(model_load(p, NULL, NULL, 0, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m->dim, 16);
    model_free(m);
    free(p);
    free(before_p); free(after_p);
    close_run(&r);
    free(man); free(out);
}

Test(dual_train, resume_is_bit_exact_and_best_is_kept, .timeout = 240) {
    SLOW_TEST();
    const char *d = test_tmpdir();
    char *man = make_data(d), *oa = path_join(d, "a"), *ob = path_join(d, "b");
    char *extra[] = {"train.steps=6", "eval.every=2", "data.sampler=m_per_class", "data.m_per_class=3"};
    run r;
    cr_assert_eq(open_run(&r, man, oa, 4, extra), ER_OK, "%s", er_msg());
    cr_assert_eq(train_loop_run(&r.lc, &r.t), ER_OK, "%s", er_msg());
    int64_t na, nb;
    float *a = snapshot(r.t.params, &na);
    tensor *best = params_find(r.t.params, "dual.best_val_map");
    cr_assert(best && best->data[0] > 0, "best val mAP recorded");
    close_run(&r);
    cr_assert_eq(open_run(&r, man, ob, 4, extra), ER_OK, "%s", er_msg());
    r.lc.stop_after = 3;
    cr_assert_eq(train_loop_run(&r.lc, &r.t), ER_RUNTIME);
    close_run(&r);
    cr_assert_eq(open_run(&r, man, ob, 4, extra), ER_OK, "%s", er_msg());
    char *ck = path_join(ob, "checkpoint.safetensors");
    r.lc.resume = ck;
    cr_assert_eq(train_loop_run(&r.lc, &r.t), ER_OK, "%s", er_msg());
    float *b = snapshot(r.t.params, &nb);
    cr_assert_eq(na, nb);
    int64_t diff = 0;
    for (int64_t i = 0; i < na; i++) diff += memcmp(&a[i], &b[i], 4) != 0;
    cr_assert_eq(diff, 0, "%lld of %lld values differ after resume (best mAP and BN stats included)", (long long)diff,
                 (long long)na);
    char *bp = path_join(ob, "best.safetensors");
    struct stat sb;
    cr_assert_eq(stat(bp, &sb), 0, "best.safetensors written");
    free(bp); free(ck); free(a); free(b);
    close_run(&r);
    free(man); free(oa); free(ob);
}

Test(dual_train, bad_values_name_the_key) {
    const char *d = test_tmpdir();
    char *man = make_data(d), *out = path_join(d, "x");
    const char *bad[][2] = {{"loss.miner=easy", "loss.miner"},
                            {"dual.pool=max", "dual.pool"},
                            {"dual.branches=all", "dual.branches"},
                            {"dual.lora_dropout=1.5", "dual.lora_dropout"},
                            {"data.sampler=balanced", "data.sampler"},
                            {"data.m_per_class=5", "data.m_per_class"},
                            {"data.label=patient", "data.label"},
                            {"dual.gastronet=/nonexistent/g.safetensors", "dual.gastronet"},
                            {"loss.margin=-1", "loss.margin"}};
    for (int i = 0; i < (int)(sizeof bad / sizeof *bad); i++) {
        run r;
        char *extra[2] = {(char *)bad[i][0], "data.sampler=m_per_class"};
        int ne = !strncmp(bad[i][0], "data.m_per_class", 16) ? 2 : 1;
        int rc = open_run(&r, man, out, ne, extra);
        if (rc == ER_OK) close_run(&r);
        cr_assert_eq(rc, ER_INPUT, "%s accepted", bad[i][0]);
        cr_assert(strstr(er_msg(), bad[i][1]), "%s: message does not name the key: %s", bad[i][0], er_msg());
    }
    run r;
    snprintf(sets_buf[2], sizeof sets_buf[2], "data.manifest=%s/none.csv", d);
    char *extra[1] = {sets_buf[2]};
    cr_assert_eq(open_run(&r, man, out, 1, extra), ER_INPUT);
    cr_assert(strstr(er_msg(), "none.csv"), "%s", er_msg());
    free(man); free(out);
}

/* the command itself: a bad value is ER_INPUT (exit 2) naming the key, before any data is read */
Test(dual_train, command_refuses_bad_values_before_work) {
    char *a1[] = {"train", "dual", "--config", "configs/dual_backbone.cfg", "--set", "loss.miner=easy", NULL};
    cr_assert_eq(cmd_train(6, a1), ER_INPUT);
    cr_assert(strstr(er_msg(), "loss.miner") && strstr(er_msg(), "easy"), "%s", er_msg());
    char *a2[] = {"train", "dual", "--config", "configs/dual_backbone.cfg", "--set", "dual.lora_r=-1", NULL};
    cr_assert_eq(cmd_train(6, a2), ER_INPUT);
    cr_assert(strstr(er_msg(), "dual.lora_r"), "%s", er_msg());
    char *a3[] = {"train", "dual", "--config", "configs/dual_backbone.cfg", "--set", "data.manifest=/nonexistent/m.csv", NULL};
    cr_assert_eq(cmd_train(6, a3), ER_INPUT);
    cr_assert(strstr(er_msg(), "/nonexistent/m.csv"), "%s", er_msg());
}
