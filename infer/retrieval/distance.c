/* distance.c — see distance.h. Cosine goes through the float index (sgemm); chi2 is a brute-force
 * scan, fine for evaluation-sized sets. */
#include "infer/retrieval/distance.h"
#include "infer/retrieval/index.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *emb_distance_name(emb_distance d) { return d == DIST_CHI2 ? "chi2" : "cosine"; }

int emb_distance_of(const emb_set *e, const char *what, emb_distance *d) {
    *d = DIST_COSINE;
    if (!e->distance || !strcmp(e->distance, "cosine")) return ER_OK;
    if (strcmp(e->distance, "chi2"))
        return er_fail(ER_INPUT, "%s: distance '%s' cannot rank float descriptors (cosine or chi2)", what, e->distance);
    *d = DIST_CHI2;
    for (size_t i = 0; i < (size_t)e->n * e->dim; i++)
        if (e->x[i] < 0)
            return er_fail(ER_INPUT, "%s: distance chi2 needs non-negative histograms, item %zu has %g", what, i / e->dim, e->x[i]);
    return ER_OK;
}

int emb_require_cosine(const emb_set *e, const char *what) {
    emb_distance d;
    int rc = emb_distance_of(e, what, &d);
    if (!rc && d != DIST_COSINE)
        rc = er_fail(ER_INPUT, "%s: the embedding file's distance is %s; hash indexes, the case database, kNN classification and sweeps rank "
                     "by cosine only (evaluate it with `eval reid`, `eval multiview` or `eval retrieval`)", what, emb_distance_name(d));
    return rc;
}

void dist_normalise(emb_distance d, float *x, int dim) {
    double s = 0;
    for (int i = 0; i < dim; i++) s += d == DIST_CHI2 ? fabs(x[i]) : (double)x[i] * x[i];
    if (d == DIST_COSINE) s = sqrt(s);
    if (s > 0)
        for (int i = 0; i < dim; i++) x[i] = (float)(x[i] / s);
}

typedef struct { double d; int64_t id; } cand;
static int by_dist_then_id(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static double chi2(const float *x, const float *y, int dim) {
    double s = 0;
    for (int i = 0; i < dim; i++) {
        double t = (double)x[i] + y[i];
        if (t > 0) s += ((double)x[i] - y[i]) * ((double)x[i] - y[i]) / t;
    }
    return s;
}

static int chi2_topk(const float *ref, const int64_t *ref_ids, int nr, const float *q, int nq, int dim, int k,
                     int64_t *out_ids, double *out_score, int *cnt) {
    float *r1 = xmalloc(sizeof *r1 * (size_t)nr * dim), *q1 = xmalloc(sizeof *q1 * (size_t)nq * dim);
    memcpy(r1, ref, sizeof *r1 * (size_t)nr * dim);
    memcpy(q1, q, sizeof *q1 * (size_t)nq * dim);
    for (int j = 0; j < nr; j++) dist_normalise(DIST_CHI2, r1 + (size_t)j * dim, dim);
    for (int i = 0; i < nq; i++) dist_normalise(DIST_CHI2, q1 + (size_t)i * dim, dim);
    int kk = k < nr ? k : nr;
#pragma omp parallel
    {
        cand *c = xmalloc(sizeof *c * (size_t)(nr ? nr : 1));
#pragma omp for schedule(dynamic, 4)
        for (int i = 0; i < nq; i++) {
            for (int j = 0; j < nr; j++) c[j] = (cand){chi2(q1 + (size_t)i * dim, r1 + (size_t)j * dim, dim), ref_ids[j]};
            qsort(c, (size_t)nr, sizeof *c, by_dist_then_id);
            for (int t = 0; t < kk; t++) {
                out_ids[(size_t)i * k + t] = c[t].id;
                out_score[(size_t)i * k + t] = -c[t].d;
            }
            cnt[i] = kk;
        }
        free(c);
    }
    free(r1);
    free(q1);
    return ER_OK;
}

int dist_topk(emb_distance d, const float *ref, const int64_t *ref_ids, int nr, const float *q, int nq, int dim, int k,
              int64_t *out_ids, double *out_score, int *cnt) {
    if (d == DIST_CHI2) return chi2_topk(ref, ref_ids, nr, q, nq, dim, k, out_ids, out_score, cnt);
    findex fx;
    int rc = findex_build(&fx, dim, ref, ref_ids, nr);
    if (rc) return rc;
    float *fd = xmalloc(sizeof *fd * (size_t)(nq ? nq : 1) * k);
    findex_search(&fx, q, nq, k, out_ids, fd, cnt);
    for (size_t i = 0; i < (size_t)nq * k; i++) out_score[i] = -2.0 * fd[i]; /* -|q - r|^2 of unit vectors */
    free(fd);
    findex_free(&fx);
    return ER_OK;
}

int dist_topk_hashed(hash_kind kind, int bits, uint64_t seed, const float *ref, const int64_t *ref_ids, int nr,
                     const float *q, int nq, int dim, int k, int64_t *out_ids, double *out_score, int *cnt) {
    hasher h;
    int rc = hasher_fit(&h, kind, ref, nr, dim, bits, seed);
    if (rc) return rc;
    int W = hash_words(bits);
    uint64_t *cq = xmalloc((size_t)(nq ? nq : 1) * W * 8), *cr = xmalloc((size_t)(nr ? nr : 1) * W * 8);
    hasher_encode(&h, q, nq, cq);
    hasher_encode(&h, ref, nr, cr);
    bindex bx;
    rc = bindex_build(&bx, INDEX_SCAN, bits, cr, ref_ids, nr, 0);
    if (!rc) {
        int32_t *d = xmalloc((size_t)(nq ? nq : 1) * k * sizeof *d);
        bindex_search(&bx, cq, nq, k, out_ids, d, cnt);
        for (size_t i = 0; i < (size_t)nq * k; i++) out_score[i] = -4.0 * d[i]; /* |a - b|^2 of +-1 codes = 4H */
        free(d);
        bindex_free(&bx);
    }
    free(cq);
    free(cr);
    hasher_free(&h);
    return rc;
}
