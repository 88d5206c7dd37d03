#!/usr/bin/python3
"""One tiny ViT per public weight layout, each with the output of a plain PyTorch forward written from
that code's public definition, for tests/nn/models/test_vit_layouts.c (issue 14). Independent of
nn/models/*.c: the names, the token order, the position-table rule and the MLP are each layout's own.

  layout_meta_g.safetensors   facebookresearch/dinov2 DinoVisionTransformer as dinov2_vitg14_reg builds
                              it: 4 register_tokens, LayerScale (ls1/ls2.gamma), ffn_layer="swiglufused"
                              (SwiGLUFFNFused: hidden = (int(2/3 * 4 * D) + 7) // 8 * 8, w12 -> chunk(2) ->
                              silu(x1) * x2 -> w3), block_chunks = 2 (names blocks.0.0.*, blocks.1.1.*:
                              BlockChunk pads with Identity), mask_token, a 37x37 table (img_size 518).
                              Reference at 224 (16x16): interpolate_pos_encoding with the hub reg
                              settings (interpolate_antialias=True, interpolate_offset=0.0)
  layout_hf_reg.safetensors   Hugging Face Dinov2WithRegistersModel state dict: embeddings.{cls_token,
                              mask_token, register_tokens, position_embeddings, patch_embeddings.projection},
                              encoder.layer.N.{norm1, attention.attention.{query,key,value},
                              attention.output.dense, layer_scale1.lambda1, norm2, mlp.weights_in/weights_out
                              (Dinov2SwiGLUFFN, use_swiglu_ffn=True), layer_scale2.lambda1}, layernorm; a
                              4x4 table (56). Reference at 56 and at 84 (6x6: size=, antialias=True)
  layout_hf_plain.safetensors Hugging Face Dinov2Model: no registers, Dinov2MLP (mlp.fc1/fc2); a 4x4 table.
                              Reference at 84 (size=, no antialias: transformers' Dinov2Embeddings)
  layout_dinov1.safetensors   facebookresearch/dino VisionTransformer (patch 16, no LayerScale, no
                              registers) as a teacher checkpoint: backbone.* plus the DINOHead (head.mlp.*,
                              head.last_layer.weight_g/_v); a 7x7 table (112). Reference at 64 (4x4:
                              scale_factor = (4 + 0.1) / 7, bicubic, no antialias)
  layout_timm_reg.safetensors timm vit_*_reg4_dinov2: reg_token, pos_embed of the patches only
                              (no_embed_class=True), blocks.N.ls1.gamma; a 5x5 table (70). Reference at 98
                              (7x7: resample_abs_pos_embed(num_prefix_tokens=0), antialias=True)
  layout_refs.safetensors     "<tag>_cls_<img>": x_norm_clstoken (the [CLS] after the final norm) [2, 32]

All models: D 32, 2 heads of 16 (the files cannot say it: the test passes model.heads=2), depth 2, LN eps
1e-6, weights stored F16 (the references run on the same rounded values). Inputs are not stored: image b,
channel c, row h, column w of an img x img batch of 2 is sin(0.0137 i) + 0.5 cos(0.291 i) with
i = ((b * 3 + c) * img + h) * img + w, rounded to float32 (the C test computes the same).

Run: /usr/bin/python3 tests/nn/models/make_layout_refs.py
"""
import importlib.util
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
D, HEADS, DEPTH, EPS = 32, 2, 2, 1e-6


def images(img, B=2):
    i = np.arange(B * 3 * img * img, dtype=np.float64)
    return torch.from_numpy((np.sin(0.0137 * i) + 0.5 * np.cos(0.291 * i)).astype(np.float32)).reshape(B, 3, img, img)


def rand(shape, kind):
    if kind == "ln_w":
        return 1.0 + 0.1 * torch.randn(shape)
    if kind == "small":
        return 0.05 * torch.randn(shape)
    if kind == "token":
        return 0.5 * torch.randn(shape)
    if kind == "ls":
        return 0.5 + 0.1 * torch.randn(shape)
    fan_in = int(np.prod(shape[1:]))
    return torch.randn(shape) * fan_in ** -0.5


def f16(sd):
    return {k: v.half().float() for k, v in sd.items()}


def attention(h, qkv_w, qkv_b, proj_w, proj_b):
    B, N, C = h.shape
    qkv = F.linear(h, qkv_w, qkv_b).reshape(B, N, 3, HEADS, C // HEADS).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0] * (C // HEADS) ** -0.5, qkv[1], qkv[2]
    a = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    return F.linear((a @ v).transpose(1, 2).reshape(B, N, C), proj_w, proj_b)


def swiglu_hidden(dim):
    return (int(4 * dim * 2 / 3) + 7) // 8 * 8  # SwiGLUFFNFused / Dinov2SwiGLUFFN


# ---------------------------------------------------------------- Meta DINOv2, ViT-g style, chunked


def make_meta_g():
    Hs = swiglu_hidden(D)
    sd = {"cls_token": rand((1, 1, D), "token"), "register_tokens": rand((1, 4, D), "token"),
          "pos_embed": rand((1, 1 + 37 * 37, D), "token"), "mask_token": rand((1, D), "token"),
          "patch_embed.proj.weight": rand((D, 3, 14, 14), "w"), "patch_embed.proj.bias": rand((D,), "small"),
          "norm.weight": rand((D,), "ln_w"), "norm.bias": rand((D,), "small")}
    for n in range(DEPTH):
        b = "blocks.%d.%d." % (n * 2 // DEPTH, n)  # block_chunks = 2: chunk c holds blocks c*depth/2 ...
        sd.update({b + "norm1.weight": rand((D,), "ln_w"), b + "norm1.bias": rand((D,), "small"),
                   b + "attn.qkv.weight": rand((3 * D, D), "w"), b + "attn.qkv.bias": rand((3 * D,), "small"),
                   b + "attn.proj.weight": rand((D, D), "w"), b + "attn.proj.bias": rand((D,), "small"),
                   b + "ls1.gamma": rand((D,), "ls"), b + "norm2.weight": rand((D,), "ln_w"),
                   b + "norm2.bias": rand((D,), "small"), b + "mlp.w12.weight": rand((2 * Hs, D), "w"),
                   b + "mlp.w12.bias": rand((2 * Hs,), "small"), b + "mlp.w3.weight": rand((D, Hs), "w"),
                   b + "mlp.w3.bias": rand((D,), "small"), b + "ls2.gamma": rand((D,), "ls")})
    return f16(sd)


def meta_interpolate_pos_encoding(pos_embed, npatch_side, interpolate_offset, interpolate_antialias):
    """DinoVisionTransformer.interpolate_pos_encoding (dinov2/models/vision_transformer.py)"""
    N = pos_embed.shape[1] - 1
    if npatch_side * npatch_side == N:
        return pos_embed
    class_pos_embed, patch_pos_embed = pos_embed[:, 0], pos_embed[:, 1:]
    dim = pos_embed.shape[-1]
    w0 = h0 = npatch_side
    M = int(math.sqrt(N))
    kwargs = {}
    if interpolate_offset:
        kwargs["scale_factor"] = (float(w0 + interpolate_offset) / M, float(h0 + interpolate_offset) / M)
    else:
        kwargs["size"] = (w0, h0)
    patch_pos_embed = F.interpolate(patch_pos_embed.reshape(1, M, M, dim).permute(0, 3, 1, 2), mode="bicubic",
                                    antialias=interpolate_antialias, **kwargs)
    assert (w0, h0) == patch_pos_embed.shape[-2:]
    patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
    return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1)


def meta_g_cls(sd, x):
    B, _, img, _ = x.shape
    t = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=14).flatten(2).transpose(1, 2)
    t = torch.cat((sd["cls_token"].expand(B, -1, -1), t), dim=1)
    t = t + meta_interpolate_pos_encoding(sd["pos_embed"], img // 14, 0.0, True)
    t = torch.cat((t[:, :1], sd["register_tokens"].expand(B, -1, -1), t[:, 1:]), dim=1)
    for n in range(DEPTH):
        b = "blocks.%d.%d." % (n * 2 // DEPTH, n)
        h = F.layer_norm(t, (D,), sd[b + "norm1.weight"], sd[b + "norm1.bias"], EPS)
        t = t + sd[b + "ls1.gamma"] * attention(h, sd[b + "attn.qkv.weight"], sd[b + "attn.qkv.bias"],
                                               sd[b + "attn.proj.weight"], sd[b + "attn.proj.bias"])
        h = F.layer_norm(t, (D,), sd[b + "norm2.weight"], sd[b + "norm2.bias"], EPS)
        x12 = F.linear(h, sd[b + "mlp.w12.weight"], sd[b + "mlp.w12.bias"])
        x1, x2 = x12.chunk(2, dim=-1)
        t = t + sd[b + "ls2.gamma"] * F.linear(F.silu(x1) * x2, sd[b + "mlp.w3.weight"], sd[b + "mlp.w3.bias"])
    return F.layer_norm(t, (D,), sd["norm.weight"], sd["norm.bias"], EPS)[:, 0]


# ---------------------------------------------------------------- Hugging Face Dinov2WithRegisters


def make_hf(registers=True):
    Hs = swiglu_hidden(D)
    e = "embeddings."
    sd = {e + "cls_token": rand((1, 1, D), "token"), e + "mask_token": rand((1, D), "token"),
          e + "position_embeddings": rand((1, 1 + 16, D), "token"),
          e + "patch_embeddings.projection.weight": rand((D, 3, 14, 14), "w"),
          e + "patch_embeddings.projection.bias": rand((D,), "small"),
          "layernorm.weight": rand((D,), "ln_w"), "layernorm.bias": rand((D,), "small")}
    for n in range(DEPTH):
        b = "encoder.layer.%d." % n
        for nm in ("query", "key", "value"):
            sd[b + "attention.attention.%s.weight" % nm] = rand((D, D), "w")
            sd[b + "attention.attention.%s.bias" % nm] = rand((D,), "small")
        sd.update({b + "norm1.weight": rand((D,), "ln_w"), b + "norm1.bias": rand((D,), "small"),
                   b + "attention.output.dense.weight": rand((D, D), "w"),
                   b + "attention.output.dense.bias": rand((D,), "small"),
                   b + "layer_scale1.lambda1": rand((D,), "ls"), b + "norm2.weight": rand((D,), "ln_w"),
                   b + "norm2.bias": rand((D,), "small"), b + "layer_scale2.lambda1": rand((D,), "ls")})
        if registers:  # the with-registers file: use_swiglu_ffn=True (Dinov2SwiGLUFFN)
            sd.update({b + "mlp.weights_in.weight": rand((2 * Hs, D), "w"), b + "mlp.weights_in.bias": rand((2 * Hs,), "small"),
                       b + "mlp.weights_out.weight": rand((D, Hs), "w"), b + "mlp.weights_out.bias": rand((D,), "small")})
        else:  # Dinov2MLP
            sd.update({b + "mlp.fc1.weight": rand((4 * D, D), "w"), b + "mlp.fc1.bias": rand((4 * D,), "small"),
                       b + "mlp.fc2.weight": rand((D, 4 * D), "w"), b + "mlp.fc2.bias": rand((D,), "small")})
    if registers:
        sd[e + "register_tokens"] = rand((1, 4, D), "token")
    return f16(sd)


def hf_cls(sd, x):
    """Dinov2WithRegistersEmbeddings (or Dinov2Embeddings without registers: size=, no antialias) +
    Dinov2Layer (SelfAttention with separate query/key/value, SelfOutput dense, LayerScale lambda1,
    SwiGLUFFN weights_in/weights_out or Dinov2MLP fc1/fc2) + layernorm, [CLS]."""
    registers = "embeddings.register_tokens" in sd
    B, _, img, _ = x.shape
    e = "embeddings."
    t = F.conv2d(x, sd[e + "patch_embeddings.projection.weight"], sd[e + "patch_embeddings.projection.bias"],
                 stride=14).flatten(2).transpose(1, 2)
    t = torch.cat((sd[e + "cls_token"].expand(B, -1, -1), t), dim=1)
    pos = sd[e + "position_embeddings"]
    g = img // 14
    if g * g != pos.shape[1] - 1:
        M = int(math.sqrt(pos.shape[1] - 1))
        pp = pos[:, 1:].reshape(1, M, M, D).permute(0, 3, 1, 2)
        pp = F.interpolate(pp.to(torch.float32), size=(g, g), mode="bicubic", align_corners=False, antialias=registers)
        pos = torch.cat((pos[:, 0].unsqueeze(0), pp.permute(0, 2, 3, 1).view(1, -1, D)), dim=1)
    t = t + pos
    if registers:
        t = torch.cat((t[:, :1], sd[e + "register_tokens"].expand(B, -1, -1), t[:, 1:]), dim=1)
    for n in range(DEPTH):
        b = "encoder.layer.%d." % n
        h = F.layer_norm(t, (D,), sd[b + "norm1.weight"], sd[b + "norm1.bias"], EPS)
        N = h.shape[1]

        def heads(nm):
            y = F.linear(h, sd[b + "attention.attention.%s.weight" % nm], sd[b + "attention.attention.%s.bias" % nm])
            return y.view(B, N, HEADS, D // HEADS).permute(0, 2, 1, 3)
        q, k, v = heads("query"), heads("key"), heads("value")
        a = ((q @ k.transpose(-1, -2)) / math.sqrt(D // HEADS)).softmax(dim=-1) @ v
        a = a.permute(0, 2, 1, 3).reshape(B, N, D)
        a = F.linear(a, sd[b + "attention.output.dense.weight"], sd[b + "attention.output.dense.bias"])
        t = t + a * sd[b + "layer_scale1.lambda1"]
        h = F.layer_norm(t, (D,), sd[b + "norm2.weight"], sd[b + "norm2.bias"], EPS)
        if registers:
            hid = F.linear(h, sd[b + "mlp.weights_in.weight"], sd[b + "mlp.weights_in.bias"])
            x1, x2 = hid.chunk(2, dim=-1)
            h = F.linear(F.silu(x1) * x2, sd[b + "mlp.weights_out.weight"], sd[b + "mlp.weights_out.bias"])
        else:
            h = F.linear(F.gelu(F.linear(h, sd[b + "mlp.fc1.weight"], sd[b + "mlp.fc1.bias"])), sd[b + "mlp.fc2.weight"],
                         sd[b + "mlp.fc2.bias"])
        t = t + h * sd[b + "layer_scale2.lambda1"]
    return F.layer_norm(t, (D,), sd["layernorm.weight"], sd["layernorm.bias"], EPS)[:, 0]


# ---------------------------------------------------------------- DINO v1 teacher checkpoint


def make_dinov1():
    p = "backbone."
    sd = {p + "cls_token": rand((1, 1, D), "token"), p + "pos_embed": rand((1, 1 + 49, D), "token"),
          p + "patch_embed.proj.weight": rand((D, 3, 16, 16), "w"), p + "patch_embed.proj.bias": rand((D,), "small"),
          p + "norm.weight": rand((D,), "ln_w"), p + "norm.bias": rand((D,), "small"),
          # DINOHead(in_dim=D, out_dim=32, nlayers=2, bottleneck_dim=16): dropped by the loader
          "head.mlp.0.weight": rand((24, D), "w"), "head.mlp.0.bias": rand((24,), "small"),
          "head.mlp.2.weight": rand((16, 24), "w"), "head.mlp.2.bias": rand((16,), "small"),
          "head.last_layer.weight_g": rand((32, 1), "ln_w"), "head.last_layer.weight_v": rand((32, 16), "w")}
    for n in range(DEPTH):
        b = p + "blocks.%d." % n
        sd.update({b + "norm1.weight": rand((D,), "ln_w"), b + "norm1.bias": rand((D,), "small"),
                   b + "attn.qkv.weight": rand((3 * D, D), "w"), b + "attn.qkv.bias": rand((3 * D,), "small"),
                   b + "attn.proj.weight": rand((D, D), "w"), b + "attn.proj.bias": rand((D,), "small"),
                   b + "norm2.weight": rand((D,), "ln_w"), b + "norm2.bias": rand((D,), "small"),
                   b + "mlp.fc1.weight": rand((4 * D, D), "w"), b + "mlp.fc1.bias": rand((4 * D,), "small"),
                   b + "mlp.fc2.weight": rand((D, 4 * D), "w"), b + "mlp.fc2.bias": rand((D,), "small")})
    return f16(sd)


def dinov1_cls(sd, x):
    """dino/vision_transformer.py VisionTransformer.prepare_tokens + blocks + norm, [CLS]"""
    p = "backbone."
    B, _, w, h = x.shape
    t = F.conv2d(x, sd[p + "patch_embed.proj.weight"], sd[p + "patch_embed.proj.bias"], stride=16).flatten(2).transpose(1, 2)
    t = torch.cat((sd[p + "cls_token"].expand(B, -1, -1), t), dim=1)
    pos = sd[p + "pos_embed"]
    npatch, N = t.shape[1] - 1, pos.shape[1] - 1
    if npatch != N:  # interpolate_pos_encoding
        class_pos_embed, patch_pos_embed = pos[:, 0], pos[:, 1:]
        w0, h0 = w // 16 + 0.1, h // 16 + 0.1
        patch_pos_embed = F.interpolate(
            patch_pos_embed.reshape(1, int(math.sqrt(N)), int(math.sqrt(N)), D).permute(0, 3, 1, 2),
            scale_factor=(w0 / math.sqrt(N), h0 / math.sqrt(N)), mode="bicubic")
        assert int(w0) == patch_pos_embed.shape[-2] and int(h0) == patch_pos_embed.shape[-1]
        pos = torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, D)), dim=1)
    t = t + pos
    for n in range(DEPTH):
        b = p + "blocks.%d." % n
        h_ = F.layer_norm(t, (D,), sd[b + "norm1.weight"], sd[b + "norm1.bias"], EPS)
        t = t + attention(h_, sd[b + "attn.qkv.weight"], sd[b + "attn.qkv.bias"], sd[b + "attn.proj.weight"],
                          sd[b + "attn.proj.bias"])
        h_ = F.layer_norm(t, (D,), sd[b + "norm2.weight"], sd[b + "norm2.bias"], EPS)
        t = t + F.linear(F.gelu(F.linear(h_, sd[b + "mlp.fc1.weight"], sd[b + "mlp.fc1.bias"])),
                         sd[b + "mlp.fc2.weight"], sd[b + "mlp.fc2.bias"])
    return F.layer_norm(t, (D,), sd[p + "norm.weight"], sd[p + "norm.bias"], EPS)[:, 0]


# ---------------------------------------------------------------- timm vit_*_reg4_dinov2


def make_timm_reg():
    sd = {"cls_token": rand((1, 1, D), "token"), "reg_token": rand((1, 4, D), "token"),
          "pos_embed": rand((1, 25, D), "token"), "patch_embed.proj.weight": rand((D, 3, 14, 14), "w"),
          "patch_embed.proj.bias": rand((D,), "small"), "norm.weight": rand((D,), "ln_w"), "norm.bias": rand((D,), "small")}
    for n in range(DEPTH):
        b = "blocks.%d." % n
        sd.update({b + "norm1.weight": rand((D,), "ln_w"), b + "norm1.bias": rand((D,), "small"),
                   b + "attn.qkv.weight": rand((3 * D, D), "w"), b + "attn.qkv.bias": rand((3 * D,), "small"),
                   b + "attn.proj.weight": rand((D, D), "w"), b + "attn.proj.bias": rand((D,), "small"),
                   b + "ls1.gamma": rand((D,), "ls"), b + "norm2.weight": rand((D,), "ln_w"),
                   b + "norm2.bias": rand((D,), "small"), b + "mlp.fc1.weight": rand((4 * D, D), "w"),
                   b + "mlp.fc1.bias": rand((4 * D,), "small"), b + "mlp.fc2.weight": rand((D, 4 * D), "w"),
                   b + "mlp.fc2.bias": rand((D,), "small"), b + "ls2.gamma": rand((D,), "ls")})
    return f16(sd)


def timm_resample_abs_pos_embed(posemb, new_size, num_prefix_tokens=1, interpolation="bicubic", antialias=True):
    """timm/layers/pos_embed.py resample_abs_pos_embed (square)"""
    num_pos_tokens = posemb.shape[1]
    if new_size[0] * new_size[1] + num_prefix_tokens == num_pos_tokens:
        return posemb
    hw = int(math.sqrt(num_pos_tokens - num_prefix_tokens))
    if num_prefix_tokens:
        posemb_prefix, posemb = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    else:
        posemb_prefix = None
    embed_dim = posemb.shape[-1]
    posemb = posemb.float().reshape(1, hw, hw, -1).permute(0, 3, 1, 2)
    posemb = F.interpolate(posemb, size=new_size, mode=interpolation, antialias=antialias)
    posemb = posemb.permute(0, 2, 3, 1).reshape(1, -1, embed_dim)
    if posemb_prefix is not None:
        posemb = torch.cat([posemb_prefix, posemb], dim=1)
    return posemb


def timm_reg_cls(sd, x):
    """timm VisionTransformer(reg_tokens=4, no_embed_class=True, init_values set): _pos_embed, blocks, norm"""
    B, _, img, _ = x.shape
    t = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=14).flatten(2).transpose(1, 2)
    t = t + timm_resample_abs_pos_embed(sd["pos_embed"], (img // 14, img // 14), num_prefix_tokens=0)
    t = torch.cat([sd["cls_token"].expand(B, -1, -1), sd["reg_token"].expand(B, -1, -1), t], dim=1)
    for n in range(DEPTH):
        b = "blocks.%d." % n
        h = F.layer_norm(t, (D,), sd[b + "norm1.weight"], sd[b + "norm1.bias"], EPS)
        t = t + sd[b + "ls1.gamma"] * attention(h, sd[b + "attn.qkv.weight"], sd[b + "attn.qkv.bias"],
                                               sd[b + "attn.proj.weight"], sd[b + "attn.proj.bias"])
        h = F.layer_norm(t, (D,), sd[b + "norm2.weight"], sd[b + "norm2.bias"], EPS)
        h = F.linear(F.gelu(F.linear(h, sd[b + "mlp.fc1.weight"], sd[b + "mlp.fc1.bias"])), sd[b + "mlp.fc2.weight"],
                     sd[b + "mlp.fc2.bias"])
        t = t + sd[b + "ls2.gamma"] * h
    return F.layer_norm(t, (D,), sd["norm.weight"], sd["norm.bias"], EPS)[:, 0]


def main():
    spec = importlib.util.spec_from_file_location("dv", os.path.join(here, "make_dinov2_refs.py"))
    dv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dv)
    torch.manual_seed(1414)
    refs = {}
    cases = (("meta_g", make_meta_g, meta_g_cls, (224,)), ("hf_reg", make_hf, hf_cls, (56, 84)),
             ("hf_plain", lambda: make_hf(registers=False), hf_cls, (84,)),
             ("dinov1", make_dinov1, dinov1_cls, (64,)), ("timm_reg", make_timm_reg, timm_reg_cls, (98,)))
    with torch.no_grad():
        for tag, make, cls, sizes in cases:
            sd = make()
            for img in sizes:
                refs["%s_cls_%d" % (tag, img)] = cls(sd, images(img))
                print("%-9s img %3d: [CLS] max |x| %.3f" % (tag, img, refs["%s_cls_%d" % (tag, img)].abs().max()))
            dv.write_safetensors(os.path.join(here, "layout_%s.safetensors" % tag), sd, "F16")
    dv.write_safetensors(os.path.join(here, "layout_refs.safetensors"), refs, "F32")
    print("wrote tests/nn/models/layout_{meta_g,hf_reg,hf_plain,dinov1,timm_reg,refs}.safetensors")


if __name__ == "__main__":
    main()
