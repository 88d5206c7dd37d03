#!/usr/bin/python3
"""Simulated observers for demos on synthetic scenes (no human in the loop): score every couple of
a `vss draw` sheet from the manifest labels with noise, as 1-2 observers would on the Likert scale.
Same label: +2 / +1 / -1 with p = .5/.35/.15; different labels: -2 / -1 / +1 likewise.
Sheet ids must be manifest row indices (what `bow embed` writes).
Usage: simulate_observers.py sheet.csv manifest.csv pairs.csv [seed]"""
import csv, random, sys

sheet, manifest, out = sys.argv[1:4]
rnd = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
labels = [row["label"] for row in csv.DictReader(open(manifest))]
with open(out, "w") as f:
    f.write("a,b,score,observer\n")
    for row in csv.DictReader(open(sheet)):
        a, b = int(row["a"]), int(row["b"])
        same = labels[a] == labels[b]
        for obs in range(rnd.choice([1, 1, 2])):
            u = rnd.random()
            s = 2 if u < 0.5 else 1 if u < 0.85 else -1
            f.write("%d,%d,%+d,sim%d\n" % (a, b, s if same else -s, obs))
