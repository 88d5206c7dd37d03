#!/bin/sh
# The GPU recipe of issue 31 (configs/colondb_seq_gpu.cfg: ViT-S/16 at 224, bf16) on the CVC-ColonDB
# leave-sequences-out folds, then the same tables as the CPU recipe (bench/colondb_folds_eval.sh).
# Made to run on a lent GPU machine in one call (bench/gpu_session.sh stage `colondb`):
#   on this machine:  sh bench/colondb_gpu.sh pack            (the images as .gpu/data: smaller copies,
#                                                              endoret data resize --side 224, ~40 MB)
#   on the GPU one:   sh bench/colondb_gpu.sh run E DATA OUT  (E: .gpu/endoret, DATA: .gpu/data)
#                     sh bench/colondb_gpu.sh profile E DATA OUT  (fold 0, 60 steps, `train --profile`:
#                     the data phase against the model's, to tell whether the loader bounds the step;
#                     the recipe ran at 1,370-1,690 img/s in session 19, well below ViT-S's compute)
# The folds, seeds and tables are the CPU recipe's; only the model, input size and steps differ (the
# config says why). The encoders stay in OUT on the GPU machine (88 MB each): copy back only the logs.
set -eu
case ${1:-} in
pack)
    E=${2:-build/endoret}
    "$E" data resize ../shared/data/cvc_colondb --out .gpu/data/cvc_colondb --side 224
    "$E" data resize ../shared/data/kvasir_seg --out .gpu/data/kvasir_seg --side 224 --quality 85
    du -sh .gpu/data ;;
run)
    E=${2:?usage: colondb_gpu.sh run E DATA OUT}
    DATA=${3:?}
    O=${4:?}
    start=$(date +%s)
    DATA="$DATA" EMBED_DEVICE=cuda sh bench/colondb_folds.sh "$E" "$O" 5 600 configs/colondb_seq_gpu.cfg
    echo "colondb_gpu: 5 folds trained and embedded in $(( $(date +%s) - start )) s"
    RECIPE=configs/colondb_seq_gpu.cfg sh bench/colondb_folds_eval.sh "$E" "$O" 5 ;;
profile)
    E=${2:?usage: colondb_gpu.sh profile E DATA OUT}
    DATA=${3:?}
    O=${4:?}
    mkdir -p "$O"
    C=$DATA/cvc_colondb
    "$E" data import --layout sequences "$C" --map "$C/labels.csv" --views 0 --out "$O/colondb.csv"
    "$E" data import --layout image-mask "$DATA/kvasir_seg" --out "$O/kvasir.csv"
    "$E" data split "$O/colondb.csv" --folds 5 --by scene --seed 0 --holdout-fold 0 --out "$O/hold0.csv"
    { cat "$O/hold0.csv"; awk -F, 'NR > 1 { OFS = ","; $7 = "train"; print }' "$O/kvasir.csv"; } > "$O/train0.csv"
    "$E" train image --config configs/colondb_seq_gpu.cfg --set data.manifest="$O/train0.csv" --set train.steps=${STEPS:-60} \
        --set out.dir="$O/profile0" ${EXTRA:-} --profile ;;
*)
    echo "usage: sh bench/colondb_gpu.sh pack [E] | run E DATA OUT | profile E DATA OUT" >&2
    exit 2 ;;
esac
