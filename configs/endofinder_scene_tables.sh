#!/bin/sh
# EndoFinder-Scene's tables, one command (paper Tables 4 and 5 and the hashing comparison):
#
#   sh configs/endofinder_scene_tables.sh BIN MANIFEST SPLIT OUT name=IMAGE_ENCODER[,SCENE_MODEL] ...
#
# MANIFEST holds the evaluation scenes (scene + view columns, views 0..3, labels for Table 5); SPLIT
# its rows to use ('' = all). Each model argument names an image encoder file (or random:CONFIG for
# the random-init encoder of a training config) and, optionally, the scene model trained on it.
#   Table 4  re-identification of a scene from views 0+1 (query) against views 2+3 (reference),
#            ISC2021 uAP / Acc@1 / Recall@P90 (k = 10, cosine), for every encoder with average fusion
#            of the view descriptors and, where a scene model is given, with transformer fusion.
#   Table 5  pathology of each scene (all its views fused) by the kNN vote (k = 6, 5-fold CV, 4/5 of
#            the cases are the database): AUC, accuracy, F1; the same for a linear probe (supervised
#            baseline) on the same folds.
#   hashing  float descriptors vs sign codes (bits = width): uAP of Table 4's setting and ms/query of
#            an exhaustive search in a 100 000-case database of that width (endoret bench search).
# Writes OUT/table4.json, OUT/table5.json, OUT/hashing.json and prints the tables.
set -eu
BIN=$1; MAN=$2; SPLIT=$3; OUT=$4; shift 4
THREADS=${THREADS:-2}
mkdir -p "$OUT"
num() { echo "$2" | sed "s/.*\"$1\": \([^,}]*\).*/\1/"; }

embed() { # model-spec fusion groups out (shell functions share variables: e_* only)
    e_spec=$1; e_fusion=$2; e_groups=$3; e_out=$4
    case $e_spec in
        random:*) e_src="--config ${e_spec#random:}" ;;
        *) e_src="--model $e_spec" ;;
    esac
    if [ -n "$e_groups" ]; then
        # shellcheck disable=SC2086
        "$BIN" embed $e_src --scene --fusion "$e_fusion" --groups "$e_groups" --manifest "$MAN" --split "$SPLIT" --out "$e_out" --threads "$THREADS" --json
    else
        # shellcheck disable=SC2086
        "$BIN" embed $e_src --scene --fusion "$e_fusion" --manifest "$MAN" --split "$SPLIT" --out "$e_out" --threads "$THREADS" --json
    fi
}

t4="$OUT/table4.json.tmp"; t5="$OUT/table5.json.tmp"; th="$OUT/hashing.json.tmp"
printf '{"protocol": "scene re-ID, query views 0+1 vs reference views 2+3, cosine, k=10, ISC2021 metrics", "rows": [' > "$t4"
printf '{"protocol": "kNN vote k=6 and linear probe, 5-fold stratified CV over the scenes (all views fused)", "rows": [' > "$t5"
printf '{"protocol": "Table 4 setting, float cosine vs sign codes; ms/query of an exhaustive search over 100000 cases", "rows": [' > "$th"
s4=""; s5=""; sh=""
echo "== Table 4: scene re-identification (views 0+1 -> 2+3)"
printf '%-16s %-12s %8s %8s %8s   %s\n' encoder fusion uAP Acc@1 R@P90 "uAP 95% (scenes)"
for arg in "$@"; do
    name=${arg%%=*}; files=${arg#*=}
    img=${files%%,*}; scene=""
    case $files in *,*) scene=${files#*,} ;; esac
    for fusion in average transformer; do
        if [ $fusion = average ]; then spec=$img; f=mean; else [ -n "$scene" ] || continue; spec=$scene; f=transformer; fi
        emb="$OUT/${name}_${fusion}_groups.safetensors"
        dim=$(num dim "$(embed "$spec" $f "0,1;2,3" "$emb")")
        line=$("$BIN" eval reid --emb "$emb" --query-view 0+1 --ref-view 2+3 --json)
        printf '%-16s %-12s %8.4f %8.4f %8.4f   [%.4f, %.4f]\n' "$name" $fusion "$(num uAP "$line")" "$(num acc1 "$line")" \
            "$(num recall_p90 "$line")" "$(num uAP_lo "$line")" "$(num uAP_hi "$line")"
        printf '%s{"model": "%s", "fusion": "%s", "uAP": %s, "acc1": %s, "recall_p90": %s, "uAP_lo": %s, "uAP_hi": %s, "scenes": %s}' \
            "$s4" "$name" $fusion "$(num uAP "$line")" "$(num acc1 "$line")" "$(num recall_p90 "$line")" \
            "$(num uAP_lo "$line")" "$(num uAP_hi "$line")" "$(num queries "$line")" >> "$t4"
        s4=", "
        # hashing: the same setting on sign codes of the full width
        hl=$("$BIN" eval reid --emb "$emb" --query-view 0+1 --ref-view 2+3 --bits "${dim:-0}" --json 2>/dev/null || true)
        if [ -n "$dim" ] && [ -n "$hl" ]; then
            printf '%s{"model": "%s", "fusion": "%s", "bits": %s, "uAP_float": %s, "uAP_sign": %s}' "$sh" "$name" $fusion "$dim" \
                "$(num uAP "$line")" "$(num uAP "$hl")" >> "$th"
            sh=", "
        fi
        # Table 5 on every view of a scene
        emb5="$OUT/${name}_${fusion}_scenes.safetensors"
        embed "$spec" $f "" "$emb5" > /dev/null
        for cls in knn probe; do
            l5=$("$BIN" eval classify --emb "$emb5" --classifier $cls --k 6 --folds 5 --json)
            printf '%s{"model": "%s", "fusion": "%s", "classifier": "%s", "auc": %s, "accuracy": %s, "f1": %s, "accuracy_lo": %s, "accuracy_hi": %s, "n": %s}' \
                "$s5" "$name" $fusion $cls "$(num auc "$l5")" "$(num accuracy "$l5")" "$(num f1 "$l5")" \
                "$(num accuracy_lo "$l5")" "$(num accuracy_hi "$l5")" "$(num n "$l5")" >> "$t5"
            s5=", "
        done
    done
done
printf ']}\n' >> "$t4"; mv "$t4" "$OUT/table4.json"
echo "== Table 5: pathology from the scene's views (5-fold CV)"
printf '%-16s %-12s %-6s %8s %8s %8s\n' encoder fusion method AUC ACC F1
(cat "$t5"; echo) | sed 's/}, {/}\n{/g' | sed -n 's/.*"model": "\([^"]*\)", "fusion": "\([^"]*\)", "classifier": "\([^"]*\)", "auc": \([^,]*\), "accuracy": \([^,]*\), "f1": \([^,]*\),.*/\1 \2 \3 \4 \5 \6/p' |
    while read -r a b c d e f; do printf '%-16s %-12s %-6s %8.4f %8.4f %8.4f\n' "$a" "$b" "$c" "$d" "$e" "$f"; done
printf ']}\n' >> "$t5"; mv "$t5" "$OUT/table5.json"
echo "== hashing: float vs sign codes"
dims=$(sed 's/}, {/}\n{/g' "$th" | sed -n 's/.*"bits": \([0-9]*\).*/\1/p' | sort -u)
speed=""
for d in $dims; do
    b=$(OMP_NUM_THREADS=1 "$BIN" bench search --n 100000 --bits "$d" --dim "$d" --queries 100 --indexes scan --json)
    fl=$(echo "$b" | sed -n 's/.*"index": "float", "ms_per_query": \([^,]*\).*/\1/p')
    hs=$(echo "$b" | sed -n 's/.*"index": "scan", "ms_per_query": \([^,]*\).*/\1/p')
    speed="$speed, \"$d\": {\"float_ms_per_query\": $fl, \"sign_ms_per_query\": $hs}"
done
printf '], "search_100000_cases": {%s}}\n' "${speed#, }" >> "$th"; mv "$th" "$OUT/hashing.json"
printf '%-16s %-12s %6s %10s %10s\n' encoder fusion bits uAP_float uAP_sign
(cat "$OUT/hashing.json"; echo) | sed 's/}, {/}\n{/g' | sed -n 's/.*"model": "\([^"]*\)", "fusion": "\([^"]*\)", "bits": \([0-9]*\), "uAP_float": \([^,]*\), "uAP_sign": \([^}]*\)}.*/\1 \2 \3 \4 \5/p' |
    while read -r a b c d e; do printf '%-16s %-12s %6s %10.4f %10.4f\n' "$a" "$b" "$c" "$d" "$e"; done
echo "search of 100000 cases (ms/query, one thread): $(sed -n 's/.*"search_100000_cases": \(.*\)}$/\1/p' "$OUT/hashing.json")"
echo "== wrote $OUT/table4.json $OUT/table5.json $OUT/hashing.json"
