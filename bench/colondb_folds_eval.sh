#!/bin/sh
# The tables of bench/RESULTS_endofinder.md, "CVC-ColonDB leave-sequences-out", from the folds that
# bench/colondb_folds.sh trained and embedded (recipe<k>.safetensors: every ColonDB frame embedded by
# the encoder that held out fold k). Every query is scored by the encoder that never saw its sequence
# (`eval sequence --folds`); the gallery is all 345 frames, as for the no-learning rows.
# The hybrid's histogram weight (0.5) was fixed before any fold was scored, never tuned.
# Usage: sh bench/colondb_folds_eval.sh [build/endoret] [out folder] [folds]
set -eu
E=${1:-build/endoret}
O=${2:-out/colondb_folds}
K=${3:-5}
W=0.5
F="$O/folds.csv"
"$E" embed --baseline colorhist --manifest "$O/colondb.csv" --out "$O/hist.safetensors"
"$E" embed --baseline thumbnail --manifest "$O/colondb.csv" --out "$O/thumb.safetensors"
"$E" embed --config configs/colondb_seq_cpu.cfg --manifest "$O/colondb.csv" --out "$O/random_vit.safetensors"
recipe="" hybrid=""
k=0
while [ "$k" -lt "$K" ]; do
    "$E" embed --hybrid "$O/recipe$k.safetensors" --hist "$O/hist.safetensors" --hist-weight "$W" --out "$O/hybrid$k.safetensors"
    recipe="$recipe${recipe:+,}$O/recipe$k.safetensors"
    hybrid="$hybrid${hybrid:+,}$O/hybrid$k.safetensors"
    k=$((k + 1))
done
# w = 1: the histogram alone under the hybrid's histogram similarity (Bhattacharyya), no learning
"$E" embed --hybrid "$O/recipe0.safetensors" --hist "$O/hist.safetensors" --hist-weight 1 --out "$O/hist_bc.safetensors"
for d in hist thumb random_vit hist_bc; do
    echo "== $d"
    "$E" eval sequence --emb "$O/$d.safetensors" --folds "$F"
done
echo "== recipe (configs/colondb_seq_cpu.cfg), file k = the encoder that held out fold k"
"$E" eval sequence --emb "$recipe" --folds "$F"
echo "== hybrid: (1 - $W) x recipe cosine + $W x histogram Bhattacharyya"
"$E" eval sequence --emb "$hybrid" --folds "$F"
echo "== paired over sequences: histogram (chi2) against each"
"$E" eval compare "$O/hist.safetensors" "$recipe" "$hybrid" "$O/hist_bc.safetensors" "$O/thumb.safetensors" --sequence --folds "$F"
