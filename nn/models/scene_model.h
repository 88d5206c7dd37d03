/* scene_model.h — EndoFinder-Scene behind the model interface (nn/models/model.h): a frozen ViT image
 * encoder plus the scene encoder of nn/models/scene.h (and, for training, its decoder).
 *
 *   descriptor       : one image -> the image encoder's L2-normalised [CLS] (as the ViT family), so
 *                      `embed` without --scene still gives per-view descriptors;
 *   scene_descriptor : the V views of one case -> their [CLS] (after the final norm) -> scene encoder
 *                      -> the L2-normalised scene descriptor (any V >= 1).
 *
 * Files: what the scene objective exports (scene_encoder.safetensors: the ViT's tensors under timm
 * names + scene_token + scene_transform.*, metadata endoret.arch = endofinder_scene, endoret.vit.*
 * and endoret.scene.*) and the reference's state dict saved as safetensors (recognised by
 * scene_token; sizes inferred from the shapes, heads = the image encoder's). The decoder is only
 * part of training checkpoints.
 *
 * Keys: model.arch = endofinder_scene; scene.image_encoder = the ViT weights file the scene model is
 * built on (required to create one); model.scene_* and model.decoder_* sizes (0 = the reference's
 * rule for the encoder's width, scene.h scene_config_default). */
#ifndef ENDORET_SCENE_MODEL_H
#define ENDORET_SCENE_MODEL_H

#include "nn/base/config.h"
#include "nn/models/model.h"
#include "nn/models/scene.h"
#include "nn/models/vit.h"

typedef struct {
    char *arch;           /* endofinder_scene */
    char *image_encoder;  /* path of the ViT file */
    int heads, head_dim, mlp;
    int dec_dim, dec_depth, dec_heads, dec_head_dim, dec_mlp;
    char *base;           /* token (the reference) | mean: scene_config.base_mean */
} scene_args;

void scene_args_defaults(scene_args *a);
const cfg_spec *scene_args_keys(scene_args *a, int *n);
void scene_args_free(scene_args *a);

/* A scene model on the host: the image encoder read from a->image_encoder (frozen: no gradient),
 * the scene encoder (and the decoder when with_decoder) initialised from seed. */
int scene_model_new(const scene_args *a, uint64_t seed, int with_decoder, model **out);
/* The parts inside (NULL for another family). */
vit *scene_model_vit(const model *m);
scene_net *scene_model_net(const model *m);
/* Everything trainable + the frozen encoder (model->params is the inference part only). */
param_list *scene_model_all_params(const model *m);

extern const model_arch scene_arch;

#endif
