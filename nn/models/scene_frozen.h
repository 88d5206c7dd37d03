/* scene_frozen.h — what the frozen image encoder gives a scene training step, kept on the model's
 * device (train/objective_scene.c).
 *
 * The step encodes its images chunk by chunk, and each chunk's activations die at the chunk's
 * nn_step_end(); the [CLS] rows, the masked latents and the reconstruction targets must outlive
 * that, so they live in long-lived tensors (nn/tensor.h: tensor_new_on) made once for the
 * micro-batch and written by device copies. Nothing goes through host memory: on a GPU the step
 * queues kernels and copies on one stream and never waits for the device until the loss is read.
 * On the CPU the "device" is host memory and the copies are the same memcpys as before. */
#ifndef ENDORET_SCENE_FROZEN_H
#define ENDORET_SCENE_FROZEN_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/models/vit.h"
#include "nn/tensor.h"

typedef struct {
    tensor *cls;     /* [n_inputs, D]: the input images' [CLS] after the final norm */
    tensor *latent;  /* [nrec, 1 + R + K, D]: the masked targets' encoder outputs (NULL: nrec = 0) */
    tensor *target;  /* [nrec, L, p*p*C]: their reconstruction targets in MAE's patch order (NULL: nrec = 0) */
} scene_frozen;

/* Long-lived buffers on enc's device for n_inputs [CLS] rows and nrec masked targets of K kept
 * patches each (nrec 0: no reconstruction). ER_OK or an er_fail code. */
int scene_frozen_new(scene_frozen *f, const vit *enc, int n_inputs, int nrec, int K);
void scene_frozen_free(scene_frozen *f);

/* Run with recording off (NO_GRAD); img [nb, C, S, S] on enc's device (a chunk of the batch).
 * scene_frozen_cls: the [CLS] of img into cls rows q0 .. q0 + nb. scene_frozen_masked: the masked
 * forward (keep: nb * K host patch indices, the kept ones first in shuffle order) into latent rows
 * q0 .. q0 + nb, and img's reconstruction targets (no pixel normalisation) into target's. */
int scene_frozen_cls(scene_frozen *f, vit *enc, const nn_ctx *ctx, tensor *img, int q0);
int scene_frozen_masked(scene_frozen *f, vit *enc, const nn_ctx *ctx, tensor *img, const int32_t *keep, int K, int q0);

/* The scene encoder's input for b scenes of V views, a per-step tensor [b V, V - 1, D]:
 * combination i = j V + t (t held out) sees the other views u != t of scene j in order of u.
 * shared: cls holds each view once (row j V + u), gathered by 2 (V - 1) strided device copies;
 * else cls already holds every combination's views in that order (row i (V - 1) + w): a view. */
tensor *scene_frozen_views(const scene_frozen *f, int b, int V, int shared);

#endif
