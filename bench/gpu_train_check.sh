#!/usr/bin/env bash
# bench/gpu_train_check.sh — the trainers on a GPU against the CPU (issue #16, item 5): each objective
# that accepts --device cuda trains a few steps from the same seed, data and config on both devices
# (fp32), and the per-step losses are printed side by side with their relative difference.
#   bash bench/gpu_train_check.sh BIN [STEPS]        (BIN: an endoret built with CUDA)
# Objectives: image (configs/demo_image.cfg), dual (configs/demo_dual.cfg, random-init backbones),
# pgcon and wincon (configs/demo_pgcon.cfg), pgcon_nhwc (pgcon with model.layout = nhwc: the channels-last
# ResNet, its CUDA kernels against the CPU's references), scene (configs/demo_scene.cfg on the image
# run's CPU encoder).
set -eu
BIN=${1:?usage: gpu_train_check.sh BIN [STEPS]}
STEPS=${2:-3}
W=${GPU_CHECK_DIR:-/tmp/gpu_train_check}
rm -rf "$W"; mkdir -p "$W"
T=$(nproc)
"$BIN" synth --out "$W/scenes" --scenes 24 --views 4 --size 64 --seed 11 --threads "$T" > /dev/null
"$BIN" synth --out "$W/frames" --scenes 64 --views 1 --size 96 --seed 11 --background --threads "$T" > /dev/null
sed -i -e 's/,benign,/,lesion,/' -e 's/,malignant,/,lesion,/' "$W/frames/manifest.csv"
run() { # name objective config device extra...
    local name=$1 obj=$2 cfg=$3 dev=$4; shift 4
    "$BIN" train "$obj" --config "$cfg" --set train.steps="$STEPS" --set train.threads="$T" --set train.device="$dev" \
        --set "out.dir=$W/$name.$dev" --set out.log_every=1 --quiet "$@"
}
for dev in ${GPU_CHECK_DEVICES:-cpu cuda}; do
    run image image configs/demo_image.cfg $dev --set "data.manifest=$W/scenes/manifest.csv"
    run dual dual configs/demo_dual.cfg $dev --set "data.manifest=$W/scenes/manifest.csv"
    run scene scene configs/demo_scene.cfg $dev --set "data.manifest=$W/scenes/manifest.csv" \
        --set "scene.image_encoder=$W/image.cpu/encoder.safetensors"
    for v in pgcon wincon; do
        run $v pgcon configs/demo_pgcon.cfg $dev --set "data.manifest=$W/frames/manifest.csv" \
            --set "eval.manifest=$W/frames/manifest.csv" --set pgcon.variant=$v --set pgcon.negatives=32
    done
    run pgcon_nhwc pgcon configs/demo_pgcon.cfg $dev --set "data.manifest=$W/frames/manifest.csv" \
        --set "eval.manifest=$W/frames/manifest.csv" --set pgcon.negatives=32 --set model.layout=nhwc
done
python3 - "$W" <<'PY'
import json, sys, os
w = sys.argv[1]
worst = 0.0
print("%-10s %4s %14s %14s %10s %6s" % ("trainer", "step", "loss cpu", "loss cuda", "rel diff", "waits"))
for name in ("image", "dual", "scene", "pgcon", "wincon", "pgcon_nhwc"):
    rows = {}
    for dev in ("cpu", "cuda"):
        if not os.path.exists(os.path.join(w, "%s.%s" % (name, dev), "log.jsonl")):
            rows[dev] = []
            continue
        with open(os.path.join(w, "%s.%s" % (name, dev), "log.jsonl")) as f:
            rows[dev] = [json.loads(l) for l in f if '"loss"' in l]
    for a, b in zip(rows["cpu"], rows["cuda"]):
        d = abs(a["loss"] - b["loss"]) / max(abs(a["loss"]), 1e-12)
        worst = max(worst, d)
        # the host's waits for the device per cuda step (train/step_record.h: 1 when nothing reads mid-step)
        print("%-10s %4d %14.7f %14.7f %10.2e %6s" % (name, a.get("step", -1), a["loss"], b["loss"], d,
                                                   b.get("host_waits_per_step", "-")))
print("worst relative loss difference: %.2e" % worst)
PY
