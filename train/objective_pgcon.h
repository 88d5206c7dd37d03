/* objective_pgcon.h — PGCon / WINCon (Vats, Mohammed, Pedersen, Sci Rep 2023): a ResNet trained
 * with a memory bank of redness-prior views, plugged into train/loop.h as `endoret train pgcon`.
 * Spec: ../shared/spec/pgcon_dual_vss.md section 1; the clean re-implementation of 1.12.
 *
 * One micro-batch of B images of the training split (datasets/augment.h pgcon_make_views):
 *   V_p  the prior view (the reddest CIELAB a* point's box, flips only)  -> z_p = P(f(V_p))
 *   V_d  9 jigsaw tiles (shared tiles clean, the others distorted)       -> z_d = Q([P(f(t_1)); ..; P(f(t_9))])
 *   W    (WINCon) the image with the prior box zeroed                     -> z_w = P(f(W))
 * with f the ResNet's pooled features, P = Linear(features, 128) shared by every view and Q =
 * Linear(9 * 128, 128) (nn/models/resnet.h). All embeddings are L2-normalised; with memory rows m_i
 * and independent draws N1, N2 of k rows other than i (nn/losses/pgcon_loss.h):
 *   L = w_jig l(z_p, z_d, N1 [+ W]) + w_mem l(z_p, m_i, N2 [+ W])         (0.5 / 0.5, tau 0.07)
 * then M_i <- normalize(0.5 M_i + 0.5 z_p,i). The bank is filled by one pass over the training split
 * (prior views, the untrained network) at the first step of a run that has none; it is a buffer of
 * the training state (`memory_bank` [N, 128]), so checkpoints carry it and --resume is bit-exact:
 * views and negatives are pure functions of (seed, step, micro, sample).
 *
 * Exports <out>/encoder.safetensors: the ResNet with its projection and jigsaw heads (torchvision
 * names + projection_original_features / connect_patches_feature), whose descriptor is the
 * normalised 128-d projection, with the WCE input rule (endoret.input.*) so `embed` evaluates it as
 * the paper does (centre crop, resize, WCE mean / std). */
#ifndef ENDORET_OBJECTIVE_PGCON_H
#define ENDORET_OBJECTIVE_PGCON_H

#include "nn/base/config.h"
#include "nn/models/resnet_model.h"
#include "train/loop.h"
#include "train/loop_keys.h"
#include "train/objective.h"

typedef struct {
    resnet_args model;             /* model.* keys (nn/models/resnet_model.h); proj 128, jigsaw 9 */
#define KEY CFG_FIELD
#include "train/pgcon_keys.def"    /* variant, negatives, momentum, tau, w_jig, w_mem, geometry, data, eval */
#undef KEY
} pgcon_cfg;

extern const objective_def objective_pgcon;

#endif
