#!/usr/bin/python3
"""PyTorch reference for `endoret bench latency`: the encoder stage only, the same ViT as
bench/torch_vit_bench.py (timm layout), eager forward in eval mode under no_grad at batch 1, the same
thread count and precision (bf16: torch.autocast), p50 / p99 (nearest rank) over --runs runs after
--warmup. One JSON line with encoder_ms_p50 / encoder_ms_p99, as the C benchmark's keys.

  /usr/bin/python3 bench/torch_latency.py --model vit_small --img 224 --threads 2 [--precision bf16]
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_vit_bench import CONFIGS, ViT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="vit_small")
    ap.add_argument("--img", type=int, default=224)
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--precision", default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    d, depth, h = CONFIGS[a.model]
    m = ViT(d, depth, h, a.img, a.patch).eval()
    x = torch.randn(1, 3, a.img, a.img)
    times = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
        for i in range(a.warmup + a.runs):
            t0 = time.perf_counter()
            m(x)[:, 0].float()
            if i >= a.warmup:
                times.append(1e3 * (time.perf_counter() - t0))
    times.sort()
    p = lambda q: times[max(0, math.ceil(q / 100 * len(times)) - 1)]
    print(json.dumps({"bench": "latency", "impl": "torch %s eager" % torch.__version__, "model": a.model, "img": a.img,
                      "threads": a.threads, "precision": a.precision, "runs": a.runs,
                      "encoder_ms_p50": round(p(50), 4), "encoder_ms_p99": round(p(99), 4)}))


if __name__ == "__main__":
    main()
