/* Warm-up + cosine schedule at hand-computed points, and the layer-id map of timm ViT names. */
#include <math.h>

#include "nn/schedule.h"
#include "tests/test_util.h"

Test(optim_schedule, warmup_cosine_values) {
    lr_schedule s = {.base_lr = 1e-3, .min_lr = 1e-5, .warmup_steps = 10, .total_steps = 110};
    cr_expect_float_eq(lr_at(&s, 0), 0.0, 1e-15);
    cr_expect_float_eq(lr_at(&s, 5), 5e-4, 1e-15);          /* half-way through warm-up */
    cr_expect_float_eq(lr_at(&s, 10), 1e-3, 1e-15);         /* warm-up end = base */
    cr_expect_float_eq(lr_at(&s, 60), 5.05e-4, 1e-15);      /* cosine mid-point: (base+min)/2 */
    cr_expect_float_eq(lr_at(&s, 35), 1e-5 + 0.99e-3 * 0.5 * (1 + sqrt(0.5)), 1e-15); /* quarter: cos(pi/4) */
    cr_expect_float_eq(lr_at(&s, 110), 1e-5, 1e-15);        /* end = floor */
    cr_expect_float_eq(lr_at(&s, 500), 1e-5, 1e-15);        /* past the end stays at the floor */
    for (int t = 11; t <= 110; t++) cr_expect_leq(lr_at(&s, t), lr_at(&s, t - 1), "not decreasing at %d", t);
    lr_schedule nowarm = {.base_lr = 2.0, .min_lr = 0.0, .warmup_steps = 0, .total_steps = 4};
    cr_expect_float_eq(lr_at(&nowarm, 0), 2.0, 1e-15);
    cr_expect_float_eq(lr_at(&nowarm, 2), 1.0, 1e-15);
}

Test(optim_schedule, vit_layer_ids_as_mae) {
    const int depth = 12; /* num_layers = 13 */
    cr_expect_eq(vit_layer_id("cls_token", depth), 0);
    cr_expect_eq(vit_layer_id("pos_embed", depth), 0);
    cr_expect_eq(vit_layer_id("patch_embed.proj.weight", depth), 0);
    cr_expect_eq(vit_layer_id("reg_token", depth), 0);
    cr_expect_eq(vit_layer_id("blocks.0.norm1.weight", depth), 1);
    cr_expect_eq(vit_layer_id("blocks.3.attn.qkv.weight", depth), 4);
    cr_expect_eq(vit_layer_id("blocks.11.mlp.fc2.bias", depth), 12);
    cr_expect_eq(vit_layer_id("norm.weight", depth), 13);
    cr_expect_eq(vit_layer_id("fc_norm.bias", depth), 13);
    cr_expect_eq(vit_layer_id("head.weight", depth), 13);
    cr_expect_eq(vit_layer_id("encoder.blocks.5.attn.proj.weight", depth), 6);
    cr_expect_eq(vit_layer_id("backbone.cls_token", depth), 0);
    cr_expect_eq(vit_layer_id("blocksy.1.weight", depth), 13); /* not the "blocks" component */
    cr_expect_float_eq(layer_decay_scale("blocks.3.attn.qkv.weight", depth, 0.75), pow(0.75, 9), 1e-15);
    cr_expect_float_eq(layer_decay_scale("cls_token", depth, 0.75), pow(0.75, 13), 1e-15);
    cr_expect_float_eq(layer_decay_scale("head.bias", depth, 0.75), 1.0, 1e-15);
}
