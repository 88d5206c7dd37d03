#!/usr/bin/env python3
"""bench/pgcon_twin_table.py - endoret's log.jsonl and the twin's JSON lines side by side (issue #34).
  python3 bench/pgcon_twin_table.py out/demo/pgcon/pgcon/log.jsonl out/demo/pgcon/twin.jsonl [every]"""
import json
import sys


def load(p):
    out = {}
    for line in open(p):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            out[r["step"]] = r
    return out


e, t = load(sys.argv[1]), load(sys.argv[2])
every = int(sys.argv[3]) if len(sys.argv) > 3 else 50
cols = ["jigsaw", "memory", "pos_jig", "pos_mem"]
print("| step | lr e/t | " + " | ".join(f"{c} e / t" for c in cols) + " | twin neg_mem | twin age pos / neg | twin mem_fresh |")
print("|---" * (len(cols) + 5) + "|")
for s in sorted(set(e) | set(t)):
    if s % every and s != max(t) and s != 10:
        continue
    a, b = e.get(s, {}), t.get(s, {})
    f = lambda r, k: f"{r[k]:.3f}" if k in r else "-"
    row = [str(s), f"{a.get('lr', float('nan')):.5f} / {b.get('lr', float('nan')):.5f}"]
    row += [f"{f(a, 'loss_' + c)} / {f(b, c)}" for c in cols]
    row += [f(b, "neg_mem"), f"{f(b, 'age_pos')} / {f(b, 'age_neg')}", f(b, "mem_fresh")]
    print("| " + " | ".join(row) + " |")
