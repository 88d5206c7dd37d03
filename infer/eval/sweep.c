/* sweep.c — the hash-length x k sweep (see sweep.h). */
#include "infer/eval/sweep.h"
#include "infer/eval/bootstrap.h"
#include "infer/retrieval/knn.h"
#include "nn/base/svg_plot.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int label_of(const emb_set *q, const emb_set *db, int i) {
    /* query labels mapped onto the database's label ids by name when both have names */
    if (!q->labels || q->labels[i] < 0) return -1;
    if (q->nlabel_names && db->nlabel_names && q->labels[i] < q->nlabel_names) {
        for (int c = 0; c < db->nlabel_names; c++)
            if (!strcmp(q->label_names[q->labels[i]], db->label_names[c])) return c;
        return -1;
    }
    return (int)q->labels[i];
}

int sweep_run(const emb_set *db, const emb_set *q, const reid_gt *gt, int64_t ngt, const int *bits, int nbits,
              const int *ks, int nk, hash_kind hk, index_kind kind, uint64_t seed, int bootstrap, sweep_row *rows) {
    if (db->dim != q->dim) return er_fail(ER_INPUT, "sweep: database %d-d, queries %d-d", db->dim, q->dim);
    for (int b = 0; b < nbits; b++)
        if (bits[b] < 1 || bits[b] > db->dim)
            return er_fail(ER_INPUT, "sweep: %d bits: code lengths must be within 1..%d (the embedding size)", bits[b], db->dim);
    int kmax = 0;
    for (int a = 0; a < nk; a++) {
        if (ks[a] < 1) return er_fail(ER_INPUT, "sweep: k must be >= 1");
        /* more neighbours than items only allocated room for them (1e9 aborted) */
        if (ks[a] > db->n) return er_fail(ER_INPUT, "sweep: k = %d is more than the %d database items", ks[a], db->n);
        if (ks[a] > kmax) kmax = ks[a];
    }
    const int n = db->n, m = q->n, D = db->dim;
    int C = db->nlabel_names;
    if (db->labels) for (int i = 0; i < n; i++) if (db->labels[i] >= C) C = (int)db->labels[i] + 1;
    int *truth = xmalloc((size_t)m * sizeof(int)), *pred = xmalloc((size_t)m * sizeof(int));
    for (int i = 0; i < m; i++) truth[i] = label_of(q, db, i);
    /* database id -> label */
    int64_t *ids = xmalloc((size_t)m * kmax * 8), *lab = xmalloc((size_t)kmax * 8);
    int32_t *hd = xmalloc((size_t)m * kmax * 4);
    float *fd = xmalloc((size_t)m * kmax * 4);
    int *cnt = xmalloc((size_t)m * sizeof(int));
    double *score = xmalloc((size_t)(C > 0 ? C : 1) * 8), *pos = xmalloc((size_t)m * 8), *hit = xmalloc((size_t)m * 8);
    reid_pred *pr = xmalloc((size_t)m * kmax * sizeof *pr);
    int64_t *rows_by_id = NULL, minid = INT64_MAX, maxid = INT64_MIN;
    for (int i = 0; i < n; i++) { if (db->ids[i] < minid) minid = db->ids[i]; if (db->ids[i] > maxid) maxid = db->ids[i]; }
    if (maxid - minid > 16LL * n + 4096) { /* sparse ids: fall back to a sorted search */
        free(truth); free(pred); free(ids); free(lab); free(hd); free(fd); free(cnt); free(score); free(pos); free(hit); free(pr);
        return er_fail(ER_INPUT, "sweep: database ids are too sparse (range %lld for %d items)", (long long)(maxid - minid), n);
    }
    rows_by_id = xmalloc((size_t)(maxid - minid + 1) * 8);
    for (int i = 0; i < n; i++) rows_by_id[db->ids[i] - minid] = i;
    int rc = ER_OK;
    for (int b = -1; b < nbits && !rc; b++) {
        int B = b < 0 ? 0 : bits[b];
        findex fx;
        bindex bx;
        hasher h;
        uint64_t *cq = NULL;
        int built = 0; /* a failed fit leaves no index: free only what was built (was a bad free) */
        memset(&h, 0, sizeof h);
        if (B == 0) built = !(rc = findex_build(&fx, D, db->x, db->ids, n));
        else {
            hash_kind k2 = B == D ? HASH_SIGN : hk == HASH_SIGN ? HASH_PCA : hk;
            rc = hasher_fit(&h, k2, db->x, n, D, B, seed);
            if (!rc) {
                int W = hash_words(B);
                uint64_t *cd = xmalloc((size_t)n * W * 8);
                cq = xmalloc((size_t)m * W * 8);
                hasher_encode(&h, db->x, n, cd);
                hasher_encode(&h, q->x, m, cq);
                built = !(rc = bindex_build(&bx, kind, B, cd, db->ids, n, 0));
                free(cd);
            }
        }
        for (int a = 0; a < nk && !rc; a++) {
            int k = ks[a];
            sweep_row *row = &rows[(b + 1) * nk + a];
            row->bits = B;
            row->k = k;
            double t0 = now_seconds();
            if (B == 0) findex_search(&fx, q->x, m, k, ids, fd, cnt);
            else bindex_search(&bx, cq, m, k, ids, hd, cnt);
            row->ms_per_query = (now_seconds() - t0) * 1e3 / m;
            /* re-identification */
            row->uap = row->acc1 = row->recall_p90 = NAN;
            row->uap_lo = row->uap_hi = row->acc1_lo = row->acc1_hi = row->knn_acc_lo = row->knn_acc_hi = NAN;
            if (gt && ngt) {
                int64_t np = 0;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < cnt[i]; j++)
                        pr[np++] = (reid_pred){q->ids[i], ids[(size_t)i * k + j],
                                               B == 0 ? -2.0 * fd[(size_t)i * k + j] : -(double)hd[(size_t)i * k + j]};
                reid_result rr;
                if ((rc = reid_metrics(pr, np, gt, ngt, &rr))) break;
                row->uap = rr.uap; row->acc1 = rr.acc1; row->recall_p90 = rr.recall_p90;
                if (bootstrap > 0) {
                    reid_interval ci;
                    if ((rc = reid_bootstrap(pr, np, gt, ngt, bootstrap, BOOTSTRAP_SEED, &ci))) break;
                    row->uap_lo = ci.lo.uap; row->uap_hi = ci.hi.uap;
                    row->acc1_lo = ci.lo.acc1; row->acc1_hi = ci.hi.acc1;
                }
            }
            /* kNN majority vote */
            row->knn_acc = row->knn_auc = row->knn_f1 = NAN;
            if (db->labels && C >= 2) {
                for (int i = 0; i < m; i++) {
                    for (int j = 0; j < cnt[i]; j++) lab[j] = db->labels[rows_by_id[ids[(size_t)i * k + j] - minid]];
                    pred[i] = knn_majority(lab, cnt[i], C, score);
                    pos[i] = C == 2 ? score[1] : 0;
                }
                int64_t *conf = xmalloc((size_t)C * C * 8);
                confusion_matrix(truth, pred, m, C, conf);
                row->knn_acc = accuracy_from_confusion(conf, C);
                row->knn_f1 = f1_from_confusion(conf, C, C == 2 ? 1 : -1);
                row->knn_auc = C == 2 ? roc_auc(pos, truth, m) : NAN;
                free(conf);
                if (bootstrap > 0) { /* the accuracy is the mean of the labelled queries' hits */
                    int nl = 0;
                    for (int i = 0; i < m; i++)
                        if (truth[i] >= 0) hit[nl++] = pred[i] == truth[i];
                    bootstrap_mean_interval(hit, nl, bootstrap, BOOTSTRAP_SEED, &row->knn_acc_lo, &row->knn_acc_hi);
                }
            }
        }
        if (B == 0) { if (built) findex_free(&fx); }
        else { if (built) bindex_free(&bx); hasher_free(&h); free(cq); }
    }
    free(truth); free(pred); free(ids); free(lab); free(hd); free(fd); free(cnt); free(score); free(pos); free(hit); free(pr); free(rows_by_id);
    return rc;
}

static void fmt(char *buf, size_t n, double v) {
    if (v == v) snprintf(buf, n, "%.4f", v);
    else snprintf(buf, n, "-");
}

const char *const SWEEP_COLUMNS[SWEEP_NCOLS] = {
    "uAP", "acc1", "recall_p90", "knn_accuracy", "knn_auc", "knn_f1", "ms_per_query",
    "uAP_lo", "uAP_hi", "acc1_lo", "acc1_hi", "knn_accuracy_lo", "knn_accuracy_hi",
};

void sweep_row_values(const sweep_row *r, double v[SWEEP_NCOLS]) {
    const double x[SWEEP_NCOLS] = {r->uap, r->acc1, r->recall_p90, r->knn_acc, r->knn_auc, r->knn_f1, r->ms_per_query,
                                   r->uap_lo, r->uap_hi, r->acc1_lo, r->acc1_hi, r->knn_acc_lo, r->knn_acc_hi};
    memcpy(v, x, sizeof x);
}

int sweep_write_csv(const char *path, const sweep_row *rows, int nrows) {
    atomic_file af;
    int rc = atomic_open(&af, path);
    if (rc) return rc;
    fprintf(af.f, "bits,k");
    for (int c = 0; c < SWEEP_NCOLS; c++) fprintf(af.f, ",%s", SWEEP_COLUMNS[c]);
    fprintf(af.f, "\n");
    for (int i = 0; i < nrows; i++) {
        const sweep_row *r = &rows[i];
        double v[SWEEP_NCOLS];
        sweep_row_values(r, v);
        if (r->bits) fprintf(af.f, "%d,%d", r->bits, r->k);
        else fprintf(af.f, "float,%d", r->k);
        for (int c = 0; c < SWEEP_NCOLS; c++) fprintf(af.f, ",%.6f", v[c]);
        fprintf(af.f, "\n");
    }
    if (ferror(af.f)) { atomic_abort(&af); return er_fail(ER_RUNTIME, "%s: write failed", path); }
    return atomic_commit(&af);
}

/* "[lo, hi]" or "-" */
static void fmt_ci(char *buf, size_t n, double lo, double hi) {
    if (lo == lo && hi == hi) snprintf(buf, n, "[%.4f, %.4f]", lo, hi);
    else snprintf(buf, n, "-");
}

void sweep_print_table(const sweep_row *rows, int nrows, int markdown) {
    if (markdown) printf("| bits | k | uAP | Acc@1 | R@P90 | kNN acc | kNN AUC | kNN F1 | ms/query | uAP 95%% | Acc@1 95%% | kNN-acc 95%% |\n"
                         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    else printf("%6s %4s %8s %8s %8s %8s %8s %8s %10s  %-16s  %-16s  %-16s\n", "bits", "k", "uAP", "Acc@1", "R@P90", "kNN-acc",
                "kNN-AUC", "kNN-F1", "ms/query", "uAP 95%", "Acc@1 95%", "kNN-acc 95%");
    for (int i = 0; i < nrows; i++) {
        const sweep_row *r = &rows[i];
        char b[16], u[16], a[16], p[16], ka[16], kau[16], kf[16], cu[40], ca[40], ck[40];
        if (r->bits) snprintf(b, sizeof b, "%d", r->bits); else snprintf(b, sizeof b, "float");
        fmt(u, 16, r->uap); fmt(a, 16, r->acc1); fmt(p, 16, r->recall_p90);
        fmt(ka, 16, r->knn_acc); fmt(kau, 16, r->knn_auc); fmt(kf, 16, r->knn_f1);
        fmt_ci(cu, 40, r->uap_lo, r->uap_hi); fmt_ci(ca, 40, r->acc1_lo, r->acc1_hi); fmt_ci(ck, 40, r->knn_acc_lo, r->knn_acc_hi);
        if (markdown) printf("| %s | %d | %s | %s | %s | %s | %s | %s | %.4f | %s | %s | %s |\n", b, r->k, u, a, p, ka, kau, kf,
                             r->ms_per_query, cu, ca, ck);
        else printf("%6s %4d %8s %8s %8s %8s %8s %8s %10.4f  %-16s  %-16s  %-16s\n", b, r->k, u, a, p, ka, kau, kf,
                    r->ms_per_query, cu, ca, ck);
    }
}

int sweep_write_svg(const char *path, const sweep_row *rows, int nrows, const int *ks, int nk, const char *title) {
    /* x = bits (log2); one kNN-accuracy series per k, plus Acc@1 and uAP at the largest k */
    int nb = nrows / nk - 1; /* without the float row */
    if (nb < 1) return er_fail(ER_INPUT, "sweep: nothing to plot");
    double *x = xmalloc((size_t)nb * 8), *y = xmalloc((size_t)(nk + 2) * nb * 8);
    char (*names)[48] = xmalloc((size_t)(nk + 2) * 48);
    svg_series *s = xmalloc((size_t)(nk + 2) * sizeof *s);
    int ns = 0, kmax_a = 0;
    for (int a = 0; a < nk; a++) if (ks[a] > ks[kmax_a]) kmax_a = a;
    for (int b = 0; b < nb; b++) x[b] = rows[(b + 1) * nk].bits;
    if (rows[0].uap == rows[0].uap) {
        for (int b = 0; b < nb; b++) y[ns * nb + b] = rows[(b + 1) * nk + kmax_a].acc1;
        snprintf(names[ns], 48, "re-ID Acc@1");
        s[ns] = (svg_series){.name = names[ns], .n = nb, .x = x, .y = y + ns * nb}; ns++;
        for (int b = 0; b < nb; b++) y[ns * nb + b] = rows[(b + 1) * nk + kmax_a].uap;
        snprintf(names[ns], 48, "re-ID uAP (k=%d)", ks[kmax_a]);
        s[ns] = (svg_series){.name = names[ns], .n = nb, .x = x, .y = y + ns * nb}; ns++;
    }
    for (int a = 0; a < nk; a++) {
        if (rows[a].knn_acc != rows[a].knn_acc) break;
        for (int b = 0; b < nb; b++) y[ns * nb + b] = rows[(b + 1) * nk + a].knn_acc;
        snprintf(names[ns], 48, "kNN accuracy k=%d", ks[a]);
        s[ns] = (svg_series){.name = names[ns], .n = nb, .x = x, .y = y + ns * nb}; ns++;
    }
    svg_opts o = {.title = title, .xlabel = "code length (bits)", .ylabel = "score", .width = 720, .height = 420, .logx = 1, .ymin = 0, .ymax = 1};
    int rc = svg_line_plot(path, &o, s, ns);
    free(x); free(y); free(names); free(s);
    return rc;
}
