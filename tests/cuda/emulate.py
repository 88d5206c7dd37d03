#!/usr/bin/env python3
"""emulate.py - run the CUDA parity tests on a machine without a GPU, with kernels/cuda/*.cu
compiled as host C++ against tests/cuda/emu_cuda.h (blocks run in turn, each block's threads are
real threads with real barriers; cuBLAS is a column-major reference loop).

This executes the kernels' own code - indexing, tiling, shared-memory reuse, barriers, warp
shuffles, the device Philox, the row-major -> column-major GEMM mapping - and compares every
result with the CPU table through tests/cuda/test_cuda_parity.c. It is no substitute for a GPU run
(no real memory model, no real cuBLAS, no speed), but it catches logic errors without one.

usage: python3 tests/cuda/emulate.py [criterion args, e.g. --verbose --filter 'cuda/gemm*']
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "build", "emu")

LAUNCH = re.compile(r"\b([A-Za-z_]\w*(?:<[^<>;()]*>)?)\s*<<<")


def split_top(s):
    """Split at commas not nested in parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


# Block-level synchronisation: a kernel that (transitively) uses one of these needs real threads.
SYNC_WORDS = {"__syncthreads", "__syncwarp", "__shfl_xor_sync", "__shfl_sync", "__shfl_down_sync",
              "__shfl_up_sync", "cu_warp_sum", "cu_warp_sum_d", "cu_warp_max", "cu_block_sum_d", "cu_block_max"}
FUNC = re.compile(r"(?:__global__|__device__)[^;{()]*?\b([A-Za-z_]\w*)\s*\(")


def function_bodies(src):
    """name -> body text of every __global__ / __device__ function defined in src."""
    out = {}
    for m in FUNC.finditer(src):
        i = src.find("{", m.end())
        semi = src.find(";", m.end())
        if i < 0 or (0 <= semi < i):  # a declaration
            continue
        depth, j = 0, i
        while j < len(src):
            if src[j] == "{":
                depth += 1
            elif src[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out[m.group(1)] = out.get(m.group(1), "") + src[i:j + 1]
    return out


def syncing_kernels(src):
    """(names of functions that use block/warp synchronisation, directly or through a callee,
    names of all functions found). A kernel whose body is not found counts as synchronising."""
    bodies = function_bodies(re.sub(r"__launch_bounds__\s*\([^)]*\)", "", src))
    sync = set(SYNC_WORDS)
    changed = True
    while changed:
        changed = False
        for name, body in bodies.items():
            if name not in sync and any(re.search(r"\b%s\b" % re.escape(w), body) for w in sync):
                sync.add(name)
                changed = True
    return sync, set(bodies)


def rewrite_launches(src):
    """kernel<<<grid, block, smem, stream>>>(args) -> emu_launch(dim3(grid), dim3(block), [&]{ kernel(args); });
    kernels without block/warp synchronisation run their threads one after another on the calling
    thread (emu_launch_seq): same results (no barrier means no ordering between threads), far faster."""
    sync, known = syncing_kernels(src)
    out, pos = [], 0
    while True:
        m = LAUNCH.search(src, pos)
        if not m:
            out.append(src[pos:])
            return "".join(out)
        end_cfg = src.index(">>>", m.end())
        cfg = split_top(src[m.end():end_cfg])
        i = end_cfg + 3
        while src[i].isspace():
            i += 1
        assert src[i] == "(", "launch without arguments"
        depth, j = 0, i
        while True:
            if src[j] == "(":
                depth += 1
            elif src[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        args = src[i:j + 1]
        out.append(src[pos:m.start()])
        base = m.group(1).split("<")[0]
        launcher = "emu_launch" if base in sync or base not in known else "emu_launch_seq"
        out.append(f"{launcher}(dim3({cfg[0]}), dim3({cfg[1]}), [&] {{ {m.group(1)}{args}; }})")
        pos = j + 1


def run(cmd):
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode:
        sys.exit(f"emulate.py: failed: {' '.join(cmd)}")


def main():
    inc = os.path.join(OUT, "include")
    os.makedirs(inc, exist_ok=True)
    for h in ("cuda_runtime.h", "cublas_v2.h", "cudnn.h", "cuda_bf16.h", "mma.h", "cublasLt.h"):
        with open(os.path.join(inc, h), "w") as f:
            f.write('#include "emu_cuda.h"\n')
    objs = []
    for cu in sorted(glob.glob(os.path.join(ROOT, "kernels", "cuda", "*.cu"))):
        name = os.path.basename(cu)[:-3]
        if name == "bench_cuda":  # timing code: events, nothing to compare
            continue
        with open(cu) as f:
            src = rewrite_launches(f.read())
        cpp = os.path.join(OUT, name + ".cpp")
        with open(cpp, "w") as f:
            f.write(f'#line 1 "kernels/cuda/{name}.cu"\n' + src)
        obj = cpp[:-4] + ".o"
        # UBSan's alignment check: a vector load (float2/float4/uint4 or a pair of bf16 as one word)
        # from an address the GPU would fault on stops the test here, where x86 would just load it
        run(["g++", "-std=c++20", "-O1", "-g", "-pthread", "-fsanitize=alignment", "-fno-sanitize-recover=alignment",
             "-DENDORET_CUDA", "-I" + inc,
             "-I" + os.path.join(ROOT, "tests", "cuda"), "-I" + ROOT, "-Wno-unused-result", "-c", cpp, "-o", obj])
        objs.append(obj)
    csrc = sorted(glob.glob(os.path.join(ROOT, "nn", "**", "*.c"), recursive=True)
                  + glob.glob(os.path.join(ROOT, "kernels", "*.c"))
                  + glob.glob(os.path.join(ROOT, "kernels", "cpu", "*.c"))
                  + glob.glob(os.path.join(ROOT, "checkpoints", "*.c"))
                  + glob.glob(os.path.join(ROOT, "train", "*.c"))  # the trainers: test_cuda_parity_loop.c
                  + glob.glob(os.path.join(ROOT, "datasets", "*.c"))
                  + glob.glob(os.path.join(ROOT, "infer", "eval", "*.c"))
                  + glob.glob(os.path.join(ROOT, "infer", "retrieval", "*.c")))
    csrc += sorted(glob.glob(os.path.join(ROOT, "tests", "cuda", "test_cuda_parity*.c")))
    for c in csrc:
        obj = os.path.join(OUT, "c_" + os.path.relpath(c, ROOT).replace("/", "_")[:-2] + ".o")
        run(["gcc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-fopenmp", "-DENDORET_CUDA", "-I" + ROOT, "-c", c, "-o", obj])
        objs.append(obj)
    exe = os.path.join(OUT, "parity_emulated")
    run(["g++", "-fopenmp", "-pthread", "-fsanitize=alignment", "-o", exe] + objs
        + ["-lcriterion", "-lpng", "-ljpeg", "-lsqlite3", "-lz", "-lm", "-ldl"])
    # one job: each emulated block already runs up to 1024 threads
    r = subprocess.run([exe, "--jobs", "1"] + sys.argv[1:], cwd=ROOT)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
