/* objective_scene.h — EndoFinder-Scene's objective (paper 3.4-3.6; spec endofinder_sscd_mae.md 2):
 * a frozen ViT image encoder, a trainable scene encoder and scene-aware decoder (nn/models/scene.h).
 *
 * One micro-batch: B scenes (train.batch) of V views each (scene.views; a scene with more views
 * draws V of them per step, one with fewer is not used) -> V combinations per scene: view t is held
 * out as the target, the other V-1 views' [CLS] (frozen encoder, unmasked) form the scene token
 * -> N = B V scene descriptors.
 *   contrastive : InfoNCE (tau) + entropy over the N descriptors, the V combinations of a scene are
 *                 mutual positives (SSCD's loss, per_anchor_mean 0, as the reference);
 *   reconstruction : the target view, randomly masked (scene.mask_ratio), through the frozen encoder;
 *                 the decoder reconstructs its masked patches from the scene descriptor, MSE.
 *   loss = mse_weight * MSE + con_weight * (InfoNCE + entropy_weight * entropy)   (0.5, 1, 5)
 *
 * Choices where paper and reference code differ (config keys; defaults follow the code):
 *   scene.recon = all  : every combination's target is reconstructed (the code: 4 items per scene);
 *                 one  : one randomly chosen combination per scene (the paper: "one image per scene").
 *   scene.aug   = scene: the code's own transform (crop, flip, +-15 deg rotation, jitter, grey, blur,
 *                        JPEG; datasets/augment.h aug_scene_train), no overlays, no MixUp;
 *                 advanced: the image objective's SSCD augmentation (with overlays);
 *                 mae: crop + flip (for an image encoder trained with those only); eval: resize only.
 *   scene.share_views = false : as the code, every view is augmented and encoded anew for each
 *                 combination it enters (V^2 encoder passes per scene); true (a deviation, faster):
 *                 each view is augmented and encoded once per step and reused by every combination
 *                 (2V passes per scene).
 * The encoder is frozen: its forwards run without a tape, chunk by chunk (scene.encode_batch images),
 * and only the [CLS] vectors and the targets' masked latents are kept for the trainable part.
 * Everything random derives from (seed, step, micro, sample): resume is bit-exact. */
#ifndef ENDORET_OBJECTIVE_SCENE_H
#define ENDORET_OBJECTIVE_SCENE_H

#include "nn/base/config.h"
#include "nn/models/scene_model.h"
#include "train/loop.h"
#include "train/loop_keys.h"
#include "train/objective.h"

typedef struct {
    scene_args model;              /* model.arch, scene.image_encoder, model.scene_*, model.decoder_* */
#define KEY CFG_FIELD
#include "train/scene_keys.def"    /* views, mask_ratio, recon, aug, ..., manifest, split, eval_manifest ... */
#undef KEY
} scene_cfg;

/* The registry entry (train/objective.c). */
extern const objective_def objective_scene;

#endif
