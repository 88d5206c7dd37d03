#!/bin/sh
# PGCon on real images, a CPU-budget check: pre-train a small ResNet-18 (width 32) with PGCon on the 800
# training images of Kvasir-SEG (the split of configs/kvasir_reid.sh), then score copy detection on
# the 200 held-out images (5 "light" copies each; queries = copies, references = originals; ISC2021
# uAP / Acc@1, k 10) against random init and the colour histogram. Kvasir-SEG frames are ~600 px:
# the reference geometry applies (side 500, prior box 150, jigsaw 400), views fed at 64 / 48 px.
#   sh bench/pgcon_kvasir.sh [build/endoret]   (needs ../shared/data/kvasir_seg; ~10 min on 2 cores)
set -eu
BIN=${1:-build/endoret}
OUT=${PGK_OUT:-out/pgcon_kvasir}
DATA=${KVASIR_DATA:-../shared/data/kvasir_seg}
STEPS=${PGK_STEPS:-400}
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
mkdir -p "$OUT"
"$BIN" data import --layout image-mask "$DATA" --out "$OUT/manifest.csv"
"$BIN" data split "$OUT/manifest.csv" --folds 5 --by label --seed 0 --holdout-fold 0 --out "$OUT/split.csv"
"$BIN" data copies --manifest "$OUT/split.csv" --split test --out "$OUT/copies" --copies 5 --seed 20261122 --preset light --threads 2
SETS="--set model.arch=resnet18 --set model.width=32 --set model.img=96 --set pgcon.prior_out=64 --set pgcon.tile_out=48
      --set pgcon.win_out=96 --set pgcon.eval_crop=0.8 --set data.manifest=$OUT/split.csv --set data.split=train
      --set data.cache_side=576 --set train.batch=32 --set train.steps=$STEPS --set train.threads=2"
for v in pgcon wincon; do
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$BIN" train pgcon --config configs/pgcon.cfg $SETS --set pgcon.variant=$v --set "out.dir=$OUT/$v" --quiet
    echo "== $v: $(( $(date +%s) - t0 )) s; $(tail -n 1 "$OUT/$v/log.jsonl" | cut -c1-160)"
done
M="$OUT/copies/manifest.csv"
# shellcheck disable=SC2086
"$BIN" embed --config configs/pgcon.cfg $SETS --manifest "$M" --out "$OUT/random_emb.safetensors" --threads 2 > /dev/null
"$BIN" embed --baseline colorhist --manifest "$M" --out "$OUT/colorhist_emb.safetensors" > /dev/null
for v in pgcon wincon; do
    "$BIN" embed --model "$OUT/$v/encoder.safetensors" --manifest "$M" --out "$OUT/${v}_emb.safetensors" --threads 2 > /dev/null
done
printf '%-10s %8s %18s %8s %18s\n' model uAP "95% CI" Acc@1 "95% CI"
for name in random colorhist pgcon wincon; do
    l=$("$BIN" eval reid --emb "$OUT/${name}_emb.safetensors" --ref-view 0 --k 10 --json)
    g() { echo "$l" | sed "s/.*\"$1\": \([^,}]*\).*/\1/"; }
    printf '%-10s %8.4f   [%.4f, %.4f] %8.4f   [%.4f, %.4f]\n' "$name" "$(g uAP)" "$(g uAP_lo)" "$(g uAP_hi)" "$(g acc1)" "$(g acc1_lo)" "$(g acc1_hi)"
done
