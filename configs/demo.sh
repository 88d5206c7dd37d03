#!/bin/sh
# make demo — the whole EndoFinder pipeline on synthetic scenes, on the CPU:
#   synthesise multi-view polyp scenes -> train the demo image encoder with each objective
#   (MAE only, SSCD only, MAE+SSCD with lesion-guided masking, and MAE+SSCD whose positives are
#   other views of the scene: data.positives = views) -> embed the held-out test scenes
#   -> single-view re-identification (query view 0 against reference view 2 of every test scene,
#   k = 10 neighbours, ISC2021 uAP / Acc@1 / Recall@P90; random init and a colour histogram as
#   the no-learning references) -> table on stdout and $DEMO_OUT/reid.json
#   -> the scene stage (configs/demo_scene.sh): scene encoder on the frozen MAE+SSCD encoder, scene
#   re-ID (average vs scene encoder) -> $DEMO_OUT/scene.json, sign-hash case database, kNN
#   diagnosis, report.html.
# Usage: DEMO_OUT=out/demo sh configs/demo.sh build/endoret
# Knobs (environment): DEMO_STEPS (training steps per variant, default: the config's 1000),
# DEMO_SCENES, DEMO_THREADS, DEMO_RANDOM_MASK=1 (also train MAE+SSCD with random masking: the
# masking ablation: within noise of guided masking in the 300-step demo, ~1/3 more time).
set -eu
BIN=${1:-build/endoret}
OUT=${DEMO_OUT:-out/demo}
STEPS=${DEMO_STEPS:-1000}
SCENES=${DEMO_SCENES:-400}
THREADS=${DEMO_THREADS:-2}
VARIANTS="mae sscd mae+sscd mae+sscd_views"
if [ "${DEMO_RANDOM_MASK:-0}" = 1 ]; then VARIANTS="$VARIANTS mae+sscd_random_mask"; fi
CFG=configs/demo_image.cfg
# On a 2-core machine shared with other jobs, spinning OpenMP workers steal the cores they wait
# for; sleeping waiters are much faster there (and cost little on an idle machine).
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY

mkdir -p "$OUT"
t0=$(date +%s)
echo "== synth: $SCENES scenes x 4 views (64x64) -> $OUT/synth"
"$BIN" synth --out "$OUT/synth" --scenes "$SCENES" --views 4 --size 64 --seed 7 --threads "$THREADS"
MAN="$OUT/synth/manifest.csv"
COMMON="--set data.manifest=$MAN --set train.steps=$STEPS --set train.threads=$THREADS"

train() { # name, extra --set arguments
    name=$1; shift
    echo "== train $name ($STEPS steps)"
    # shellcheck disable=SC2086
    "$BIN" train image --config "$CFG" $COMMON --set "out.dir=$OUT/$name" "$@" --quiet
    tail -n 1 "$OUT/$name/log.jsonl"
}

train mae --set loss.con_weight=0 --set mae.masking=guided
train sscd --set loss.mae_weight=0 --set mae.mask_ratio=0
train mae+sscd --set mae.masking=guided
train mae+sscd_views --set mae.masking=guided --set data.positives=views
case " $VARIANTS " in *" mae+sscd_random_mask "*) train mae+sscd_random_mask --set mae.masking=random ;; esac

echo "== embed held-out test scenes"
"$BIN" embed --config "$CFG" --manifest "$MAN" --split test --out "$OUT/random_emb.safetensors" --threads "$THREADS"
# the no-learning reference: a colour histogram (chi2), how far colour alone re-identifies a scene
"$BIN" embed --baseline colorhist --manifest "$MAN" --split test --out "$OUT/colorhist_emb.safetensors" --threads "$THREADS"
for name in $VARIANTS; do
    "$BIN" embed --model "$OUT/$name/encoder.safetensors" --manifest "$MAN" --split test \
        --out "$OUT/${name}_emb.safetensors" --threads "$THREADS"
done

echo "== single-view re-identification (query view 0 -> reference view 2, held-out scenes)"
json="$OUT/reid.json"
printf '{"protocol": "single-view re-ID on held-out synthetic scenes: query view 0 vs reference view 2, cosine (chi2 for the colour histogram), k=10, ISC2021 metrics, 95%% bootstrap intervals over scenes", "rows": [' > "$json.tmp"
printf '%-22s %8s %8s %10s   %-18s %s\n' model uAP Acc@1 R@P90 "uAP 95%" "Acc@1 95%"
sep=""
for name in random colorhist $VARIANTS; do
    line=$("$BIN" eval multiview --emb "$OUT/${name}_emb.safetensors" --k 10 --json | grep '"query_views": "Q1", "ref_views": "R1"')
    uap=$(echo "$line" | sed 's/.*"uAP": \([^,}]*\).*/\1/')
    acc=$(echo "$line" | sed 's/.*"acc1": \([^,}]*\).*/\1/')
    rp9=$(echo "$line" | sed 's/.*"recall_p90": \([^,}]*\).*/\1/')
    n=$(echo "$line" | sed 's/.*"scenes": \([^,}]*\).*/\1/')
    g() { echo "$line" | sed "s/.*\"$1\": \([^,}]*\).*/\1/"; }
    printf '%-22s %8.4f %8.4f %10.4f   [%.4f, %.4f] [%.4f, %.4f]\n' "$name" "$uap" "$acc" "$rp9" \
        "$(g uAP_lo)" "$(g uAP_hi)" "$(g acc1_lo)" "$(g acc1_hi)"
    printf '%s{"model": "%s", "uAP": %s, "uAP_lo": %s, "uAP_hi": %s, "acc1": %s, "acc1_lo": %s, "acc1_hi": %s, "recall_p90": %s, "scenes": %s}' \
        "$sep" "$name" "$uap" "$(g uAP_lo)" "$(g uAP_hi)" "$acc" "$(g acc1_lo)" "$(g acc1_hi)" "$rp9" "$n" >> "$json.tmp"
    sep=", "
done
printf ']}\n' >> "$json.tmp"
mv "$json.tmp" "$json"
echo "== wrote $json; loss curves: $OUT/<model>/loss.svg; $(( $(date +%s) - t0 )) s so far"
DEMO_OUT=$OUT DEMO_THREADS=$THREADS sh configs/demo_scene.sh "$BIN"
echo "== make demo: total $(( $(date +%s) - t0 )) s"

