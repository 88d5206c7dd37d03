/* Every key of every registered objective (its own + the loop's) declares a range, every default
 * lies inside it, and the values an audit found accepted (and crashing or eating memory) are now
 * refused where they are given, naming the --set, the key and the value. */
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/base/config.h"
#include "tests/test_util.h"
#include "train/objective.h"

Test(config_audit, every_key_declares_a_range_and_defaults_are_inside) {
    int n;
    const objective_def *const *all = objective_list(&n);
    cr_assert_gt(n, 0);
    for (int i = 0; i < n; i++) {
        objective_config oc;
        objective_config_init(&oc, all[i]);
        cr_expect_eq(cfg_check_ranges_declared(oc.specs, oc.nspecs), ER_OK, "%s: %s", all[i]->name, er_msg());
        cr_expect_eq(cfg_check(oc.specs, oc.nspecs, "defaults"), ER_OK, "%s: %s", all[i]->name, er_msg());
        objective_config_free(&oc);
    }
}

static void expect_refused(const char *set, const char *needle) {
    objective_config oc;
    objective_config_init(&oc, objective_find("image"));
    char *sets[1] = {(char *)set};
    cr_expect_eq(objective_config_load(&oc, NULL, sets, 1), ER_INPUT, "%s accepted", set);
    cr_expect(strstr(er_msg(), set), "'%s' does not name '%s'", er_msg(), set);
    cr_expect(strstr(er_msg(), needle), "'%s' lacks '%s'", er_msg(), needle);
    objective_config_free(&oc);
}

Test(config_audit, audited_values_are_refused_with_key_and_value) {
    expect_refused("train.accum=0", "'train.accum' = 0 is outside [1, 65536]");
    expect_refused("train.batch=2147483647", "'train.batch' = 2147483647");
    expect_refused("model.img=100000", "'model.img' = 100000");
    expect_refused("train.steps=-1", "'train.steps' = -1");
    expect_refused("train.threads=-1", "'train.threads' = -1");
    expect_refused("train.clip=-1", "'train.clip' = -1");
    expect_refused("out.ckpt_every=0", "'out.ckpt_every' = 0");
    expect_refused("out.log_every=0", "'out.log_every' = 0");
    expect_refused("train.warmup_steps=-5", "'train.warmup_steps' = -5");
    expect_refused("model.depth=-1", "'model.depth' = -1");
    expect_refused("model.patch=0", "'model.patch' = 0");
    expect_refused("train.optimizer=lamb", "one of adamw/sgd");
    expect_refused("train.device=tpu", "got 'tpu'");
    expect_refused("train.device=cuda:x", "got 'cuda:x'");
    expect_refused("aug.rotate=200", "'aug.rotate' = 200");
    expect_refused("aug.crop_min=0", "'aug.crop_min' = 0");
    expect_refused("aug.preset=strong", "aug.preset");
}

Test(config_audit, device_index_form_is_accepted_by_the_key) {
    objective_config oc;
    objective_config_init(&oc, objective_find("image"));
    char *sets[2] = {"train.device=cuda:1", "train.device=cpu"};
    cr_expect_eq(objective_config_load(&oc, NULL, sets, 2), ER_OK, "%s", er_msg());
    objective_config_free(&oc);
}

/* The footprint check runs before the manifest is read: with too little memory the run is refused
 * with the estimate; with enough, the next error is the missing manifest. */
static int create_image(const char *img, const char *limit) {
    objective_config oc;
    objective_config_init(&oc, objective_find("image"));
    char *sets[3] = {"data.manifest=/nonexistent/m.csv", (char *)img, "model.arch=vit_small"};
    cr_assert_eq(objective_config_load(&oc, NULL, sets, 3), ER_OK, "%s", er_msg());
    setenv("ENDORET_MEM_LIMIT", limit, 1);
    train_objective obj;
    int rc = objective_create(&oc, &obj);
    unsetenv("ENDORET_MEM_LIMIT");
    if (rc == ER_OK) obj.free(obj.self);
    objective_config_free(&oc);
    return rc;
}

Test(config_audit, a_run_that_cannot_fit_is_refused_with_its_estimate) {
    cr_assert_eq(create_image("model.img=2048", "64G"), ER_INPUT);
    cr_expect(strstr(er_msg(), "train image needs about"), "%s", er_msg());
    cr_expect(strstr(er_msg(), "activations"), "%s", er_msg());
    cr_expect(strstr(er_msg(), "64.0 GiB available"), "%s", er_msg());
    cr_assert_eq(create_image("model.img=224", "64G"), ER_INPUT);
    cr_expect(strstr(er_msg(), "/nonexistent/m.csv"), "enough memory: the next error is the manifest: %s", er_msg());
    cr_assert_eq(create_image("model.img=224", "1G"), ER_INPUT);
    cr_expect(strstr(er_msg(), "needs about"), "%s", er_msg());
}
