#!/usr/bin/python3
"""PyTorch reference for `endoret bench train`: the same ViT (timm layout: pre-norm blocks, qkv bias,
exact GELU, LayerNorm eps 1e-6, [CLS] + fixed pos-embed), batch, image size, thread count, device,
precision and objective, with torch's own kernels (MKL/oneDNN on the CPU, cuBLAS/cuDNN on CUDA).
Prints one JSON line with the same keys as the C benchmark.

  objective cls: train = forward + backward + AdamW (loss = mean square of the [CLS] output)
  objective mae: one MAE pre-training step (75 % random masking, encoder on the kept patches,
                 8-block 512-wide decoder, norm_pix MSE on the removed patches, AdamW)
  infer = no_grad encoder forward on full images.
  attention: F.scaled_dot_product_attention where torch has it (>= 2.0, as timm), else matmul+softmax.
  --precision bf16: torch.autocast(device, dtype=torch.bfloat16) around forward (the usual mixed
  precision: bf16 matmuls, fp32 weights and AdamW state), like endoret's --precision bf16.
  mfu: training GFLOP/s (3x forward FLOPs, the count endoret uses) over a square matmul measured in
  the same run and precision (1024^3 on the CPU, 8192^3 on CUDA).

  /usr/bin/python3 bench/torch_vit_bench.py --model vit_small --img 224 --batch 16 --threads 2
  python3 bench/torch_vit_bench.py --device cuda --precision bf16 --objective mae --model vit_large --batch 64
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {"vit_tiny": (192, 12, 3), "vit_small": (384, 12, 6), "vit_base": (768, 12, 12), "vit_large": (1024, 24, 16)}
DEC = (512, 8, 16)  # MAE decoder width, depth, heads
SDPA = hasattr(F, "scaled_dot_product_attention")


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
        if SDPA:  # torch >= 2: the fused attention timm uses (flash / memory-efficient kernels)
            a = F.scaled_dot_product_attention(q, k, v)
        else:
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

    def forward(self, x, keep=None):
        x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed[:, 1:]
        if keep is not None:
            x = torch.gather(x, 1, keep.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        cls = (self.cls_token + self.pos_embed[:, :1]).expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], 1)
        for b in self.blocks:
            x = b(x)
        return self.norm(x)


class MAE(nn.Module):
    """MAE (He et al.): the encoder above on the kept patches + the 8x512 decoder, norm_pix loss."""

    def __init__(self, d, depth, h, img, p, mask_ratio):
        super().__init__()
        self.enc = ViT(d, depth, h, img, p)
        self.p, self.L = p, (img // p) ** 2
        self.K = int(self.L * (1 - mask_ratio))
        dd, ddepth, dh = DEC
        self.embed = nn.Linear(d, dd)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dd))
        self.register_buffer("dpos", torch.zeros(1, 1 + self.L, dd))
        self.blocks = nn.ModuleList([Block(dd, dh) for _ in range(ddepth)])
        self.norm = nn.LayerNorm(dd, eps=1e-6)
        self.pred = nn.Linear(dd, p * p * 3)

    def target(self, img):
        B, C, H, W = img.shape
        p, g = self.p, H // self.p
        t = img.reshape(B, C, g, p, g, p).permute(0, 2, 4, 3, 5, 1).reshape(B, g * g, p * p * C)
        return (t - t.mean(-1, keepdim=True)) / (t.var(-1, keepdim=True) + 1e-6) ** 0.5

    def forward(self, img):
        B = img.shape[0]
        shuffle = torch.rand(B, self.L, device=img.device).argsort(1)
        restore = shuffle.argsort(1)
        mask = torch.ones(B, self.L, device=img.device)
        mask[:, :self.K] = 0
        mask = torch.gather(mask, 1, restore)
        x = self.embed(self.enc(img, shuffle[:, :self.K]))
        vis = torch.cat([x[:, 1:], self.mask_token.expand(B, self.L - self.K, -1)], 1)
        vis = torch.gather(vis, 1, restore.unsqueeze(-1).expand(-1, -1, vis.shape[-1]))
        x = torch.cat([x[:, :1], vis], 1) + self.dpos
        for b in self.blocks:
            x = b(x)
        pred = self.pred(self.norm(x))[:, 1:]
        loss = ((pred.float() - self.target(img)) ** 2).mean(-1)
        return (loss * mask).sum() / mask.sum()


def block_flops(T, D, hid):
    return 2.0 * T * D * 3 * D + 2.0 * 2 * T * T * D + 2.0 * T * D * D + 2.0 * 2 * T * D * hid


def forward_flops(d, depth, img, p, B, T):
    L = T - 1
    return B * (2.0 * L * 3 * p * p * d + depth * block_flops(T, d, 4 * d))


def mae_flops(d, depth, img, p, B, K):
    L = (img // p) ** 2
    dd, ddepth, _ = DEC
    P = p * p * 3.0
    return (forward_flops(d, depth, img, p, B, 1 + K) + 2.0 * B * (L - K) * P * d
            + B * (2.0 * (1 + K) * d * dd + ddepth * block_flops(1 + L, dd, 4 * dd) + 2.0 * (1 + L) * dd * P))


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def gemm_peak(dev, bf16, reps=3):
    n = 8192 if dev.type == "cuda" else 1024
    a = torch.randn(n, n, device=dev)
    b = torch.randn(n, n, device=dev)
    if bf16:
        a, b = a.bfloat16(), b.bfloat16()
    best = 0.0
    for r in range(reps + 1):
        sync(dev)
        t0 = time.perf_counter()
        a @ b
        sync(dev)
        g = 2.0 * n ** 3 / (time.perf_counter() - t0) / 1e9
        if r:
            best = max(best, g)
    return best, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="vit_small")
    ap.add_argument("--img", type=int, default=224)
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--objective", default="cls", choices=["cls", "mae"])
    ap.add_argument("--mask-ratio", type=float, default=0.75)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as endoret's default
        torch.backends.cudnn.allow_tf32 = False
    bf16 = a.precision == "bf16"
    d, depth, h = CONFIGS[a.model]
    if a.objective == "mae":
        m = MAE(d, depth, h, a.img, a.patch, a.mask_ratio).to(dev)
        enc = m.enc
        fwd = mae_flops(d, depth, a.img, a.patch, a.batch, m.K)
    else:
        m = enc = ViT(d, depth, h, a.img, a.patch).to(dev)
        fwd = forward_flops(d, depth, a.img, a.patch, a.batch, 1 + (a.img // a.patch) ** 2)
    fwd_full = forward_flops(d, depth, a.img, a.patch, a.batch, 1 + (a.img // a.patch) ** 2)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.05)
    x = torch.randn(a.batch, 3, a.img, a.img, device=dev)

    def amp():
        return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16)

    t_train = 0.0
    for s in range(a.steps + 1):
        sync(dev)
        t0 = time.perf_counter()
        with amp():
            loss = m(x) if a.objective == "mae" else m(x)[:, 0].float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(dev)
        if s:
            t_train += time.perf_counter() - t0
    t_inf = 0.0
    with torch.no_grad():
        for s in range(a.steps + 1):
            sync(dev)
            t0 = time.perf_counter()
            with amp():
                enc(x)
            sync(dev)
            if s:
                t_inf += time.perf_counter() - t0
    peak, n = gemm_peak(dev, bf16)
    gflops = 3 * fwd * a.steps / t_train / 1e9
    inf_gflops = fwd_full * a.steps / t_inf / 1e9
    rec = {"bench": "train", "impl": "pytorch %s" % torch.__version__, "model": a.model, "objective": a.objective,
           "device": a.device, "precision": a.precision, "img": a.img, "batch": a.batch,
           "threads": torch.get_num_threads(),
           "train_img_per_s": round(a.steps * a.batch / t_train, 3),
           "infer_img_per_s": round(a.steps * a.batch / t_inf, 3),
           "gflops": round(gflops, 2), "infer_gflops": round(inf_gflops, 2),
           "gemm_peak_gflops": round(peak, 2), "gemm_peak_n": n, "mfu": round(gflops / peak, 4),
           "attention": "sdpa" if SDPA else "matmul+softmax", "loss": round(float(loss), 5)}
    if dev.type == "cuda":
        rec["gpu"] = torch.cuda.get_device_name()
        # peak of the caching allocator, to set against endoret's device peak in the same call
        rec["gpu_peak_mib"] = round(torch.cuda.max_memory_reserved() / 2**20)
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
