#!/usr/bin/env bash
# bench/gpu_train_speed.sh — a real `endoret train image` run on a GPU (loader, augmentation, SSCD +
# MAE objective, the training loop with its per-step checks), not the bench's synthetic step:
# configs/endofinder_image.cfg (ViT-L/16, batch 32, advanced augmentation) on synthetic 256 px
# scenes, bf16, STEPS steps; img/s of the last logged window per binary, binaries alternated.
#   bash bench/gpu_train_speed.sh STEPS BIN [BIN...]
# SPEED_SETS="data.prefetch=off data.prefetch=on": each binary runs once per setting (one --set each).
set -eu
STEPS=${1:?usage: gpu_train_speed.sh STEPS BIN [BIN...]}; shift
W=${GPU_SPEED_DIR:-/tmp/gpu_train_speed}
rm -rf "$W"; mkdir -p "$W"
T=$(nproc)
"$1" synth --out "$W/scenes" --scenes 256 --views 2 --size 256 --seed 11 --threads "$T" > /dev/null
for round in 1 2; do
    for b in "$@"; do
        for set in ${SPEED_SETS:-train.seed=0}; do
            d="$W/run_$(echo "$b $set" | tr '/.= ' '____')_$round"
            "$b" train image --config configs/endofinder_image.cfg --set "data.manifest=$W/scenes/manifest.csv" \
                --set train.steps="$STEPS" --set train.threads="$T" --set out.log_every=10 --set out.ckpt_every=100000 \
                --set "out.dir=$d" --set "$set" --device cuda --precision bf16 --quiet
            printf '%-22s %-18s round %d: %s %s\n' "$b" "$set" "$round" "$(tail -n 1 "$d/log.jsonl" | grep -o '"img_per_s": [0-9.]*')" "$(tail -n 1 "$d/log.jsonl" | grep -o '"loss": [0-9.e-]*')"
        done
    done
done
