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
# Usage: sh bench/colondb_scene_folds.sh [build/endoret] [folds folder] [folds] [steps] [config]
#   (config: configs/colondb_scene_cpu.cfg, or a variant such as configs/colondb_scene_mean_cpu.cfg; a
#    variant's files are named after it: <out>/<config name><k>/, <config name>_tf<k>.safetensors)
# A fold already trained (<out>/scene<k>/scene_encoder.safetensors) is not trained again.
set -eu
E=${1:-build/endoret}
O=${2:-out/colondb_folds}
K=${3:-5}
STEPS=${4:-150}
CFG=${5:-configs/colondb_scene_cpu.cfg}
T=scene
[ "$CFG" = configs/colondb_scene_cpu.cfg ] || T=$(basename "$CFG" .cfg)
T=$T${SEED:+_s$SEED}   # SEED=s in the environment sets train.seed (files named <name>_s<s>)
C=../shared/data/cvc_colondb
[ -f "$O/folds.csv" ] || { echo "colondb_scene_folds.sh: $O/folds.csv not found (run bench/colondb_folds.sh first)" >&2; exit 2; }
"$E" data import --layout sequences "$C" --map "$C/labels.csv" --views 4 --out "$O/colondb4.csv"
mean="" scene="" k=0
while [ "$k" -lt "$K" ]; do
    if [ ! -f "$O/$T$k/scene_encoder.safetensors" ]; then
        start=$(date +%s)
        nice -n 10 "$E" train scene --config "$CFG" ${SEED:+--set train.seed=$SEED} --set scene.image_encoder="$O/fold$k/encoder.safetensors" \
            --set data.manifest="$O/hold$k.csv" --set train.steps="$STEPS" --set out.dir="$O/$T$k" --quiet
        echo "fold $k: scene encoder trained in $(( $(date +%s) - start )) s"
    fi
    "$E" embed --model "$O/fold$k/encoder.safetensors" --scene --fusion mean --groups "0,1;2,3" --manifest "$O/colondb4.csv" \
        --out "$O/scene_mean$k.safetensors"
    "$E" embed --model "$O/$T$k/scene_encoder.safetensors" --scene --fusion transformer --groups "0,1;2,3" \
        --manifest "$O/colondb4.csv" --out "$O/${T}_tf$k.safetensors"
    mean="$mean${mean:+,}$O/scene_mean$k.safetensors"
    scene="$scene${scene:+,}$O/${T}_tf$k.safetensors"
    k=$((k + 1))
done
echo "== 2-vs-2 on held-out sequences: A = averaging the fold's view descriptors, B = the fold's scene encoder ($CFG)"
"$E" eval compare "$mean" "$scene" --query-view 0+1 --ref-view 2+3 --folds "$O/folds.csv"
