/* checkpoint.h — a whole training state in ONE safetensors file (checkpoints/safetensors.h).
 *
 * Tensors (all little-endian; PyTorch reads them with safetensors.torch.load_file):
 *   <param name>              F32, the parameter's shape, timm naming ("blocks.0.attn.qkv.weight")
 *   optim.<param name>.m      F32, AdamW first moment   (AdamW only)
 *   optim.<param name>.v      F32, AdamW second moment  (AdamW only)
 *   optim.<param name>.momentum F32, SGD momentum buffer (SGD with momentum only)
 *   optim.step                I64 [1], optimizer updates done (AdamW bias correction)
 *   train.step                I64 [1], the training loop's step counter
 * Metadata (__metadata__, string -> string):
 *   format = "pt"                        (what the HF tooling expects)
 *   endoret.kind = "train_state" | "weights"
 *   endoret.optimizer = "adamw" | "sgd"  (when optimizer state is present)
 *   endoret.rng = "<seed> <stream> <index>" (decimal; the sequential generator, nn/base/rng.h)
 *   endoret.config = the run's config text (verbatim)
 *   endoret.world_size = "<N>"           (data-parallel runs only: N > 1 processes)
 * Frozen parameters are saved as weights but have no optimizer tensors.
 *
 * Loading checks every name, shape and dtype BEFORE changing anything: a missing or mis-shaped
 * tensor, an unexpected tensor (strict mode), an optimizer of another kind, a non-finite weight or a
 * truncated/garbled file gives ER_INPUT with one message naming the file and the tensor, and the
 * model is left untouched. F16/BF16/F64 weights are converted to fp32 on load. */
#ifndef ENDORET_CHECKPOINT_H
#define ENDORET_CHECKPOINT_H

#include <stdint.h>

#include "nn/optim.h"
#include "nn/base/rng.h"
#include "nn/tensor.h"

typedef struct {
    const param_list *params; /* required */
    optimizer *opt;           /* NULL: weights only */
    int64_t step;             /* training step (saved / restored) */
    rng_t *rng;               /* NULL: none */
    const char *config;       /* save: text stored in metadata (NULL: none) */
    int world_size;           /* save: > 1 is stored as endoret.world_size (0/1: nothing) */
} ckpt_state;

int ckpt_save(const char *path, const ckpt_state *s);

enum {
    CKPT_STRICT = 0,       /* every tensor of the file must be used, optimizer state required when s->opt */
    CKPT_WEIGHTS_ONLY = 1, /* load parameters only; optimizer/step/rng in the file are ignored */
    CKPT_ALLOW_EXTRA = 2,  /* tensors of the file that the model does not have are ignored */
};

/* Restores parameters (and, unless CKPT_WEIGHTS_ONLY, optimizer state, s->step, *s->rng).
 * config_out (may be NULL) receives a malloc'd copy of the stored config text, or NULL. */
int ckpt_load(const char *path, ckpt_state *s, int flags, char **config_out);

#endif
