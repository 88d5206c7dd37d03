/* model.h — the model interface and the architecture registry.
 *
 * An architecture (model_arch) is a family of models with one config struct: its name, a one-line
 * help, its `model.*` config keys (the first is always model.arch, whose value names the variant,
 * e.g. vit_large), create-from-config, recognise-a-file and load-a-file, and the instance
 * operations (descriptor forward, input resize, metadata, destroy). A model is one instance: its
 * parameter list (weights and buffers such as batch-norm running statistics), device, descriptor
 * width and input side. Users (`embed`, `bench train`, report/serve, evaluation hooks) see only
 * this header; the families register in model.c's table (docs/models.md: "add a model").
 *
 * How a file says what it holds, tried in this order by model_load:
 *   1. metadata "endoret.arch" = a model.arch value (every family added after the ViT writes it);
 *   2. a training checkpoint's "endoret.config" text: its model.arch line picks the family, its
 *      model.* lines rebuild the config (the checkpoint's other tensors are ignored);
 *   3. a family's own metadata or tensor names (recognises: the ViT's endoret.vit.* keys, timm /
 *      torchvision names of plain files);
 *   4. otherwise `arch` (the --arch option) must name the family (it also overrides 1-3).
 * A file's tensors are checked against the rebuilt model: a missing tensor or a wrong shape is
 * ER_INPUT with one message naming the file and the tensor. */
#ifndef ENDORET_MODEL_H
#define ENDORET_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoints/safetensors.h"
#include "nn/base/config.h"
#include "nn/context.h"
#include "nn/tensor.h"

typedef struct model model;

typedef struct model_arch {
    const char *name;      /* the family: "vit" */
    const char *variants;  /* model.arch values it builds, for help: "vit_tiny | vit_small | ..." */
    const char *help;      /* one line */
    const char *what;      /* the descriptor, for messages: "L2-normalised [CLS]" */
    int (*accepts)(const char *arch);            /* 1: model.arch = arch is one of our variants */
    /* The family's config struct (args_size bytes): defaults, and the model.* keys bound to it. */
    size_t args_size;
    void (*args_defaults)(void *args);
    const cfg_spec *(*keys)(void *args, int *n);
    void (*args_free)(void *args);               /* the strings the keys own */
    int (*create)(const void *args, uint64_t seed, model **out);   /* random init, on the host */
    int (*recognises)(const st_file *f);         /* 1: metadata or tensor names are ours */
    /* The model a file describes, with its weights, on the host. arch: NULL or a model.arch value
     * overriding what the file says; sets: "model.key=value" overrides of what a file cannot say
     * (the heads of a timm ViT), checked against the keys. */
    int (*load)(const st_file *f, const char *arch, char **sets, int nsets, model **out);
    /* ---- instance operations ---- */
    tensor *(*descriptor)(model *m, const nn_ctx *ctx, const float *images, int B); /* [B, dim] */
    /* Optional: the descriptor [1, dim] of one case from its V >= 1 views [V, 3, img, img] (host): a
     * family that fuses views (EndoFinder-Scene). NULL: `embed --scene` can only average. */
    tensor *(*scene_descriptor)(model *m, const nn_ctx *ctx, const float *images, int V);
    int (*set_img)(model *m, int img);           /* NULL: the input side is fixed */
    double (*forward_flops)(const model *m, int B); /* descriptor forward of B images (mul-add = 2) */
    double (*forward_bytes)(const model *m, int B); /* host bytes of that forward beyond the weights
                                                      * (vit_memory.h); NULL: not estimated */
    void (*describe)(const model *m, char *buf, size_t n); /* "vit dim 384 depth 12 ...: what" */
    void (*add_meta)(const model *m, st_writer *w);        /* what `load` needs to rebuild it */
    void (*destroy)(model *m);                   /* frees impl (which owns the tensors) */
} model_arch;

/* How a model wants its input (datasets/augment.h aug_eval_input): a centre square of `crop` times
 * the short side, resized to img x img, normalised with mean / std. Unset (has_input 0): no crop
 * and the ImageNet statistics, what every family trained here before PGCon expects. PGCon sets the
 * WCE statistics and its evaluation crop (spec pgcon_dual_vss.md 1.2, 1.9); model_save writes it as
 * endoret.input.{mean,std,crop} metadata and model_load reads it back for any family. */
typedef struct {
    float mean[3], std[3];
    float crop;            /* (0, 1] */
} model_input;

struct model {
    const model_arch *arch;
    void *impl;            /* the family's own struct (vit *) */
    param_list *params;    /* weights and buffers: what model_save writes; owned by impl */
    int dim;               /* descriptor width */
    int img;               /* input side: images are [B, 3, img, img] */
    int device;            /* DEV_CPU / DEV_CUDA */
    int precision;         /* ER_PREC_*: how its inference forwards compute (model_set_precision) */
    int has_input;         /* input below is set */
    model_input input;
};

/* m's input rule (the defaults when unset). */
model_input model_input_of(const model *m);
/* Gives m its own input rule (saved with it as endoret.input.*). */
void model_set_input(model *m, model_input in);

/* How many families are registered. */
int model_arch_count(void);
/* The family that builds model.arch = arch; NULL + ER_INPUT message listing the known ones. */
const model_arch *model_arch_find(const char *arch);

/* Rebuild a model from a safetensors file (see the header comment), on the host. arch and sets
 * (model.* overrides, see model_arch.load) may be NULL / 0. ER_INPUT with one message naming the
 * file (and the tensor or key) on any mismatch. */
int model_load(const char *path, const char *arch, char **sets, int nsets, model **out);
/* A random-init model from a config file (may be NULL) and `--set key=value` overrides: the
 * model.* keys of the family named by arch (NULL: the config's model.arch) and train.seed (the run
 * seed, the same init a training run starts from); the config's other keys are left to their
 * readers. What `embed --config` embeds with. */
int model_create(const char *arch, const char *config, char **sets, int nsets, model **out);
/* Weights and buffers + the family's metadata + format/kind/step (step < 0: none), atomically. */
int model_save(const model *m, const char *path, int64_t step);

/* Descriptors of B images [B, 3, img, img] (host floats, normalised as datasets/augment.h's
 * aug_eval) into out [B, dim] (host): eval mode, no gradient, activations released. */
int model_embed(model *m, const float *images, int B, float *out);
/* The descriptor of one case from its V views (host floats as model_embed) into out [dim]: the
 * family's scene_descriptor; ER_INPUT naming the model when it fuses no views. */
int model_embed_scene(model *m, const float *images, int V, float *out);
/* The mean of the V views' descriptors into out [dim], not renormalised (the paper's averaging
 * baseline; cosine retrieval ignores the scale): any family. */
int model_embed_mean(model *m, const float *images, int V, float *out);
int model_to_device(model *m, int device);
/* ER_PREC_FP32 (the default) | ER_PREC_BF16: the autocast scope of model_embed*'s forwards
 * (nn/layers/autocast.h); call it before model_prepack, which packs for it. */
void model_set_precision(model *m, int precision);
/* Inference only from here on: every 2-D weight also kept packed as a product operand
 * (tensor_prepack), so each forward skips repacking it; on the CPU about +50 % of those weights'
 * bytes in bf16, +100 % in fp32 (docs/gemm.md, "Frozen weights"); nothing on CUDA. Call it after
 * loading, moving and setting the precision; training the model afterwards drops the packed copies
 * step by step (optim_step), so it stays correct, only slower to start. */
int model_prepack(model *m);
/* Another input side (ER_INPUT when the family's input is fixed or the side does not fit). */
/* A new input side: outside the family's model.img range is ER_INPUT naming `what` (e.g. "--img")
 * before anything is resampled. */
int model_set_img(model *m, int img);
/* ER_OK when a descriptor forward of B images fits in the memory this machine has (nn/base/memory.h)
 * with the weights; else ER_INPUT with the estimate, naming `what` and what to lower (`hint`). Every
 * command that embeds images calls it before reading them (a 4096-pixel side asked for tens of GB
 * and aborted in the allocator). Families without forward_bytes, and models on a GPU, pass. */
int model_forward_check(const model *m, int B, const char *what, const char *hint);
void model_describe(const model *m, char *buf, size_t n);
void model_free(model *m);

#endif
