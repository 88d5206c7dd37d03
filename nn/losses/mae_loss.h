/* mae_loss.h — the masked-autoencoder objective: per-sample patch masking (random, and EndoFinder's
 * lesion-guided masking), the reconstruction target and the masked-patch MSE (the decoder that
 * predicts the patches is nn/models/mae.h).
 *
 * Masking returns, per sample, a permutation ids_shuffle of the L patches (the first K are kept),
 * its inverse ids_restore, and mask[l] = 1 for removed patches in the original order, exactly as
 * MAE's random_masking does. K = mae_len_keep(L, ratio) = int(L * (1 - ratio)).
 *   random : noise ~ U[0,1) per patch (Philox stream (RNG_MASKING, step, sample)), keep smallest.
 *   guided : score = sum of the lesion-mask pixels inside the patch; patches without lesion get a
 *            random score in [0.01, 1); keep the largest scores. So every lesion patch is kept first
 *            (most-covered first) and background is masked first; a sample with no mask (or an
 *            all-background mask) is masked uniformly at random.  (EF models_EndoFinder.py)
 * Ties are broken by patch index, so the result is a pure function of (seed, step, sample). */
#ifndef ENDORET_MAE_LOSS_H
#define ENDORET_MAE_LOSS_H

#include <stdint.h>

#include "nn/tensor.h"

int mae_len_keep(int L, double mask_ratio);

/* scores: B*L lesion scores (see mae_patch_scores) or NULL for plain random masking; has_mask[b]=0
 * makes sample b random (NULL = every sample has one when scores != NULL).
 * Outputs (B*L each): ids_shuffle, ids_restore, mask (1 = removed). */
void mae_masking(int B, int L, int K, const float *scores, const uint8_t *has_mask, uint64_t seed,
                 uint64_t step, int32_t *ids_shuffle, int32_t *ids_restore, float *mask);

/* Lesion masks [B, H, W] (any values, > 0 = lesion) -> per-patch pixel sums [B, L] (patch p). */
void mae_patch_scores(const float *masks, int B, int H, int W, int p, float *scores);

/* MAE's reconstruction target: image [B,C,H,W] -> [B, L, p*p*C] in MAE's patchify order
 * (dy, dx, c); norm_pix: each patch standardised by its mean and unbiased variance (+1e-6). */
void mae_target(const float *img, int B, int C, int H, int W, int p, int norm_pix, float *out);

/* mae_target on the image tensor's device through nn/ops: img [B,C,H,W] -> [B, L, p*p*C] (view ops +
 * one strided copy; norm_pix: mean / unbiased variance over the last axis, as mae_target). */
tensor *mae_target_t(tensor *img, int p, int norm_pix);

/* sum_l mask[b,l] * mean_j (pred - target)^2 / sum mask (MSE on removed patches only), on pred's
 * device. target: a tensor on that device (mae_target_t); mask: host [B,L] (uploaded once). */
tensor *mae_loss_t(tensor *pred, tensor *target, const float *mask);
/* The same with a host target [B,L,P] (uploaded). */
tensor *mae_loss(tensor *pred, const float *target, const float *mask);

#endif
