#!/usr/bin/python3
"""PyTorch reference for `endoret bench train --model resnet50`: torchvision's ResNet (fc removed, as
endoret's descriptor: the L2-normalised globally pooled features), the same batch, image size and
thread count, torch's own kernels (oneDNN / MKL on the CPU). Prints one JSON line with the keys of
the C benchmark: train = forward + backward of the mean of the descriptor + AdamW; infer = no_grad
forward; timed steps after two warm-up training steps and one inference step, as endoret's.

  /usr/bin/python3 bench/torch_resnet_bench.py --model resnet50 --img 224 --batch 16 --threads 2 [--channels-last]
  python3 bench/torch_resnet_bench.py --device cuda --precision bf16 --channels-last --batch 256 --steps 20
  (on CUDA: bf16 = torch.autocast around the forward, fp32 weights and AdamW state; TF32 off for fp32)
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--img", type=int, default=224)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--channels-last", action="store_true", help="NHWC memory format (oneDNN's preferred)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as endoret's default
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    m = getattr(torchvision.models, a.model)().to(dev)
    m.fc = torch.nn.Identity()
    x = torch.randn(a.batch, 3, a.img, a.img, device=dev)
    bf16 = a.precision == "bf16"

    def amp():
        return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()
    if a.channels_last:
        m = m.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.05, betas=(0.9, 0.95))
    m.train()
    t_train = 0.0
    for s in range(a.steps + 2):
        sync()
        t0 = time.perf_counter()
        with amp():
            loss = F.normalize(m(x).float(), dim=-1).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if s > 1:
            t_train += time.perf_counter() - t0
    m.eval()
    t_inf = 0.0
    with torch.no_grad():
        for s in range(a.steps + 1):
            sync()
            t0 = time.perf_counter()
            with amp():
                F.normalize(m(x).float(), dim=-1)
            sync()
            if s > 0:
                t_inf += time.perf_counter() - t0
    print(json.dumps({"bench": "train", "impl": "torch %s%s" % (torch.__version__, " channels_last" if a.channels_last else ""),
                      "model": a.model, "device": a.device, "precision": a.precision,
                      "img": a.img, "batch": a.batch, "threads": a.threads,
                      "train_img_per_s": round(a.steps * a.batch / t_train, 3),
                      "infer_img_per_s": round(a.steps * a.batch / t_inf, 3)}))


if __name__ == "__main__":
    main()
