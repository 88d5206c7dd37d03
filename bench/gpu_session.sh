#!/usr/bin/env bash
# bench/gpu_session.sh — what one call on a lent GPU machine runs (issue #16), stage by stage.
#
#   bash bench/gpu_session.sh [BIN_DIR] STAGE...
#
# BIN_DIR holds endoret, endoret_tests and lib/ (built on the CPU machine with
#   make CUDA=1 MPI=0 BUILD=build/gpu ARCH=-march=x86-64-v2
# and the shared libraries the GPU image may lack, copied from ldd), or is "build" after a build there.
# Each stage writes its raw output to $OUT/<stage>.txt (or ./gpu_out when OUT is unset) and is bounded
# by its own timeout, so one hang costs that stage only. The last lines printed are a summary.
#
# Stages: env probe gpumem parity optim suite sanitize attn_sanitize benchcuda attn_ab attn_profile fuse_ab mae_bf16 mae_resident torch_ab mae_base mae_large mae_large_fp32 resnet resnet_nhwc torch_mae
#         torch_resnet profile_large profile_resnet train_check bf16_track train_speed (SPEED_BINS) train_profile scene_bench
#         colondb (issue 31's GPU recipe: bench/colondb_gpu.sh, the images packed into BIN/data first)
#         colondb_profile (its fold 0 for 60 steps with --profile: loader against model)
#         owed: the stages whose figures no lent GPU has measured yet, in the order to run them (OWED below)
set -u
# Owed as of session 22 (sessions 19-22 had no GPU): the probe before any timing, parity and memcheck of
# the new device tests (flash attention, channels-last ResNet, the step guard and the one-wait step),
# the trainers against the CPU (their host waits per step beside), both ResNet layouts beside PyTorch,
# the attention paths, the flash rows of bench cuda, PyTorch's ViT rows, the resident batch, the loop's speed.
OWED="probe parity sanitize train_check resnet_nhwc torch_resnet attn_ab attn_profile benchcuda torch_ab mae_resident train_speed"
BIN=${1:?usage: gpu_session.sh BIN_DIR STAGE...}; shift
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
E=${EBIN:-$BIN/endoret}; T=$BIN/endoret_tests   # EBIN: another endoret (an earlier build) with BIN's libraries
NT=$(nproc)

# CUDA libraries: the toolkit's and the pip wheels' (cuDNN and NCCL are often only there); carried
# libraries only where the image has no library of that name.
libdirs=""
for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  p=$(ldconfig -p | awk -v n="$n" '$1 == n {print $NF; exit}')
  [ -z "$p" ] && p=$(find /usr/local/cuda*/ /opt /usr/lib -name "$n" 2>/dev/null | head -1)
  [ -n "$p" ] && libdirs="$libdirs:$(dirname "$p")"
done
if [ -d "$BIN/lib" ]; then
  mkdir -p /tmp/carried_lib
  for f in "$BIN"/lib/*; do
    ldconfig -p | grep -q "^[[:space:]]*$(basename "$f") " || cp "$f" /tmp/carried_lib/
  done
  libdirs="$libdirs:/tmp/carried_lib"
fi
export LD_LIBRARY_PATH="${libdirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1

summary=""
stage() { # name timeout command...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s%N)
  echo "=== $name: $*" | tee "$OUT/$name.txt"
  timeout --kill-after=5 "$t" "$@" >> "$OUT/$name.txt" 2>&1
  local rc=$?
  local dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "=== $name rc=$rc ${dt} ms" >> "$OUT/$name.txt"
  summary="$summary$(printf '%-16s rc=%-3s %8d ms' "$name" "$rc" "$dt")"$'\n'
  tail -n "${TAIL:-6}" "$OUT/$name.txt"
}
train() { # model batch objective precision [extra...]
  "$E" bench train --model "$1" --img 224 --batch "$2" --objective "$3" --precision "$4" --device cuda \
       --threads "$NT" --steps "${STEPS:-10}" --json "${@:5}"
}
torch_vit() { python3 bench/torch_vit_bench.py --model "$1" --batch "$2" --objective "$3" --precision "$4" \
                --device cuda --threads "$NT" --steps "${STEPS:-10}" "${@:5}"; }

stages=""
for s in "$@"; do [ "$s" = owed ] && stages="$stages $OWED" || stages="$stages $s"; done
for s in $stages; do
  case $s in
    env) stage env 60 bash -c "nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv;
                              nvcc --version | tail -2; python3 -c 'import torch,timm; print(\"torch\", torch.__version__, \"timm\", timm.__version__, torch.cuda.get_device_name())';
                              lscpu | grep -E 'Model name|^CPU\\(s\\)'; echo LD_LIBRARY_PATH=\$LD_LIBRARY_PATH;
                              ldd $E | grep -E 'not found|cud|nccl|cublas'; $E --version" ;;
    parity) stage parity 240 "$T" --filter 'cuda/*' --jobs 4 --verbose ;;
    optim) stage optim 120 "$T" --filter 'optim_cuda/*' --jobs 2 --verbose ;;
    suite) TAIL=12 stage suite 300 "$T" --jobs "$NT" ;;
    sanitize) stage sanitize 400 compute-sanitizer --tool memcheck --target-processes all --print-limit 20 \
                "$T" --filter 'cuda/*' --jobs 1 ;;
    probe) TAIL=80 stage probe 60 "$E" bench cuda --probe ;;
    benchcuda) TAIL=40 stage benchcuda 120 "$E" bench cuda ;;
    attn_sanitize) stage attn_sanitize 300 bash -c "for t in memcheck racecheck; do for f in 'cuda/attention_tensor*' 'cuda/attention_bf16*'; do
                     compute-sanitizer --tool \$t --print-limit 20 $T --filter \"\$f\" --jobs 1 || exit 1; done; done;
                     compute-sanitizer --tool memcheck --print-limit 20 $T --filter 'cuda/gemm_ex*' --jobs 1" ;;
    fuse_ab) TAIL=16 stage fuse_ab 400 bash -c "$(declare -f train); E=$E NT=$NT; for a in 'mma lt' 'gemm lt' 'mma split' 'gemm split'; do
               set -- \$a; export ENDORET_CUDA_ATTENTION=\$1 ENDORET_CUDA_GEMM_EX=\$2; echo attention=\$1 gemm_ex=\$2;
               train vit_large 64 mae bf16; train vit_large 128 mae bf16; train vit_base 128 mae bf16; done" ;;
    attn_ab) TAIL=12 stage attn_ab 400 bash -c "$(declare -f train); E=$E NT=$NT; for a in auto flash gemm; do
               export ENDORET_CUDA_ATTENTION=\$a; echo attention=\$a;
               train vit_large 64 mae bf16; train vit_large 128 mae bf16; train vit_base 128 mae bf16; done" ;;
    gpumem) stage gpumem 300 bash -c "$(declare -f train); E=$E NT=$NT; for p in ${PRECS:-bf16 fp32}; do
              nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > /tmp/gpumem.\$p & m=\$!;
              train vit_large ${BL:-128} mae \$p; kill \$m; echo vit_large b${BL:-128} \$p device peak MiB \$(sort -n /tmp/gpumem.\$p | tail -1); done" ;;
    mae_bf16) stage mae_bf16 200 bash -c "$(declare -f train); E=$E NT=$NT;
                train vit_large 64 mae bf16; train vit_large 128 mae bf16; train vit_base 128 mae bf16" ;;
    mae_resident) stage mae_resident 200 bash -c "$(declare -f train); E=$E NT=$NT;
                for r in '' --resident; do train vit_large 64 mae bf16 \$r; train vit_large 128 mae bf16 \$r; train vit_base 128 mae bf16 \$r; done" ;;
    torch_ab) TAIL=12 stage torch_ab 300 bash -c "$(declare -f torch_vit); NT=$NT;
                torch_vit vit_large 64 mae bf16; torch_vit vit_large 128 mae bf16; torch_vit vit_base 128 mae bf16" ;;
    mae_base) stage mae_base 240 bash -c "$(declare -f train); E=$E NT=$NT; train vit_base ${BB:-128} mae bf16; train vit_base ${BB:-128} mae fp32" ;;
    mae_large) stage mae_large 200 bash -c "$(declare -f train); E=$E NT=$NT; train vit_large ${BL:-64} mae bf16" ;;
    mae_large_fp32) stage mae_large_fp32 200 bash -c "$(declare -f train); E=$E NT=$NT; train vit_large ${BL:-64} mae fp32" ;;
    resnet) stage resnet 200 bash -c "$(declare -f train); E=$E NT=$NT; train resnet50 ${BR:-128} cls bf16; train resnet50 ${BR:-128} cls fp32" ;;
    resnet_nhwc) TAIL=8 stage resnet_nhwc 300 bash -c "$(declare -f train); E=$E NT=$NT; for l in nchw nhwc; do echo layout=\$l;
                   train resnet50 ${BR:-128} cls bf16 --set model.layout=\$l; done; train resnet50 ${BR:-128} cls fp32 --set model.layout=nhwc;
                   $E bench train --model resnet50 --img 224 --batch ${BR:-128} --precision bf16 --device cuda --threads $NT --steps 3 \
                   --profile --set model.layout=nhwc" ;;
    torch_mae) stage torch_mae 300 bash -c "$(declare -f torch_vit); NT=$NT;
                 for p in ${PRECS:-bf16 fp32}; do torch_vit vit_base ${BB:-128} mae \$p; torch_vit vit_large ${BL:-64} mae \$p; done" ;;
    torch_resnet) stage torch_resnet 200 bash -c "for p in ${PRECS:-bf16 fp32}; do python3 bench/torch_resnet_bench.py --device cuda --precision \$p \
                 --channels-last --batch ${BR:-128} --steps ${STEPS:-10} --threads $NT; done" ;;
    attn_profile) TAIL=40 stage attn_profile 200 bash -c "for a in auto flash; do echo attention=\$a; ENDORET_CUDA_ATTENTION=\$a $E bench train \
                     --model vit_base --img 224 --batch ${BB:-128} --objective mae --precision bf16 --device cuda --threads $NT --steps 3 \
                     --profile; done" ;;
    profile_large) TAIL=60 stage profile_large 200 "$E" bench train --model vit_large --img 224 --batch "${BL:-64}" --objective mae \
                     --precision bf16 --device cuda --threads "$NT" --steps 3 --profile ;;
    train_check) TAIL=30 stage train_check 300 bash bench/gpu_train_check.sh "$E" 3 ;;
    bf16_track) TAIL=4 stage bf16_track "${TRACK_S:-300}" bash bench/gpu_bf16_track.sh "$E" ;;
    scene_bench) stage scene_bench 300 bash -c "for d in 'cuda --precision bf16' 'cuda --precision fp32' 'cpu --precision fp32'; do
                   $E bench train --objective scene --model vit_small --img 224 --batch 16 --steps 3 --threads $NT --json --device \$d; done" ;;
    train_speed) TAIL=8 stage train_speed 400 bash bench/gpu_train_speed.sh "${SPEED_STEPS:-40}" $SPEED_BINS ;;
    train_profile) TAIL=40 stage train_profile 200 env ENDORET_PROFILE=1 "$E" train image --config configs/endofinder_image.cfg \
                     --set data.manifest=/tmp/gpu_train_speed/scenes/manifest.csv --set train.steps=20 --set train.threads="$NT" \
                     --set out.dir=/tmp/gpu_train_profile --device cuda --precision bf16 --quiet ;;
    colondb) TAIL=40 stage colondb 590 sh bench/colondb_gpu.sh run "$E" "${DATA:-$BIN/data}" /tmp/colondb_gpu ;;
    colondb_profile) TAIL=60 stage colondb_profile 200 sh bench/colondb_gpu.sh profile "$E" "${DATA:-$BIN/data}" /tmp/colondb_prof ;;
    profile_resnet) TAIL=60 stage profile_resnet 200 "$E" bench train --model resnet50 --img 224 --batch "${BR:-128}" \
                     --precision bf16 --device cuda --threads "$NT" --steps 3 --profile ;;
    *) echo "gpu_session.sh: unknown stage '$s'" >&2; exit 2 ;;
  esac
done
echo "---- summary"
printf '%s' "$summary"
grep -h '^{' "$OUT"/*.txt 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try: r = json.loads(line)
    except Exception: continue
    if r.get("bench") == "train":
        w = r.get("host_waits_per_step")
        print("%-8s %-9s %-4s %-4s b=%-4s train %8.1f img/s  mfu %.3f  peak %.0f GF  %s%s" % (r.get("impl", "endoret")[:8], r["model"], r.get("objective", "cls"),
              r.get("precision", "?"), r.get("batch", r.get("batch_scenes")), r.get("train_img_per_s", r.get("scenes_per_s", 0)),
              r.get("mfu", 0), r.get("gemm_peak_gflops", 0), r.get("gpu", r.get("device", "")),
              "" if w is None else "  waits/step %.2f" % w))'
# at most 8 files come back from a lent machine: pack the stage logs into one, under a name no
# earlier run into the same $OUT used (a second run in one call once overwrote the first's logs)
n=$(ls "$OUT"/*.txt 2>/dev/null | wc -l)
if [ "$n" -gt 2 ]; then
  tgz=logs.tgz; i=2
  while [ -e "$OUT/$tgz" ]; do tgz=logs_$i.tgz; i=$((i + 1)); done
  (cd "$OUT" && tar czf "$tgz" *.txt && rm -f *.txt)
fi
