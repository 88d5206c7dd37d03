#!/bin/sh
# Leave-sequences-out folds on CVC-ColonDB (issue 31, items 2-3): bench/RESULTS_endofinder.md,
# "CVC-ColonDB leave-sequences-out". For every fold k of `data split --by scene --folds K`, the recipe
# configs/colondb_seq_cpu.cfg trains on Kvasir-SEG + the other folds' sequences; every ColonDB frame is
# embedded by each fold's encoder, and `eval sequence --folds` scores each query (and its gallery) with
# the encoder that never saw the query's sequence. Rows: the recipe, the hybrid with the colour
# histogram at a weight fixed a priori (0.5), and the no-learning baselines on the same protocol.
# Usage: sh bench/colondb_folds.sh [build/endoret] [out folder] [folds] [steps] [config]
#   (config: configs/colondb_seq_cpu.cfg, or an ablation of it such as configs/colondb_seq_nojitter_cpu.cfg;
#    SEED=s in the environment sets train.seed, for the recipe's seed rows; DATA=dir reads the two sets
#    from dir instead of ../shared/data (a `data resize` copy on a GPU machine); EMBED_DEVICE=cuda
#    embeds on the GPU)
# then:  sh bench/colondb_folds_eval.sh [build/endoret] [out folder] [folds]   (the tables)
# A fold already trained (<out>/fold<k>/encoder.safetensors) is not trained again.
# Needs ../shared/data/{cvc_colondb,kvasir_seg} (never copied into the repository).
set -eu
E=${1:-build/endoret}
O=${2:-out/colondb_folds}
K=${3:-5}
STEPS=${4:-300}
CFG=${5:-configs/colondb_seq_cpu.cfg}
SEED_SET=${SEED:+--set train.seed=$SEED}
DATA=${DATA:-../shared/data}
C=$DATA/cvc_colondb
[ -f "$C/labels.csv" ] || { echo "colondb_folds.sh: $C/labels.csv not found" >&2; exit 2; }
mkdir -p "$O"
"$E" data import --layout sequences "$C" --map "$C/labels.csv" --views 0 --out "$O/colondb.csv"
"$E" data import --layout image-mask "$DATA/kvasir_seg" --out "$O/kvasir.csv"
"$E" data split "$O/colondb.csv" --folds "$K" --by scene --seed 0 --out "$O/folds.csv"
k=0
while [ "$k" -lt "$K" ]; do
    "$E" data split "$O/colondb.csv" --folds "$K" --by scene --seed 0 --holdout-fold "$k" --out "$O/hold$k.csv"
    # the training manifest: ColonDB with fold k as test, then every Kvasir-SEG row as train (same columns)
    { cat "$O/hold$k.csv"; awk -F, 'NR > 1 { OFS = ","; $7 = "train"; print }' "$O/kvasir.csv"; } > "$O/train$k.csv"
    if [ ! -f "$O/fold$k/encoder.safetensors" ]; then
        start=$(date +%s)
        nice -n 10 "$E" train image --config "$CFG" $SEED_SET --set data.manifest="$O/train$k.csv" \
            --set train.steps="$STEPS" --set out.dir="$O/fold$k"
        echo "fold $k: trained in $(( $(date +%s) - start )) s"
    fi
    "$E" embed --model "$O/fold$k/encoder.safetensors" --manifest "$O/colondb.csv" --out "$O/recipe$k.safetensors" \
        ${EMBED_DEVICE:+--device $EMBED_DEVICE}
    k=$((k + 1))
done
