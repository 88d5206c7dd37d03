/* objective_finetune.h — supervised evaluation of a pre-trained ResNet as `endoret train finetune`:
 * PGCon's linear evaluation (Table 3: a classification head on the frozen encoder) and full fine-tuning
 * (Table 4: every layer, batch norm included), spec pgcon_dual_vss.md 1.10.
 *
 * The trunk is a ResNet (nn/models/resnet.h) loaded from finetune.init (a PGCon encoder.safetensors,
 * a torchvision state dict, or nothing: random init, the "random" row); only its convolutional trunk
 * is taken (PGCon's projection heads are left out). The head is fc = Linear(features, classes)
 * (torchvision's name, so the exported file is a torchvision classifier) or the paper's "2-fc" head,
 * head.0 = Linear(features, hidden) -> ReLU -> head.2 = Linear(hidden, classes). Loss: cross-entropy
 * over the labelled rows of data.split, optionally a seeded share of each class's labels
 * (data.label_percent: the 1 % / 10 % regimes). Augmentation (spec 1.10): centre crop, resize,
 * ColorJitter(brightness 0.4, contrast 0.6), horizontal and vertical flips, the input rule's mean / std.
 * finetune.freeze: the trunk keeps its weights and its running statistics (eval-mode batch norm).
 * Evaluation: top-1 accuracy and per-class sensitivity on eval.split; the best evaluation's weights
 * are kept as <out>/best.safetensors (a copy at that step, not a reference), the last as
 * <out>/classifier.safetensors; with eval.test_split, each new best is also scored on that split
 * (the test accuracy of the model selected on eval.split: CAD-CAP's protocol). */
#ifndef ENDORET_OBJECTIVE_FINETUNE_H
#define ENDORET_OBJECTIVE_FINETUNE_H

#include "nn/models/resnet_model.h"
#include "train/objective.h"

typedef struct {
    resnet_args model;         /* model.arch, model.img, model.width (the trunk; model.proj/jigsaw unused) */
#define KEY CFG_FIELD
#include "train/finetune_keys.def" /* init, freeze, head, hidden, norm, crop, manifest, split, label_percent ... */
#undef KEY
} finetune_cfg;

extern const objective_def objective_finetune;

#endif
