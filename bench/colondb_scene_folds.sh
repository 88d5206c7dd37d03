#!/bin/sh
# The scene encoder trained on real sequences against averaging, on CVC-ColonDB leave-sequences-out
# (issue 31, item 2; bench/RESULTS_endofinder.md "CVC-ColonDB leave-sequences-out"). Needs the folds
# of bench/colondb_folds.sh (<out>/fold<k>/encoder.safetensors, hold<k>.csv, folds.csv). For every
# fold k: configs/colondb_scene_cpu.cfg trains the scene encoder on the frozen fold-k image encoder and
# the frames of fold k's training sequences; every sequence's 4 views (the frames at the centres of 4
# equal parts, as `eval sequence`'s 2-vs-2) are then fused 0+1 and 2+3, by the scene encoder and by
# averaging the same encoder's view descriptors. `eval compare --folds` scores the queries (0+1) of
# fold k's sequences in fold k's files against the references (2+3) of all 17 sequences, pooled over
# the folds, and pairs the two fusions over the sequences.
# Usage: sh bench/colondb_scene_folds.sh [build/endoret] [folds folder] [folds] [steps]
# A fold already trained (<out>/scene<k>/scene_encoder.safetensors) is not trained again.
set -eu
E=${1:-build/endoret}
O=${2:-out/colondb_folds}
K=${3:-5}
STEPS=${4:-150}
C=../shared/data/cvc_colondb
[ -f "$O/folds.csv" ] || { echo "colondb_scene_folds.sh: $O/folds.csv not found (run bench/colondb_folds.sh first)" >&2; exit 2; }
"$E" data import --layout sequences "$C" --map "$C/labels.csv" --views 4 --out "$O/colondb4.csv"
mean="" scene="" k=0
while [ "$k" -lt "$K" ]; do
    if [ ! -f "$O/scene$k/scene_encoder.safetensors" ]; then
        start=$(date +%s)
        nice -n 10 "$E" train scene --config configs/colondb_scene_cpu.cfg --set scene.image_encoder="$O/fold$k/encoder.safetensors" \
            --set data.manifest="$O/hold$k.csv" --set train.steps="$STEPS" --set out.dir="$O/scene$k" --quiet
        echo "fold $k: scene encoder trained in $(( $(date +%s) - start )) s"
    fi
    "$E" embed --model "$O/fold$k/encoder.safetensors" --scene --fusion mean --groups "0,1;2,3" --manifest "$O/colondb4.csv" \
        --out "$O/scene_mean$k.safetensors"
    "$E" embed --model "$O/scene$k/scene_encoder.safetensors" --scene --fusion transformer --groups "0,1;2,3" \
        --manifest "$O/colondb4.csv" --out "$O/scene_tf$k.safetensors"
    mean="$mean${mean:+,}$O/scene_mean$k.safetensors"
    scene="$scene${scene:+,}$O/scene_tf$k.safetensors"
    k=$((k + 1))
done
echo "== 2-vs-2 on held-out sequences: A = averaging the fold's view descriptors, B = the fold's scene encoder"
"$E" eval compare "$mean" "$scene" --query-view 0+1 --ref-view 2+3 --folds "$O/folds.csv"
