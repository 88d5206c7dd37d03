"""Reference values for tests/infer/eval/test_metrics.c, computed independently of endoret:
- ISC2021 micro-AP / Recall@P90 / Acc@1 re-implemented here with numpy exactly as the ISC code
  describes them (lexsort on (y, -score): false positives first among equal scores);
- ROC AUC with sklearn.metrics.roc_auc_score (scores rounded to create ties);
- ranked-list AP with sklearn.metrics.average_precision_score (distinct scores, full ranking).
Run: /usr/bin/python3 tests/infer/eval/make_metric_refs.py  (writes tests/infer/data/*.csv)"""
import os
import numpy as np
from sklearn.metrics import roc_auc_score, average_precision_score

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1234)

# ---- re-identification ----
nq, nr = 40, 30
gt = [(q, int(rng.integers(nr))) for q in range(nq) if rng.random() < 0.8]
gtref = dict(gt)
preds = []
for q in range(nq):
    refs = rng.choice(nr, size=5, replace=False)
    if q in gtref and gtref[q] not in refs and rng.random() < 0.7:
        refs[0] = gtref[q]  # the true match is usually retrieved
    for r in refs:
        # rounded scores (many ties inside and across queries); true matches score higher
        bonus = 0.6 if gtref.get(q) == r else 0.0
        preds.append((q, int(r), float(np.round(min(1.5, rng.random() + bonus), 1))))
gts = set(gt)
y = np.array([(q, r) in gts for q, r, _ in preds], dtype=np.int64)
s = np.array([p[2] for p in preds])
order = np.lexsort((y, -s))
tp = np.cumsum(y[order])
P = tp / np.arange(1, len(y) + 1)
R = tp / len(gt)
uap = float(np.sum(np.diff(np.concatenate([[0.0], R])) * P))
ok = P >= 0.9
rp90 = float(R[ok].max()) if ok.any() else 0.0
top1 = 0
for q, r in gt:
    sc = [p[2] for p in preds if p[0] == q]
    mine = [p[2] for p in preds if p[0] == q and p[1] == r]
    if mine and sum(v >= mine[0] for v in sc) - 1 == 0:
        top1 += 1
acc1 = top1 / len(gt)
with open(os.path.join(out, "reid_preds.csv"), "w") as f:
    f.write("q,r,score\n")
    for q, r, sc in preds:
        f.write(f"{q},{r},{sc:.1f}\n")
with open(os.path.join(out, "reid_gt.csv"), "w") as f:
    f.write("query_id,reference_id\n")
    for q, r in gt:
        f.write(f"{q},{r}\n")
with open(os.path.join(out, "reid_expected.csv"), "w") as f:
    f.write("uap,acc1,recall_p90\n%.12f,%.12f,%.12f\n" % (uap, acc1, rp90))

# ---- ROC AUC with ties ----
n = 200
t = rng.integers(0, 2, n)
sc = np.round(rng.random(n) + 0.3 * t, 1)
with open(os.path.join(out, "auc.csv"), "w") as f:
    f.write("truth,score\n")
    for a, b in zip(t, sc):
        f.write(f"{a},{b:.1f}\n")
    f.write("expected,%.12f\n" % roc_auc_score(t, sc))

# ---- ranked AP (distinct scores) ----
with open(os.path.join(out, "ranked_ap.csv"), "w") as f:
    f.write("list,relevant_flags_in_rank_order,expected_ap\n")
    for i in range(20):
        m = int(rng.integers(5, 40))
        rel = rng.integers(0, 2, m)
        if rel.sum() == 0:
            rel[int(rng.integers(m))] = 1
        scores = np.sort(rng.random(m))[::-1] + np.arange(m)[::-1] * 1e-6  # strictly decreasing
        ap = average_precision_score(rel, scores)
        f.write("%d,%s,%.12f\n" % (i, "".join(str(int(v)) for v in rel), ap))
print("wrote", out)
