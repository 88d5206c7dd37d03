#!/bin/sh
# The dual-backbone paper's tables (Kim et al., Front. Med. 2025) with `endoret train dual`:
#   Table A  backbone: GastroNet only | DINOv2 only | dual (fusion)       -> Recall@1, Recall@5, mAP
#   Table B  pooling (dual): cls | gem | mean
#   Table C  loss (dual): miner semihard | hard | all (loss margin 0.6, miner margin 0.3)
#   Table D  class-wise (dual, cls, semihard): per class Recall@1, Recall@5, mAP, and the macro mean
# Each row trains with the same config, seed and data, is selected on validation mAP
# (best.safetensors), then every image of the query split is ranked against the gallery split by
# cosine (endoret eval retrieval: relevant = same label, AP over the full ranking).
# Usage: sh configs/dual_backbone_tables.sh build/endoret MANIFEST [extra --set arguments...]
# Environment: CFG (configs/dual_backbone.cfg), OUT (out/dual_tables), QUERY_SPLIT (test),
#   GALLERY_SPLIT (train), GASTRONET / DINOV2 (weights files; unset = random init, said on stderr),
#   THREADS (2). With real weights on 2 CPU cores each row takes hours: use a GPU (--device cuda via
#   --set train.device=cuda) or fewer steps (--set train.steps=N).
set -eu
BIN=${1:?usage: dual_backbone_tables.sh BIN MANIFEST [--set k=v ...]}
MAN=${2:?usage: dual_backbone_tables.sh BIN MANIFEST [--set k=v ...]}
shift 2
CFG=${CFG:-configs/dual_backbone.cfg}
OUT=${OUT:-out/dual_tables}
QS=${QUERY_SPLIT:-test}
GS=${GALLERY_SPLIT:-train}
THREADS=${THREADS:-2}
# sleeping OpenMP waiters: spinning ones steal the cores of a shared machine (configs/demo.sh)
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
W=""""
[ -n "${GASTRONET:-}" ] && W="$W --set dual.gastronet=$GASTRONET"
[ -n "${DINOV2:-}" ] && W="$W --set dual.dinov2=$DINOV2"
mkdir -p "$OUT"

num() { sed -n "s/.*\"$2\": \([-0-9.eE]*\).*/\1/p" "$1"; }

# row NAME [--set ...]: train, embed the best model on both splits, evaluate; prints nothing
row() {
    name=$1; shift
    d="$OUT/$name"
    if [ ! -f "$d/retrieval.json" ]; then
        # shellcheck disable=SC2086
        "$BIN" train dual --config "$CFG" --set "data.manifest=$MAN" --set "train.threads=$THREADS" $W "$@" \
            --set "out.dir=$d" --quiet 2> "$d.stderr" || { cat "$d.stderr" >&2; exit 1; }
        "$BIN" embed --model "$d/best.safetensors" --manifest "$MAN" --split "$QS" --out "$d/query.safetensors" \
            --threads "$THREADS" > /dev/null
        "$BIN" embed --model "$d/best.safetensors" --manifest "$MAN" --split "$GS" --out "$d/gallery.safetensors" \
            --threads "$THREADS" > /dev/null
        "$BIN" eval retrieval --query "$d/query.safetensors" --ref "$d/gallery.safetensors" --bootstrap 0 --json \
            > "$d/retrieval.json"
    fi
}

line() { # label, row name
    f="$OUT/$2/retrieval.json"
    awk -v l="$1" -v a="$(num "$f" 'recall@1')" -v b="$(num "$f" 'recall@5')" -v m="$(num "$f" mAP)" \
        'BEGIN { printf "| %-28s | %8.2f | %8.2f | %8.2f |\n", l, 100 * a, 100 * b, 100 * m }'
}
header() { printf '\n%s\n| %-28s | %8s | %8s | %8s |\n|%s|%s|%s|%s|\n' "$1" "$2" "R@1 (%)" "R@5 (%)" "mAP (%)" \
    "------------------------------" "----------" "----------" "----------"; }

row gastronet --set dual.branches=gastronet "$@"
row dinov2 --set dual.branches=dinov2 "$@"
row dual "$@"
row dual_gem --set dual.pool=gem "$@"
row dual_mean --set dual.pool=mean "$@"
row dual_hard --set loss.miner=hard "$@"
row dual_all --set loss.miner=all "$@"

header "Table A. Backbones (query split '$QS' vs gallery '$GS')" "Backbone"
line "GastroNet ViT-S/16 + LoRA" gastronet
line "DINOv2 ViT-S/14 reg4 + LoRA" dinov2
line "Dual (fusion)" dual
header "Table B. Pooling (dual)" "Pooling"
line "CLS (the reference's code)" dual
line "GeM (p learnable, init 3)" dual_gem
line "Mean of patch tokens" dual_mean
header "Table C. Mining (dual; loss margin 0.6)" "Miner"
line "semihard (margin 0.3)" dual
line "hard" dual_hard
line "all (margin 0.3)" dual_all

# Table D: one query manifest per class of the query split, against the whole gallery
header "Table D. Class-wise (dual)" "Class"
labels=$(awk -F, -v s="$QS" 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "label") L = i; if ($i == "split") S = i }; next }
    $S == s && $L != "" { print $L }' "$MAN" | sort -u)
n=0; s1=0; s5=0; sm=0
dir=$(dirname "$MAN")
for c in $labels; do
    q="$dir/.dual_tables_query_$c.csv"
    awk -F, -v s="$QS" -v c="$c" 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "label") L = i; if ($i == "split") S = i }; print; next }
        $S == s && $L == c' "$MAN" > "$q"
    "$BIN" embed --model "$OUT/dual/best.safetensors" --manifest "$q" --out "$OUT/dual/query_$c.safetensors" \
        --threads "$THREADS" > /dev/null
    "$BIN" eval retrieval --query "$OUT/dual/query_$c.safetensors" --ref "$OUT/dual/gallery.safetensors" --bootstrap 0 \
        --json > "$OUT/dual/retrieval_$c.json"
    rm -f "$q"
    mkdir -p "$OUT/class_$c" && cp "$OUT/dual/retrieval_$c.json" "$OUT/class_$c/retrieval.json"
    line "$c" "class_$c"
    f="$OUT/dual/retrieval_$c.json"
    s1=$(awk -v x="$s1" -v y="$(num "$f" 'recall@1')" 'BEGIN { print x + y }')
    s5=$(awk -v x="$s5" -v y="$(num "$f" 'recall@5')" 'BEGIN { print x + y }')
    sm=$(awk -v x="$sm" -v y="$(num "$f" mAP)" 'BEGIN { print x + y }')
    n=$((n + 1))
done
if [ "$n" -gt 0 ]; then
    awk -v n="$n" -v a="$s1" -v b="$s5" -v m="$sm" \
        'BEGIN { printf "| %-28s | %8.2f | %8.2f | %8.2f |\n", "macro mean (" n " classes)", 100 * a / n, 100 * b / n, 100 * m / n }'
fi
