#!/usr/bin/python3
"""Outside weights on real images: the same file, the same pixels, endoret vs PyTorch.

For N Kvasir-SEG images (../shared/data, never copied into the repo) resized once to 224x224 with PIL
and saved as PNG (so both sides read identical pixels; endoret's resize of a 224 image to 224 is the
identity), this writes
  - a ResNet-50 in torchvision's layout (tests/ref/make_resnet_ref.py's re-typed definition; random
    weights and random batch-norm statistics, as a state dict without num_batches_tracked), and
  - a DINOv2 ViT-S/14 with 4 registers and LayerScale in Meta's layout
    (tests/nn/models/make_dinov2_refs.py's definition, random weights, 224^2 position table),
  - the same ViT-S/14 reg4 with the hub checkpoints' 518^2 table (37^2 + 1 rows), used at 224 as
    dinov2_vits14_reg does (interpolate_pos_encoding, antialias=True, offset 0: embed --img 224),
    in Meta's layout and converted by `endoret convert` to timm's and Hugging Face's, and
  - a DINO v1 ViT-S/16 (GastroNet-5M's architecture) as a teacher checkpoint (backbone. + head) with a
    224 table used at 160 (DINO's interpolate_pos_encoding: scale_factor (10 + 0.1) / 14),
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
    lr = load_module(os.path.join(root, "tests", "nn", "models", "make_layout_refs.py"), "lr")
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
    # DINOv2 ViT-S/14 reg4 with the hub's 518 table, at 224 by the hub reg rule
    d518 = dv.DinoVisionTransformer(518, 14, 384, 12, 6, mlp_ratio=4.0, init_values=1.0, num_register_tokens=4)
    d518.load_state_dict({k: (v if k != "pos_embed" else 0.5 * torch.randn(1, 1 + 37 * 37, 384))
                          for k, v in d.state_dict().items()})
    d518.interpolate_pos_encoding = lambda t, w, h: lr.meta_interpolate_pos_encoding(d518.pos_embed, w // 14, 0.0, True)
    d518.eval()
    # DINO v1 ViT-S/16 teacher checkpoint: backbone.* (timm names, no LayerScale) + a DINO head, 224 table
    g = torch.Generator().manual_seed(16)
    v1 = {"backbone.cls_token": 0.5 * torch.randn(1, 1, 384, generator=g),
          "backbone.pos_embed": 0.5 * torch.randn(1, 1 + 14 * 14, 384, generator=g),
          "backbone.patch_embed.proj.weight": torch.randn(384, 3, 16, 16, generator=g) * 768 ** -0.5,
          "backbone.patch_embed.proj.bias": 0.05 * torch.randn(384, generator=g),
          "backbone.norm.weight": 1 + 0.1 * torch.randn(384, generator=g), "backbone.norm.bias": 0.05 * torch.randn(384, generator=g),
          "head.mlp.0.weight": torch.randn(64, 384, generator=g), "head.last_layer.weight_v": torch.randn(32, 64, generator=g)}
    for n in range(12):
        b = "backbone.blocks.%d." % n
        for nm, shp in (("norm1.weight", (384,)), ("norm1.bias", (384,)), ("attn.qkv.weight", (1152, 384)),
                        ("attn.qkv.bias", (1152,)), ("attn.proj.weight", (384, 384)), ("attn.proj.bias", (384,)),
                        ("norm2.weight", (384,)), ("norm2.bias", (384,)), ("mlp.fc1.weight", (1536, 384)),
                        ("mlp.fc1.bias", (1536,)), ("mlp.fc2.weight", (384, 1536)), ("mlp.fc2.bias", (384,))):
            t = torch.randn(*shp, generator=g)
            v1[b + nm] = (1 + 0.1 * t) if nm.endswith("norm1.weight") or nm.endswith("norm2.weight") else \
                (0.05 * t if nm.endswith("bias") else t * shp[-1] ** -0.5)
    lr.D, lr.HEADS, lr.DEPTH = 384, 6, 12  # make_layout_refs' DINO v1 forward at ViT-S/16 size
    with torch.no_grad():
        feats = torch.flatten(m.avgpool(m.layer4(m.layer3(m.layer2(m.layer1(m.maxpool(m.relu(m.bn1(m.conv1(x))))))))), 1)
        ref = {"resnet50": F.normalize(feats, dim=1), "dinov2_vits14_reg4": F.normalize(d(x), dim=1),
               "dinov2_vits14_reg4_518": F.normalize(d518(x), dim=1)}
    dv.write_safetensors(os.path.join(out, "resnet50.safetensors"), sd, "F32")
    dv.write_safetensors(os.path.join(out, "dinov2_vits14_reg4.safetensors"), d.state_dict(), "F32")
    dv.write_safetensors(os.path.join(out, "dinov2_vits14_reg4_518.safetensors"), d518.state_dict(), "F32")
    dv.write_safetensors(os.path.join(out, "dino_vits16_teacher.safetensors"), v1, "F32")
    for to in ("timm", "hf"):
        subprocess.run([exe, "convert", "--in", os.path.join(out, "dinov2_vits14_reg4_518.safetensors"), "--out",
                        os.path.join(out, "dinov2_vits14_reg4_518_%s.safetensors" % to), "--to", to], check=True,
                       stdout=subprocess.DEVNULL)
        ref["dinov2_vits14_reg4_518_%s" % to] = ref["dinov2_vits14_reg4_518"]
    # DINO v1 at 160: 160x160 PNG copies, so both sides read the same pixels (embed's resize of a 160
    # image to the model's 160 is the identity); the 224 table is resized by DINO's offset rule
    rows160 = []
    for i, p in enumerate(rows):
        q = os.path.join(out, "img160_%02d.png" % i)
        Image.open(p).resize((160, 160), Image.BILINEAR).save(q)
        rows160.append(q)
    with open(os.path.join(out, "manifest160.csv"), "w") as f:
        f.write("path\n" + "".join(os.path.abspath(p) + "\n" for p in rows160))
    x160 = torch.stack([torch.from_numpy(__import__("numpy").asarray(Image.open(p), dtype="float32")).permute(2, 0, 1) / 255
                        for p in rows160])
    x160 = (x160 - mean) / std
    with torch.no_grad():
        ref["dino_vits16_teacher"] = F.normalize(lr.dinov1_cls(v1, x160), dim=1)
    cases = (("resnet50", [], "manifest.csv"), ("dinov2_vits14_reg4", ["--heads", "6"], "manifest.csv"),
             ("dinov2_vits14_reg4_518", ["--heads", "6", "--img", "224"], "manifest.csv"),
             ("dinov2_vits14_reg4_518_timm", ["--heads", "6", "--img", "224"], "manifest.csv"),
             ("dinov2_vits14_reg4_518_hf", ["--heads", "6", "--img", "224"], "manifest.csv"),
             ("dino_vits16_teacher", ["--heads", "6", "--img", "160"], "manifest160.csv"))
    for tag, extra, manifest in cases:
        emb = os.path.join(out, tag + "_emb.safetensors")
        subprocess.run([exe, "embed", "--model", os.path.join(out, tag + ".safetensors"), "--manifest",
                        os.path.join(out, manifest), "--out", emb] + extra, check=True, stdout=subprocess.DEVNULL)
        ours = read_embeddings(emb)
        diff = (ours - ref[tag]).abs().max().item()
        cos = (ours * ref[tag]).sum(1).min().item()
        # the error relative to how far the images' descriptors are from their mean (a random ResNet's pooled
        # features share a large common part, so the absolute error alone would say little)
        spread = (ref[tag] - ref[tag].mean(0)).abs().max().item()
        dev = ((ours - ours.mean(0)) - (ref[tag] - ref[tag].mean(0))).abs().max().item() / spread
        worst = max(worst, diff, dev * 1e-2)
        side = extra[extra.index("--img") + 1] if "--img" in extra else "224"
        print("%-27s %d real images %sx%s: max |endoret - torch| %.3g, min cosine %.9f; image-to-image part: "
              "spread %.3g, relative error %.3g" % (tag, len(rows), side, side, diff, cos, spread, dev))
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()
