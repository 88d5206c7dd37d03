#!/usr/bin/python3
"""Position-table resampling references for tests/nn/models/test_pos_interp.c (issue 14).

Each rule is written the way the public code that trained a checkpoint calls PyTorch:
  bicubic         MAE util/pos_embed.py interpolate_pos_embed, Hugging Face Dinov2Embeddings
                  (transformers' current code): F.interpolate(size=(g, g), mode="bicubic",
                  align_corners=False)
  bicubic_aa      timm layers/pos_embed.py resample_abs_pos_embed (antialias=True by default),
                  dinov2/hub/backbones.py *_reg builders (interpolate_antialias=True,
                  interpolate_offset=0.0), HF Dinov2WithRegistersEmbeddings: the same call with
                  antialias=True
  bicubic_offset  DINO v1 vision_transformer.py and DinoVisionTransformer.interpolate_pos_encoding
                  with its default interpolate_offset=0.1 (hub builders without registers):
                  F.interpolate(scale_factor=((g + 0.1) / M, (g + 0.1) / M), mode="bicubic")
The functions below take a [1, 1 + M*M, D] table like the originals and return [1, 1 + g*g, D].

Writes tests/nn/models/pos_interp_refs.safetensors: src [1, 1 + 37*37, 6] (518 / 14 = 37, random),
and for every rule and target grid g in (16, 5): "<rule>_<g>" [1, 1 + g*g, 6] (16 = 224 / 14, the
case of issue 14; 5 shrinks hard). Also a 14 -> 16 case of each rule on a 14x14
table ("src14", "<rule>_14to16").

Run: /usr/bin/python3 tests/nn/models/make_pos_interp_refs.py
"""
import importlib.util
import math
import os

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))


def mae_rule(pos, g):
    cls, grid = pos[:, :1], pos[:, 1:]
    M, D = int(math.sqrt(grid.shape[1])), grid.shape[-1]
    grid = grid.reshape(-1, M, M, D).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(g, g), mode="bicubic", align_corners=False)
    return torch.cat((cls, grid.permute(0, 2, 3, 1).flatten(1, 2)), dim=1)


def timm_rule(pos, g, num_prefix_tokens=1):
    prefix, grid = pos[:, :num_prefix_tokens], pos[:, num_prefix_tokens:]
    M, D = int(math.sqrt(grid.shape[1])), grid.shape[-1]
    grid = grid.float().reshape(1, M, M, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(g, g), mode="bicubic", antialias=True)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, D)
    return torch.cat([prefix, grid], dim=1)


def dinov2_rule(pos, g, interpolate_offset, interpolate_antialias):
    """DinoVisionTransformer.interpolate_pos_encoding for a g*14 square image."""
    N = pos.shape[1] - 1
    class_pos_embed, patch_pos_embed = pos[:, 0], pos[:, 1:]
    dim = pos.shape[-1]
    w0 = h0 = g
    M = int(math.sqrt(N))
    kwargs = {}
    if interpolate_offset:
        sx = float(w0 + interpolate_offset) / M
        sy = float(h0 + interpolate_offset) / M
        kwargs["scale_factor"] = (sx, sy)
    else:
        kwargs["size"] = (w0, h0)
    patch_pos_embed = F.interpolate(patch_pos_embed.reshape(1, M, M, dim).permute(0, 3, 1, 2), mode="bicubic",
                                    antialias=interpolate_antialias, **kwargs)
    assert (w0, h0) == patch_pos_embed.shape[-2:]
    patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
    return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1)


RULES = {
    "bicubic": mae_rule,
    "bicubic_aa": timm_rule,
    "bicubic_offset": lambda p, g: dinov2_rule(p, g, 0.1, False),
}


def main():
    spec = importlib.util.spec_from_file_location("dv", os.path.join(here, "make_dinov2_refs.py"))
    dv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dv)
    torch.manual_seed(518)
    D = 6
    src = torch.randn(1, 1 + 37 * 37, D)
    src14 = torch.randn(1, 1 + 14 * 14, D)
    out = {"src": src, "src14": src14}
    for name, fn in RULES.items():
        for g in (16, 5):
            out["%s_%d" % (name, g)] = fn(src, g)
        out["%s_14to16" % name] = fn(src14, 16)
    # the three rules differ (what the test tells apart), and the hub reg builder is timm's rule
    d_aa = (out["bicubic_aa_16"] - out["bicubic_16"]).abs().max().item()
    d_off = (out["bicubic_offset_16"] - out["bicubic_16"]).abs().max().item()
    d_hub = (dinov2_rule(src, 16, 0.0, True) - out["bicubic_aa_16"]).abs().max().item()
    print("518 -> 224 (37 -> 16): antialias moves the table by %.3g, the 0.1 offset by %.3g; DINOv2 hub reg rule vs "
          "timm: %.3g" % (d_aa, d_off, d_hub))
    assert d_aa > 1e-3 and d_off > 1e-3 and d_hub == 0
    dv.write_safetensors(os.path.join(here, "pos_interp_refs.safetensors"), out, "F32")
    print("wrote tests/nn/models/pos_interp_refs.safetensors (%d tensors)" % len(out))


if __name__ == "__main__":
    main()
