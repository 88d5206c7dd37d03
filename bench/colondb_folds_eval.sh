#!/bin/sh
# The tables of bench/RESULTS_endofinder.md, "CVC-ColonDB leave-sequences-out", from the folds that
# bench/colondb_folds.sh trained and embedded (recipe<k>.safetensors: every ColonDB frame embedded by
# the encoder that held out fold k). Every query is scored by the encoder that never saw its sequence
# (`eval sequence --folds`); the gallery is all 345 frames, as for the no-learning rows.
# With a fold number as 4th argument only that fold's queries are scored (`--fold k`: one trained fold).
# The hybrid's histogram weight (0.5) was fixed before any fold was scored, never tuned. The second
# hybrid row takes, for each held-out fold, the weight of the grid 0, 0.1, .., 1 with the best mAP on
# the OTHER folds (`embed --hybrid .. --select-weight`, infer/eval/seq_select.h): nested, so no frame
# of a test sequence chooses its weight. It needs every fold (not with the 4th argument).
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
GRID=0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1
recipe="" hybrid="" selected=""
k=0
while [ "$k" -lt "$K" ]; do
    if [ -z "$ONLY" ] || [ "$k" = "$ONLY" ]; then
        "$E" embed --hybrid "$O/recipe$k.safetensors" --hist "$O/hist.safetensors" --hist-weight "$W" --out "$O/hybrid$k.safetensors"
        recipe="$recipe${recipe:+,}$O/recipe$k.safetensors"
        hybrid="$hybrid${hybrid:+,}$O/hybrid$k.safetensors"
        selected="$selected${selected:+,}$O/hybrid_sel$k.safetensors"
    fi
    k=$((k + 1))
done
SEL="--folds $F${ONLY:+ --fold $ONLY}"
[ -n "$ONLY" ] || "$E" embed --hybrid "$recipe" --hist "$O/hist.safetensors" --folds "$F" --select-weight "$GRID" --out "$selected"
# w = 1: the histogram alone under the hybrid's histogram similarity (Bhattacharyya), no learning
"$E" embed --hybrid "${recipe%%,*}" --hist "$O/hist.safetensors" --hist-weight 1 --out "$O/hist_bc.safetensors"
for d in hist thumb random_vit hist_bc; do
    echo "== $d"
    "$E" eval sequence --emb "$O/$d.safetensors" $SEL
done
echo "== recipe (${RECIPE:-the fold encoders in $O}), each query scored by the encoder that held out its fold"
"$E" eval sequence --emb "$recipe" $SEL
echo "== hybrid: (1 - $W) x recipe cosine + $W x histogram Bhattacharyya"
"$E" eval sequence --emb "$hybrid" $SEL
if [ -z "$ONLY" ]; then
    echo "== hybrid, each fold's weight chosen on its training folds (the table above)"
    "$E" eval sequence --emb "$selected" $SEL
fi
[ -z "$ONLY" ] || selected="" # one fold: no weights chosen
echo "== paired over sequences: histogram (chi2) against recipe, hybrid, ${selected:+hybrid with chosen weights, }histogram (Bhattacharyya), thumbnail, random ViT"
# shellcheck disable=SC2086
"$E" eval compare "$O/hist.safetensors" "$recipe" "$hybrid" $selected "$O/hist_bc.safetensors" "$O/thumb.safetensors" \
    "$O/random_vit.safetensors" --sequence $SEL
