#!/bin/bash
# The figures of `endoret serve` in bench/RESULTS_report.md (issue #30): requests/s and p50/p99 of
# GET pages and POST /case.json (4 Kvasir-SEG JPEG views, a ViT-S/16 with random weights: speed does
# not depend on them) at 1, 8 and 64 concurrent clients; the server's peak RSS and a probe's answers
# under the decompression-bomb and slowloris patterns. Each pattern runs on a fresh server.
# Usage: bench/serve_bench.sh WORKDIR [SECONDS]   (from the repository root; needs build/endoret and
# ../shared/data/kvasir_seg, or $ENDORET_SHARED/data/kvasir_seg)
set -euo pipefail
E=$(realpath build/endoret)
B=$(realpath bench)
KV=$(realpath "${ENDORET_SHARED:-../shared}/data/kvasir_seg/images")
S=${2:-10}
mkdir -p "$1"
cd "$1"
[ -f vits.safetensors ] || python3 "$B/make_random_vit.py" vits.safetensors
if [ ! -f cases.db ]; then
  "$E" synth --out synth --scenes 30 --views 4 --size 224 --seed 1 > /dev/null
  "$E" embed --model vits.safetensors --manifest synth/manifest.csv --out e.safetensors --threads 2 > /dev/null
  "$E" index build --emb e.safetensors --out cases.db --manifest synth/manifest.csv > /dev/null
fi
VIEWS=$(ls "$KV" | sed -n "1,4s|^|$KV/|p" | paste -sd,)
[ -f bomb.png ] || python3 - <<'PY'
import struct, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
W = H = 8192
raw = zlib.compress((b"\0" + bytes(3 * W)) * H, 9)  # all-zero RGB rows
with open("bomb.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)) + chunk(b"IDAT", raw) + chunk(b"IEND", b""))
PY
PORT=18931
start() {
  "$E" serve --index cases.db --model vits.safetensors --port $PORT > serve.log 2>&1 &
  SRV=$!
  for _ in $(seq 100); do grep -q serving serve.log 2>/dev/null && break; sleep 0.1; done
}
stop() { kill "$SRV"; wait "$SRV" || true; }
L="python3 $B/serve_load.py"
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); bomb.png $(stat -c %s bomb.png) bytes"
start
echo "idle server peak RSS: $(grep VmHWM /proc/$SRV/status)"
stop
for c in 1 8 64; do
  A=$(( c > 32 ? 4 : 1 ))  # 64 clients from 127.0.0.1..4: one address may hold 32 connections
  start
  $L load --port $PORT --clients $c --addrs $A --seconds "$S" --get /
  $L load --port $PORT --clients $c --addrs $A --seconds "$S" --get /query/0
  $L load --port $PORT --clients $c --addrs $A --seconds $((2 * S)) --post /case.json --files "$VIEWS" --pid $SRV
  stop
done
start
$L bomb --port $PORT --clients 8 --seconds "$S" --files bomb.png --probe-every 0.5 --pid $SRV
stop
start
$L slowloris --port $PORT --conns 128 --seconds $((3 * S)) --probe-every 0.5 --pid $SRV
stop
