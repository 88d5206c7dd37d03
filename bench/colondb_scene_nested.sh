#!/bin/sh
# The mean-based scene encoder (configs/colondb_scene_mean_cpu.cfg) with its training length chosen
# by nested leave-sequences-out cross-validation (issue 31, item 2; bench/RESULTS_endofinder.md).
# For each outer fold k of bench/colondb_folds.sh (<out>/fold<k>/encoder.safetensors, hold<k>.csv,
# folds.csv), using fold k's training sequences only:
#   - they are split into INNER groups (sorted scene ids, round robin);
#   - for each candidate length in CANDS, a scene encoder is trained on all groups but one and its
#     2-vs-2 descriptors (views 0+1 against 2+3, as colondb_scene_folds.sh) are scored against
#     averaging the same frozen encoder's view descriptors, queries from the left-out group,
#     references from all of fold k's training sequences (`eval compare --folds`, pooled);
#   - the length with the largest pooled uAP gain over averaging is chosen; 0 steps (the untrained
#     mean base, which is averaging itself) is always a candidate and wins a tie or no gain;
#   - the encoder is trained on all of fold k's training sequences for the chosen length (none for
#     0) and embeds the 17 sequences.
# Fold k's held-out sequences are never seen before this last step. Then `eval compare --folds`
# pairs the nested choice against averaging on the held-out sequences, as colondb_scene_folds.sh.
# Usage: sh bench/colondb_scene_nested.sh [build/endoret] [folds folder]   (env: CANDS, INNER, K)
set -eu
E=${1:-build/endoret}
O=${2:-out/colondb_folds}
CANDS=${CANDS:-150 450}
INNER=${INNER:-3}
K=${K:-5}
CFG=configs/colondb_scene_mean_cpu.cfg
C=../shared/data/cvc_colondb
N=$O/nested
[ -f "$O/folds.csv" ] || { echo "colondb_scene_nested.sh: $O/folds.csv not found (run bench/colondb_folds.sh first)" >&2; exit 2; }
mkdir -p "$N"
: > "$N/chosen.csv"
[ -f "$O/colondb4.csv" ] || "$E" data import --layout sequences "$C" --map "$C/labels.csv" --views 4 --out "$O/colondb4.csv"
train() { # manifest steps out
    nice -n 10 "$E" train scene --config "$CFG" --set scene.image_encoder="$O/fold$k/encoder.safetensors" \
        --set data.manifest="$1" --set train.steps="$2" --set out.dir="$3" --quiet
}
embed_mean() { # manifest out: averaging fold k's view descriptors, groups 0+1 and 2+3
    "$E" embed --model "$O/fold$k/encoder.safetensors" --scene --fusion mean --groups "0,1;2,3" --manifest "$1" --out "$2" > /dev/null
}
embed_tf() { # scene-encoder manifest out: its fusion of the same groups
    "$E" embed --model "$1" --scene --fusion transformer --groups "0,1;2,3" --manifest "$2" --out "$3" > /dev/null
}
gain() { # A-list B-list folds.csv: B's pooled 2-vs-2 uAP minus A's
    "$E" eval compare "$1" "$2" --query-view 0+1 --ref-view 2+3 --folds "$3" |
        awk '$1 == "uAP" { for (i = 1; i <= NF; i++) if ($i == "A-B") { v = $(i + 1); sub(",", "", v); printf "%+.4f\n", -v } }'
}
mean="" nested="" k=0
while [ "$k" -lt "$K" ]; do
    D=$N/k$k
    mkdir -p "$D"
    # fold k's training sequences, their inner group, the 4-view rows of just those sequences
    awk -F, 'NR > 1 && $7 == "train" { print $4 }' "$O/hold$k.csv" | sort -u |
        awk -v n="$INNER" '{ print $1 "," (NR - 1) % n }' > "$D/groups.txt"
    # (manifests written two folders below $O: their relative image paths get ../../)
    awk -F, -v OFS=, 'NR == FNR { g[$1] = $2; next } FNR == 1 { print; next }
        ($4 in g) { if ($1 !~ /^\//) $1 = "../../" $1; $7 = "fold" g[$4]; print }' \
        "$D/groups.txt" "$O/colondb4.csv" > "$D/inner_folds.csv"
    embed_mean "$D/inner_folds.csv" "$D/mean.safetensors"
    best=0 bestgain=0
    for s in $CANDS; do
        list="" alist="" j=0
        while [ "$j" -lt "$INNER" ]; do
            # training manifest: fold k's, with inner group j's frames taken out of the train split
            awk -F, -v OFS=, -v j="$j" 'NR == FNR { g[$1] = $2; next } FNR == 1 { print; next }
                { if ($1 !~ /^\//) $1 = "../../" $1 } ($4 in g) && g[$4] == j { $7 = "inner" } { print }' \
                "$D/groups.txt" "$O/hold$k.csv" > "$D/train_j$j.csv"
            [ -f "$D/j${j}_s$s/scene_encoder.safetensors" ] || train "$D/train_j$j.csv" "$s" "$D/j${j}_s$s"
            embed_tf "$D/j${j}_s$s/scene_encoder.safetensors" "$D/inner_folds.csv" "$D/j${j}_s$s.safetensors"
            list="$list${list:+,}$D/j${j}_s$s.safetensors"
            alist="$alist${alist:+,}$D/mean.safetensors"
            j=$((j + 1))
        done
        g=$(gain "$alist" "$list" "$D/inner_folds.csv")
        echo "fold $k: $s steps, inner 2-vs-2 uAP gain over averaging $g"
        if awk -v g="$g" -v b="$bestgain" 'BEGIN { exit !(g > b) }'; then best=$s bestgain=$g; fi
    done
    echo "fold $k: chosen $best steps (inner gain $bestgain)"
    echo "$k,$best,$bestgain" >> "$N/chosen.csv"
    if [ "$best" -gt 0 ]; then
        [ -f "$D/final_s$best/scene_encoder.safetensors" ] || train "$O/hold$k.csv" "$best" "$D/final_s$best"
        embed_tf "$D/final_s$best/scene_encoder.safetensors" "$O/colondb4.csv" "$D/outer.safetensors"
    else
        embed_mean "$O/colondb4.csv" "$D/outer.safetensors"
    fi
    embed_mean "$O/colondb4.csv" "$D/outer_mean.safetensors"
    mean="$mean${mean:+,}$D/outer_mean.safetensors"
    nested="$nested${nested:+,}$D/outer.safetensors"
    k=$((k + 1))
done
echo "== 2-vs-2 on held-out sequences: A = averaging, B = the mean-based scene encoder, its length chosen per fold on that fold's training sequences (candidates 0 $CANDS)"
"$E" eval compare "$mean" "$nested" --query-view 0+1 --ref-view 2+3 --folds "$O/folds.csv"
