/* multiview.c — EndoFinder table 3: every combination of query views and reference views. */
#include "infer/eval/multiview.h"
#include "infer/retrieval/hash.h"
#include "infer/retrieval/index.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the paper's rows go from one view on each side to two on each side */
static const int ORDER[9][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {3, 1}, {1, 3}, {3, 2}, {2, 3}, {3, 3}};

static void add_norm(float *dst, const float *x, int d) {
    double s = 0;
    for (int i = 0; i < d; i++) s += (double)x[i] * x[i];
    double inv = s > 0 ? 1.0 / sqrt(s) : 0;
    for (int i = 0; i < d; i++) dst[i] += (float)(x[i] * inv);
}

int multiview_eval(const emb_set *e, int k, int bits, uint64_t seed, mv_row rows[9]) {
    if (!e->scene || !e->view) return er_fail(ER_INPUT, "multi-view evaluation needs `scene` and `view` in the embedding file");
    int64_t maxs = -1;
    for (int i = 0; i < e->n; i++) if (e->scene[i] > maxs) maxs = e->scene[i];
    if (maxs < 0) return er_fail(ER_INPUT, "multi-view evaluation: no scene ids");
    int64_t ns = maxs + 1;
    int64_t *row_of = xmalloc((size_t)ns * 4 * sizeof *row_of); /* scene x view -> row, -1 */
    for (int64_t i = 0; i < ns * 4; i++) row_of[i] = -1;
    for (int i = 0; i < e->n; i++)
        if (e->scene[i] >= 0 && e->view[i] >= 0 && e->view[i] < 4) row_of[e->scene[i] * 4 + e->view[i]] = i;
    const int D = e->dim;
    float *qd = xmalloc((size_t)ns * D * sizeof *qd), *rd = xmalloc((size_t)ns * D * sizeof *rd);
    int64_t *sid = xmalloc((size_t)ns * sizeof *sid);
    int64_t *oid = xmalloc((size_t)ns * k * sizeof *oid);
    float *od = xmalloc((size_t)ns * k * sizeof *od);
    int32_t *hd = xmalloc((size_t)ns * k * sizeof *hd);
    int *cnt = xmalloc((size_t)ns * sizeof *cnt);
    reid_pred *pred = xmalloc((size_t)ns * k * sizeof *pred);
    reid_gt *gt = xmalloc((size_t)ns * sizeof *gt);
    int rc = ER_OK;
    for (int o = 0; o < 9 && !rc; o++) {
        int qm = ORDER[o][0], rm = ORDER[o][1];
        int m = 0;
        for (int64_t s = 0; s < ns; s++) {
            int ok = 1;
            for (int v = 0; v < 2; v++) {
                if ((qm >> v & 1) && row_of[s * 4 + v] < 0) ok = 0;
                if ((rm >> v & 1) && row_of[s * 4 + 2 + v] < 0) ok = 0;
            }
            if (!ok) continue;
            memset(qd + (size_t)m * D, 0, D * sizeof(float));
            memset(rd + (size_t)m * D, 0, D * sizeof(float));
            for (int v = 0; v < 2; v++) {
                if (qm >> v & 1) add_norm(qd + (size_t)m * D, e->x + (size_t)row_of[s * 4 + v] * D, D);
                if (rm >> v & 1) add_norm(rd + (size_t)m * D, e->x + (size_t)row_of[s * 4 + 2 + v] * D, D);
            }
            sid[m] = s;
            m++;
        }
        rows[o].qmask = qm;
        rows[o].rmask = rm;
        rows[o].nscenes = m;
        memset(&rows[o].r, 0, sizeof rows[o].r);
        if (m == 0) continue;
        int kk = k < m ? k : m;
        if (bits <= 0) {
            findex fx;
            rc = findex_build(&fx, D, rd, sid, m);
            if (rc) break;
            findex_search(&fx, qd, m, kk, oid, od, cnt);
            findex_free(&fx);
        } else {
            hasher h;
            rc = hasher_fit(&h, bits == D ? HASH_SIGN : HASH_PCA, rd, m, D, bits, seed);
            if (rc) break;
            int W = hash_words(bits);
            uint64_t *cq = xmalloc((size_t)m * W * 8), *cr = xmalloc((size_t)m * W * 8);
            hasher_encode(&h, qd, m, cq);
            hasher_encode(&h, rd, m, cr);
            bindex bx;
            rc = bindex_build(&bx, INDEX_SCAN, bits, cr, sid, m, 0);
            if (!rc) { bindex_search(&bx, cq, m, kk, oid, hd, cnt); bindex_free(&bx); }
            free(cq); free(cr);
            hasher_free(&h);
            if (rc) break;
        }
        int64_t np = 0;
        for (int a = 0; a < m; a++) {
            gt[a].q = sid[a];
            gt[a].r = sid[a];
            for (int j = 0; j < cnt[a]; j++) {
                pred[np].q = sid[a];
                pred[np].r = oid[(size_t)a * kk + j];
                /* ISC score: higher = more similar; -squared L2 of unit vectors = -(2 - 2 cos) */
                pred[np].score = bits <= 0 ? -2.0 * od[(size_t)a * kk + j] : -(double)hd[(size_t)a * kk + j];
                np++;
            }
        }
        rc = reid_metrics(pred, np, gt, m, &rows[o].r);
    }
    free(row_of); free(qd); free(rd); free(sid); free(oid); free(od); free(hd); free(cnt); free(pred); free(gt);
    return rc;
}
