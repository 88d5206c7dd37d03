/* schedule.h — learning-rate schedules and the layer-wise lr decay of MAE / BEiT fine-tuning.
 *
 * Warm-up + cosine, per step (MAE's util/lr_sched.py with epoch = step / steps_per_epoch):
 *   step <  warmup:  lr = base_lr * step / warmup
 *   step >= warmup:  lr = min_lr + (base_lr - min_lr) * 0.5 * (1 + cos(pi * (step - warmup) / (total - warmup)))
 * so lr(0) = 0, lr(warmup) = base_lr, lr(total) = min_lr; steps past `total` stay at min_lr.
 *
 * Layer-wise lr decay (MAE util/lr_decay.py, BEiT): a ViT with `depth` blocks has
 * num_layers = depth + 1 layer ids; parameter scale = decay^(num_layers - layer_id):
 *   cls_token, pos_embed, patch_embed.*, reg_token, register_tokens, mask_token, dist_token -> 0
 *   blocks.<i>.*                                                                         -> i + 1
 *   everything else (norm, fc_norm, head, ...)                                           -> num_layers (scale 1)
 * Names may carry a prefix ("encoder.blocks.3.attn.qkv.weight", "backbone.cls_token"). */
#ifndef ENDORET_SCHEDULE_H
#define ENDORET_SCHEDULE_H

#include <stdint.h>

typedef struct {
    double base_lr, min_lr;
    int64_t warmup_steps, total_steps;
    /* Cosine with warm restarts instead of one cosine (PGCon, torch CosineAnnealingWarmRestarts
     * stepped per iteration with the fractional epoch): restart_steps = T_0 in steps (> 0 turns it
     * on), restart_mult = T_mult (>= 1). With t = step - warmup: cycle n (T_i = T_0 T_mult^n) starts at
     * T_0 (T_mult^n - 1) / (T_mult - 1) (n T_0 when T_mult = 1), and
     *   lr = min_lr + (base_lr - min_lr) (1 + cos(pi t_cur / T_i)) / 2;
     * total_steps does not end it (steps past it continue the cycle). */
    double restart_steps, restart_mult;
} lr_schedule;

double lr_at(const lr_schedule *s, int64_t step);

/* Layer id of a timm ViT parameter name for a model with `depth` blocks (see above). */
int vit_layer_id(const char *name, int depth);
/* decay^(depth + 1 - layer_id): the lr multiplier of that parameter. decay = 1 disables it. */
double layer_decay_scale(const char *name, int depth, double decay);

#endif
