#!/usr/bin/env bash
# bench/gpu_bf16_track.sh — issue #27's check that bf16 training follows fp32 training: the same
# trainer, seed, data and config on the GPU in both precisions, loss curves side by side.
#   image: configs/endofinder_image.cfg on ViT-S/16 (MAE + SSCD), batch 32, IMAGE_STEPS (200) steps
#   pgcon: configs/pgcon.cfg (ResNet-50, SGD), batch 64, 64 negatives, PGCON_STEPS (60) steps
# on synthetic 256 px scenes (`endoret synth`). Per run: the mean relative difference of the logged
# losses over the last half, and each run's first and last logged loss (both must fall alike).
#   bash bench/gpu_bf16_track.sh BIN          (DEV=cpu with small *_STEPS: a smoke test of the script)
set -eu
BIN=${1:?usage: gpu_bf16_track.sh BIN}
W=${GPU_TRACK_DIR:-/tmp/gpu_bf16_track}
rm -rf "$W"; mkdir -p "$W"
T=$(nproc)
"$BIN" synth --out "$W/scenes" --scenes 256 --views 2 --size 256 --seed 11 --threads "$T" > /dev/null
for p in fp32 bf16; do
    "$BIN" train image --config configs/endofinder_image.cfg --set model.arch=vit_small --set "data.manifest=$W/scenes/manifest.csv" \
        --set train.steps="${IMAGE_STEPS:-200}" --set train.threads="$T" --set out.log_every=10 --set out.ckpt_every=100000 \
        --set "out.dir=$W/image.$p" --device "${DEV:-cuda}" --precision "$p" --quiet
    "$BIN" train pgcon --config configs/pgcon.cfg --set "data.manifest=$W/scenes/manifest.csv" --set train.batch=64 \
        --set pgcon.negatives=64 --set train.steps="${PGCON_STEPS:-60}" --set train.threads="$T" --set out.log_every=5 \
        --set out.ckpt_every=100000 --set "out.dir=$W/pgcon.$p" --device "${DEV:-cuda}" --precision "$p" --quiet
done
python3 - "$W" <<'PY'
import json, os, sys
w = sys.argv[1]
for name in ("image", "pgcon"):
    rows = {}
    for p in ("fp32", "bf16"):
        with open(os.path.join(w, "%s.%s" % (name, p), "log.jsonl")) as f:
            rows[p] = [json.loads(l) for l in f if '"loss"' in l]
    a, b = rows["fp32"], rows["bf16"]
    for x, y in zip(a, b):
        print("%-6s step %4d  fp32 %10.5f  bf16 %10.5f  rel %8.2e" % (name, x["step"], x["loss"], y["loss"],
              abs(x["loss"] - y["loss"]) / max(abs(x["loss"]), 1e-12)))
    half = [(x["loss"], y["loss"]) for x, y in zip(a, b)][len(a) // 2:]
    mean = sum(abs(x - y) / abs(x) for x, y in half) / max(len(half), 1)
    print("%s: %d logged steps; fp32 %.4f -> %.4f, bf16 %.4f -> %.4f; mean relative difference over the last half %.3e"
          % (name, len(a), a[0]["loss"], a[-1]["loss"], b[0]["loss"], b[-1]["loss"], mean))
PY
