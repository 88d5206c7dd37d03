#!/bin/sh
# make demo-pgcon — PGCon / WINCon on synthetic frames, on the CPU:
#   synthesise 300 scenes x (one polyp view + one lesion-free view), 96 px, labelled lesion / none
#   (the demo's pathology label: the synthetic benign / malignant label is not learnable at this size,
#   see README) -> train PGCon (and WINCon with DEMO_PGCON_VARIANTS="pgcon wincon")
#   (configs/demo_pgcon.cfg, ResNet-18 width 32)
#   -> embed the train and test splits with each encoder, random init and a no-learning thumbnail
#   -> weighted kNN (k 20, tau 0.1: the bank has 416 rows) and a linear probe trained on the train
#   split, tested on the test split, with 95 % bootstrap intervals; alignment / uniformity
#   -> few labels (10 % / 100 % of the training labels, kNN and probe): each encoder minus random init,
#   paired over the same test rows (eval split --base-train/--base-test)
#   -> tables on stdout and $DEMO_OUT/pgcon.json (rows random, thumbnail, the variants; paired_vs_random).
# Usage: DEMO_OUT=out/demo sh configs/demo_pgcon.sh build/endoret
# Knobs (environment): DEMO_PGCON_STEPS (default: the config's 400), DEMO_PGCON_VARIANTS (default
# 'pgcon', which keeps `make demo-pgcon` within 5 minutes on 2 idle cores; 'pgcon wincon' adds
# WINCon, about 4 minutes more), DEMO_THREADS.
set -eu
BIN=${1:-build/endoret}
OUT=${DEMO_OUT:-out/demo}
THREADS=${DEMO_THREADS:-2}
STEPS=${DEMO_PGCON_STEPS:-400}
VARIANTS=${DEMO_PGCON_VARIANTS:-pgcon}
CFG=configs/demo_pgcon.cfg
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
P="$OUT/pgcon"
mkdir -p "$P"
t0=$(date +%s)
echo "== synth: 300 scenes x (1 polyp view + 1 lesion-free view), 96x96 -> $OUT/pgcon_synth"
"$BIN" synth --out "$OUT/pgcon_synth" --scenes 300 --views 1 --size 96 --seed 11 --background --threads "$THREADS"
MAN="$OUT/pgcon_synth/manifest.csv"
sed -e 's/,benign,/,lesion,/' -e 's/,malignant,/,lesion,/' "$MAN" > "$MAN.tmp" && mv "$MAN.tmp" "$MAN"
COMMON="--set data.manifest=$MAN --set eval.manifest=$MAN --set train.steps=$STEPS --set train.threads=$THREADS"
for v in $VARIANTS; do
    echo "== train $v ($STEPS steps)"
    # shellcheck disable=SC2086
    "$BIN" train pgcon --config "$CFG" $COMMON --set pgcon.variant=$v --set "out.dir=$P/$v" --quiet
    tail -n 1 "$P/$v/log.jsonl" | cut -c1-200
done
echo "== embed train / test splits"
for s in train test; do
    "$BIN" embed --config "$CFG" --manifest "$MAN" --split $s --out "$P/random_$s.safetensors" --threads "$THREADS" > /dev/null
    "$BIN" embed --baseline thumbnail --manifest "$MAN" --split $s --out "$P/thumbnail_$s.safetensors" --threads "$THREADS" > /dev/null
    for v in $VARIANTS; do
        "$BIN" embed --model "$P/$v/encoder.safetensors" --manifest "$MAN" --split $s --out "$P/${v}_$s.safetensors" --threads "$THREADS" > /dev/null
    done
done
field() { echo "$1" | sed "s/.*\"$2\": \([^,}]*\).*/\1/"; }
json="$P/pgcon.json"
printf '{"protocol": "synthetic lesion / none frames, train split -> test split: weighted kNN (k 20, tau 0.1) and a linear probe on frozen descriptors, 95%% bootstrap intervals over test rows", "rows": [' > "$json.tmp"
printf '%-10s %22s %22s %8s %8s\n' model "kNN acc [95% CI]" "linear acc [95% CI]" align uniform
sep=""
for name in random thumbnail $VARIANTS; do
    k=$("$BIN" eval split --train "$P/${name}_train.safetensors" --test "$P/${name}_test.safetensors" --k 20 --json)
    l=$("$BIN" eval split --train "$P/${name}_train.safetensors" --test "$P/${name}_test.safetensors" --classifier probe --json)
    a=$("$BIN" eval align --emb "$P/${name}_test.safetensors" --json)
    printf '%-10s %8.4f [%.3f, %.3f] %8.4f [%.3f, %.3f] %8.4f %8.4f\n' "$name" "$(field "$k" accuracy)" "$(field "$k" accuracy_lo)" \
        "$(field "$k" accuracy_hi)" "$(field "$l" accuracy)" "$(field "$l" accuracy_lo)" "$(field "$l" accuracy_hi)" \
        "$(field "$a" align)" "$(field "$a" uniform)"
    printf '%s{"model": "%s", "knn_acc": %s, "knn_acc_lo": %s, "knn_acc_hi": %s, "linear_acc": %s, "linear_acc_lo": %s, "linear_acc_hi": %s, "align": %s, "uniform": %s}' \
        "$sep" "$name" "$(field "$k" accuracy)" "$(field "$k" accuracy_lo)" "$(field "$k" accuracy_hi)" "$(field "$l" accuracy)" \
        "$(field "$l" accuracy_lo)" "$(field "$l" accuracy_hi)" "$(field "$a" align)" "$(field "$a" uniform)" >> "$json.tmp"
    sep=", "
done
printf '], "paired_vs_random": [' >> "$json.tmp"
# the few-label regimes of the paper's Tables 2-3 (label share of the training split), each encoder
# against random init on the same test rows with the same labelled rows: paired bootstrap of the
# per-row difference, exact McNemar p
echo "== few labels: each encoder minus random init on the same test rows (95% paired interval)"
printf '%-10s %6s %-8s %9s %9s %22s %9s\n' model labels clf acc random "difference [95% CI]" McNemar
sep=""
for name in $VARIANTS; do
    for pc in 10 100; do
        for clf in knn probe; do
            r=$("$BIN" eval split --train "$P/${name}_train.safetensors" --test "$P/${name}_test.safetensors" --classifier $clf \
                --k 20 --label-percent $pc --base-train "$P/random_train.safetensors" --base-test "$P/random_test.safetensors" --json)
            printf '%-10s %5s%% %-8s %9.4f %9.4f %+8.4f [%+.3f, %+.3f] %9.3g\n' "$name" "$pc" "$clf" "$(field "$r" accuracy)" \
                "$(field "$r" base_accuracy)" "$(field "$r" delta)" "$(field "$r" delta_lo)" "$(field "$r" delta_hi)" "$(field "$r" p_mcnemar)"
            printf '%s{"model": "%s", "label_percent": %s, "classifier": "%s", "acc": %s, "random_acc": %s, "delta": %s, "delta_lo": %s, "delta_hi": %s, "p_mcnemar": %s}' \
                "$sep" "$name" "$pc" "$clf" "$(field "$r" accuracy)" "$(field "$r" base_accuracy)" "$(field "$r" delta)" \
                "$(field "$r" delta_lo)" "$(field "$r" delta_hi)" "$(field "$r" p_mcnemar)" >> "$json.tmp"
            sep=", "
        done
    done
done
printf ']}\n' >> "$json.tmp"
mv "$json.tmp" "$json"
cp "$json" "$OUT/pgcon.json"
echo "== wrote $OUT/pgcon.json; loss curves: $P/<variant>/loss.svg; $(( $(date +%s) - t0 )) s"
