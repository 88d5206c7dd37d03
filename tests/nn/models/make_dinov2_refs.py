#!/usr/bin/python3
"""A DINOv2 ViT with 4 register tokens and LayerScale in Meta's layout, for tests/nn/models/test_dinov2.c
(issue 14), written independently of nn/models/vit.c.

The model below follows the public definition in facebookresearch/dinov2,
dinov2/models/vision_transformer.py (DinoVisionTransformer) and dinov2/layers (PatchEmbed, Attention,
Mlp, LayerScale, Block), block_chunks = 0 and no drop-path: the tensor names are Meta's
(cls_token, pos_embed, register_tokens, mask_token, patch_embed.proj, blocks.N.{norm1, attn.qkv,
attn.proj, ls1.gamma, norm2, mlp.fc1, mlp.fc2, ls2.gamma}, norm). What the test is about lives in
prepare_tokens_with_masks: the position table covers [CLS] + patches only, it is added BEFORE the
register tokens are inserted after [CLS], so the registers get no position and the token order is
[CLS, reg x 4, patches]; the descriptor is x_norm_clstoken = norm(x)[:, 0].

Writes (random weights, seed 14):
  tests/nn/models/dinov2_reg4_meta.safetensors   the model, Meta's names, F16 (exact: the reference
                                                 runs on the same rounded values), "format": "pt"
  tests/nn/models/dinov2_reg4_refs.safetensors   x [2,3,56,56] (F32 input) and cls [2,D]
                                                 (x_norm_clstoken of that input, F32)
The committed model has ViT-S/14's patch (14), head width (64), 4 registers, LayerScale, GELU and
eps 1e-6, but is narrower (D 128, 2 heads) and shallower (2 blocks) with a 4x4 position table
(56x56 input, no interpolation) so the two files stay under 1 MB. `--full DIR` writes the real
ViT-S/14 reg4 size instead (D 384, 6 heads, 12 blocks, 224x224 table, F32, ~88 MB) into DIR, for
measurements; never commit those.

It also checks, in PyTorch, that the same weights in timm's vit_*_reg4_dinov2 layout (reg_token,
pos_embed without the [CLS] row (no_embed_class=True): positions added to the patches only, then
[CLS] and registers prepended; [CLS]'s position folded into cls_token) give the same [CLS].

Run: /usr/bin/python3 tests/nn/models/make_dinov2_refs.py [--full DIR]
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------- Meta's DINOv2 (dinov2/layers, models)


class PatchEmbed(nn.Module):
    def __init__(self, img_size, patch_size, in_chans, embed_dim):
        super().__init__()
        self.patch_size = patch_size
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = nn.Identity()

    def forward(self, x):
        x = self.proj(x)  # B C H W
        x = x.flatten(2).transpose(1, 2)  # B HW C
        return self.norm(x)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Attention(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class LayerScale(nn.Module):
    def __init__(self, dim, init_values=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio, init_values):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads)
        self.ls1 = LayerScale(dim, init_values)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.ls2 = LayerScale(dim, init_values)

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class DinoVisionTransformer(nn.Module):
    def __init__(self, img_size, patch_size, embed_dim, depth, num_heads, mlp_ratio=4.0, init_values=1e-5,
                 num_register_tokens=4):
        super().__init__()
        self.patch_size = patch_size
        self.num_tokens = 1
        self.num_register_tokens = num_register_tokens
        self.patch_embed = PatchEmbed(img_size, patch_size, 3, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + self.num_tokens, embed_dim))
        self.register_tokens = nn.Parameter(torch.zeros(1, num_register_tokens, embed_dim)) if num_register_tokens else None
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads, mlp_ratio, init_values) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Identity()
        self.mask_token = nn.Parameter(torch.zeros(1, embed_dim))

    def interpolate_pos_encoding(self, x, w, h):
        npatch = x.shape[1] - 1
        N = self.pos_embed.shape[1] - 1
        if npatch == N and w == h:
            return self.pos_embed
        raise NotImplementedError("the references use the table's own size (no bicubic interpolation)")

    def prepare_tokens_with_masks(self, x, masks=None):
        B, nc, w, h = x.shape
        x = self.patch_embed(x)
        if masks is not None:
            x = torch.where(masks.unsqueeze(-1), self.mask_token.to(x.dtype).unsqueeze(0), x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = x + self.interpolate_pos_encoding(x, w, h)
        if self.register_tokens is not None:
            x = torch.cat((x[:, :1], self.register_tokens.expand(x.shape[0], -1, -1), x[:, 1:]), dim=1)
        return x

    def forward_features(self, x):
        x = self.prepare_tokens_with_masks(x)
        for blk in self.blocks:
            x = blk(x)
        x_norm = self.norm(x)
        return {
            "x_norm_clstoken": x_norm[:, 0],
            "x_norm_regtokens": x_norm[:, 1 : self.num_register_tokens + 1],
            "x_norm_patchtokens": x_norm[:, self.num_register_tokens + 1 :],
        }

    def forward(self, x):
        return self.head(self.forward_features(x)["x_norm_clstoken"])


# ---------------------------------------------------------------- timm's reg4 layout, same weights


def timm_reg4_cls(sd, x, heads):
    """timm VisionTransformer(no_embed_class=True, reg_tokens=4)._pos_embed + blocks + norm, [CLS]."""
    B = x.shape[0]
    D = sd["cls_token"].shape[-1]
    P = sd["patch_embed.proj.weight"].shape[-1]
    t = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=P).flatten(2).transpose(1, 2)
    t = t + sd["pos_embed"][:, 1:]  # timm: pos_embed holds the patches only
    cls = sd["cls_token"] + sd["pos_embed"][:, :1]  # timm: cls_token (Meta's [CLS] position folded in)
    t = torch.cat([cls.expand(B, -1, -1), sd["register_tokens"].expand(B, -1, -1), t], 1)
    i = 0
    while "blocks.%d.norm1.weight" % i in sd:
        b = "blocks.%d." % i
        h = F.layer_norm(t, (D,), sd[b + "norm1.weight"], sd[b + "norm1.bias"], 1e-6)
        qkv = F.linear(h, sd[b + "attn.qkv.weight"], sd[b + "attn.qkv.bias"]).reshape(B, -1, 3, heads, D // heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        a = ((q @ k.transpose(-2, -1)) * (D // heads) ** -0.5).softmax(-1) @ v
        a = F.linear(a.transpose(1, 2).reshape(B, -1, D), sd[b + "attn.proj.weight"], sd[b + "attn.proj.bias"])
        t = t + sd[b + "ls1.gamma"] * a
        h = F.layer_norm(t, (D,), sd[b + "norm2.weight"], sd[b + "norm2.bias"], 1e-6)
        h = F.linear(F.gelu(F.linear(h, sd[b + "mlp.fc1.weight"], sd[b + "mlp.fc1.bias"])), sd[b + "mlp.fc2.weight"],
                     sd[b + "mlp.fc2.bias"])
        t = t + sd[b + "ls2.gamma"] * h
        i += 1
    return F.layer_norm(t, (D,), sd["norm.weight"], sd["norm.bias"], 1e-6)[:, 0]


# ---------------------------------------------------------------- files


def write_safetensors(path, tensors, dtype):
    """safetensors by hand (8-byte LE header size, JSON header, data in name order): no extra package."""
    code, tdt = {"F16": ("F16", torch.float16), "F32": ("F32", torch.float32)}[dtype]
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().contiguous().to(tdt).numpy().tobytes()
        header[name] = {"dtype": code, "shape": list(tensors[name].shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def main():
    full = len(sys.argv) == 3 and sys.argv[1] == "--full"
    if len(sys.argv) != 1 and not full:
        sys.exit("usage: make_dinov2_refs.py [--full DIR]")
    if full:
        out, img, dim, depth, heads, dtype = sys.argv[2], 224, 384, 12, 6, "F32"
        os.makedirs(out, exist_ok=True)
    else:
        out, img, dim, depth, heads, dtype = os.path.dirname(os.path.abspath(__file__)), 56, 128, 2, 2, "F16"
    torch.manual_seed(14)
    model = DinoVisionTransformer(img, 14, dim, depth, heads, mlp_ratio=4.0, init_values=1.0, num_register_tokens=4)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.copy_(0.5 + 0.1 * torch.randn_like(p))  # LayerScale far from its 1e-5 init, so blocks matter
            elif name.startswith("norm") or ".norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            elif name in ("cls_token", "pos_embed", "register_tokens", "mask_token"):
                p.copy_(0.5 * torch.randn_like(p))  # registers well away from Meta's 1e-6 init: they must matter
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn_like(p))
            else:  # linear / conv weights
                fan_in = p[0].numel()
                p.copy_(torch.randn_like(p) * fan_in ** -0.5)
            if dtype == "F16":
                p.copy_(p.half().float())  # the file's exact values
    model.eval()
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    x = torch.randn(2, 3, img, img)
    with torch.no_grad():
        feats = model.forward_features(x)
        cls = feats["x_norm_clstoken"]
        assert torch.equal(cls, model(x))
        # the registers matter (the bug of issue 14 dropped them) ...
        saved = model.register_tokens
        model.register_tokens = None
        cls_noreg = model.forward_features(x)["x_norm_clstoken"]
        model.register_tokens = saved
        # ... and timm's layout of the same weights is the same network
        cls_timm = timm_reg4_cls(sd, x, heads)
    d_noreg = (cls - cls_noreg).abs().max().item()
    d_timm = (cls - cls_timm).abs().max().item()
    print("[CLS] max |x| %.3f; without the registers it moves by up to %.3e; timm reg4 layout: %.1e" % (
        cls.abs().max().item(), d_noreg, d_timm))
    assert d_noreg > 1e-2 and d_timm < 1e-5
    tag = "dinov2_vits14_reg4" if full else "dinov2_reg4"
    write_safetensors(os.path.join(out, tag + "_meta.safetensors"), sd, dtype)
    write_safetensors(os.path.join(out, tag + "_refs.safetensors"), {"x": x, "cls": cls, "cls_noreg": cls_noreg}, "F32")
    print("wrote %s/%s_{meta,refs}.safetensors (D %d, depth %d, heads %d, img %d, %s)" % (out, tag, dim, depth, heads, img, dtype))


if __name__ == "__main__":
    main()
