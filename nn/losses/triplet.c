/* triplet.c — cosine triplet margin loss with a batch miner (triplet.h). */
#include "nn/losses/triplet.h"

#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/ops.h"

int miner_parse(const char *s, const char *key, miner_kind *k) {
    if (s && !strcmp(s, "semihard")) *k = MINER_SEMIHARD;
    else if (s && !strcmp(s, "hard")) *k = MINER_HARD;
    else if (s && !strcmp(s, "all")) *k = MINER_ALL;
    else return er_fail(ER_INPUT, "%s = '%s': expected semihard, hard or all", key, s ? s : "");
    return ER_OK;
}

const char *miner_name(miner_kind k) { return k == MINER_HARD ? "hard" : k == MINER_ALL ? "all" : "semihard"; }

int64_t triplet_mine(const float *S, const int *labels, int n, int kind, double miner_margin, int32_t *out) {
    int64_t cnt = 0;
    for (int a = 0; a < n; a++)
        for (int p = 0; p < n; p++) {
            if (p == a || labels[p] != labels[a]) continue;
            for (int q = 0; q < n; q++) {
                if (labels[q] == labels[a]) continue;
                /* PML computes the margin in the distance's dtype: float */
                float m = S[(size_t)a * n + p] - S[(size_t)a * n + q];
                int keep = kind < 0 ? 1
                         : kind == MINER_SEMIHARD ? (m > 0 && m <= (float)miner_margin)
                         : kind == MINER_HARD ? m <= 0
                         : m <= (float)miner_margin;
                if (!keep) continue;
                if (out) { out[3 * cnt] = a; out[3 * cnt + 1] = p; out[3 * cnt + 2] = q; }
                cnt++;
            }
        }
    return cnt;
}

tensor *triplet_loss(tensor *e, const int *labels, miner_kind kind, double miner_margin, double margin,
                     triplet_stats *st) {
    if (!e) return NULL;
    if (e->ndim != 2) {
        er_fail(ER_INPUT, "triplet loss: embeddings must be [n, D]");
        return NULL;
    }
    int n = (int)e->shape[0];
    for (int i = 0; i < n; i++)
        if (labels[i] < 0) {
            er_fail(ER_INPUT, "triplet loss: row %d has no label", i);
            return NULL;
        }
    triplet_stats s = {0};
    tensor *en = op_l2_normalize(e, -1, 1e-12f);
    tensor *S = op_matmul(en, en, 0, 1); /* [n, n] cosine similarities */
    if (!S) return NULL;
    float *h = xmalloc((size_t)n * n * sizeof(float));
    tensor_to_host(S, h);
    s.valid = triplet_mine(h, labels, n, -1, 0, NULL);
    s.mined = triplet_mine(h, labels, n, kind, miner_margin, NULL);
    int use = s.mined > 0 ? (int)kind : -1; /* nothing mined: every in-batch triplet */
    int64_t T = s.mined > 0 ? s.mined : s.valid;
    tensor *loss;
    if (T == 0) {
        loss = op_mul_scalar(op_sum_all(e), 0.0f);
    } else {
        int32_t *tr = xmalloc((size_t)T * 3 * sizeof(int32_t)), *iap = xmalloc(T * sizeof(int32_t)),
                *ian = xmalloc(T * sizeof(int32_t));
        triplet_mine(h, labels, n, use, miner_margin, tr);
        for (int64_t t = 0; t < T; t++) {
            iap[t] = tr[3 * t] * n + tr[3 * t + 1];
            ian[t] = tr[3 * t] * n + tr[3 * t + 2];
        }
        tensor *flat = op_reshape(S, 1, SHAPE((int64_t)n * n));
        tensor *sap = op_index_select(flat, 0, iap, (int)T), *san = op_index_select(flat, 0, ian, (int)T);
        tensor *l = op_relu(op_add_scalar(op_sub(san, sap), (float)margin)); /* [T] */
        free(tr); free(iap); free(ian);
        if (!l) { free(h); return NULL; }
        float *lv = xmalloc((size_t)T * sizeof(float));
        tensor_to_host(l, lv);
        for (int64_t t = 0; t < T; t++) s.active += lv[t] > 0;
        free(lv);
        loss = op_mul_scalar(op_sum_all(l), s.active > 0 ? (float)(1.0 / (double)s.active) : 0.0f);
    }
    free(h);
    if (loss) s.loss = tensor_item(loss);
    if (st) *st = s;
    return loss;
}
