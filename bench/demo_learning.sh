#!/bin/sh
# bench/demo_learning.sh NAME [--set k=v ...] — one controlled run of docs/demo_learning.md: train
# configs/demo_image.cfg (with the given overrides) on the demo's synthetic scenes, embed the 60
# held-out test scenes, evaluate single-view re-ID (query view 0 -> reference view 2, k = 10) and
# append "NAME uAP acc1 train-seconds | overrides | last log line" to $DL_OUT/results.txt.
# Data: DL_MAN (default $DL_OUT/synth/manifest.csv, rendered on first use exactly as make demo does:
# 400 scenes x 4 views, 64x64, seed 7). BIN (build/endoret), THR (2 threads), DL_OUT (out/dl).
set -eu
BIN=${BIN:-build/endoret}
OUT=${DL_OUT:-out/dl}
MAN=${DL_MAN:-$OUT/synth/manifest.csv}
T=${THR:-2}
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
name=$1; shift
[ -f "$MAN" ] || "$BIN" synth --out "$(dirname "$MAN")" --scenes 400 --views 4 --size 64 --seed 7 --threads "$T"
d=$OUT/runs/$name
mkdir -p "$d"
t0=$(date +%s)
"$BIN" train image --config configs/demo_image.cfg --set data.manifest="$MAN" --set train.threads="$T" \
    --set out.dir="$d" --set out.ckpt_every=100000 "$@" --quiet > "$d/train.out" 2>&1 || { cat "$d/train.out"; exit 1; }
t1=$(date +%s)
"$BIN" embed --model "$d/encoder.safetensors" --manifest "$MAN" --split test --out "$d/emb.safetensors" --threads "$T" > /dev/null
line=$("$BIN" eval multiview --emb "$d/emb.safetensors" --k 10 --bootstrap 0 --json | grep '"query_views": "Q1", "ref_views": "R1"')
uap=$(echo "$line" | sed 's/.*"uAP": \([^,}]*\).*/\1/')
acc=$(echo "$line" | sed 's/.*"acc1": \([^,}]*\).*/\1/')
printf '%-28s uAP %.4f acc1 %.4f train %ss | %s | %s\n' "$name" "$uap" "$acc" $((t1 - t0)) "$*" "$(tail -n 1 "$d/log.jsonl")" |
    tee -a "$OUT/results.txt"
