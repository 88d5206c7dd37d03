#!/usr/bin/python3
"""PyTorch reference for `endoret bench train`: the same ViT (timm layout: pre-norm blocks, qkv bias,
exact GELU, LayerNorm eps 1e-6, [CLS] + fixed pos-embed), batch, image size and thread count, on the
CPU with torch's own kernels (MKL/oneDNN). train = forward + backward + AdamW (loss = mean square of
the [CLS] output), infer = no_grad forward. Prints one JSON line like the C benchmark.

  /usr/bin/python3 bench/torch_vit_bench.py --model vit_small --img 224 --batch 16 --threads 2
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {"vit_tiny": (192, 12, 3), "vit_small": (384, 12, 6), "vit_base": (768, 12, 12), "vit_large": (1024, 24, 16)}


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.norm1 = nn.LayerNorm(d, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d, eps=1e-6)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        a = ((q @ k.transpose(-2, -1)) * (D // self.h) ** -0.5).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, d, depth, h, img, p):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, d, p, p)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.register_buffer("pos_embed", torch.zeros(1, 1 + (img // p) ** 2, d))
        self.blocks = nn.ModuleList([Block(d, h) for _ in range(depth)])
        self.norm = nn.LayerNorm(d, eps=1e-6)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.norm(x)[:, 0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="vit_small")
    ap.add_argument("--img", type=int, default=224)
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    d, depth, h = CONFIGS[a.model]
    m = ViT(d, depth, h, a.img, a.patch)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.05)
    x = torch.randn(a.batch, 3, a.img, a.img)
    t_train = 0.0
    for s in range(a.steps + 1):
        t0 = time.perf_counter()
        loss = m(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if s:
            t_train += time.perf_counter() - t0
    t_inf = 0.0
    with torch.no_grad():
        for s in range(a.steps + 1):
            t0 = time.perf_counter()
            m(x)
            if s:
                t_inf += time.perf_counter() - t0
    print(json.dumps({"bench": "train", "impl": "pytorch %s" % torch.__version__, "model": a.model, "img": a.img,
                      "batch": a.batch, "threads": torch.get_num_threads(),
                      "train_img_per_s": round(a.steps * a.batch / t_train, 3),
                      "infer_img_per_s": round(a.steps * a.batch / t_inf, 3)}))


if __name__ == "__main__":
    main()
