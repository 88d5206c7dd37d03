/* The objective registry and `endoret train`: the image objective is registered; an unknown
 * objective, a bad optimizer name and momentum out of range are exit 2 with one message naming what
 * is wrong; the effective config is the objective's keys then the loop's shared keys, in the order
 * the checkpoints store; objective_create owns an objective's state, keeps its hooks and drops eval
 * without a set. */
#include <string.h>

#include "nn/base/base.h"
#include "nn/precision.h"
#include "tests/test_util.h"
#include "train/loop_keys.h"
#include "train/objective.h"

int cmd_train(int argc, char **argv);

Test(train_objective, registry_lists_and_finds) {
    int n;
    const objective_def *const *all = objective_list(&n);
    cr_assert_geq(n, 1);
    for (int i = 0; i < n; i++) {
        cr_assert(all[i]->name && all[i]->help && all[i]->create && all[i]->specs, "objective %d is incomplete", i);
        cr_assert_eq(objective_find(all[i]->name), all[i]);
    }
    cr_assert_not_null(objective_find("image"));
    cr_assert_null(objective_find("dino"));
    cr_assert(strstr(er_msg(), "unknown objective 'dino'") && strstr(er_msg(), "image"), "%s", er_msg());
    cr_assert(!strstr(er_msg(), "did you mean"), "nothing is near 'dino': %s", er_msg());
    cr_assert_null(objective_find("pgcno"));
    cr_assert(strstr(er_msg(), "did you mean 'pgcon'?"), "a misspelt objective names the near one: %s", er_msg());
}

/* train.precision is the run's setting, parsed once by the loop's keys for every objective into the
 * run (train_run.precision, the forwards' autocast scope): no objective parses it, and nothing is
 * process-wide. An unknown value is refused when the config is read, naming the key. */
Test(train_objective, precision_is_set_once_for_every_objective) {
    int n;
    const objective_def *const *all = objective_list(&n);
    for (int i = 0; i < n; i++) {
        objective_config oc;
        objective_config_init(&oc, all[i]);
        char set[] = "train.precision=bf16", *sets[1] = {set};
        cr_assert_eq(objective_config_load(&oc, NULL, sets, 1), ER_OK, "%s: %s", all[i]->name, er_msg());
        train_run run;
        cr_assert_eq(loop_keys_run(&oc.loop, &run), ER_OK, "%s: %s", all[i]->name, er_msg());
        cr_assert_eq(run.precision, ER_PREC_BF16, "%s: train.precision = bf16 not applied", all[i]->name);
        objective_config_free(&oc);
        objective_config_init(&oc, all[i]);
        char bad[] = "train.precision=fp16", *bsets[1] = {bad};
        cr_assert_eq(objective_config_load(&oc, NULL, bsets, 1), ER_INPUT, "%s: fp16 accepted", all[i]->name);
        cr_assert(strstr(er_msg(), "train.precision") && strstr(er_msg(), "fp16"), "%s", er_msg());
        objective_config_free(&oc);
    }
}

static int run_train(const char *set1, const char *set2) {
    const char *d = test_tmpdir();
    char *cfg = path_join(d, "c.cfg");
    /* a small model: the default (ViT-L, batch 32) is refused by the memory check on small machines */
    const char *text = "[model]\narch = vit_tiny\nimg = 64\n[data]\nmanifest = /nonexistent/manifest.csv\n";
    cr_assert_eq(write_file_atomic(cfg, text, strlen(text)), 0);
    char *argv[] = {"train", "image", "--config", cfg, "--set", (char *)set1, "--set", (char *)set2, "--quiet", NULL};
    int rc = cmd_train(9, argv);
    free(cfg);
    return rc;
}

Test(train_objective, bad_input_is_one_message_and_exit_2) {
    char *argv[] = {"train", "pgcom", "--config", "x.cfg", NULL};
    cr_assert_eq(cmd_train(4, argv), ER_INPUT);
    cr_assert(strstr(er_msg(), "'pgcom'") && strstr(er_msg(), "image"), "%s", er_msg());
    /* loop keys are checked before the objective reads its data (the manifest does not exist) */
    cr_assert_eq(run_train("train.optimizer=lamb", "train.steps=1"), ER_INPUT);
    cr_assert(strstr(er_msg(), "train.optimizer") && strstr(er_msg(), "lamb"), "%s", er_msg());
    cr_assert_eq(run_train("train.optimizer=sgd", "train.momentum=1"), ER_INPUT);
    cr_assert(strstr(er_msg(), "train.momentum"), "%s", er_msg());
    cr_assert_eq(run_train("train.optimizer=sgd", "train.nesterov=true"), ER_INPUT);
    cr_assert(strstr(er_msg(), "train.nesterov"), "%s", er_msg());
    cr_assert_eq(run_train("train.optimizer=adamw", "train.momentum=0.9"), ER_INPUT);
    cr_assert(strstr(er_msg(), "train.momentum"), "%s", er_msg());
    cr_assert_eq(run_train("train.accum=0", "train.steps=1"), ER_INPUT);
    cr_assert(strstr(er_msg(), "train.accum"), "%s", er_msg());
    /* good loop keys: the objective runs and names its missing manifest */
    cr_assert_eq(run_train("train.optimizer=sgd", "train.momentum=0.9"), ER_INPUT);
    cr_assert(strstr(er_msg(), "/nonexistent/manifest.csv"), "%s", er_msg());
}

/* Order of the stored config: the objective's keys, then eval.every, train.*, out.* (new keys
 * appended inside their group), and each key once. */
Test(train_objective, config_text_is_objective_then_loop_keys) {
    objective_config oc;
    objective_config_init(&oc, objective_find("image"));
    char *sets[] = {"train.optimizer=sgd", "train.momentum=0.5", "train.nesterov=true", "model.img=32"};
    cr_assert_eq(objective_config_load(&oc, NULL, sets, 4), 0, "%s", er_msg());
    char *text = objective_config_text(&oc);
    const char *order[] = {"model.arch = ", "model.img = 32\n", "eval.split = ", "eval.every = ", "train.epochs = ",
                           "train.beta2 = ", "train.optimizer = sgd\n", "train.momentum = 0.5\n",
                           "train.nesterov = true\n", "train.warmup_epochs = ", "out.dir = ", "out.ckpt_every = "};
    const char *prev = text;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *p = strstr(text, order[i]);
        cr_assert(p && p >= prev, "'%s' missing or out of order in\n%s", order[i], text);
        cr_assert_null(strstr(p + 1, order[i]), "'%s' twice", order[i]);
        prev = p;
    }
    train_loop_config lc;
    cr_assert_eq(loop_keys_to_config(&oc.loop, &lc), 0, "%s", er_msg());
    cr_assert_eq(lc.optimizer, OPTIM_SGD);
    cr_assert_eq(lc.momentum, 0.5);
    cr_assert_eq(lc.nesterov, 1);
    cr_assert_eq(lc.world_size, 1);
    /* MAE's rule: lr = blr * batch * accum / 256 */
    oc.loop.blr = 1e-3; oc.loop.batch = 64; oc.loop.accum = 2;
    cr_assert_eq(loop_keys_to_config(&oc.loop, &lc), 0, "%s", er_msg());
    cr_assert_eq(lc.lr, 1e-3 * 64 * 2 / 256.0);
    free(text);
    objective_config_free(&oc);
}

/* objective_create owns an objective's state: it allocates state_size zeroed bytes, starts the
 * interface from the objective's static hooks (kept as they are, except eval, dropped when no
 * evaluation set was loaded), and frees the state once with the hooks' free when create fails
 * half-way; objective_ready fills in steps per epoch = items / (batch x accum), at least 1, and the
 * progress rate. A fake objective, so that its hooks can count. */
typedef struct {
    int fail, items, has_eval;
} fake_cfg;
typedef struct {
    char *owned; /* allocated by create before it can fail */
    param_list params;
} fake_state;
static int fake_frees;
static void *fake_freed;
static tensor *no_step(void *self, int64_t step, int micro, loss_terms *terms) {
    (void)self, (void)step, (void)micro, (void)terms;
    return NULL;
}
static int no_eval(void *self, int64_t step, char *buf, size_t n) {
    (void)self, (void)step, (void)buf, (void)n;
    return 0;
}
static void fake_free(void *self) {
    fake_state *s = self;
    fake_frees++, fake_freed = self;
    free(s->owned);
    free(s);
}
static void fake_defaults(void *cfg, loop_keys *k) {
    ((fake_cfg *)cfg)->items = 20;
    k->batch = 4, k->accum = 2;
}
static void fake_specs(void *cfg, key_table *t) {
    fake_cfg *c = cfg;
    OBJ_KEY("fake.fail", CFG_INT, fail, "[0, 1]", "1: fail after allocating");
    OBJ_KEY("fake.items", CFG_INT, items, "[0, inf)", "training items");
    OBJ_KEY("fake.eval", CFG_INT, has_eval, "[0, 1]", "an evaluation set is loaded");
}
static int fake_create(const void *cfg, const train_run *run, void *self, train_objective *out) {
    const fake_cfg *c = cfg;
    fake_state *s = self;
    cr_assert(!s->owned && !s->params.n, "the state starts zeroed");
    cr_assert(out->self == self && out->step == no_step && out->run.batch == run->batch, "hooks, self and run are set");
    s->owned = xmalloc(64);
    if (c->fail) return er_fail(ER_INPUT, "fake: failed half-way");
    return objective_ready(out, NULL, &s->params, c->items, 2, c->has_eval);
}
static const train_objective fake_hooks = {.name = "fake", .rate_unit = "scenes", .step = no_step, .eval = no_eval,
                                           .free = fake_free, .export_name = "e.safetensors", .exports = "e.safetensors"};
static const objective_def fake_def = {.name = "fake", .help = "a test objective", .cfg_size = sizeof(fake_cfg),
                                       .defaults = fake_defaults, .specs = fake_specs, .state_size = sizeof(fake_state),
                                       .hooks = &fake_hooks, .create = fake_create};

static int fake_run(const char *items, const char *eval, const char *fail, train_objective *t) {
    objective_config oc;
    objective_config_init(&oc, &fake_def);
    char *sets[] = {(char *)items, (char *)eval, (char *)fail};
    cr_assert_eq(objective_config_load(&oc, NULL, sets, 3), 0, "%s", er_msg());
    int rc = objective_create(&oc, t);
    objective_config_free(&oc);
    return rc;
}

Test(train_objective, create_owns_the_state_keeps_the_hooks_and_drops_eval_without_a_set) {
    train_objective t;
    fake_frees = 0;
    cr_assert_eq(fake_run("fake.items=20", "fake.eval=1", "fake.fail=0", &t), 0, "%s", er_msg());
    cr_assert(t.eval == no_eval && t.step == no_step && t.free == fake_free && !strcmp(t.name, "fake"));
    cr_assert(!strcmp(t.rate_unit, "scenes") && !strcmp(t.export_name, "e.safetensors") && !strcmp(t.exports, "e.safetensors"));
    cr_assert(t.self && t.params == &((fake_state *)t.self)->params && t.run.batch == 4 && t.run.keys);
    cr_assert_eq(t.steps_per_epoch, 2, "20 items / (batch 4 x accum 2)");
    cr_assert_eq(t.images_per_step, 16, "2 views x batch 4 x accum 2");
    void *self = t.self;
    t.free(t.self);
    cr_assert(fake_frees == 1 && fake_freed == self);
    cr_assert_eq(fake_run("fake.items=3", "fake.eval=0", "fake.fail=0", &t), 0, "%s", er_msg());
    cr_assert_null(t.eval, "no evaluation set: no eval hook");
    cr_assert(t.step == no_step && t.free == fake_free);
    cr_assert_eq(t.steps_per_epoch, 1, "fewer items than a step: still one step per epoch");
    t.free(t.self);
    fake_frees = 0;
    cr_assert_eq(fake_run("fake.items=20", "fake.eval=1", "fake.fail=1", &t), ER_INPUT);
    cr_assert(strstr(er_msg(), "failed half-way"), "%s", er_msg());
    cr_assert_eq(fake_frees, 1, "a failed create's state is freed once, by the hooks' free (%d)", fake_frees);
    cr_assert(!t.self && !t.step, "a failed create leaves no interface behind");
}
