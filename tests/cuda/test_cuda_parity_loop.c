/* test_cuda_parity_loop.c — the real training loop (train/loop.c) with real objectives on the device,
 * counting how often a step makes the host wait (the table's host_waits, written per logged step to
 * log.jsonl as host_waits_per_step on a device run):
 *   - `train image` (the tiny MAE + SSCD ViT of tests/train/tiny_image_cfg.h, AdamW, clipping): once a
 *     step, the step record's read;
 *   - `train pgcon` (a ResNet-18 of width 8, SGD, a memory bank of 48 rows): twice, the record and the
 *     download of the batch's prior embeddings that the host-side bank needs (nn/losses/memory_bank.h).
 * Both runs' losses must also be finite and logged for every step. On the CPU table (the selftest) the
 * field is absent. Skips without a GPU; runs under python3 tests/cuda/emulate.py (which links the
 * trainers for this file). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/synth.h"
#include "nn/base/base.h"
#include "tests/cuda/parity_util.h"
#include "train/loop.h"
#include "train/objective.h"
#include "train/objective_image.h"
#include "train/objective_pgcon.h"

/* Trains `steps` steps of objective `def` on 12 synthetic scenes x 4 views of 48 px with the --set
 * strings given, on the test's device; returns the log's host_waits_per_step of each step (-1 absent). */
static void run_loop(const objective_def *def, const char *const *extra, int nextra, int steps, double *waits) {
    const char *d = test_tmpdir();
    char *sd = path_join(d, "synth"), *man = path_join(sd, "manifest.csv"), *out = path_join(d, def->name);
    FILE *f = fopen(man, "r");
    if (f) fclose(f);
    else {
        synth_config sc = {.scenes = 12, .views = 4, .size = 48, .seed = 3, .threads = 1};
        cr_assert_eq(synth_write_dataset(sd, &sc), 0, "%s", er_msg());
    }
    char s[32][300];
    int n = 0;
    snprintf(s[n++], 300, "data.manifest=%s", man);
    snprintf(s[n++], 300, "data.split=");
    snprintf(s[n++], 300, "out.dir=%s", out);
    snprintf(s[n++], 300, "train.device=%s", GPU_DEV == DEV_CPU ? "cpu" : "cuda");
    snprintf(s[n++], 300, "data.prefetch=off");
    for (int i = 0; i < nextra; i++) snprintf(s[n++], 300, "%s", extra[i]);
    char *sets[32];
    for (int i = 0; i < n; i++) sets[i] = s[i];
    objective_config oc;
    train_objective t;
    objective_config_init(&oc, def);
    cr_assert_eq(objective_config_load(&oc, NULL, sets, n), 0, "%s", er_msg());
    cr_assert_eq(objective_create(&oc, &t), 0, "%s", er_msg());
    cr_assert_eq(t.params->t[0]->device, GPU_DEV, "the model is on the test's device");
    train_loop_config lc = {.steps = steps, .lr = 1e-3, .min_lr = 1e-3, .weight_decay = 1e-4, .beta1 = 0.9,
                            .beta2 = 0.95, .eps = 1e-8, .clip = 1, .accum = 1, .log_every = 1, .ckpt_every = 100,
                            .out_dir = out, .config_text = "test"};
    if (!strcmp(def->name, "pgcon")) {
        lc.optimizer = OPTIM_SGD;
        lc.momentum = 0.9;
    }
    cr_assert_eq(train_loop_run(&lc, &t), 0, "%s", er_msg());
    gpu_ok("training loop");
    t.free(t.self);
    objective_config_free(&oc);
    char *log = path_join(out, "log.jsonl"), *text = NULL;
    size_t len = 0;
    cr_assert_eq(read_file(log, &text, &len), ER_OK, "%s", er_msg());
    for (int i = 0; i < steps; i++) waits[i] = -2;
    for (char *p = text; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        long st = -1;
        double loss = NAN;
        char *q = strstr(p, "\"step\": "), *l = strstr(p, "\"loss\": "), *w = strstr(p, "\"host_waits_per_step\": ");
        if (q) st = strtol(q + 8, NULL, 10);
        if (l) loss = strtod(l + 8, NULL);
        if (st >= 1 && st <= steps && l) {
            cr_assert(isfinite(loss), "%s step %ld: loss %g", def->name, st, loss);
            waits[st - 1] = w ? strtod(w + 23, NULL) : -1;
        }
        p = nl ? nl + 1 : NULL;
    }
    for (int i = 0; i < steps; i++) cr_assert(waits[i] != -2, "%s: step %d not logged", def->name, i + 1);
    free(text), free(log), free(out), free(man), free(sd);
}

static void expect_waits(const char *name, const double *waits, int steps, double want) {
    for (int i = 0; i < steps; i++) cr_log_info("%s step %d: host waits %g", name, i + 1, waits[i]);
    for (int i = 1; i < steps; i++) { /* the first step sizes the arena (its trim waits) */
        if (GPU_DEV == DEV_CPU) cr_assert_eq(waits[i], -1, "%s: a CPU run logs no host waits", name);
        else cr_assert_eq(waits[i], want, "%s step %d: %g host waits, want %g", name, i + 1, waits[i], want);
    }
}

Test(cuda, train_image_loop_waits_once_a_step) {
    require_gpu();
    const char *extra[] = {"model.arch=vit_tiny", "model.img=16", "model.patch=4", "model.dim=32", "model.depth=1",
                           "model.heads=2", "model.head_dim=16", "decoder.dim=16", "decoder.depth=1", "decoder.heads=2",
                           "aug.preset=mae", "aug.mix_prob=0.5", "train.batch=4", "data.cache_side=20"};
    double w[3];
    run_loop(&objective_image, extra, (int)(sizeof extra / sizeof *extra), 3, w);
    expect_waits("image", w, 3, 1);
}

Test(cuda, train_pgcon_loop_waits_twice_a_step) {
    require_gpu();
    const char *extra[] = {"model.arch=resnet18", "model.width=8", "model.img=32", "model.proj=16", "pgcon.prior_out=16",
                           "pgcon.tile_out=16", "pgcon.win_out=24", "pgcon.negatives=20", "train.batch=8",
                           "eval.manifest=", "model.sync_bn=false"};
    double w[3];
    run_loop(&objective_pgcon, extra, (int)(sizeof extra / sizeof *extra), 3, w);
    expect_waits("pgcon", w, 3, 2);
}
