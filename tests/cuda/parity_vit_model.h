/* parity_vit_model.h — the EndoFinder model the device tests train: a ViT (16 px images, 4 px patches,
 * dim 32, 2 blocks, 2 heads) + MAE decoder + SSCD head on one device, AdamW over all of it, built
 * from the same Philox streams on either device (so CPU and CUDA start bit-identical). Used by
 * test_cuda_parity.c (against the CPU) and test_cuda_parity_step.c (the one-wait step). */
#ifndef ENDORET_PARITY_VIT_MODEL_H
#define ENDORET_PARITY_VIT_MODEL_H

#include <string.h>

#include "nn/layers/sscd_head.h"
#include "nn/models/mae.h"
#include "nn/models/vit.h"
#include "nn/optim.h"
#include "tests/cuda/parity_util.h"

#define MB 4      /* images: 2 instances x 2 views */
#define MIMG 16
#define MP 4

typedef struct {
    vit *enc;
    mae_decoder dec;
    sscd_head head;
    param_list all;
    optimizer *opt;
} model_on;

static inline void model_build(model_on *m, int dev) {
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_tiny", &c), ER_OK);
    c.img = MIMG; c.patch = MP; c.dim = 32; c.depth = 2; c.heads = 2;
    memset(m, 0, sizeof *m);
    m->enc = vit_new_on(dev, &c, 11);
    cr_assert_not_null(m->enc, "vit_new_on(%d): %s", dev, er_msg());
    for (int i = 0; i < m->enc->params.n; i++) params_add(&m->all, m->enc->params.t[i]);
    cr_assert_eq(mae_decoder_init_on(dev, &m->dec, &c, 16, 1, 2, 12, &m->all), ER_OK, "%s", er_msg());
    cr_assert_eq(sscd_head_init_on(dev, &m->head, 32, 16, 13, &m->all), ER_OK, "%s", er_msg());
    for (int i = 0; i < m->all.n; i++) cr_assert_eq(m->all.t[i]->device, dev, "%s not moved", m->all.t[i]->name);
    optim_config oc = {.kind = OPTIM_ADAMW, .lr = 3e-3, .weight_decay = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    m->opt = optim_new(&oc, &m->all);
    cr_assert_not_null(m->opt, "%s", er_msg());
}

static inline void model_free(model_on *m) {
    optim_free(m->opt);
    for (int i = m->enc->params.n; i < m->all.n; i++) tensor_free(m->all.t[i]);
    free(m->all.t);
    mae_decoder_free(&m->dec);
    vit_free(m->enc);
}

#endif
