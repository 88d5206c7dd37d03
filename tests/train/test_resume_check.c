/* test_resume_check.c — `--resume` with a config that is not the checkpoint's (issue 33): every
 * changed key is named with both values, keys the checkpoint cannot honour are refused naming
 * them, and a run whose last step is the checkpoint's says that nothing is left to train (exit 0,
 * nothing written) while one that ends before it is refused. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/synth.h"
#include "nn/base/base.h"
#include "tests/test_util.h"
#include "tests/train/tiny_image_cfg.h"
#include "train/loop.h"
#include "train/objective_image.h"

/* run `steps` steps of the tiny objective into out (resuming from `resume` when given) with this
 * config text; returns the loop's status, what it wrote on stderr in *err */
static int run(const char *man, const char *out, int64_t steps, const char *config, const char *resume, char **err) {
    image_cfg c;
    loop_keys k;
    tiny_image_cfg(&c, &k, man, out);
    image_objective *o;
    cr_assert_eq(image_objective_new(&c, &k, &o), 0, "%s", er_msg());
    train_objective t = image_objective_iface(o);
    train_loop_config lc = {.steps = steps, .warmup_steps = 1, .lr = 1e-3, .min_lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95,
                            .eps = 1e-8, .clip = 5, .accum = 1, .log_every = 1, .ckpt_every = 100, .out_dir = out,
                            .config_text = config, .resume = resume};
    char tmpl[] = "/tmp/endoret_err_XXXXXX";
    int fd = mkstemp(tmpl);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int rc = train_loop_run(&lc, &t);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    size_t len;
    cr_assert_eq(read_file(tmpl, err, &len), ER_OK);
    unlink(tmpl);
    image_objective_free(o);
    image_cfg_free(&c);
    loop_keys_free(&k);
    return rc;
}

static const char *CFG_RUN = "model.dim = 32\ntrain.lr = 0.0010000000000000000208\ntrain.seed = 1\ntrain.batch = 4\ntrain.steps = 2\n";

Test(train_resume, changed_keys_are_named_refused_ones_stop_and_finished_runs_say_so, .timeout = 120) {
    const char *d = test_tmpdir();
    synth_config sc = {.scenes = 4, .views = 2, .size = 32, .seed = 3, .threads = 1};
    cr_assert_eq(synth_write_dataset(d, &sc), 0, "%s", er_msg());
    char *man = path_join(d, "manifest.csv"), *out = path_join(d, "run"), *ck = path_join(out, "checkpoint.safetensors");
    char *err = NULL;
    cr_assert_eq(run(man, out, 2, CFG_RUN, NULL, &err), ER_OK, "%s", er_msg());
    free(err);
    struct stat st0, st1;
    cr_assert_eq(stat(ck, &st0), 0);

    /* the same config: no warning */
    cr_assert_eq(run(man, out, 2, CFG_RUN, ck, &err), ER_OK, "%s", er_msg());
    cr_expect(!strstr(err, "differs"), "%s", err);
    free(err);

    /* at the checkpoint's step: nothing left, exit 0, nothing written */
    cr_assert_eq(run(man, out, 2, CFG_RUN, ck, &err), ER_OK, "%s", er_msg());
    cr_expect(strstr(err, "nothing is left to train"), "%s", err);
    free(err);
    cr_assert_eq(stat(ck, &st1), 0);
    cr_expect(st0.st_mtim.tv_sec == st1.st_mtim.tv_sec && st0.st_mtim.tv_nsec == st1.st_mtim.tv_nsec,
              "the checkpoint was rewritten");

    /* before it: refused */
    cr_expect_eq(run(man, out, 1, CFG_RUN, ck, &err), ER_INPUT);
    cr_expect(strstr(er_msg(), "step 2") && strstr(er_msg(), "nothing is left to train"), "%s", er_msg());
    free(err);

    /* changed keys: each named with both values (doubles in their short form); the run goes on */
    const char *changed = "model.dim = 32\ntrain.lr = 0.002\ntrain.seed = 7\ntrain.batch = 4\ntrain.steps = 3\n";
    cr_assert_eq(run(man, out, 3, changed, ck, &err), ER_OK, "%s", er_msg());
    cr_expect(strstr(err, "train.lr: 0.001 -> 0.002"), "%s", err);
    cr_expect(strstr(err, "train.seed: 1 -> 7"), "%s", err);
    cr_expect(strstr(err, "train.steps: 2 -> 3"), "%s", err);
    cr_expect(!strstr(err, "train.batch"), "%s", err);
    free(err);

    /* the network's keys and the optimizer: refused, naming them, before anything is restored */
    const char *net = "model.dim = 64\ntrain.lr = 0.002\ntrain.seed = 7\ntrain.batch = 4\ntrain.steps = 4\ntrain.optimizer = sgd\n";
    cr_expect_eq(run(man, out, 4, net, ck, &err), ER_INPUT);
    cr_expect(strstr(er_msg(), "model.dim 32 -> 64") && strstr(er_msg(), "train.optimizer (absent) -> sgd"), "%s", er_msg());
    free(err);
    free(man), free(out), free(ck);
}
