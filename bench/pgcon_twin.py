#!/usr/bin/env python3
"""bench/pgcon_twin.py - a PyTorch twin of a PGCon training run (issue #34), written from the paper's
method (../shared/spec/pgcon_dual_vss.md 1.3-1.8, 1.12), not from endoret's C code.

Same run as `make demo-pgcon` / configs/demo_pgcon.cfg: ResNet-18 of width 32 (torchvision layout and
init) with the PGCon heads (projection 128, jigsaw head 9*128 -> 128), prior view 32 px (box 30 around
the reddest CIELAB a* pixel of the 96 px centre crop, flips), 9 jigsaw tiles 24 px (centre crop 85,
cells 28, colour jitter on all, grayscale / erasing on the tiles away from the prior), memory bank of
L2-normalised prior embeddings filled by the untrained network, M_i <- normalize(mu M_i + (1-mu) z_i),
k negatives per term and sample drawn without replacement from the other rows, InfoNCE (tau 0.07)
0.5 jigsaw + 0.5 memory, SGD 0.9 / wd 1e-4 / lr 0.012, cosine warm restarts (T_0 50 epochs, floor
1.2e-4) stepped per iteration, batch 32, an epoch = a random permutation of the training rows.

Besides the terms endoret logs (loss, jigsaw, memory, pos_jig, pos_mem) it logs what tells a bug from
dynamics: neg_mem (mean cosine of the anchor with its memory negatives), age_pos / age_neg (steps since
the positive's row / the negatives' rows were written) and, every --fresh-every steps, the memory term of
the same batch against a bank rebuilt from the current network (mem_fresh): if mem_fresh is below chance
ln(1 + k) while memory is above it, the stored rows are stale, not wrongly indexed.

Run (Debian's torch: apt-get install python3-torch python3-pil; the product never needs Python):
  make demo-pgcon            # or: build/endoret synth ... as configs/demo_pgcon.sh does
  nice /usr/bin/python3 bench/pgcon_twin.py --manifest out/demo/pgcon_synth/manifest.csv --steps 400 \
      --out out/demo/pgcon/twin.jsonl
Knobs for the settings search: --momentum, --tau, --lr, --negatives, --batch, --sampler epoch|iid.
"""
import argparse
import csv
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

MEAN = torch.tensor([0.56, 0.35, 0.20]).view(3, 1, 1)  # WCE statistics (spec 1.2)
STD = torch.tensor([0.30, 0.24, 0.17]).view(3, 1, 1)
SHARED = {1: {0, 1, 3, 4}, 2: {3, 4, 6, 7}, 3: {1, 2, 4, 5}, 4: {4, 5, 7, 8}, 0: {4}}  # spec 1.4, k = 3 col + row


# ------------------------------------------------------------------ data and views

def load_images(manifest, split):
    rows = list(csv.DictReader(open(manifest)))
    key = next(k for k in ("path", "image", "file") if k in rows[0])
    base = os.path.dirname(manifest)
    out = []
    for r in rows:
        if split and r.get("split") != split:
            continue
        p = r[key] if os.path.isabs(r[key]) else os.path.join(base, r[key])
        if not os.path.exists(p):
            p = r[key]
        out.append(torch.from_numpy(np.asarray(Image.open(p).convert("RGB"), dtype=np.float32) / 255.0).permute(2, 0, 1).contiguous())
    return out


def lab_a(rgb):
    """CIELAB a* of an sRGB [3, H, W] image in [0, 1] (D65, skimage's rgb2lab)."""
    lin = torch.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    m = torch.tensor([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169], [0.019334, 0.119193, 0.950227]])
    xyz = torch.einsum("ij,jhw->ihw", m, lin)
    x, y = xyz[0] / 0.95047, xyz[1]
    f = lambda t: torch.where(t > 0.008856, t.clamp(min=1e-12) ** (1 / 3), 7.787 * t + 16 / 116)
    return 500 * (f(x) - f(y))


def center_crop(img, s):
    _, h, w = img.shape
    t, l = (h - s) // 2, (w - s) // 2
    return img[:, t:t + s, l:l + s]


def geometry(S):
    """The reference's geometry (side 316, half box 50, jigsaw 280) scaled to a smaller image."""
    if S >= 316:
        return 316, 50, 280 if S < 360 else 300
    f = S / 316.0
    return S, max(2, round(50 * f)), round(280 * f)


class Prior:
    """Per image, the deterministic part of the prior view (spec 1.3): box and quadrant."""

    def __init__(self, img):
        S = min(img.shape[1:])
        self.side, self.half, self.jig = geometry(S)
        C = center_crop(img, self.side)
        a = lab_a(C)
        ys, xs = divmod(int(torch.argmax(a.flatten())), self.side)
        c, margin = self.side / 2, 50.0 * self.side / 316 if self.side < 316 else 50
        q = (1 if ys < c else 3) if xs < c else (2 if ys < c else 4)
        if c - margin < xs < c + margin and c - margin < ys < c + margin:
            q = 0
        b = self.half
        xc, yc = min(max(xs, b), self.side - b), min(max(ys, b), self.side - b)
        self.q, self.box = q, C[:, yc - b:yc + b, xc - b:xc + b]


def prior_view(pr, out, g):
    v = F.interpolate(pr.box[None], size=(out, out), mode="bilinear", align_corners=False)[0]
    if torch.rand(1, generator=g) < 0.5:
        v = v.flip(2)
    if torch.rand(1, generator=g) < 0.5:
        v = v.flip(1)
    return (v - MEAN) / STD


def gray(x):
    return (0.299 * x[0] + 0.587 * x[1] + 0.114 * x[2])[None]


def color_jitter(x, g, s=0.4):
    """torchvision ColorJitter(0.4, 0.4, 0.4, 0): brightness, contrast, saturation in a random order."""
    for op in torch.randperm(3, generator=g).tolist():
        f = float(1 - s + 2 * s * torch.rand(1, generator=g))
        if op == 0:
            x = (x * f).clamp(0, 1)
        elif op == 1:
            x = (f * x + (1 - f) * gray(x).mean()).clamp(0, 1)
        else:
            x = (f * x + (1 - f) * gray(x)).clamp(0, 1)
    return x


def random_erase(x, g, s0=0.02, s1=0.3, r0=0.3, r1=2.0):
    _, h, w = x.shape
    for _ in range(10):
        area = h * w * float(s0 + (s1 - s0) * torch.rand(1, generator=g))
        ar = math.exp(math.log(r0) + (math.log(r1) - math.log(r0)) * float(torch.rand(1, generator=g)))
        eh, ew = int(round(math.sqrt(area * ar))), int(round(math.sqrt(area / ar)))
        if eh < h and ew < w:
            t = int(torch.randint(0, h - eh + 1, (1,), generator=g))
            l = int(torch.randint(0, w - ew + 1, (1,), generator=g))
            x = x.clone()
            x[:, t:t + eh, l:l + ew] = 0
            return x
    return x


def jigsaw_view(img, pr, out, g):
    D = center_crop(img, pr.jig)
    pw = pr.jig // 3
    crop = min(pw, out)
    tiles = []
    for k in range(9):
        col, row = divmod(k, 3)
        t = row * pw + int(torch.randint(0, pw - crop + 1, (1,), generator=g))
        l = col * pw + int(torch.randint(0, pw - crop + 1, (1,), generator=g))
        x = D[:, t:t + crop, l:l + crop]
        if crop != out:
            x = F.interpolate(x[None], size=(out, out), mode="bilinear", align_corners=False)[0]
        x = color_jitter(x, g)
        clean = k in SHARED[pr.q]
        if not clean and torch.rand(1, generator=g) < 0.1:
            x = gray(x).expand(3, -1, -1)
        x = (x - MEAN) / STD
        if not clean and torch.rand(1, generator=g) < 0.5:
            x = random_erase(x, g)
        tiles.append(x)
    perm = torch.randperm(9, generator=g).tolist()
    return torch.stack([tiles[p] for p in perm])


# ------------------------------------------------------------------ network (torchvision ResNet-18 layout)

class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class PGConNet(nn.Module):
    def __init__(self, width=32, proj=128, tiles=9):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        layers, cin = [], width
        for i, c in enumerate([width, 2 * width, 4 * width, 8 * width]):
            layers += [Basic(cin, c, 1 if i == 0 else 2), Basic(c, c, 1)]
            cin = c
        self.layers = nn.Sequential(*layers)
        self.proj = nn.Linear(cin, proj)              # projection_original_features, shared by every view
        self.jig = nn.Linear(tiles * proj, proj)      # connect_patches_feature
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def project(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        return self.proj(self.layers(x).mean((2, 3)))

    def jigsaw(self, t):  # t [B*9, 3, T, T] -> [B, proj]
        u = self.project(t)
        return self.jig(u.view(-1, 9 * u.shape[1]))


def infonce(a, p, negs, tau):
    """a, p [B, D] and negs [B, k, D], unit rows: mean_i -log softmax([a.p, a.n_1..a.n_k] / tau)[0]."""
    logits = torch.cat([(a * p).sum(1, keepdim=True), torch.einsum("bd,bkd->bk", a, negs)], 1) / tau
    return F.cross_entropy(logits, torch.zeros(a.shape[0], dtype=torch.long)), logits


def lr_at(step, spe, base, floor, t0, mult):
    e = step / spe
    t = t0
    while e >= t:  # CosineAnnealingWarmRestarts with T_mult
        e -= t
        t *= mult
    return floor + (base - floor) * (1 + math.cos(math.pi * e / t)) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--split", default="train")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.012)
    ap.add_argument("--min-lr", type=float, default=1.2e-4)
    ap.add_argument("--restart-epochs", type=float, default=50)
    ap.add_argument("--tau", type=float, default=0.07)
    ap.add_argument("--momentum", type=float, default=0.5, help="memory bank momentum mu")
    ap.add_argument("--negatives", type=int, default=200)
    ap.add_argument("--sampler", default="epoch", choices=["epoch", "iid"], help="epoch: permutations; iid: rows drawn with replacement")
    ap.add_argument("--prior-out", type=int, default=32)
    ap.add_argument("--tile-out", type=int, default=24)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--fresh-every", type=int, default=50, help="0 = never rebuild the diagnostic fresh bank")
    ap.add_argument("--out", default=None, help="JSON lines, one per logged step")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    g = torch.Generator().manual_seed(a.seed + 1)
    imgs = load_images(a.manifest, a.split)
    N, B, k, D = len(imgs), a.batch, a.negatives, 128
    priors = [Prior(x) for x in imgs]
    net = PGConNet(a.width)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
    spe = max(1, N // B)
    chance = math.log(1 + k)
    print(f"twin: {N} images, batch {B}, {spe} steps/epoch, k {k}, tau {a.tau}, mu {a.momentum}, lr {a.lr}, "
          f"sampler {a.sampler}; chance ln(1+k) = {chance:.3f}", flush=True)

    def embed_all():  # every row's prior view through the current network (train-mode BN, chunks of B)
        out = torch.empty(N, D)
        with torch.no_grad():
            for c0 in range(0, N, B):
                ids = list(range(c0, min(N, c0 + B)))
                x = torch.stack([prior_view(priors[i], a.prior_out, g) for i in ids])
                out[c0:c0 + len(ids)] = F.normalize(net.project(x), dim=1)
        return out

    net.train()
    M = embed_all()                           # spec 1.6: the bank from the untrained network
    written = torch.zeros(N, dtype=torch.long)  # step at which each row was last written
    order = []
    logf = open(a.out, "w") if a.out else None
    win, t0 = {}, time.time()
    for step in range(a.steps):
        if a.sampler == "iid":
            idx = torch.randint(0, N, (B,), generator=g)
        else:
            while len(order) < B:
                order += torch.randperm(N, generator=g).tolist()
            idx, order = torch.tensor(order[:B]), order[B:]
        xp = torch.stack([prior_view(priors[i], a.prior_out, g) for i in idx.tolist()])
        xt = torch.cat([jigsaw_view(imgs[i], priors[i], a.tile_out, g) for i in idx.tolist()])
        w = torch.ones(2 * B, N)
        w[torch.arange(2 * B), idx.repeat(2)] = 0
        negi = torch.multinomial(w, k, replacement=False, generator=g).view(2, B, k)  # independent per term
        lr = lr_at(step, spe, a.lr, a.min_lr, a.restart_epochs, 2)
        for pg in opt.param_groups:
            pg["lr"] = lr
        zp = F.normalize(net.project(xp), dim=1)
        zd = F.normalize(net.jigsaw(xt), dim=1)
        l_jig, lg_j = infonce(zp, zd, M[negi[0]], a.tau)
        l_mem, lg_m = infonce(zp, M[idx], M[negi[1]], a.tau)
        loss = 0.5 * l_jig + 0.5 * l_mem
        fresh = None
        if a.fresh_every and (step + 1) % a.fresh_every == 0:
            Mf = embed_all()  # diagnostic only: the bank the network that gave zp would write now
            with torch.no_grad():
                fresh = infonce(zp.detach(), Mf[idx], Mf[negi[1]], a.tau)
        opt.zero_grad()
        loss.backward()
        opt.step()
        st = {"loss": loss.item(), "jigsaw": l_jig.item(), "memory": l_mem.item(),
              "pos_jig": (lg_j[:, 0] * a.tau).mean().item(), "pos_mem": (lg_m[:, 0] * a.tau).mean().item(),
              "neg_mem": (lg_m[:, 1:] * a.tau).mean().item(),
              "age_pos": (step - written[idx]).float().mean().item(),
              "age_neg": (step - written[negi[1]]).float().mean().item()}
        if fresh is not None:
            st["mem_fresh"], st["pos_mem_fresh"] = fresh[0].item(), (fresh[1][:, 0] * a.tau).mean().item()
        with torch.no_grad():  # spec 1.12: M_i <- normalize(mu M_i + (1 - mu) z_i), batch order
            for j, i in enumerate(idx.tolist()):
                M[i] = F.normalize(a.momentum * M[i] + (1 - a.momentum) * zp[j].detach(), dim=0)
                written[i] = step + 1
        for key, v in st.items():
            win.setdefault(key, []).append(v)
        if (step + 1) % a.log_every == 0 or step + 1 == a.steps:
            rec = {"step": step + 1, "epoch": round((step + 1) / spe, 4), "lr": lr}
            rec.update({key: st[key] for key in st})
            rec.update({key + "_win": sum(v) / len(v) for key, v in win.items() if key in ("memory", "jigsaw")})
            rec["time_s"] = round(time.time() - t0, 1)
            win = {}
            line = json.dumps(rec)
            print(line, flush=True)
            if logf:
                logf.write(line + "\n")
                logf.flush()


if __name__ == "__main__":
    main()
