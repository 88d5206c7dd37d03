#!/bin/sh
# The tables of bench/RESULTS_endofinder.md, "CVC-ColonDB leave-sequences-out", from the folds that
# bench/colondb_folds.sh trained and embedded (recipe<k>.safetensors: every ColonDB frame embedded by
# the encoder that held out fold k). Every query is scored by the encoder that never saw its sequence
# (`eval sequence --folds`); the gallery is all 345 frames, as for the no-learning rows.
# With a fold number as 4th argument only that fold's queries are scored (`--fold k`: one trained fold).
# The hybrid's histogram weight (0.5) was fixed before any fold was scored, never tuned.
# Usage: sh bench/colondb_folds_eval.sh [build/endoret] [out folder] [folds] [only this fold]
set -eu
E=${1:-build/endoret}
O=${2:-out/colondb_folds}
K=${3:-5}
ONLY=${4:-}
W=0.5
F="$O/folds.csv"
"$E" embed --baseline colorhist --manifest "$O/colondb.csv" --out "$O/hist.safetensors"
"$E" embed --baseline thumbnail --manifest "$O/colondb.csv" --out "$O/thumb.safetensors"
"$E" embed --config configs/colondb_seq_cpu.cfg --manifest "$O/colondb.csv" --out "$O/random_vit.safetensors"
recipe="" hybrid=""
k=0
while [ "$k" -lt "$K" ]; do
    if [ -z "$ONLY" ] || [ "$k" = "$ONLY" ]; then
        "$E" embed --hybrid "$O/recipe$k.safetensors" --hist "$O/hist.safetensors" --hist-weight "$W" --out "$O/hybrid$k.safetensors"
        recipe="$recipe${recipe:+,}$O/recipe$k.safetensors"
        hybrid="$hybrid${hybrid:+,}$O/hybrid$k.safetensors"
    fi
    k=$((k + 1))
done
SEL="--folds $F${ONLY:+ --fold $ONLY}"
# w = 1: the histogram alone under the hybrid's histogram similarity (Bhattacharyya), no learning
"$E" embed --hybrid "${recipe%%,*}" --hist "$O/hist.safetensors" --hist-weight 1 --out "$O/hist_bc.safetensors"
for d in hist thumb random_vit hist_bc; do
    echo "== $d"
    "$E" eval sequence --emb "$O/$d.safetensors" $SEL
done
echo "== recipe (configs/colondb_seq_cpu.cfg), each query scored by the encoder that held out its fold"
"$E" eval sequence --emb "$recipe" $SEL
echo "== hybrid: (1 - $W) x recipe cosine + $W x histogram Bhattacharyya"
"$E" eval sequence --emb "$hybrid" $SEL
echo "== paired over sequences: histogram (chi2) against recipe, hybrid, histogram (Bhattacharyya), thumbnail, random ViT"
"$E" eval compare "$O/hist.safetensors" "$recipe" "$hybrid" "$O/hist_bc.safetensors" "$O/thumb.safetensors" \
    "$O/random_vit.safetensors" --sequence $SEL
