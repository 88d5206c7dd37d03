#!/usr/bin/python3
"""Outside weights on real images: the same file, the same pixels, endoret vs PyTorch.

For N Kvasir-SEG images (../shared/data, never copied into the repo) resized once to 224x224 with PIL
and saved as PNG (so both sides read identical pixels; endoret's resize of a 224 image to 224 is the
identity), this writes
  - a ResNet-50 in torchvision's layout (tests/ref/make_resnet_ref.py's re-typed definition; random
    weights and random batch-norm statistics, as a state dict without num_batches_tracked), and
  - a DINOv2 ViT-S/14 with 4 registers and LayerScale in Meta's layout
    (tests/nn/models/make_dinov2_refs.py's definition, random weights, 224^2 position table),
runs `endoret embed` on them and compares the descriptors with PyTorch's (eval mode, ImageNet
normalisation): the ResNet's L2-normalised pooled features, DINOv2's L2-normalised x_norm_clstoken.
Prints max |difference|, the smallest cosine, and the error of the part that differs between images
relative to its size; exits 1 when the difference exceeds 1e-4 or that relative error 1e-2.

usage: /usr/bin/python3 tests/ref/real_image_parity.py BUILD/endoret OUTDIR [N]
"""
import importlib.util
import json
import os
import struct
import subprocess
import sys

import torch
import torch.nn.functional as F
from PIL import Image

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)  # their main() runs only under __main__
    return m


def read_embeddings(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    h = json.loads(raw[8:8 + n])
    e = h["embeddings"]
    s, t = e["data_offsets"]
    x = torch.frombuffer(bytearray(raw[8 + n + s:8 + n + t]), dtype=torch.float32)
    return x.reshape(e["shape"])


def main():
    exe, out = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    os.makedirs(out, exist_ok=True)
    src = os.path.join(root, "..", "shared", "data", "kvasir_seg", "images")
    names = sorted(os.listdir(src))[:count]
    rows = []
    for i, nm in enumerate(names):
        p = os.path.join(out, "img%02d.png" % i)
        Image.open(os.path.join(src, nm)).convert("RGB").resize((224, 224), Image.BILINEAR).save(p)
        rows.append(p)
    with open(os.path.join(out, "manifest.csv"), "w") as f:
        f.write("path\n" + "".join(os.path.abspath(p) + "\n" for p in rows))
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    x = torch.stack([torch.from_numpy(__import__("numpy").asarray(Image.open(p), dtype="float32")).permute(2, 0, 1) / 255
                     for p in rows])
    x = (x - mean) / std
    rn = load_module(os.path.join(here, "make_resnet_ref.py"), "rn")
    dv = load_module(os.path.join(root, "tests", "nn", "models", "make_dinov2_refs.py"), "dv")
    worst = 0.0
    torch.manual_seed(50)
    # ResNet-50, torchvision v1.5 layout
    m = rn.ResNet(rn.Bottleneck, [3, 4, 6, 3], 64, 1000).float()
    with torch.no_grad():  # torchvision's init for convs; mild random statistics, so images stay apart
        for mod in m.modules():
            if isinstance(mod, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.weight.uniform_(0.8, 1.2); mod.bias.normal_(0, 0.1)
                mod.running_mean.normal_(0, 0.1); mod.running_var.uniform_(0.8, 1.2)
    m.eval()
    sd = {k: v for k, v in m.state_dict().items() if not k.endswith("num_batches_tracked")}
    # DINOv2 ViT-S/14 reg4 at 224
    d = dv.DinoVisionTransformer(224, 14, 384, 12, 6, mlp_ratio=4.0, init_values=1.0, num_register_tokens=4)
    with torch.no_grad():
        for name, p in d.named_parameters():
            if name.endswith("gamma"):
                p.copy_(0.5 + 0.1 * torch.randn_like(p))
            elif name in ("cls_token", "pos_embed", "register_tokens", "mask_token"):
                p.copy_(0.5 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn_like(p))
            elif not (name.startswith("norm") or ".norm" in name):
                p.copy_(torch.randn_like(p) * p[0].numel() ** -0.5)
    d.eval()
    with torch.no_grad():
        feats = torch.flatten(m.avgpool(m.layer4(m.layer3(m.layer2(m.layer1(m.maxpool(m.relu(m.bn1(m.conv1(x))))))))), 1)
        ref = {"resnet50": F.normalize(feats, dim=1), "dinov2_vits14_reg4": F.normalize(d(x), dim=1)}
    dv.write_safetensors(os.path.join(out, "resnet50.safetensors"), sd, "F32")
    dv.write_safetensors(os.path.join(out, "dinov2_vits14_reg4.safetensors"), d.state_dict(), "F32")
    for tag, extra in (("resnet50", []), ("dinov2_vits14_reg4", ["--heads", "6"])):
        emb = os.path.join(out, tag + "_emb.safetensors")
        subprocess.run([exe, "embed", "--model", os.path.join(out, tag + ".safetensors"), "--manifest",
                        os.path.join(out, "manifest.csv"), "--out", emb] + extra, check=True, stdout=subprocess.DEVNULL)
        ours = read_embeddings(emb)
        diff = (ours - ref[tag]).abs().max().item()
        cos = (ours * ref[tag]).sum(1).min().item()
        # the error relative to how far the images' descriptors are from their mean (a random ResNet's pooled
        # features share a large common part, so the absolute error alone would say little)
        spread = (ref[tag] - ref[tag].mean(0)).abs().max().item()
        dev = ((ours - ours.mean(0)) - (ref[tag] - ref[tag].mean(0))).abs().max().item() / spread
        worst = max(worst, diff, dev * 1e-2)
        print("%-20s %d real images 224x224: max |endoret - torch| %.3g, min cosine %.9f; image-to-image part: "
              "spread %.3g, relative error %.3g" % (tag, len(rows), diff, cos, spread, dev))
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()
