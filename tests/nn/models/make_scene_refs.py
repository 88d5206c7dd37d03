#!/usr/bin/python3
"""Reference tensors for tests/nn/models/test_scene.c, written from the EndoFinder-Scene definitions
(spec endofinder_sscd_mae.md 2.2-2.3) independently of nn/models/scene.c.

A tiny scene model: width D = 16, scene encoder 2 heads x 8 (MLP 32), decoder 8 wide, 2 cross-attention
layers of 2 heads x 5 (MLP 32), image 8x8 with patch 4 (L = 4 patches, 48 values each). Inputs: S = 3
scenes x V = 3 views -> N = 9 combinations, each with V-1 = 2 view [CLS] vectors, a masked target latent
([CLS] + K = 2 kept patches), its ids_restore / mask, and target patches. Outputs: the scene descriptors,
the decoder's prediction, the masked MSE, the SSCD loss (tau 0.05, entropy 5, the combinations of a scene
mutual positives), the total 0.5 MSE + SSCD and its gradient for every parameter. float64 throughout.

Writes tests/nn/models/scene_ref.safetensors (float32; parameters under their reference names, the rest
under "in.", "out." and "grad."). The safetensors container is written by hand (no extra package).
Run: /usr/bin/python3 tests/nn/models/make_scene_refs.py
"""
import json
import os
import struct

import torch
import torch.nn.functional as F

torch.manual_seed(11)
torch.set_default_dtype(torch.float64)
D, H, DH, MLP = 16, 2, 8, 32
DD, DEPTH, DHEADS, DDH, DMLP = 8, 2, 2, 5, 32
IMG, P = 8, 4
L, PD = (IMG // P) ** 2, P * P * 3
S, V = 3, 3
N, K = S * V, 2
EPS = 1e-5
TAU, ENT = 0.05, 5.0
here = os.path.dirname(os.path.abspath(__file__))


def sincos_2d(dim, g):
    """MAE's 2-D sin-cos table with a zero [CLS] row: first half from the column (w) index, second from the row (h)."""
    def one(d, pos):
        om = 1.0 / 10000 ** (torch.arange(d // 2, dtype=torch.float64) / (d / 2.0))
        out = pos.reshape(-1)[:, None] * om[None]
        return torch.cat([torch.sin(out), torch.cos(out)], 1)
    gh, gw = torch.meshgrid(torch.arange(g, dtype=torch.float64), torch.arange(g, dtype=torch.float64), indexing="ij")
    emb = torch.cat([one(dim // 2, gw), one(dim // 2, gh)], 1)
    return torch.cat([torch.zeros(1, dim), emb], 0)[None]


w = {}
def lin(name, out, inp, bias=True):
    w[name + ".weight"] = torch.randn(out, inp) * (1.0 / inp ** 0.5)
    if bias:
        w[name + ".bias"] = torch.randn(out) * 0.1
def ln(name, d):
    w[name + ".weight"] = 1 + 0.1 * torch.randn(d)
    w[name + ".bias"] = 0.1 * torch.randn(d)

w["scene_token"] = torch.randn(1, 1, D) * 0.5
ln("scene_transform.layers.0.0.norm", D)
lin("scene_transform.layers.0.0.fn.to_qkv", 3 * H * DH, D, bias=False)
lin("scene_transform.layers.0.0.fn.to_out.0", D, H * DH)
ln("scene_transform.layers.0.1.norm", D)
lin("scene_transform.layers.0.1.fn.net.0", MLP, D)
lin("scene_transform.layers.0.1.fn.net.3", D, MLP)
lin("decoder_embed", DD, D)
w["mask_token"] = torch.randn(1, 1, DD) * 0.5
for i in range(DEPTH):
    p = "decoder_transformer.layers.%d." % i
    ln(p + "0.norm", DD)
    lin(p + "0.fn.to_q", DHEADS * DDH, DD, bias=False)
    lin(p + "0.fn.to_kv", 2 * DHEADS * DDH, D, bias=False)
    lin(p + "0.fn.to_out.0", DD, DHEADS * DDH)
    ln(p + "1.norm", DD)
    lin(p + "1.fn.net.0", DMLP, DD)
    lin(p + "1.fn.net.3", DD, DMLP)
lin("decoder_pred", PD, DD)
fixed = {"decoder_pos_embed": sincos_2d(DD, IMG // P)}
for t in w.values():
    t.requires_grad_(True)


def attention(x, z, pre, heads, dh):
    B, T, _ = x.shape
    if z is None:
        q, k, v = F.linear(x, w[pre + "fn.to_qkv.weight"]).chunk(3, -1)
    else:
        q = F.linear(x, w[pre + "fn.to_q.weight"])
        k, v = F.linear(z, w[pre + "fn.to_kv.weight"]).chunk(2, -1)
    split = lambda t: t.reshape(t.shape[0], t.shape[1], heads, dh).transpose(1, 2)
    q, k, v = split(q), split(k), split(v)
    a = torch.softmax(q @ k.transpose(-1, -2) * dh ** -0.5, -1) @ v
    a = a.transpose(1, 2).reshape(B, T, heads * dh)
    return F.linear(a, w[pre + "fn.to_out.0.weight"], w[pre + "fn.to_out.0.bias"])


def layer(x, z, pre, dim, heads, dh):
    h = F.layer_norm(x, (dim,), w[pre + "0.norm.weight"], w[pre + "0.norm.bias"], EPS)
    x = x + attention(h, z, pre + "0.", heads, dh)
    h = F.layer_norm(x, (dim,), w[pre + "1.norm.weight"], w[pre + "1.norm.bias"], EPS)
    h = F.linear(F.gelu(F.linear(h, w[pre + "1.fn.net.0.weight"], w[pre + "1.fn.net.0.bias"])),
                 w[pre + "1.fn.net.3.weight"], w[pre + "1.fn.net.3.bias"])
    return x + h


views = torch.randn(N, V - 1, D)
latent = torch.randn(N, 1 + K, D)
shuffle = torch.stack([torch.randperm(L) for _ in range(N)])
restore = torch.argsort(shuffle, 1)
mask = torch.ones(N, L)
mask[:, :K] = 0
mask = torch.gather(mask, 1, restore)
target = torch.randn(N, L, PD)
ids = torch.arange(N) // V

# scene encoder
x = torch.cat([w["scene_token"].expand(N, -1, -1), views], 1)
x = layer(x, None, "scene_transform.layers.0.", D, H, DH)
z = F.normalize(x[:, 0], dim=-1)
# decoder
y = F.linear(latent, w["decoder_embed.weight"], w["decoder_embed.bias"])
y_ = torch.cat([y[:, 1:], w["mask_token"].expand(N, L - K, -1)], 1)
y_ = torch.gather(y_, 1, restore[:, :, None].expand(-1, -1, DD))
y = torch.cat([y[:, :1], y_], 1) + fixed["decoder_pos_embed"]
y = y[:, 1:]
for i in range(DEPTH):
    y = layer(y, z[:, None], "decoder_transformer.layers.%d." % i, DD, DHEADS, DDH)
pred = F.linear(y, w["decoder_pred.weight"], w["decoder_pred.bias"])
mse = (((pred - target) ** 2).mean(-1) * mask).sum() / mask.sum()
# SSCD loss as the reference's forward_sscd_loss (no MixUp)
sim = z @ z.T
match = ids[:, None] == ids[None, :]
nonmatch = ~match
nontrivial = match & ~torch.eye(N, dtype=torch.bool)
logits = (sim / TAU).exp()
part = logits + ((nonmatch * logits).sum(1) + 1e-6)[:, None]
infonce = (-(logits / part).log() * nontrivial).sum() / N
maxneg = torch.where(nonmatch, sim, torch.full_like(sim, -100.0)).max(1).values
entropy = -(2 - 2 * maxneg).clamp(min=1e-6).sqrt().log().mean()
sscd = infonce + ENT * entropy
total = 0.5 * mse + sscd
total.backward()

out = {}
for k_, t in w.items():
    out[k_] = t.detach()
    out["grad." + k_] = t.grad
out["decoder_pos_embed"] = fixed["decoder_pos_embed"]
out["in.views"] = views
out["in.latent"] = latent
out["in.restore"] = restore.double()
out["in.mask"] = mask
out["in.target"] = target
out["out.z"] = z.detach()
out["out.pred"] = pred.detach()
out["out.losses"] = torch.tensor([mse.item(), infonce.item(), entropy.item(), total.item()])

header, blobs, off = {}, [], 0
for name in sorted(out):
    data = out[name].detach().contiguous().float().numpy().tobytes()
    header[name] = {"dtype": "F32", "shape": list(out[name].shape), "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
header["__metadata__"] = {"format": "pt", "torch": torch.__version__}
hj = json.dumps(header, separators=(",", ":")).encode()
hj += b" " * ((8 - len(hj) % 8) % 8)
with open(os.path.join(here, "scene_ref.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(hj)))
    f.write(hj)
    for b in blobs:
        f.write(b)
print("mse %.6f infonce %.6f entropy %.6f total %.6f" % (mse.item(), infonce.item(), entropy.item(), total.item()))
