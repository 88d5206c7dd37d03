/* objective_dual.h — `endoret train dual`: the dual-backbone retrieval model (nn/models/dual_model.h)
 * trained with the cosine triplet loss and a batch miner (nn/losses/triplet.h) on a labelled
 * manifest, model selection on validation mAP (spec section 2).
 *
 * Trainable: the LoRA adapters, the fusion head and the GeM exponents; the backbones are frozen and
 * travel in the checkpoint as buffers (saved and restored bit-exactly by --resume, never optimised),
 * as does the best validation mAP so far (dual.best_val_map), so a resumed run keeps selecting
 * against the right best.
 *
 * Writes into out.dir, besides the loop's files: dual.safetensors (the merged export at each
 * checkpoint: `endoret embed --model`), best.safetensors (the same, whenever the validation mAP
 * improves: a copy written at that moment, not a live reference as in the reference code), and
 * <branch>_adapter/ (PEFT adapter_model.safetensors + adapter_config.json) when LoRA is on. */
#ifndef ENDORET_OBJECTIVE_DUAL_H
#define ENDORET_OBJECTIVE_DUAL_H

#include "nn/models/dual_model.h"
#include "train/objective.h"

typedef struct {
    dual_args model;           /* model.arch, model.img, dual.* */
#define KEY CFG_FIELD
#include "train/dual_keys.def" /* miner, miner_margin, margin, manifest, split, val_split, label, sampler ... */
#undef KEY
} dual_cfg;

extern const objective_def objective_dual;

#endif
