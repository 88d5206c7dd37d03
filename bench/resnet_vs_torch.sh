#!/bin/sh
# ResNet training / inference speed on the CPU, endoret against PyTorch in the same run, alternated:
#   sh bench/resnet_vs_torch.sh [MODEL] [BATCH] [THREADS] [ROUNDS]
# endoret: `endoret bench train --model MODEL --img 224` (forward + backward of the mean of the
# L2-normalised pooled features + AdamW); torch: bench/torch_resnet_bench.py (torchvision's model,
# the same loss and optimizer), NCHW and channels-last. Then the peak resident memory of one endoret
# training step (warm-up + 1 timed step) at BATCH and at 128, from /usr/bin/time.
set -eu
MODEL=${1:-resnet50}; B=${2:-16}; T=${3:-2}; ROUNDS=${4:-2}
BIN=${BIN:-build/endoret}
uptime
for r in $(seq "$ROUNDS"); do
    "$BIN" bench train --model "$MODEL" --img 224 --batch "$B" --threads "$T" --steps 3 --json
    /usr/bin/python3 bench/torch_resnet_bench.py --model "$MODEL" --img 224 --batch "$B" --threads "$T" --steps 3
    /usr/bin/python3 bench/torch_resnet_bench.py --model "$MODEL" --img 224 --batch "$B" --threads "$T" --steps 3 --channels-last
done
uptime
for b in "$B" 128; do
    /usr/bin/time -f "peak RSS %M KiB: endoret bench train --model $MODEL --batch $b (one step after the warm-up)" \
        "$BIN" bench train --model "$MODEL" --img 224 --batch "$b" --threads "$T" --steps 1 --json
done
uptime
