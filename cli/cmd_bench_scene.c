/* cmd_bench_scene.c — `endoret bench train --objective scene`: scenes/s of EndoFinder-Scene training
 * steps (augmentation, the frozen encoder's forwards, scene encoder + decoder forward and backward,
 * AdamW) on synthetic 4-view scenes, next to the frozen encoder's forward alone over the same number
 * of images, timed in the same run: what the scene objective adds to the encoder passes it needs.
 * The encoder is a seeded random ViT of --model (weights do not change the cost). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_bench_scene.h"
#include "datasets/synth.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "nn/models/model.h"
#include "nn/precision.h"
#include "train/loop.h"
#include "train/objective.h"

int bench_train_scene(const char *arch, int img, int patch, int batch, int steps, int share, int json,
                      const char *device, const char *precision) {
    char dir[] = "/tmp/endoret_bench_scene_XXXXXX";
    if (!mkdtemp(dir)) return er_fail(ER_RUNTIME, "bench: cannot create a temporary folder");
    char *enc = path_join(dir, "encoder.safetensors"), *man = path_join(dir, "manifest.csv"), *out = path_join(dir, "run");
    int rc = ER_OK, V = 4;
    /* data: 2 batches of scenes at the encoder's side; the encoder: a random ViT of --model */
    synth_config sc = {.scenes = 2 * batch, .views = V, .size = img, .seed = 1, .threads = omp_get_max_threads()};
    char set_img[32], set_patch[32], set_seed[] = "train.seed=1", *msets[3] = {set_img, set_seed, set_patch};
    snprintf(set_img, sizeof set_img, "model.img=%d", img);
    snprintf(set_patch, sizeof set_patch, "model.patch=%d", patch);
    model *m = NULL;
    if (!rc) rc = synth_write_dataset(dir, &sc);
    if (!rc) rc = model_create(arch, NULL, msets, patch > 0 ? 3 : 2, &m);
    if (!rc) rc = model_save(m, enc, -1);
    int dev = DEV_CPU;
    if (!rc) rc = er_device_parse(device, &dev);
    int prec = ER_PREC_FP32;
    if (!rc) rc = er_precision_parse(precision, &prec);
    if (!rc) rc = model_to_device(m, dev); /* the encoder-alone reference runs where the step runs */
    if (m) model_set_precision(m, prec);   /* ... and computes as the step does */
    objective_config oc;
    objective_config_init(&oc, objective_find("scene"));
    char s[8][512]; /* the objective sets the device and precision from its own keys */
    snprintf(s[0], 512, "scene.image_encoder=%s", enc);
    snprintf(s[1], 512, "data.manifest=%s", man);
    snprintf(s[2], 512, "data.split=");
    snprintf(s[3], 512, "train.batch=%d", batch);
    snprintf(s[4], 512, "scene.share_views=%s", share ? "true" : "false");
    snprintf(s[5], 512, "out.dir=%s", out);
    snprintf(s[6], 512, "train.device=%s", device);
    snprintf(s[7], 512, "train.precision=%s", precision);
    char *sets[8] = {s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]};
    train_objective t = {0};
    if (!rc) rc = objective_config_load(&oc, NULL, sets, 8);
    if (!rc) rc = objective_create(&oc, &t);
    double t_step = 0, t_enc = 0;
    int per_scene = share ? 2 * V : V * V; /* encoder passes per scene: inputs + targets */
    if (!rc) {
        train_loop_config lc = {.steps = 1 + steps, .warmup_steps = 0, .lr = 1e-4, .min_lr = 1e-4, .weight_decay = 0.05,
                                .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .accum = 1, .log_every = 1000,
                                .ckpt_every = 1000000, .out_dir = out, .config_text = "bench"};
        lc.stop_after = 1; /* warm-up step (arena growth), then the timed ones resumed from it */
        rc = train_loop_run(&lc, &t);
        if (rc == ER_RUNTIME && train_interrupted) { rc = ER_OK; train_interrupted = 0; }
        char *ck = path_join(out, "checkpoint.safetensors");
        lc.stop_after = 0;
        lc.resume = ck;
        double t0 = now_seconds();
        if (!rc) rc = train_loop_run(&lc, &t);
        t_step = (now_seconds() - t0) / steps;
        free(ck);
    }
    if (!rc) { /* the frozen encoder alone: forwards over the images of one step, 64 at a time */
        int n = batch * per_scene, S = m->img, cb = 64;
        float *x = xmalloc((size_t)cb * 3 * S * S * sizeof(float)), *d = xmalloc((size_t)cb * m->dim * sizeof(float));
        rng_t r = rng_make(1, 0);
        for (size_t i = 0; i < (size_t)cb * 3 * S * S; i++) x[i] = rng_normal(&r);
        model_embed(m, x, cb, d); /* warm-up */
        double t0 = now_seconds();
        for (int q = 0; q < n && !rc; q += cb) rc = model_embed(m, x, n - q < cb ? n - q : cb, d);
        t_enc = now_seconds() - t0;
        free(x); free(d);
    }
    if (!rc) {
        if (json)
            printf("{\"bench\": \"train\", \"objective\": \"scene\", \"device\": \"%s\", \"precision\": \"%s\", \"model\": \"%s\", \"img\": %d, \"batch_scenes\": %d, "
                   "\"views\": %d, \"share_views\": %s, \"threads\": %d, \"scenes_per_s\": %.3f, \"step_s\": %.3f, "
                   "\"encoder_forward_s\": %.3f, \"step_over_encoder\": %.3f}\n",
                   device, precision, arch, img, batch, V, share ? "true" : "false", omp_get_max_threads(), batch / t_step, t_step, t_enc,
                   t_step / t_enc);
        else
            printf("bench train scene: %s %dx%d encoder (frozen), %d scenes x %d views per step, %s views, %s/%s, %d threads\n"
                   "  train step   %.3f s  = %.2f scenes/s\n"
                   "  encoder only %.3f s  (%d forward passes: %d per scene)\n"
                   "  step / encoder forwards = %.2f\n",
                   arch, img, img, batch, V, share ? "shared" : "per-combination", device, precision, omp_get_max_threads(), t_step,
                   batch / t_step, t_enc, batch * per_scene, per_scene, t_step / t_enc);
    }
    if (t.free) t.free(t.self);
    objective_config_free(&oc);
    model_free(m);
    if (remove_tree(dir)) fprintf(stderr, "bench: %s\n", er_msg());
    free(enc); free(man); free(out);
    return rc;
}
