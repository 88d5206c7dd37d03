/* vit_lora.h — LoRA on a ViT (PEFT's LoraModel with target_modules = [qkv, proj, fc1, fc2]):
 * which modules get an adapter, freezing the rest, the merged export, and adapter files.
 *
 * PEFT matches a module whose name is a target or ends with "." + target; on a timm / DINO / DINOv2
 * ViT that is, in every block, attn.qkv, attn.proj, mlp.fc1, mlp.fc2, and also patch_embed.proj (a
 * Conv2d with kernel = stride = patch; PEFT's Conv2d LoRA: A = conv C -> r with the same kernel, B =
 * 1x1 conv r -> dim). Attaching freezes every tensor the ViT had (no gradient: the optimizer, weight
 * decay and clipping never see them; checkpoints still save them as buffers, nn/context.h).
 *
 * Adapter files are what PEFT's save_pretrained writes: a folder with adapter_model.safetensors
 * (tensors "base_model.model.<module>.lora_A.weight" / ".lora_B.weight", PEFT's shapes) and
 * adapter_config.json (r, lora_alpha, lora_dropout, target_modules), so
 * PeftModel.from_pretrained(vit, folder) loads it; the safetensors metadata repeats r / alpha /
 * dropout (endoret.lora.*) so a lone file is enough for lora_merge_files. */
#ifndef ENDORET_VIT_LORA_H
#define ENDORET_VIT_LORA_H

#include "nn/layers/lora.h"
#include "nn/models/vit.h"

/* Adds 1 + 4 depth adapters (patch_embed.proj first, then per block qkv, proj, fc1, fc2) to v,
 * their tensors appended to v->params as "<module>.lora_A.weight" ..., and freezes every tensor v
 * had before. ER_INPUT for a bad config (r < 1, alpha <= 0, dropout outside [0, 1)) or a second
 * attach. */
int vit_lora_attach(vit *v, const lora_config *c, uint64_t seed);
/* The PEFT module path of adapter i ("patch_embed.proj", "blocks.3.mlp.fc1") into buf. */
const char *vit_lora_module(const vit *v, int i, char *buf, size_t n);
/* A plain ViT (no adapters, nothing frozen) with W + s B A in every adapted weight: the merged
 * export. Host copy; NULL + er_msg on failure. */
vit *vit_lora_merged_copy(const vit *v);
/* Writes folder dir/adapter_model.safetensors + dir/adapter_config.json (atomic files; the folder is
 * created). */
int vit_lora_save_adapter(const vit *v, const char *dir);
/* Reads an adapter file (adapter_model.safetensors, or a folder holding it) into v's attached
 * adapters: every adapter tensor must be there with PEFT's shape, and the file may hold nothing
 * else (ER_INPUT naming the file and the tensors). r must equal the attached r. */
int vit_lora_load_adapter(vit *v, const char *path);

/* base (a weights file, e.g. timm / Meta names) + adapter (PEFT names) -> out = the base file with
 * W + (alpha / r) B A in every adapted weight, every other tensor copied (as float32), metadata
 * kept. alpha / r come from the adapter's endoret.lora.* metadata or the adapter_config.json beside
 * it. Every adapter pair must match a base weight of the right shape; anything else is ER_INPUT
 * naming the file and the tensor. Module names are relative to the wrapped ViT, so base must carry
 * timm names (convert a Meta / HF / prefixed DINO file to timm first). What `endoret convert
 * --merge-lora` calls. */
int lora_merge_files(const char *base, const char *adapter, const char *out);

#endif
