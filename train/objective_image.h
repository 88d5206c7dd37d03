/* objective_image.h — EndoFinder's image-encoder objective: MAE (random or lesion-guided masking)
 * + SSCD InfoNCE/entropy on two augmented views of every image, plugged into train/loop.h.
 *
 * One micro-batch: B images of the training split -> 2 views each (SSCD ADVANCED augmentation or
 * MAE crop+flip, masks carried through the geometry) ordered [view 0 of all B; view 1 of all B];
 * with data.positives = views the second copy is another view of the image's scene (a multi-view
 * manifest's scene column: positives across camera poses, a use of the scene labels SSCD does not make)
 * -> MixUp/CutMix on the 2B views (extra positives) -> per-sample masking -> ViT on the kept
 * patches -> MAE decoder + masked MSE, and [CLS] -> head -> L2 norm -> InfoNCE + entropy.
 * loss = w_mae * MSE + w_con * (InfoNCE + entropy_weight * entropy)   (EF: 0.5, 1, 5, tau 0.05)
 * Everything random derives from (seed, step, micro, sample): resume is bit-exact. */
#ifndef ENDORET_OBJECTIVE_IMAGE_H
#define ENDORET_OBJECTIVE_IMAGE_H

#include "nn/base/config.h"
#include "nn/models/vit_model.h"
#include "train/loop.h"
#include "train/loop_keys.h"
#include "train/objective.h"

typedef struct {
    vit_args model;                /* the encoder's model.* keys (nn/models/vit_model.h) */
#define KEY CFG_FIELD              /* head_dim, decoder, MAE, losses, aug, positives, data, eval (the KEY rows) */
#define VIEW_KEY(...)
#include "train/image_keys.def"
#undef KEY
#undef VIEW_KEY
    struct {                       /* aug.preset = views: the aug.* strengths (datasets/augment.h aug_view_params) */
#define KEY(...)
#define VIEW_KEY CFG_FIELD
#include "train/image_keys.def"
#undef KEY
#undef VIEW_KEY
    } view;
} image_cfg;

/* Defaults = the paper's settings (configs/endofinder_image.cfg spells them out). */
void image_cfg_defaults(image_cfg *c);
/* The paper's values of the shared loop keys (AdamW beta2 0.95, lr 1.25e-4, 5 warm-up epochs...). */
void image_loop_defaults(loop_keys *k);
/* The objective's own key table bound to c (n receives its length); the loop's keys (eval.every,
 * train.*, out.*) are in train/loop_keys.h. */
const cfg_spec *image_cfg_specs(image_cfg *c, int *n);
void image_cfg_free(image_cfg *c);

typedef struct image_objective image_objective;
/* Checks train.device / train.precision (of k) first (ER_INPUT with one message when the device cannot be
 * used: before any other work), sets the process-wide precision, builds the model (seeded, on the
 * host, then moved to the device) and loads the training data. */
int image_objective_new(const image_cfg *c, const loop_keys *k, image_objective **out);
void image_objective_free(image_objective *o);
train_objective image_objective_iface(image_objective *o);
param_list *image_objective_params(image_objective *o);

/* The registry entry (train/objective.c). */
extern const objective_def objective_image;

#endif
