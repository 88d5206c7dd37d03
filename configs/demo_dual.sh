#!/bin/sh
# make demo-dual — `train dual` on synthetic scenes, on the CPU, in a few minutes:
#   synthesise multi-view scenes -> pre-train two tiny ViT backbones with `train image` on the
#   training split, stand-ins for the paper's two pretrained models: "gastronet" = SSCD with other
#   views of a scene as positives (domain-specific), "dinov2" = MAE (generic reconstruction)
#   -> train the dual-backbone model on them twice with the same seed, data and steps: "frozen"
#   (dual.lora_r = 0: the backbones stay as loaded, only the fusion head learns) and "lora" (LoRA r 8
#   on both backbones + the head), each selected on validation mAP
#   (best.safetensors) -> embed the held-out test scenes -> retrieval: query views 0-1 against
#   gallery views 2-3 of every test scene, relevant = same scene (instance retrieval), cosine,
#   Recall@1/5 and mAP over the full ranking (endoret eval retrieval) -> table on stdout and
#   $DEMO_OUT/dual.json. A "random_init" row (the untrained model) is the no-learning reference.
# Tiny models at 64 px on synthetic data: the rows compare adaptation mechanisms, not the paper's
# numbers. DEMO_DUAL_PRETRAIN_STEPS=0 skips the pre-training (random-init backbones,
# configs/demo_dual.cfg as it is).
# Usage: DEMO_OUT=out/demo sh configs/demo_dual.sh build/endoret
# Knobs (environment): DEMO_DUAL_STEPS (default 300), DEMO_DUAL_PRETRAIN_STEPS (200),
# DEMO_DUAL_SCENES (120), DEMO_THREADS (2).
set -eu
BIN=${1:-build/endoret}
OUT=${DEMO_OUT:-out/demo}
STEPS=${DEMO_DUAL_STEPS:-300}
PRE=${DEMO_DUAL_PRETRAIN_STEPS:-200}
SCENES=${DEMO_DUAL_SCENES:-120}
THREADS=${DEMO_THREADS:-2}
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
for name in frozen lora; do
    extra=""
    [ "$name" = frozen ] && extra="--set dual.lora_r=0"
    echo "== train dual: $name ($STEPS steps)"
    # shellcheck disable=SC2086
    "$BIN" train dual --config "$CFG" $COMMON $extra --set "out.dir=$OUT/dual_$name" --quiet 2> "$OUT/dual_$name.stderr" ||
        { cat "$OUT/dual_$name.stderr" >&2; exit 1; }
    grep '"eval"' "$OUT/dual_$name/log.jsonl" | tail -1
    embed_eval "$name" --model "$OUT/dual_$name/best.safetensors"
done

num() { sed -n "s/.*\"$2\": \([-0-9.eE]*\).*/\1/p" "$1"; }
json="$OUT/dual.json"
printf '{"protocol": "held-out synthetic test scenes: query views 0-1 vs gallery views 2-3, relevant = same scene, cosine, full-ranking AP; %s training steps, model selected on val mAP; backbones pre-trained for %s steps (0 = random)", "rows": [' "$STEPS" "$PRE" > "$json.tmp"
sep=""
printf '\n%-12s %9s %9s %9s\n' model "Recall@1" "Recall@5" mAP
for name in random_init frozen lora; do
    f="$OUT/dual_$name/retrieval.json"
    r1=$(num "$f" 'recall@1'); r5=$(num "$f" 'recall@5'); map=$(num "$f" mAP)
    printf '%-12s %9.4f %9.4f %9.4f\n' "$name" "$r1" "$r5" "$map"
    printf '%s{"model": "%s", "recall1": %s, "recall5": %s, "mAP": %s}' "$sep" "$name" "$r1" "$r5" "$map" >> "$json.tmp"
    sep=", "
done
printf ']}\n' >> "$json.tmp"
mv "$json.tmp" "$json"
echo "wrote $json in $(( $(date +%s) - t0 )) s"
