/* cmd_train.c — `endoret train <objective> --config C [--set key=value ...] [--resume CKPT]`.
 * Objectives of this file: image (EndoFinder MAE + SSCD). Other objectives plug in here. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/args.h"
#include "nn/base/base.h"
#include "nn/base/config.h"
#include "train/loop.h"
#include "train/objective_image.h"

/* Pull every `--set k=v` / `--set=k=v` out of argv (they may repeat); the rest goes to args_parse. */
static int split_sets(int argc, char **argv, char ***rest, int *nrest, char ***sets, int *nsets) {
    *rest = xmalloc((argc + 1) * sizeof(char *));
    *sets = xmalloc((argc + 1) * sizeof(char *));
    *nrest = *nsets = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--set")) {
            if (i + 1 >= argc) return er_fail(ER_INPUT, "--set needs key=value");
            (*sets)[(*nsets)++] = argv[++i];
        } else if (i > 0 && !strncmp(argv[i], "--set=", 6)) {
            (*sets)[(*nsets)++] = argv[i] + 6;
        } else {
            (*rest)[(*nrest)++] = argv[i];
        }
    }
    return ER_OK;
}

/* Load config file + overrides into the image config. */
int image_cfg_from_args(image_cfg *c, const char *config, char **sets, int nsets) {
    int n;
    const cfg_spec *s = image_cfg_specs(c, &n);
    int rc = config ? cfg_load(config, s, n) : ER_OK;
    for (int i = 0; rc == ER_OK && i < nsets; i++) rc = cfg_set(sets[i], "--set", s, n);
    return rc;
}

static int train_image(int argc, char **argv) {
    char **rest, **sets;
    int nrest, nsets;
    int rc = split_sets(argc, argv, &rest, &nrest, &sets, &nsets);
    const char *config = NULL, *resume = NULL, *device = NULL, *precision = NULL;
    int quiet = 0, keys = 0, stop_after = 0;
    arg_spec specs[] = {
        {"config", ARG_STR, &config, "config file (configs/endofinder_image.cfg, configs/demo_image.cfg)"},
        {"resume", ARG_STR, &resume, "continue from a checkpoint (bit-exact)"},
        {"quiet", ARG_FLAG, &quiet, "no progress line"},
        {"keys", ARG_FLAG, &keys, "list the config keys with their defaults and exit"},
        {"stop-after", ARG_INT, &stop_after, "testing aid: stop (with a checkpoint) after N steps"},
        {"device", ARG_STR, &device, "cpu | cuda (overrides train.device)"},
        {"precision", ARG_STR, &precision, "fp32 | bf16 (overrides train.precision)"},
    };
    image_cfg c;
    image_cfg_defaults(&c);
    image_objective *o = NULL;
    char *cfg_text = NULL;
    if (!rc) {
        rc = args_parse(nrest, rest, specs, 7,
                        "endoret train image --config C [--set key=value ...] [--resume CKPT] [--device cpu|cuda] [--precision fp32|bf16]\n"
                        "  EndoFinder image encoder: MAE (lesion-guided masking) + SSCD InfoNCE/entropy", NULL, NULL);
        if (rc == ARGS_HELP) { rc = ER_OK; goto out; }
    }
    if (!rc && keys) {
        int n;
        const cfg_spec *ks = image_cfg_specs(&c, &n);
        cfg_print_keys(stdout, ks, n);
        goto out;
    }
    if (!rc && !config) rc = er_fail(ER_INPUT, "train image: --config is required (see --help)");
    if (!rc) rc = image_cfg_from_args(&c, config, sets, nsets);
    if (!rc && device) cfg_set_str(&c.device, device);
    if (!rc && precision) cfg_set_str(&c.precision, precision);
    if (!rc) {
        if (c.threads > 0) omp_set_num_threads(c.threads);
        rc = image_objective_new(&c, &o);
    }
    if (!rc) {
        int n;
        const cfg_spec *ks = image_cfg_specs(&c, &n);
        cfg_text = cfg_to_string(ks, n);
        train_objective obj = image_objective_iface(o);
        double lr = c.blr > 0 ? c.blr * c.batch * c.accum / 256.0 : c.lr;
        train_loop_config lc = {
            .steps = c.steps, .epochs = c.epochs, .warmup_steps = c.warmup_steps, .warmup_epochs = c.warmup_epochs,
            .lr = lr, .min_lr = c.min_lr, .weight_decay = c.weight_decay, .beta1 = c.beta1, .beta2 = c.beta2,
            .eps = 1e-8, .clip = c.clip, .accum = c.accum, .log_every = c.log_every, .ckpt_every = c.ckpt_every,
            .eval_every = c.eval_every, .progress = !quiet, .out_dir = c.out, .resume = resume,
            .config_text = cfg_text, .stop_after = stop_after,
        };
        vit *v = image_objective_encoder(o);
        if (!quiet)
            fprintf(stderr, "train image: %s %dx%d (dim %d, depth %d, heads %d, %lld parameters) on %s/%s, %d images, batch %d x %d views x accum %d, %lld steps/epoch, lr %.3g -> %s\n",
                    c.model.arch, c.model.img, c.model.img, v->cfg.dim, v->cfg.depth, v->cfg.heads,
                    (long long)params_numel(obj.params), c.device, c.precision, image_objective_images(o),
                    c.batch, 2, c.accum, (long long)obj.steps_per_epoch, lr, c.out);
        rc = train_loop_run(&lc, &obj);
        if (!rc && !quiet) fprintf(stderr, "done: %s/checkpoint.safetensors, %s/encoder.safetensors, %s/log.jsonl, %s/loss.svg\n", c.out, c.out, c.out, c.out);
    }
out:
    image_objective_free(o);
    free(cfg_text);
    image_cfg_free(&c);
    free(rest);
    free(sets);
    return rc;
}

int cmd_train(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: endoret train <objective> --config C [--set key=value ...] [--resume CKPT]\n"
               "objectives:\n  image   EndoFinder image encoder (ViT, MAE with lesion-guided masking + SSCD)\n");
        return argc < 2 ? ER_INPUT : ER_OK;
    }
    if (!strcmp(argv[1], "image")) return train_image(argc - 1, argv + 1);
    return er_fail(ER_INPUT, "train: unknown objective '%s' (image)", argv[1]);
}
