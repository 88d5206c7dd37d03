#!/bin/sh
# make kvasir-reid — copy-detection re-identification on real polyp images (Kvasir-SEG, research
# use only, read from ../shared/data/kvasir_seg; nothing derived from it is committed):
#   import -> fixed split (fold 0 of 5, seed 0: 800 train / 200 test images)
#   -> train the ViT-tiny/16 112² encoder of configs/kvasir_seg_image.cfg on the 800 train images
#      with each objective (MAE+SSCD lesion-guided masking = the paper's method, MAE+SSCD random
#      masking, SSCD only, MAE only)
#   -> `data copies`: N augmented copies of each of the 200 held-out test images, for each preset
#      (`copydet` = the headline, `light` = an easier check; own seed; see docs/endofinder.md)
#   -> embed originals + copies -> `eval reid --emb E --ref-view 0`: every copy is a query, the 200
#      originals are the references, a query's only true match is its source (each file's distance:
#      cosine, chi2 for the colour histogram; k = 10, ISC2021 uAP / Acc@1 / Recall@P90 with 95 %
#      bootstrap intervals over the queries); the no-learning rows colorhist and thumbnail
#      (`embed --baseline`) sit beside random init
#   -> table on stdout and $OUT/reid.json (one row per model and preset).
# Usage: KVASIR_OUT=out/kvasir_reid sh configs/kvasir_reid.sh build/endoret
# Knobs (environment): KVASIR_DATA (default ../shared/data/kvasir_seg), KVASIR_STEPS (training
# steps per variant, default 400 as the config), KVASIR_COPIES (copies per test image, default 5),
# KVASIR_THREADS (2), KVASIR_VARIANTS (trained rows, default "mae+sscd sscd mae mae+sscd_random_mask recipe_1h";
# also mae+sscd_crop_aug, mae+sscd_random_mask_crop_aug, sscd_crop_aug: the same objectives with
# MAE's crop+flip views instead of SSCD's advanced augmentation);
# set but empty = none),
# recipe_1h (configs/kvasir_seg_image_1h.cfg, the CPU recipe of issue 19); any name + _seedN trains
# that variant with train.seed = N, e.g. "recipe_1h_seed0 recipe_1h_seed1 recipe_1h_seed2";
# KVASIR_PRESETS (copy presets, default "copydet light"), KVASIR_LONG_STEPS (> 0 adds the row
# mae+sscd_long: the paper's method trained this many steps), KVASIR_STAGES (default
# "data train copies eval"; e.g. "copies eval" re-evaluates trained encoders),
# KVASIR_REUSE=1 keeps a variant whose $OUT/<name>/encoder.safetensors exists instead of retraining.
set -eu
BIN=${1:-build/endoret}
OUT=${KVASIR_OUT:-out/kvasir_reid}
DATA=${KVASIR_DATA:-../shared/data/kvasir_seg}
STEPS=${KVASIR_STEPS:-400}
COPIES=${KVASIR_COPIES:-5}
THREADS=${KVASIR_THREADS:-2}
VARIANTS=${KVASIR_VARIANTS-"mae+sscd sscd mae mae+sscd_random_mask recipe_1h"}
PRESETS=${KVASIR_PRESETS:-"copydet light"}
LONG_STEPS=${KVASIR_LONG_STEPS:-0}
[ "$LONG_STEPS" -gt 0 ] && VARIANTS="$VARIANTS mae+sscd_long"
STAGES=${KVASIR_STAGES:-"data train copies eval"}
REUSE=${KVASIR_REUSE:-0}
CFG=configs/kvasir_seg_image.cfg
# sleeping OpenMP waiters: on a shared 2-core machine spinning workers steal the cores they wait for
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
has() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }

mkdir -p "$OUT"
MAN="$OUT/split.csv"
t0=$(date +%s)

if has data; then
    if [ ! -d "$DATA/images" ]; then
        echo "kvasir_reid: $DATA/images not found (Kvasir-SEG lives in ../shared/data/kvasir_seg; set KVASIR_DATA)" >&2
        exit 2
    fi
    echo "== import $DATA + split (fold 0 of 5, seed 0 held out)"
    "$BIN" data import --layout image-mask "$DATA" --out "$OUT/manifest.csv"
    "$BIN" data split "$OUT/manifest.csv" --folds 5 --by label --seed 0 --holdout-fold 0 --out "$MAN"
fi

variant_cfg() { # the config file of one row
    case ${1%_seed*} in
    recipe_1h) echo configs/kvasir_seg_image_1h.cfg ;;
    *) echo "$CFG" ;;
    esac
}

variant_sets() { # the --set arguments of one row
    case $1 in
    *_seed*) echo "$(variant_sets "${1%_seed*}") --set train.seed=${1##*_seed}" ;;
    recipe_1h) echo "" ;;
    mae+sscd) echo "--set mae.masking=guided" ;;
    mae+sscd_long) echo "--set mae.masking=guided --set train.steps=$LONG_STEPS" ;;
    mae+sscd_random_mask) echo "--set mae.masking=random" ;;
    sscd) echo "--set loss.mae_weight=0 --set mae.mask_ratio=0" ;;
    mae) echo "--set loss.con_weight=0 --set mae.masking=guided" ;;
    mae+sscd_crop_aug) echo "--set mae.masking=guided --set aug.preset=mae" ;; # views: crop + flip only
    mae+sscd_random_mask_crop_aug) echo "--set mae.masking=random --set aug.preset=mae" ;;
    sscd_crop_aug) echo "--set loss.mae_weight=0 --set mae.mask_ratio=0 --set aug.preset=mae" ;;
    *) echo "kvasir_reid: unknown variant '$1'" >&2; return 2 ;;
    esac
}

if has train; then
    for name in $VARIANTS; do
        sets=$(variant_sets "$name")
        if [ "$REUSE" = 1 ] && [ -f "$OUT/$name/encoder.safetensors" ]; then
            echo "== train $name: reusing $OUT/$name/encoder.safetensors (KVASIR_REUSE=1)"
            continue
        fi
        echo "== train $name ($(variant_cfg "$name") $sets; 800 train images)"
        ts=$(date +%s)
        # shellcheck disable=SC2086 (later --set wins: the variant's train.steps overrides $STEPS)
        steps_set="--set train.steps=$STEPS"
        [ "$(variant_cfg "$name")" = "$CFG" ] || steps_set="" # a recipe file keeps its own steps
        "$BIN" train image --config "$(variant_cfg "$name")" --set "data.manifest=$MAN" --set data.split=train \
            $steps_set --set "train.threads=$THREADS" --set "out.dir=$OUT/$name" $sets --quiet
        echo "$(( $(date +%s) - ts ))" > "$OUT/$name/train_seconds.txt"
        tail -n 1 "$OUT/$name/log.jsonl"
    done
fi

if has copies; then
    for preset in $PRESETS; do
        echo "== copies: $COPIES per held-out test image (preset $preset, seed 20261122)"
        "$BIN" data copies --manifest "$MAN" --split test --out "$OUT/copies_$preset" --copies "$COPIES" \
            --seed 20261122 --preset "$preset" --threads "$THREADS"
    done
fi

if has eval; then
    rows="random colorhist thumbnail $VARIANTS"
    json="$OUT/reid.json"
    printf '{"protocol": "copy detection on the 200 held-out Kvasir-SEG test images: queries = %s augmented copies per image, references = the originals, k=10, ISC2021 metrics, each file ranked by its distance (chi2 for colorhist), 95%% bootstrap intervals over queries", "rows": [' "$COPIES" > "$json.tmp"
    sep=""
    table=""
    for preset in $PRESETS; do
        echo "== embed originals + copies ($preset)"
        man="$OUT/copies_$preset/manifest.csv"
        for name in $rows; do
            emb="$OUT/${name}_${preset}_emb.safetensors"
            if [ "$name" = random ]; then
                "$BIN" embed --config "$CFG" --manifest "$man" --out "$emb" --threads "$THREADS"
            elif [ "$name" = colorhist ] || [ "$name" = thumbnail ]; then
                "$BIN" embed --baseline "$name" --manifest "$man" --out "$emb"
            else
                "$BIN" embed --model "$OUT/$name/encoder.safetensors" --manifest "$man" --out "$emb" --threads "$THREADS"
            fi
            line=$("$BIN" eval reid --emb "$emb" --ref-view 0 --k 10 --json)
            get() { echo "$line" | sed "s/.*\"$1\": \([^,}]*\).*/\1/"; }
            secs=0
            [ -f "$OUT/$name/train_seconds.txt" ] && secs=$(cat "$OUT/$name/train_seconds.txt")
            steps=0
            [ -f "$OUT/$name/log.jsonl" ] && steps=$(tail -n 1 "$OUT/$name/log.jsonl" | sed 's/.*"step": \([0-9]*\).*/\1/')
            table="$table$(printf '%-22s %-8s %8.4f %8.4f %10.4f %8s %6s %6s %8s   [%.4f, %.4f] [%.4f, %.4f]' "$name" "$preset" "$(get uAP)" "$(get acc1)" \
                "$(get recall_p90)" "$(get queries)" "$(get references)" "$steps" "$secs" "$(get uAP_lo)" "$(get uAP_hi)" "$(get acc1_lo)" "$(get acc1_hi)")
"
            printf '%s{"model": "%s", "preset": "%s", "uAP": %s, "uAP_lo": %s, "uAP_hi": %s, "acc1": %s, "acc1_lo": %s, "acc1_hi": %s, "recall_p90": %s, "queries": %s, "references": %s, "train_steps": %s, "train_seconds": %s}' \
                "$sep" "$name" "$preset" "$(get uAP)" "$(get uAP_lo)" "$(get uAP_hi)" "$(get acc1)" "$(get acc1_lo)" "$(get acc1_hi)" \
                "$(get recall_p90)" "$(get queries)" "$(get references)" "$steps" "$secs" >> "$json.tmp"
            sep=", "
        done
    done
    printf ']}\n' >> "$json.tmp"
    mv "$json.tmp" "$json"
    echo "== copy detection: queries = the copies (views 1..$COPIES), references = the originals (view 0)"
    printf '%-22s %-8s %8s %8s %10s %8s %6s %6s %8s   %-16s %s\n' model preset uAP Acc@1 R@P90 queries refs steps train_s "uAP 95%" "Acc@1 95%"
    printf '%s' "$table"
    echo "== wrote $json; loss curves: $OUT/<model>/loss.svg"
fi
echo "== kvasir_reid: total $(( $(date +%s) - t0 )) s"
