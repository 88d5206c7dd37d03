#!/bin/sh
# The few-label stage of make demo-pgcon (the paper's Tables 2-3 regime, spec 1.10): after
# configs/demo_pgcon.sh, fine-tune every layer of the demo's ResNet-18 on 10 % of the training labels
# (train finetune, data.label_percent 10) from random init and from each encoder the first part
# trained (PGCon; WINCon too with DEMO_PGCON_VARIANTS="pgcon wincon"); each run keeps the weights of its best validation accuracy (best.safetensors: the test split
# is never used to choose), then the test split is scored twice:
#   - the fine-tuning run's own classifier at that step (test_accuracy in its log, unpaired);
#   - a probe on the fine-tuned trunk's features trained on the same labelled rows, paired with the
#     random-init run on the same test rows (eval split --base-train/--base-test: per-row difference,
#     paired bootstrap 95 % interval, exact McNemar p).
# Usage: DEMO_OUT=out/demo sh configs/demo_pgcon_finetune.sh build/endoret   (after demo_pgcon.sh)
# Knobs (environment): DEMO_FT_STEPS (150), DEMO_FT_PERCENT (10), DEMO_THREADS, DEMO_FT_MODELS (the inits,
# 'random' and DEMO_PGCON_VARIANTS' (default 'pgcon'); the random-init run is the paired baseline and
# must exist).
set -eu
BIN=${1:-build/endoret}
OUT=${DEMO_OUT:-out/demo}
THREADS=${DEMO_THREADS:-2}
STEPS=${DEMO_FT_STEPS:-150}
PC=${DEMO_FT_PERCENT:-10}
MODELS=${DEMO_FT_MODELS:-random ${DEMO_PGCON_VARIANTS:-pgcon}}
P="$OUT/pgcon"
MAN="$OUT/pgcon_synth/manifest.csv"
field() { echo "$1" | sed "s/.*\"$2\": \([^,}]*\).*/\1/"; }
for name in $MODELS; do
    init=""
    [ "$name" = random ] || init="$P/$name/encoder.safetensors"
    echo "== fine-tune from $name on $PC% of the training labels ($STEPS steps, selected on val)"
    "$BIN" train finetune --config configs/pgcon_finetune.cfg --set model.arch=resnet18 --set model.width=32 \
        --set model.img=32 --set model.classes=2 --set "finetune.init=$init" --set data.manifest="$MAN" \
        --set data.label_percent="$PC" --set eval.split=val --set eval.test_split=test --set eval.every=25 \
        --set train.steps="$STEPS" --set train.batch=32 --set train.threads="$THREADS" --set out.dir="$P/ft_$name" \
        --set out.log_every=50 --quiet
    for s in train test; do
        "$BIN" embed --model "$P/ft_$name/best.safetensors" --manifest "$MAN" --split $s \
            --out "$P/ft_${name}_$s.safetensors" --threads "$THREADS" > /dev/null
    done
done
json="$P/pgcon_finetune.json"
printf '{"protocol": "fine-tune every layer on %s%% of the training labels, best validation step; test: its own classifier (unpaired) and a probe on its features paired with random init", "rows": [' "$PC" > "$json.tmp"
echo "== $PC% labels, fine-tuned: test accuracy; probe on the fine-tuned features minus random init's (95% paired interval)"
printf '%-8s %9s %9s %9s %24s %9s\n' init val test probe "diff vs random [95% CI]" McNemar
sep=""
for name in $MODELS; do
    best=$(grep '"best": true' "$P/ft_$name/log.jsonl" | tail -n 1)
    r=$("$BIN" eval split --train "$P/ft_${name}_train.safetensors" --test "$P/ft_${name}_test.safetensors" --classifier probe \
        --label-percent "$PC" --base-train "$P/ft_random_train.safetensors" --base-test "$P/ft_random_test.safetensors" --json)
    printf '%-8s %9.4f %9.4f %9.4f %+9.4f [%+.3f, %+.3f] %9.3g\n' "$name" "$(field "$best" accuracy)" \
        "$(field "$best" test_accuracy)" "$(field "$r" accuracy)" "$(field "$r" delta)" "$(field "$r" delta_lo)" \
        "$(field "$r" delta_hi)" "$(field "$r" p_mcnemar)"
    printf '%s{"init": "%s", "val_acc": %s, "test_acc": %s, "probe_acc": %s, "delta": %s, "delta_lo": %s, "delta_hi": %s, "p_mcnemar": %s}' \
        "$sep" "$name" "$(field "$best" accuracy)" "$(field "$best" test_accuracy)" "$(field "$r" accuracy)" "$(field "$r" delta)" \
        "$(field "$r" delta_lo)" "$(field "$r" delta_hi)" "$(field "$r" p_mcnemar)" >> "$json.tmp"
    sep=", "
done
printf ']}\n' >> "$json.tmp"
mv "$json.tmp" "$json"
cp "$json" "$OUT/pgcon_finetune.json"
echo "== wrote $OUT/pgcon_finetune.json"
