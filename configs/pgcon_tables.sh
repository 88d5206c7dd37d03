#!/bin/sh
# PGCon / WINCon's tables (Vats et al., Sci Rep 2023), one command:
#
#   sh configs/pgcon_tables.sh BIN OUT name=ENCODER ...
#
# Each model argument names a pre-trained ResNet file: a PGCon / WINCon encoder.safetensors, a
# torchvision ResNet-50 converted to safetensors (the ImageNet row), or random:CONFIG for the random
# init of a training config. The labelled data sets come from the environment, each a manifest with a
# label column and train / val (/ test) splits (`endoret data import --layout class-folders`):
#   CADCAP  CAD-CAP (80:10:10 train / val / test)       OSF   OSF-Kvasir (Kvasir-Capsule, 60:40)
#   KID     FS-KID (60:40)                               KID2  FS-KID2 (60:40)
# Tables (a data set that is not given is left out of every table):
#   Table 2  zero-shot weighted kNN on CAD-CAP (k 290, tau 0.1 on the normalised 128-d projection; the
#            2048-d pooled features for a file without one): bank = train split, queries = test split.
#   Table 3  linear evaluation (configs/pgcon_linear.cfg: frozen encoder, the 2-fc head): OSF, KID,
#            KID2 (best val accuracy, as the paper reports them) and CAD-CAP at 1 %, 10 % and 100 % of
#            the labels (test accuracy of the model selected on val).
#   Table 4  full fine-tuning (configs/pgcon_finetune.cfg): OSF and CAD-CAP, accuracy and per-class
#            sensitivity, selected on val (test for CAD-CAP).
#   align    alignment / uniformity of every encoder's CAD-CAP test descriptors (the paper's fig. 4a).
# Knobs: EPOCHS_LINEAR, EPOCHS_FT (override the configs' epochs for a quick look), THREADS, SEED,
# FT_SETS (more --set arguments for every linear / fine-tuning run, e.g. the random row's architecture:
# "--set model.arch=resnet18").
# Writes OUT/table2.json, OUT/table3.json, OUT/table4.json, OUT/align.json and prints the tables.
set -eu
BIN=$1; OUT=$2; shift 2
THREADS=${THREADS:-2}
SEED=${SEED:-0}
mkdir -p "$OUT"
num() { echo "$2" | sed "s/.*\"$1\": \([^,}]*\).*/\1/"; }

src() { # model spec -> embed arguments
    case $1 in random:*) echo "--config ${1#random:}" ;; *) echo "--model $1" ;; esac
}
init() { # model spec -> finetune.init value ('' = random init)
    case $1 in random:*) echo "" ;; *) echo "$1" ;; esac
}

# the eval line of a finetune run with the best accuracy on the selection split (the last "best")
best_line() { grep '"best": true' "$1/log.jsonl" | tail -n 1; }

finetune() { # cfg name model manifest percent out-subdir -> prints the best eval line
    f_cfg=$1; f_model=$2; f_man=$3; f_pct=$4; f_out=$5; f_test=$6
    f_extra=""
    [ -n "${EPOCHS:-}" ] && f_extra="--set train.epochs=$EPOCHS"
    # shellcheck disable=SC2086
    "$BIN" train finetune --config "$f_cfg" --set "finetune.init=$(init "$f_model")" --set "data.manifest=$f_man" \
        --set "data.label_percent=$f_pct" --set "eval.test_split=$f_test" --set "train.seed=$SEED" \
        --set "train.threads=$THREADS" --set "out.dir=$f_out" $f_extra ${FT_SETS:-} --quiet
    best_line "$f_out"
}

t2="$OUT/table2.json.tmp"; t3="$OUT/table3.json.tmp"; t4="$OUT/table4.json.tmp"; ta="$OUT/align.json.tmp"
printf '{"protocol": "CAD-CAP zero-shot weighted kNN, k 290, tau 0.1, bank = train, queries = test", "rows": [' > "$t2"
printf '{"protocol": "linear evaluation (frozen encoder, 2-fc head): best val accuracy (OSF, KID, KID2); CAD-CAP test accuracy of the model selected on val", "rows": [' > "$t3"
printf '{"protocol": "full fine-tuning: accuracy and per-class sensitivity, selected on val (CAD-CAP: test)", "rows": [' > "$t4"
printf '{"protocol": "alignment / uniformity (Wang & Isola) of the CAD-CAP test descriptors, pairs of one label", "rows": [' > "$ta"
s2=""; s3=""; s4=""; sa=""

if [ -n "${CADCAP:-}" ]; then
    echo "== Table 2: zero-shot weighted kNN on CAD-CAP (k 290, tau 0.1)"
    printf '%-16s %10s %18s\n' encoder top-1 "95% interval"
    for arg in "$@"; do
        name=${arg%%=*}; m=${arg#*=}
        for s in train test; do
            # shellcheck disable=SC2046
            "$BIN" embed $(src "$m") --manifest "$CADCAP" --split $s --out "$OUT/${name}_cadcap_$s.safetensors" --threads "$THREADS" > /dev/null
        done
        j=$("$BIN" eval split --train "$OUT/${name}_cadcap_train.safetensors" --test "$OUT/${name}_cadcap_test.safetensors" --k 290 --tau 0.1 --json)
        printf '%-16s %10.4f     [%.4f, %.4f]\n' "$name" "$(num accuracy "$j")" "$(num accuracy_lo "$j")" "$(num accuracy_hi "$j")"
        printf '%s{"model": "%s", "knn_acc": %s, "knn_acc_lo": %s, "knn_acc_hi": %s}' "$s2" "$name" "$(num accuracy "$j")" \
            "$(num accuracy_lo "$j")" "$(num accuracy_hi "$j")" >> "$t2"
        s2=", "
        a=$("$BIN" eval align --emb "$OUT/${name}_cadcap_test.safetensors" --group label --json)
        printf '%s{"model": "%s", "align": %s, "uniform": %s}' "$sa" "$name" "$(num align "$a")" "$(num uniform "$a")" >> "$ta"
        sa=", "
    done
fi

echo "== Table 3: linear evaluation (frozen encoder, 2-fc head)"
printf '%-16s %10s %10s %10s %10s %10s %10s\n' encoder OSF-Kvasir FS-KID FS-KID2 CAD-CAP-1% CAD-CAP-10% CAD-CAP-100%
for arg in "$@"; do
    name=${arg%%=*}; m=${arg#*=}
    row="{\"model\": \"$name\""
    line=$(printf '%-16s' "$name")
    EPOCHS=${EPOCHS_LINEAR:-}
    for set in OSF KID KID2 CADCAP:1 CADCAP:10 CADCAP:100; do
        ds=${set%%:*}; pct=100
        case $set in *:*) pct=${set#*:} ;; esac
        man=$(eval echo "\${$ds:-}")
        key=$(echo "$set" | tr ':' '_')
        if [ -z "$man" ]; then line="$line $(printf '%10s' -)"; continue; fi
        test=""; [ "$ds" = CADCAP ] && test=test
        b=$(finetune configs/pgcon_linear.cfg "$m" "$man" "$pct" "$OUT/linear_${name}_$key" "$test")
        acc=$(num accuracy "$b"); [ "$ds" = CADCAP ] && acc=$(num test_accuracy "$b")
        line="$line $(printf '%10.4f' "$acc")"
        row="$row, \"$key\": $acc"
    done
    echo "$line"
    printf '%s%s}' "$s3" "$row" >> "$t3"
    s3=", "
done

echo "== Table 4: full fine-tuning"
printf '%-16s %-8s %10s  %s\n' encoder dataset accuracy "sensitivity per class"
for arg in "$@"; do
    name=${arg%%=*}; m=${arg#*=}
    EPOCHS=${EPOCHS_FT:-}
    for ds in OSF CADCAP; do
        man=$(eval echo "\${$ds:-}")
        [ -z "$man" ] && continue
        test=""; [ "$ds" = CADCAP ] && test=test
        b=$(finetune configs/pgcon_finetune.cfg "$m" "$man" 100 "$OUT/finetune_${name}_$ds" "$test")
        if [ "$ds" = CADCAP ]; then acc=$(num test_accuracy "$b"); sens=$(echo "$b" | sed 's/.*"test_sensitivity": \(\[[^]]*\]\).*/\1/')
        else acc=$(num accuracy "$b"); sens=$(echo "$b" | sed 's/.*"sensitivity": \(\[[^]]*\]\).*/\1/'); fi
        printf '%-16s %-8s %10.4f  %s\n' "$name" "$ds" "$acc" "$sens"
        printf '%s{"model": "%s", "dataset": "%s", "accuracy": %s, "sensitivity": %s}' "$s4" "$name" "$ds" "$acc" "$sens" >> "$t4"
        s4=", "
    done
done

for t in table2 table3 table4 align; do
    printf ']}\n' >> "$OUT/$t.json.tmp"
    mv "$OUT/$t.json.tmp" "$OUT/$t.json"
done
echo "== wrote $OUT/table2.json, table3.json, table4.json, align.json"
