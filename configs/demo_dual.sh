#!/bin/sh
# make demo-dual — `train dual` on synthetic scenes, on the CPU, in a few minutes:
#   synthesise multi-view scenes -> pre-train two tiny ViT backbones with `train image` on the
#   training split, stand-ins for the paper's two pretrained models: "gastronet" = SSCD with other
#   views of a scene as positives (domain-specific), "dinov2" = MAE (generic reconstruction)
#   -> train the dual-backbone model on them with the same seed, data and steps, at each of a few
#   learning rates (DEMO_DUAL_LRS): "frozen" (dual.lora_r = 0: the backbones stay as loaded, only
#   the fusion head learns) and "lora" (LoRA r 8 on both backbones + the head). Model selection on
#   the validation split only: each run keeps best.safetensors by validation mAP, and each model's
#   lr is the one with the best validation mAP. Only then are the held-out test scenes embedded
#   -> retrieval: query views 0-1 against gallery views 2-3 of every test scene, relevant = same
#   scene (instance retrieval), cosine, Recall@1/5 and mAP over the full ranking (endoret eval
#   retrieval) -> table on stdout and $DEMO_OUT/dual.json, then lora minus frozen paired on the same
#   test queries (eval retrieval --base-query/--base-ref: per-query AP difference, 95 % bootstrap
#   interval over the queries). A "random_init" row (the untrained model) is the no-learning
#   reference.
# Tiny models at 64 px on synthetic data: the rows compare adaptation mechanisms, not the paper's
# numbers. DEMO_DUAL_PRETRAIN_STEPS=0 skips the pre-training (random-init backbones,
# configs/demo_dual.cfg as it is).
# Usage: DEMO_OUT=out/demo sh configs/demo_dual.sh build/endoret
# Knobs (environment): DEMO_DUAL_STEPS (default 150), DEMO_DUAL_PRETRAIN_STEPS (200),
# DEMO_DUAL_SCENES (240), DEMO_DUAL_LRS ("1e-3 3e-4 1e-4"), DEMO_THREADS (2).
set -eu
BIN=${1:-build/endoret}
OUT=${DEMO_OUT:-out/demo}
STEPS=${DEMO_DUAL_STEPS:-150}
PRE=${DEMO_DUAL_PRETRAIN_STEPS:-200}
SCENES=${DEMO_DUAL_SCENES:-240}
THREADS=${DEMO_THREADS:-2}
LRS=${DEMO_DUAL_LRS:-"1e-3 3e-4 1e-4"}
CFG=configs/demo_dual.cfg
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
mkdir -p "$OUT"
t0=$(date +%s)
SYN="$OUT/dual_synth"
echo "== synth: $SCENES scenes x 4 views (64x64) -> $SYN"
"$BIN" synth --out "$SYN" --scenes "$SCENES" --views 4 --size 64 --seed 11 --threads "$THREADS"
MAN="$SYN/manifest.csv"
# test scenes: query views 0-1, gallery views 2-3, label := scene (columns path,label,mask,scene,view,patient,split)
for part in query gallery; do
    awk -F, -v part="$part" 'NR == 1 { print; next }
        $7 == "test" && ((part == "query" && $5 <= 1) || (part == "gallery" && $5 >= 2)) { $2 = $4; print }' OFS=, \
        "$MAN" > "$SYN/test_$part.csv.tmp"
    mv "$SYN/test_$part.csv.tmp" "$SYN/test_$part.csv"
done
COMMON="--set data.manifest=$MAN --set train.steps=$STEPS --set train.threads=$THREADS"
if [ "$PRE" -gt 0 ]; then
    # the demo image encoder (configs/demo_image.cfg: ViT width 128, depth 4, patch 8, 64 px)
    for pre in sscd mae; do
        case $pre in
            sscd) set -- --set loss.mae_weight=0 --set mae.mask_ratio=0 --set data.positives=views ;;
            mae) set -- --set loss.con_weight=0 ;;
        esac
        echo "== pre-train backbone: $pre ($PRE steps)"
        "$BIN" train image --config configs/demo_image.cfg --set "data.manifest=$MAN" --set train.steps="$PRE" \
            --set train.warmup_steps=20 --set train.threads="$THREADS" "$@" --set "out.dir=$OUT/dual_pre_$pre" --quiet
    done
    set --
    COMMON="$COMMON --set model.img=64 --set dual.gastronet=$OUT/dual_pre_sscd/encoder.safetensors"
    COMMON="$COMMON --set dual.dinov2=$OUT/dual_pre_mae/encoder.safetensors"
fi

embed_eval() { # name, then the model arguments of endoret embed
    name=$1; shift
    for part in query gallery; do
        "$BIN" embed "$@" --manifest "$SYN/test_$part.csv" --out "$OUT/dual_$name/$part.safetensors" --threads "$THREADS" > /dev/null
    done
    "$BIN" eval retrieval --query "$OUT/dual_$name/query.safetensors" --ref "$OUT/dual_$name/gallery.safetensors" \
        --bootstrap 0 --json > "$OUT/dual_$name/retrieval.json"
}

mkdir -p "$OUT/dual_random_init"
echo "== random_init (untrained model and head, random backbones, no training)"
embed_eval random_init --config "$CFG" 2> /dev/null
# model selection on the validation split only: each (model, lr) run keeps best.safetensors by
# validation mAP; the lr of each model is the one with the best validation mAP. The test split is
# touched only after both choices are made.
best_val() { sed -n 's/.*"val_mAP": \([-0-9.eE]*\).*/\1/p' "$1" | sort -g | tail -1; }
for name in frozen lora; do
    extra=""
    [ "$name" = frozen ] && extra="--set dual.lora_r=0"
    best="" bestlr=""
    for lr in $LRS; do
        d="$OUT/dual_${name}_lr$lr"
        # shellcheck disable=SC2086
        "$BIN" train dual --config "$CFG" $COMMON $extra --set train.lr="$lr" --set "out.dir=$d" --quiet 2> "$d.stderr" ||
            { cat "$d.stderr" >&2; exit 1; }
        v=$(best_val "$d/log.jsonl")
        echo "== train dual: $name lr $lr ($STEPS steps): best validation mAP $v"
        if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$v bestlr=$lr; fi
    done
    echo "== $name: chosen on validation: lr $bestlr (validation mAP $best)"
    case $name in
        frozen) frozen_lr=$bestlr frozen_val=$best ;;
        lora) lora_lr=$bestlr lora_val=$best ;;
    esac
    mkdir -p "$OUT/dual_$name"
    embed_eval "$name" --model "$OUT/dual_${name}_lr$bestlr/best.safetensors"
done

# paired on the test queries: per-query AP of lora minus frozen, the same query and gallery rows
"$BIN" eval retrieval --query "$OUT/dual_lora/query.safetensors" --ref "$OUT/dual_lora/gallery.safetensors" \
    --base-query "$OUT/dual_frozen/query.safetensors" --base-ref "$OUT/dual_frozen/gallery.safetensors" \
    --bootstrap 1000 --json > "$OUT/dual_paired.json"

num() { sed -n "s/.*\"$2\": \([-0-9.eE]*\).*/\1/p" "$1"; }
json="$OUT/dual.json"
printf '{"protocol": "held-out synthetic test scenes: query views 0-1 vs gallery views 2-3, relevant = same scene, cosine, full-ranking AP; %s training steps, lr of each model chosen on validation mAP among %s, checkpoint = best validation mAP; backbones pre-trained for %s steps (0 = random)", "rows": [' "$STEPS" "$LRS" "$PRE" > "$json.tmp"
sep=""
printf '\n%-12s %7s %9s %9s %9s %9s\n' model lr "val mAP" "Recall@1" "Recall@5" mAP
for name in random_init frozen lora; do
    f="$OUT/dual_$name/retrieval.json"
    r1=$(num "$f" 'recall@1'); r5=$(num "$f" 'recall@5'); map=$(num "$f" mAP)
    lr=-; val=-
    [ "$name" = frozen ] && lr=$frozen_lr val=$frozen_val
    [ "$name" = lora ] && lr=$lora_lr val=$lora_val
    printf '%-12s %7s %9s %9.4f %9.4f %9.4f\n' "$name" "$lr" "$val" "$r1" "$r5" "$map"
    jlr=null; jval=null
    [ "$lr" != - ] && jlr="\"$lr\"" jval=$val
    printf '%s{"model": "%s", "lr": %s, "val_mAP": %s, "recall1": %s, "recall5": %s, "mAP": %s}' "$sep" "$name" "$jlr" "$jval" "$r1" "$r5" "$map" >> "$json.tmp"
    sep=", "
done
P="$OUT/dual_paired.json"
d=$(num "$P" delta); lo=$(num "$P" delta_lo); hi=$(num "$P" delta_hi)
printf '], "paired": {"a": "lora", "b": "frozen", "queries": %s, "mAP_diff": %s, "lo": %s, "hi": %s}}\n' "$(num "$P" queries)" "$d" "$lo" "$hi" >> "$json.tmp"
mv "$json.tmp" "$json"
printf 'lora - frozen, test mAP (paired over the %s test queries, 1000 bootstrap replicates): %+.4f, 95%% interval [%+.4f, %+.4f]\n' \
    "$(num "$P" queries)" "$d" "$lo" "$hi"
echo "wrote $json in $(( $(date +%s) - t0 )) s"
