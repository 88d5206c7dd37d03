/* tiny_image_cfg.h — the smallest MAE+SSCD image objective (its keys and the loop keys it reads) the endofinder tests train (ViT with one
 * block of width 32 on 16x16 crops, decoder 16/1/2, batch 4): shared by test_train.c and
 * test_device.c so both exercise the same model. Callers change what their test is about. */
#ifndef ENDORET_TESTS_TINY_IMAGE_CFG_H
#define ENDORET_TESTS_TINY_IMAGE_CFG_H

#include "train/objective_image.h"

static inline void tiny_image_cfg(image_cfg *c, loop_keys *k, const char *manifest, const char *out) {
    image_cfg_defaults(c);
    loop_keys_defaults(k, "image");
    image_loop_defaults(k);
    cfg_set_str(&c->model.arch, "vit_tiny");
    c->model.img = 16; c->model.patch = 4; c->model.dim = 32; c->model.depth = 1; c->model.heads = 2; c->head_dim = 16;
    c->dec_dim = 16; c->dec_depth = 1; c->dec_heads = 2;
    cfg_set_str(&c->manifest, manifest);
    cfg_set_str(&c->split, "");
    cfg_set_str(&c->aug, "mae");
    cfg_set_str(&k->out, out);
    k->batch = 4; c->mix_prob = 0.5; k->seed = 1; c->cache_side = 20;
}

#endif
