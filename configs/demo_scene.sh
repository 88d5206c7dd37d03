#!/bin/sh
# The EndoFinder-Scene half of `make demo` (run by configs/demo.sh after the image encoders):
#   train the scene encoder on the frozen MAE+SSCD image encoder -> scene re-identification of the
#   held-out test scenes (views 0+1 against views 2+3) with average fusion vs the scene encoder, for
#   each image encoder -> sign-hash case database of the test scenes -> kNN diagnosis (k = 6, 5-fold)
#   -> report.html with every view of every case.
# Writes $OUT/scene.json (rows average, scene; keys model, uAP, acc1, recall_p90), the tables of
# configs/endofinder_scene_tables.sh under $OUT/tables, $OUT/cases.db and $OUT/report.html.
# Usage: DEMO_OUT=out/demo sh configs/demo_scene.sh build/endoret
set -eu
BIN=${1:-build/endoret}
OUT=${DEMO_OUT:-out/demo}
THREADS=${DEMO_THREADS:-2}
SCENE_STEPS=${DEMO_SCENE_STEPS:-150}
MAN="$OUT/synth/manifest.csv"
IMG="$OUT/mae+sscd/encoder.safetensors"
num() { echo "$2" | sed "s/.*\"$1\": \([^,}]*\).*/\1/"; }

echo "== train the scene encoder on the frozen mae+sscd image encoder ($SCENE_STEPS steps)"
"$BIN" train scene --config configs/demo_scene.cfg --set scene.image_encoder="$IMG" --set data.manifest="$MAN" \
    --set train.steps="$SCENE_STEPS" --set train.threads="$THREADS" --set out.dir="$OUT/scene" --quiet
tail -n 1 "$OUT/scene/log.jsonl"

echo "== scene tables on the held-out test scenes"
THREADS=$THREADS sh configs/endofinder_scene_tables.sh "$BIN" "$MAN" test "$OUT/tables" \
    random=random:configs/demo_image.cfg mae="$OUT/mae/encoder.safetensors" sscd="$OUT/sscd/encoder.safetensors" \
    mae+sscd="$IMG,$OUT/scene/scene_encoder.safetensors"

# scene.json: the mae+sscd encoder's two fusions (Table 4's rows)
t4="$OUT/tables/table4.json"
row() { sed 's/}, {/}\n{/g' "$t4" | grep "\"model\": \"mae+sscd\", \"fusion\": \"$1\""; }
avg=$(row average); scn=$(row transformer)
printf '{"protocol": "scene re-ID on held-out synthetic scenes: views 0+1 (query) vs views 2+3 (reference), image encoder mae+sscd, cosine, k=10, ISC2021 metrics", "rows": [{"model": "average", "uAP": %s, "acc1": %s, "recall_p90": %s}, {"model": "scene", "uAP": %s, "acc1": %s, "recall_p90": %s}]}\n' \
    "$(num uAP "$avg")" "$(num acc1 "$avg")" "$(num recall_p90 "$avg")" \
    "$(num uAP "$scn")" "$(num acc1 "$scn")" "$(num recall_p90 "$scn")" > "$OUT/scene.json.tmp"
mv "$OUT/scene.json.tmp" "$OUT/scene.json"

echo "== case database of the test scenes (one case = one polyp, 4 views, sign codes) and kNN diagnosis"
"$BIN" embed --model "$OUT/scene/scene_encoder.safetensors" --scene --manifest "$MAN" --split test \
    --out "$OUT/cases.safetensors" --threads "$THREADS"
"$BIN" index build --emb "$OUT/cases.safetensors" --manifest "$MAN" --out "$OUT/cases.db"
"$BIN" eval classify --emb "$OUT/cases.safetensors" --k 6 --folds 5 | head -n 3
"$BIN" report --index "$OUT/cases.db" --k 6 --limit 12 --out "$OUT/report.html"
