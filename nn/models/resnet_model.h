/* resnet_model.h — the ResNet behind the model interface (nn/models/model.h): its model.* keys
 * and the architecture entry model.c registers. Descriptor: the L2-normalised globally pooled
 * features (before fc), the embedding PGCon's retrieval uses.
 *
 * A file is recognised by torchvision's tensor names (conv1.weight, bn1.running_var,
 * layer1.0.conv1.weight); its shape says the rest (block kind from layer1.0.conv3, blocks per stage,
 * width from conv1, classes from fc), so torchvision state dicts converted to safetensors load as
 * they are. model_save writes endoret.arch. */
#ifndef ENDORET_RESNET_MODEL_H
#define ENDORET_RESNET_MODEL_H

#include "nn/base/config.h"
#include "nn/models/model.h"
#include "nn/models/resnet.h"

typedef struct {
    char *arch;   /* resnet18 | resnet34 | resnet50 | resnet101 | resnet152 */
    int img;      /* input side the descriptor is computed at */
    int width;    /* 0 = the preset's 64 */
    int classes;  /* fc outputs, 0 = no fc */
    int proj;     /* PGCon projection width (0 = none): the descriptor is then the normalised P(f(x)) */
    int jigsaw;   /* PGCon jigsaw head over this many tiles (0 = none; 9 in the paper) */
    int sync_bn;  /* data-parallel training: batch norm over the global batch (default on) */
    char *layout; /* nchw | nhwc: the activations' layout (resnet_config.layout) */
} resnet_args;

/* The network config the keys describe (the preset of model.arch with the width, heads and batch-norm
 * mode of the args): ER_INPUT for an unknown arch. */
int resnet_args_config(const resnet_args *a, resnet_config *c);
/* The trunk (no fc, no PGCon heads) a classifier is fine-tuned from: with `init` ('' or NULL: none)
 * the ResNet of that weight file (a torchvision file or a PGCon encoder.safetensors), its shapes
 * from the file and its weights loaded, *in its input rule when the file has one (else left
 * alone); else a random network of the args. sync_bn from the args either way. ER_INPUT naming
 * `what` (the init key) when the file is not a ResNet. */
int resnet_trunk_new(const resnet_args *a, const char *init, const char *what, uint64_t seed, resnet **out,
                     model_input *in);
/* A model that owns r (freed by model_free). */
model *resnet_model_wrap(resnet *r, int img);

extern const model_arch resnet_arch;

#endif
