"""A randomly initialised timm-layout ViT-S/16 (224 px, 384-d, 12 blocks, 6 heads) as safetensors, for
timing `endoret serve --model` (bench/serve_bench.sh): speed does not depend on the weights' values.
Python standard library only (the container is written by hand, as tests/nn/models/make_vit_refs.py).
Run: python3 bench/make_random_vit.py OUT.safetensors
"""
import array
import json
import random
import struct
import sys

D, DEPTH, P, IMG, HID = 384, 12, 16, 224, 1536
L = (IMG // P) ** 2
rng = random.Random(1)
block = array.array("f", [rng.gauss(0.0, 0.02) for _ in range(65536)])  # tiled: values need not be distinct


def tensor(shape, fill=None):
    n = 1
    for s in shape:
        n *= s
    if fill is not None:
        return shape, array.array("f", [fill]) * n
    reps = n // len(block) + 1
    return shape, (block * reps)[:n]


w = {"cls_token": tensor([1, 1, D]), "pos_embed": tensor([1, 1 + L, D]),
     "patch_embed.proj.weight": tensor([D, 3, P, P]), "patch_embed.proj.bias": tensor([D], 0.0),
     "norm.weight": tensor([D], 1.0), "norm.bias": tensor([D], 0.0)}
for i in range(DEPTH):
    b = "blocks.%d." % i
    w[b + "norm1.weight"], w[b + "norm1.bias"] = tensor([D], 1.0), tensor([D], 0.0)
    w[b + "attn.qkv.weight"], w[b + "attn.qkv.bias"] = tensor([3 * D, D]), tensor([3 * D], 0.0)
    w[b + "attn.proj.weight"], w[b + "attn.proj.bias"] = tensor([D, D]), tensor([D], 0.0)
    w[b + "norm2.weight"], w[b + "norm2.bias"] = tensor([D], 1.0), tensor([D], 0.0)
    w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"] = tensor([HID, D]), tensor([HID], 0.0)
    w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"] = tensor([D, HID]), tensor([D], 0.0)

header, blobs, off = {}, [], 0
for name in sorted(w):
    shape, data = w[name]
    raw = data.tobytes()
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw)]}
    blobs.append(raw)
    off += len(raw)
header["__metadata__"] = {"format": "pt"}
hj = json.dumps(header, separators=(",", ":")).encode()
hj += b" " * ((8 - len(hj) % 8) % 8)
with open(sys.argv[1] + ".tmp", "wb") as f:
    f.write(struct.pack("<Q", len(hj)))
    f.write(hj)
    for raw in blobs:
        f.write(raw)
import os
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
