#!/usr/bin/python3
"""Reference for tests/nn/models/test_vit_block.c: one pre-norm ViT block (timm layout) in PyTorch.

    x -> x + proj(MHA(LN1(x))) -> y + fc2(gelu(fc1(LN2(y))))

Dims: batch 2, 17 tokens, width 32, 4 heads, MLP 128 (erf GELU, LayerNorm eps 1e-6 as timm).
Computed in float64, stored as F32: the input x, a random weight R, every parameter (timm names),
the output `out`, and the gradients of sum(out * R) with respect to x ("grad.x") and to each
parameter ("grad.<name>"). Written by hand as safetensors (8-byte little-endian header length,
JSON header, raw little-endian data) because torch 1.13 has no safetensors module.
Run: /usr/bin/python3 tests/ref/make_vit_block_ref.py  (writes tests/ref/vit_block.safetensors)
"""
import json
import os
import struct

import numpy as np
import torch

torch.manual_seed(1234)
B, T, C, H, HID = 2, 17, 32, 4, 128
D = C // H
dt = torch.float64

def param(*shape, scale):
    return (torch.randn(*shape, dtype=dt) * scale).requires_grad_(True)

p = {
    "norm1.weight": (1 + 0.1 * torch.randn(C, dtype=dt)).requires_grad_(True),
    "norm1.bias": param(C, scale=0.1),
    "attn.qkv.weight": param(3 * C, C, scale=C ** -0.5),
    "attn.qkv.bias": param(3 * C, scale=0.1),
    "attn.proj.weight": param(C, C, scale=C ** -0.5),
    "attn.proj.bias": param(C, scale=0.1),
    "norm2.weight": (1 + 0.1 * torch.randn(C, dtype=dt)).requires_grad_(True),
    "norm2.bias": param(C, scale=0.1),
    "mlp.fc1.weight": param(HID, C, scale=C ** -0.5),
    "mlp.fc1.bias": param(HID, scale=0.1),
    "mlp.fc2.weight": param(C, HID, scale=HID ** -0.5),
    "mlp.fc2.bias": param(C, scale=0.1),
}
x = torch.randn(B, T, C, dtype=dt, requires_grad=True)
R = torch.randn(B, T, C, dtype=dt)
F = torch.nn.functional

def block(x):
    h = F.layer_norm(x, (C,), p["norm1.weight"], p["norm1.bias"], eps=1e-6)
    qkv = F.linear(h, p["attn.qkv.weight"], p["attn.qkv.bias"])          # [B, T, 3C]
    qkv = qkv.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4)              # [3, B, H, T, D]
    q, k, v = qkv[0], qkv[1], qkv[2]
    a = torch.softmax(q @ k.transpose(-2, -1) * D ** -0.5, dim=-1) @ v   # [B, H, T, D]
    a = a.transpose(1, 2).reshape(B, T, C)
    y = x + F.linear(a, p["attn.proj.weight"], p["attn.proj.bias"])
    h = F.layer_norm(y, (C,), p["norm2.weight"], p["norm2.bias"], eps=1e-6)
    h = F.gelu(F.linear(h, p["mlp.fc1.weight"], p["mlp.fc1.bias"]))     # erf form
    return y + F.linear(h, p["mlp.fc2.weight"], p["mlp.fc2.bias"])

out = block(x)
(out * R).sum().backward()

tensors = {"x": x, "r": R, "out": out, "grad.x": x.grad}
for n, t in p.items():
    tensors[n] = t
    tensors["grad." + n] = t.grad

header, blobs, off = {}, [], 0
for name in sorted(tensors):
    a = tensors[name].detach().numpy().astype("<f4")
    header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
    blobs.append(a.tobytes())
    off += a.nbytes
header["__metadata__"] = {"source": "tests/ref/make_vit_block_ref.py", "torch": torch.__version__}
hj = json.dumps(header, separators=(",", ":")).encode()
hj += b" " * ((8 - len(hj) % 8) % 8)
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vit_block.safetensors")
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
print(path, os.path.getsize(path), "bytes")
