"""Reference values for tests/datasets/test_transforms.c: torch.nn.functional.interpolate with
antialias=True (what torchvision's Resize does on tensors) on a deterministic pattern image.
Run with /usr/bin/python3 (torch 1.13):  python3 tests/datasets/ref/resize_ref.py
Writes tests/datasets/ref/resize_ref.txt: one line per case "mode H W" then H*W*3 floats (CHW)."""
import os
import torch
import torch.nn.functional as F

C, H, W = 3, 21, 29

def pattern():
    # same formula as pattern_image() in test_transforms.c: an integer hash, then value/255
    x = torch.zeros(C, H, W, dtype=torch.float64)
    for c in range(C):
        for y in range(H):
            for xx in range(W):
                h = (c * 7919 + y * 104729 + xx * 1299709) & 0xFFFFFFFF
                h = ((h ^ (h >> 13)) * 0x5bd1e995) & 0xFFFFFFFF
                h ^= h >> 15
                x[c, y, xx] = (h % 256) / 255.0
    return x

img = pattern().unsqueeze(0)
cases = [("bilinear", 8, 11), ("bicubic", 8, 11), ("bilinear", 5, 17), ("bicubic", 13, 7),
         ("bilinear", 30, 41), ("bicubic", 30, 41), ("bicubic", 21, 12)]
out = []
for mode, h, w in cases:
    r = F.interpolate(img, size=(h, w), mode=mode, align_corners=False, antialias=True)[0]
    out.append(f"{mode} {h} {w}")
    out.append(" ".join(f"{v:.7f}" for v in r.flatten().tolist()))
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize_ref.txt")
open(path, "w").write("\n".join(out) + "\n")
print("wrote", path)
