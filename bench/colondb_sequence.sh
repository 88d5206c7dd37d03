#!/bin/sh
# The sequence protocol (`eval sequence`, infer/eval/sequence_protocol.h) on CVC-ColonDB with the
# no-learning baselines and a random-init ViT: bench/RESULTS_endofinder.md, "CVC-ColonDB: the
# sequence protocol". Usage: sh bench/colondb_sequence.sh [build/endoret] [out folder]
# Needs ../shared/data/cvc_colondb (never copied into the repository).
set -eu
E=${1:-build/endoret}
O=${2:-out/colondb_seq}
D=../shared/data/cvc_colondb
[ -f "$D/labels.csv" ] || { echo "colondb_sequence.sh: $D/labels.csv not found" >&2; exit 2; }
mkdir -p "$O"
"$E" data import --layout sequences "$D" --map "$D/labels.csv" --views 0 --out "$O/manifest.csv"
"$E" embed --baseline colorhist --manifest "$O/manifest.csv" --out "$O/hist.safetensors"
"$E" embed --baseline thumbnail --manifest "$O/manifest.csv" --out "$O/thumb.safetensors"
"$E" embed --config configs/kvasir_seg_image_1h.cfg --manifest "$O/manifest.csv" --out "$O/random_vit.safetensors"
for f in hist thumb random_vit; do
    echo "== $f (gap: a quarter of the sequence)"
    "$E" eval sequence --emb "$O/$f.safetensors"
done
for g in 0 0.1 0.5; do
    echo "== hist, gap-frac $g"
    "$E" eval sequence --emb "$O/hist.safetensors" --gap-frac "$g" --no-2v2
done
echo "== hist, gap 3 frames, no fraction"
"$E" eval sequence --emb "$O/hist.safetensors" --gap 3 --gap-frac 0 --no-2v2
echo "== paired: hist against thumbnail and random ViT"
"$E" eval compare "$O/hist.safetensors" "$O/thumb.safetensors" "$O/random_vit.safetensors" --sequence
