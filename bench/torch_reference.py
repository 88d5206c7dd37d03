#!/usr/bin/env python3
"""torch_reference.py - the PyTorch figures endoret's GPU benchmark is compared with.

Measures, on one device, the same workloads as `endoret bench cuda` (kernels/cuda/bench_cuda.cu):
  * GEMM TFLOP/s for the ViT-B/16 and ViT-L/16 linear layers (rows = batch x 197 tokens),
    fp32 (TF32 off) and bf16, plus a square 8192^3 product as the reference peak;
  * attention forward / backward (B x H x 197 x 64), F.scaled_dot_product_attention when the
    installed torch has it (>= 2.0), else the explicit softmax(QK^T)V;
  * one MAE pre-training step (ViT-B/16 and ViT-L/16 encoder, 8-block 512-wide decoder, 75 %
    masking, normalised-pixel loss, AdamW) in images/s and MFU (model FLOPs / step time / peak).

Usage (GPU machine):   python3 bench/torch_reference.py --device cuda [--json]
Check on a CPU:        python3 bench/torch_reference.py --device cpu --tiny
The model is written out here (no timm) so that the FLOP count is exact and the script runs with
torch 1.13 as well as 2.x.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, dev, iters, warmup=3):
    for _ in range(warmup):
        fn()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(dev)
    return (time.perf_counter() - t0) / iters


def emit(args, rec, text):
    print(json.dumps(rec) if args.json else text, flush=True)


# ---------------- GEMM ----------------
def bench_gemm(args, dev, vits, peak_n):
    peaks = {}
    for prec, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        if dev.type == "cpu" and prec == "bf16" and not args.tiny:
            continue
        a = torch.full((peak_n, peak_n), 0.01, device=dev, dtype=dt)
        s = timed(lambda: a @ a, dev, min(args.iters, 5))
        peaks[prec] = 2 * peak_n ** 3 / s / 1e12
        emit(args, {"bench": "gemm_peak", "precision": prec, "m": peak_n, "tflops": round(peaks[prec], 3)},
             f"torch square {peak_n}^3 {prec}: {peaks[prec]:8.2f} TFLOP/s (reference peak)")
    for name, C, batch in vits:
        M = batch * 197
        for layer, n, k in (("qkv", 3 * C, C), ("proj", C, C), ("fc1", 4 * C, C), ("fc2", C, 4 * C)):
            for prec, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
                if prec not in peaks:
                    continue
                x = torch.full((M, k), 0.01, device=dev, dtype=dt)
                w = torch.full((n, k), 0.01, device=dev, dtype=dt)
                s = timed(lambda: F.linear(x, w), dev, args.iters)
                tf = 2 * M * n * k / s / 1e12
                emit(args, {"bench": "gemm", "model": name, "layer": layer, "m": M, "n": n, "k": k,
                            "precision": prec, "ms": round(s * 1e3, 4), "tflops": round(tf, 3),
                            "of_peak": round(tf / peaks[prec], 3)},
                     f"{name} {layer:4s} [{M:6d} x {n:5d} x {k:5d}] {prec}: {s * 1e3:8.3f} ms "
                     f"{tf:7.2f} TFLOP/s ({100 * tf / peaks[prec]:3.0f}% of torch peak)")
    return peaks


# ---------------- attention ----------------
def sdpa(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v)
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    return s.softmax(-1) @ v


def bench_attention(args, dev, vits, T, D):
    for name, C, batch in vits:
        H = C // D
        for prec, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            if dev.type == "cpu" and prec == "bf16" and not args.tiny:
                continue
            q, k, v = (torch.randn(batch, H, T, D, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
            go = torch.randn(batch, H, T, D, device=dev, dtype=dt)
            s_f = timed(lambda: sdpa(q, k, v), dev, args.iters)

            def fwd_bwd():
                o = sdpa(q, k, v)
                torch.autograd.grad(o, (q, k, v), go)

            s_fb = timed(fwd_bwd, dev, args.iters)
            s_b = max(s_fb - s_f, 1e-9)
            for pas, s, mult in (("forward", s_f, 4), ("backward", s_b, 10)):
                tf = mult * batch * H * T * T * D / s / 1e12
                emit(args, {"bench": "attention", "model": name, "B": batch, "H": H, "T": T, "D": D,
                            "precision": prec, "pass": pas, "ms": round(s * 1e3, 4), "tflops": round(tf, 3)},
                     f"{name} attention {pas:8s} {prec} B={batch} H={H} T={T} D={D}: {s * 1e3:8.3f} ms "
                     f"{tf:6.2f} TFLOP/s")


# ---------------- MAE training step ----------------
class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(C, eps=1e-6), nn.LayerNorm(C, eps=1e-6)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc1, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.H = H

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(B, T, 3, self.H, C // self.H).permute(2, 0, 3, 1, 4)
        x = x + self.proj(sdpa(q, k, v).transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class MAE(nn.Module):
    """He et al. 2021: encoder on the 25 % visible patches, light decoder on all tokens."""

    def __init__(self, img, patch, C, depth, H, dC, ddepth, dH, mask_ratio=0.75):
        super().__init__()
        self.patch, self.L, self.mask_ratio = patch, (img // patch) ** 2, mask_ratio
        self.embed = nn.Linear(3 * patch * patch, C)
        self.cls = nn.Parameter(torch.zeros(1, 1, C))
        self.pos = nn.Parameter(torch.randn(1, self.L + 1, C) * 0.02)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(depth))
        self.norm = nn.LayerNorm(C, eps=1e-6)
        self.dembed = nn.Linear(C, dC)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dC))
        self.dpos = nn.Parameter(torch.randn(1, self.L + 1, dC) * 0.02)
        self.dblocks = nn.ModuleList(Block(dC, dH) for _ in range(ddepth))
        self.dnorm = nn.LayerNorm(dC, eps=1e-6)
        self.pred = nn.Linear(dC, 3 * patch * patch)

    def patchify(self, img):
        B, p = img.shape[0], self.patch
        h = img.shape[2] // p
        x = img.reshape(B, 3, h, p, h, p).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(B, h * h, p * p * 3)

    def forward(self, img):
        target = self.patchify(img)
        B, L, _ = target.shape
        keep = int(L * (1 - self.mask_ratio))
        ids_shuffle = torch.rand(B, L, device=img.device).argsort(1)
        ids_restore = ids_shuffle.argsort(1)
        ids_keep = ids_shuffle[:, :keep]
        x = self.embed(target) + self.pos[:, 1:]
        x = torch.gather(x, 1, ids_keep[..., None].expand(-1, -1, x.shape[-1]))
        x = torch.cat([(self.cls + self.pos[:, :1]).expand(B, -1, -1), x], 1)
        for b in self.blocks:
            x = b(x)
        x = self.dembed(self.norm(x))
        m = self.mask_token.expand(B, L - keep, -1)
        y = torch.cat([x[:, 1:], m], 1)
        y = torch.gather(y, 1, ids_restore[..., None].expand(-1, -1, y.shape[-1]))
        y = torch.cat([x[:, :1], y], 1) + self.dpos
        for b in self.dblocks:
            y = b(y)
        pred = self.pred(self.dnorm(y))[:, 1:]
        mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True)
        target = (target - mean) / (var + 1e-6) ** 0.5
        mask = torch.ones(B, L, device=img.device)
        mask[:, :keep] = 0
        mask = torch.gather(mask, 1, ids_restore)
        return (((pred - target) ** 2).mean(-1) * mask).sum() / mask.sum()


def block_flops(T, C):
    """Forward FLOPs of one transformer block on T tokens (matmuls only: 24 T C^2 + 4 T^2 C)."""
    return 24 * T * C * C + 4 * T * T * C


def mae_flops(cfg, batch):
    img, patch, C, depth, H, dC, ddepth, dH = cfg
    L = (img // patch) ** 2
    Te, Td = int(L * 0.25) + 1, L + 1
    fwd = depth * block_flops(Te, C) + ddepth * block_flops(Td, dC)
    fwd += 2 * L * 3 * patch * patch * C + 2 * Te * C * dC + 2 * L * dC * 3 * patch * patch
    return 3 * fwd * batch  # forward + backward (2x)


def bench_mae(args, dev, cfgs, peaks):
    for name, cfg, batch in cfgs:
        torch.manual_seed(0)
        model = MAE(*cfg).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1.5e-4, betas=(0.9, 0.95), weight_decay=0.05)
        img = torch.randn(batch, 3, cfg[0], cfg[0], device=dev)
        for prec in ("fp32", "bf16"):
            if prec not in peaks:
                continue
            use_amp = prec == "bf16"

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=use_amp):
                    loss = model(img)
                loss.backward()
                opt.step()
                return loss

            try:
                s = timed(step, dev, max(2, args.iters // 4), warmup=2)
            except RuntimeError as e:  # out of memory at this batch: say so, go on
                emit(args, {"bench": "mae_step", "model": name, "precision": prec, "error": str(e)[:200]},
                     f"{name} MAE step {prec} batch {batch}: failed ({str(e)[:120]})")
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            fl = mae_flops(cfg, batch)
            peak = args.peak_tflops or peaks[prec]
            mfu = fl / s / 1e12 / peak
            emit(args, {"bench": "mae_step", "model": name, "batch": batch, "precision": prec,
                        "ms": round(s * 1e3, 3), "images_per_s": round(batch / s, 2),
                        "model_tflops": round(fl / s / 1e12, 3), "mfu": round(mfu, 4), "peak_tflops": round(peak, 2)},
                 f"{name} MAE train step {prec} batch {batch}: {s * 1e3:9.2f} ms {batch / s:8.1f} img/s "
                 f"{fl / s / 1e12:7.2f} TFLOP/s MFU {100 * mfu:4.1f}% (peak {peak:.1f})")
        del model, opt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--batch-b", type=int, default=64, help="ViT-B/16 images per batch")
    ap.add_argument("--batch-l", type=int, default=32, help="ViT-L/16 images per batch")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="MFU denominator (default: the measured square-GEMM rate of the precision)")
    ap.add_argument("--tiny", action="store_true", help="small shapes: check that the script runs (CPU)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: gemm,attention,mae")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as endoret's fp32 mode
    torch.backends.cudnn.allow_tf32 = False
    skip = set(filter(None, args.skip.split(",")))
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    if not args.json:
        print(f"torch {torch.__version__} on {name}")
    if args.tiny:
        vits = [("tiny-B", 64, 2), ("tiny-L", 96, 1)]
        peak_n, T, D = 256, 17, 32
        cfgs = [("tiny-B", (32, 8, 64, 2, 2, 32, 1, 2), 2)]
        args.iters = min(args.iters, 3)
    else:
        vits = [("ViT-B/16", 768, args.batch_b), ("ViT-L/16", 1024, args.batch_l)]
        peak_n, T, D = 8192, 197, 64
        cfgs = [("ViT-B/16", (224, 16, 768, 12, 12, 512, 8, 16), args.batch_b),
                ("ViT-L/16", (224, 16, 1024, 24, 16, 512, 8, 16), args.batch_l)]
    peaks = {"fp32": 1.0, "bf16": 1.0}
    if "gemm" not in skip:
        peaks = bench_gemm(args, dev, vits, peak_n)
    if "attention" not in skip:
        bench_attention(args, dev, vits, T, D)
    if "mae" not in skip:
        bench_mae(args, dev, cfgs, peaks)


if __name__ == "__main__":
    main()
