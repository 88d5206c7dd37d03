"""Compare endoret's antialiased resizes of real images (dumped by resize_check.c) with
torch.nn.functional.interpolate(antialias=True), the kernel torchvision's Resize uses on tensors,
both quantised to uint8 the way torchvision returns uint8 images (round, clamp).
Prints the largest difference in 1/255 steps per mode."""
import glob, os, re, sys
import numpy as np
import torch
import torch.nn.functional as F

d = sys.argv[1]
worst = {"bilinear": 0, "bicubic": 0}
count = 0
for src in sorted(glob.glob(os.path.join(d, "*_src_*.f32"))):
    c, h, w = map(int, re.search(r"_(\d+)x(\d+)x(\d+)\.f32$", src).groups())
    x = torch.from_numpy(np.fromfile(src, dtype=np.float32).reshape(1, c, h, w)) * 255.0
    for mode in worst:
        mine = glob.glob(src.replace("_src_", f"_{mode}_").rsplit("_", 1)[0] + "_*.f32")[0]
        ours = np.fromfile(mine, dtype=np.float32).reshape(c, 224, 224) * 255.0
        ref = F.interpolate(x, size=(224, 224), mode=mode, align_corners=False, antialias=True)[0].numpy()
        q_ours = np.clip(np.round(ours), 0, 255)
        q_ref = np.clip(np.round(ref), 0, 255)
        worst[mode] = max(worst[mode], float(np.abs(q_ours - q_ref).max()))
    count += 1
print(f"{count} real images, 224x224: max |endoret - torch antialias| in uint8 steps:", worst)
