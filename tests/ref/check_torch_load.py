#!/usr/bin/python3
"""Load an endoret checkpoint in PyTorch and print what it holds.

usage: /usr/bin/python3 tests/ref/check_torch_load.py FILE.safetensors

Uses safetensors.torch.load_file when the `safetensors` package is installed; otherwise reads the
file with the format's published layout (u64 header length, JSON header, raw little-endian data),
which is exactly what load_file does. Either way this is an independent reader of our files."""
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "I8": torch.int8, "BOOL": torch.bool}


def load(path):
    try:
        from safetensors.torch import load_file
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
        return load_file(path), meta, "safetensors.torch.load_file"
    except ImportError:
        pass
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        buf = bytearray(data[b:e])
        t = torch.frombuffer(buf, dtype=DTYPES[info["dtype"]]) if e > b else torch.empty(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out, meta, "json header + torch.frombuffer (safetensors package not installed)"


def main():
    tensors, meta, how = load(sys.argv[1])
    print("loaded with", how)
    for k, v in sorted(meta.items()):
        print("meta", k, "=", v.splitlines()[0] if v else "")
    for name in sorted(tensors):
        t = tensors[name]
        extra = " value %d" % int(t.reshape(-1)[0]) if t.dtype == torch.int64 and t.numel() == 1 else \
            " mean %+.5f std %.5f" % (t.float().mean(), t.float().std()) if t.numel() > 1 else ""
        print("%-38s %-14s %s%s" % (name, str(t.dtype), list(t.shape), extra))


if __name__ == "__main__":
    main()
