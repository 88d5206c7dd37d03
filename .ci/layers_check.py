#!/usr/bin/env python3
"""make layers-check: every #include "..." of a project header must point down the layer stack
(docs/ARCHITECTURE.md draws it). A file may include headers of its own layer or of a lower one;
kernels/cpu/* and kernels/cuda/* are private to kernels/ (the rest of the tree reaches them only
through kernels/backend.h); tests/cuda and tests/kernels may see the kernel internals they test.
A header named *_internal.h belongs to its folder (and that folder's tests).
Exit 1 with one line per violation."""
import os, re, sys

# lowest first; the longest matching prefix decides a file's layer
LAYERS = [
    ("nn/base/", "base: errors, allocation, files, args, JSON, RNG/Philox, SVG"),
    ("kernels/", "kernels: the op table (backend.h, ops.def) and its backends"),
    ("nn/", "nn core: tensors, autograd, ops, optimizers, schedules, precision"),
    ("nn/layers/", "layers"),
    ("nn/losses/", "losses"),
    ("checkpoints/", "checkpoints: safetensors + training state"),
    ("nn/models/", "models and the model registry"),
    ("datasets/", "datasets: images, manifests, augmentation, loaders"),
    ("infer/retrieval/", "retrieval: embeddings, hashing, indexes, case DB, kNN"),
    ("infer/eval/", "evaluation metrics and protocols"),
    ("infer/report/", "reports and the retrieval server"),
    ("infer/perceived/", "perceived similarity, bag of words, scoring server"),
    ("train/", "the training loop, configs, objectives"),
    ("cli/", "commands"),
]
RANK = {p: i for i, (p, _) in enumerate(LAYERS)}
PRIVATE = {"kernels/cpu/": ("kernels/", "tests/kernels/", "tests/cuda/", "bench/"),
           "kernels/cuda/": ("kernels/", "tests/cuda/")}
SRC_EXT = (".c", ".h", ".cu", ".cuh", ".def")
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

def layer(path):
    best = None
    for p in RANK:
        if path.startswith(p) and (best is None or len(p) > len(best)):
            best = p
    return best

def main(root):
    bad = []
    for top in ("nn", "kernels", "checkpoints", "datasets", "infer", "train", "cli", "tests", "bench"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith(SRC_EXT):
                    continue
                path = os.path.relpath(os.path.join(d, f), root)
                mine = layer(path)
                with open(os.path.join(root, path), errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INC.match(line)
                        if not m or "/" not in m.group(1):
                            continue
                        inc = m.group(1)
                        for priv, allowed in PRIVATE.items():
                            if inc.startswith(priv) and not path.startswith(allowed):
                                bad.append(f"{path}:{n}: includes {inc}, private to kernels/ "
                                           f"(use kernels/backend.h)")
                        if inc.endswith("_internal.h") and not (
                                path.startswith(os.path.dirname(inc) + "/") or
                                path.startswith("tests/" + os.path.dirname(inc) + "/") or
                                path.startswith("tests/kernels/") and inc.startswith("kernels/")):
                            bad.append(f"{path}:{n}: includes {inc}, internal to its folder")
                        theirs = layer(inc)
                        if mine is None or theirs is None:  # tests/, bench/: above everything
                            continue
                        if RANK[theirs] > RANK[mine]:
                            bad.append(f"{path}:{n}: includes {inc}: layer '{theirs}' is above "
                                       f"'{mine}' (docs/ARCHITECTURE.md)")
    for b in bad:
        print(b)
    print(f"layers-check: {len(bad)} violation(s)" if bad else "layers-check: ok")
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
