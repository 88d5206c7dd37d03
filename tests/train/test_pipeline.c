/* The loop-owned run (issue 28): every objective trains from the double-buffered host batches
 * (train/host_batch.h), so with data.prefetch = on (the next micro-batch filled on a worker thread)
 * its weights are bit-identical to data.prefetch = off, across gradient accumulation; and `train
 * finetune` runs data parallel: 2 ranks equal 1 rank on the same global batch. The tiny configs
 * are those of tests/train/test_data_parallel.c, on 8 synthetic scenes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/safetensors.h"
#include "datasets/synth.h"
#include "nn/base/base.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "train/loop_keys.h"
#include "train/objective.h"

static const char *const CFG_IMAGE =
    "[model]\narch = vit_tiny\nimg = 16\npatch = 4\ndim = 32\ndepth = 1\nheads = 2\nhead_dim = 16\n"
    "[decoder]\ndim = 16\ndepth = 1\nheads = 2\n[aug]\npreset = mae\nmix_prob = 0.5\n"
    "[data]\nmanifest = data/manifest.csv\nsplit =\ncache_side = 20\n"
    "[train]\nsteps = 3\nbatch = 4\nseed = 1\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nwarmup_steps = 0\n";
static const char *const CFG_SCENE =
    "[model]\narch = endofinder_scene\nscene_heads = 2\ndecoder_dim = 16\ndecoder_heads = 2\n"
    "[scene]\nimage_encoder = image_off/encoder.safetensors\nviews = 2\n"
    "[data]\nmanifest = data/manifest.csv\nsplit =\ncache_side = 20\n"
    "[train]\nbatch = 4\nsteps = 3\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nwarmup_steps = 0\n";
static const char *const CFG_PGCON =
    "[model]\narch = resnet18\nwidth = 8\nimg = 64\nproj = 16\n"
    "[pgcon]\nvariant = wincon\nnegatives = 6\nprior_out = 64\ntile_out = 32\nwin_out = 64\n"
    "[data]\nmanifest = data/manifest.csv\nsplit =\n"
    "[train]\nbatch = 4\nsteps = 3\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nschedule = cosine\n";
static const char *const CFG_DUAL =
    "[model]\narch = dual_backbone\nimg = 28\n"
    "[dual]\ngastronet_arch = vit_tiny_patch14\ndinov2_arch = vit_tiny_patch14\ndepth = 1\ndinov2_registers = 2\n"
    "embed_dim = 16\nlora_r = 4\nlora_dropout = 0\n[loss]\nminer = all\n"
    "[data]\nmanifest = data/manifest.csv\nsplit =\nlabel = scene\ncache_side = 32\n"
    "[train]\nbatch = 8\nsteps = 3\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nwarmup_steps = 0\n[eval]\nevery = 0\n";
static const char *const CFG_FINETUNE =
    "[model]\narch = resnet18\nwidth = 8\nimg = 64\n[finetune]\ninit = pgcon_off/encoder.safetensors\n"
    "[data]\nmanifest = data/manifest.csv\nsplit =\n[eval]\nsplit =\nevery = 2\n"
    "[train]\nbatch = 4\nsteps = 4\noptimizer = sgd\nmomentum = 0.9\nlr = 0.01\nwarmup_steps = 0\n";

static char dir[256];

static void data_setup(void) {
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    cr_assert_eq(chdir(dir), 0);
    synth_config sc = {.scenes = 8, .views = 2, .size = 32, .seed = 3, .threads = 1};
    cr_assert_eq(synth_write_dataset("data", &sc), 0, "%s", er_msg());
}

/* Trains `name` from cfg text into out.dir = <name>_<on|off> with data.prefetch on or off and
 * accum 2 (the worker's micro-batch crosses optimizer steps); returns all tensors' values. */
static float *train_one(const char *name, const char *text, int on, int64_t *n) {
    char path[64], out[64], set_out[96], set_pf[64];
    snprintf(path, sizeof path, "%s.cfg", name);
    snprintf(out, sizeof out, "%s_%s", name, on ? "on" : "off");
    cr_assert_eq(write_file_atomic(path, text, strlen(text)), 0);
    snprintf(set_out, sizeof set_out, "out.dir=%s", out);
    snprintf(set_pf, sizeof set_pf, "data.prefetch=%s", on ? "on" : "off");
    char *sets[] = {set_out, set_pf, "train.accum=2", "train.threads=2", "out.log_every=1"};
    objective_config oc;
    objective_config_init(&oc, objective_find(name));
    cr_assert_eq(objective_config_load(&oc, path, sets, 5), 0, "%s: %s", name, er_msg());
    train_objective t;
    cr_assert_eq(objective_create(&oc, &t), 0, "%s: %s", name, er_msg());
    cr_assert_eq(t.run.prefetch, on);
    train_loop_config lc;
    cr_assert_eq(loop_keys_to_config(&oc.loop, &lc), 0, "%s", er_msg());
    lc.config_text = "test";
    cr_assert_eq(train_loop_run(&lc, &t), 0, "%s (prefetch %d): %s", name, on, er_msg());
    param_list *pl = t.params;
    *n = params_numel(pl);
    float *w = xmalloc((size_t)*n * sizeof(float)), *p = w;
    for (int i = 0; i < pl->n; i++) {
        tensor_to_host(pl->t[i], p);
        p += tensor_numel(pl->t[i]);
    }
    t.free(t.self);
    objective_config_free(&oc);
    return w;
}

Test(train_pipeline, prefetch_gives_identical_weights_for_every_objective, .timeout = 300) {
    SLOW_TEST();
    data_setup();
    const char *names[] = {"image", "scene", "pgcon", "dual", "finetune"}; /* scene and finetune load image's and pgcon's exports */
    const char *texts[] = {CFG_IMAGE, CFG_SCENE, CFG_PGCON, CFG_DUAL, CFG_FINETUNE};
    for (int o = 0; o < 5; o++) {
        int64_t n[2];
        float *w[2];
        for (int on = 0; on <= 1; on++) w[on] = train_one(names[o], texts[o], on, &n[on]);
        cr_assert_eq(n[0], n[1]);
        int64_t diff = 0;
        for (int64_t i = 0; i < n[0]; i++) diff += memcmp(&w[0][i], &w[1][i], sizeof(float)) != 0;
        cr_log_info("%s: %lld values, %lld differ with data.prefetch = on", names[o], (long long)n[0], (long long)diff);
        cr_expect_eq(diff, 0, "%s: %lld of %lld values differ with data.prefetch = on", names[o], (long long)diff,
                     (long long)n[0]);
        free(w[0]);
        free(w[1]);
    }
}
