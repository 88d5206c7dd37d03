/* knn.c — majority and similarity-weighted kNN votes, and their cross-validation. */
#include "infer/retrieval/knn.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int argmax_first_in_rank(const double *score, const int64_t *labels, int k, int nclass) {
    double best = -1;
    for (int c = 0; c < nclass; c++) if (score[c] > best) best = score[c];
    if (best <= 0) return -1;
    for (int j = 0; j < k; j++) { /* the first label in rank order whose score is the maximum */
        int64_t c = labels[j];
        if (c >= 0 && c < nclass && score[c] == best) return (int)c;
    }
    return -1;
}

static void normalise(double *score, int nclass) {
    double s = 0;
    for (int c = 0; c < nclass; c++) s += score[c];
    if (s > 0) for (int c = 0; c < nclass; c++) score[c] /= s;
}

int knn_majority(const int64_t *labels, int k, int nclass, double *score) {
    memset(score, 0, (size_t)nclass * sizeof *score);
    for (int j = 0; j < k; j++)
        if (labels[j] >= 0 && labels[j] < nclass) score[labels[j]] += 1;
    int p = argmax_first_in_rank(score, labels, k, nclass);
    normalise(score, nclass);
    return p;
}

int knn_weighted(const int64_t *labels, const double *sims, int k, int nclass, double tau, double *score) {
    memset(score, 0, (size_t)nclass * sizeof *score);
    for (int j = 0; j < k; j++)
        if (labels[j] >= 0 && labels[j] < nclass) score[labels[j]] += exp(sims[j] / tau);
    int p = argmax_first_in_rank(score, labels, k, nclass);
    normalise(score, nclass);
    return p;
}

int knn_neighbours(const float *db, int ndb, const float *q, int nq, int dim, const knn_cv_cfg *cfg,
                   int64_t *nb_idx, double *nb_sim, int *count) {
    int k = cfg->k;
    int64_t *ids = xmalloc((size_t)(ndb > 0 ? ndb : 1) * sizeof *ids);
    for (int i = 0; i < ndb; i++) ids[i] = i;
    int rc = ER_OK;
    if (cfg->bits <= 0) {
        findex fx;
        rc = findex_build(&fx, dim, db, ids, ndb);
        if (!rc) {
            float *d = xmalloc((size_t)nq * k * sizeof *d);
            findex_search(&fx, q, nq, k, nb_idx, d, count);
            for (size_t i = 0; i < (size_t)nq * k; i++) nb_sim[i] = 1.0 - d[i];
            free(d);
            findex_free(&fx);
        }
    } else {
        hasher h;
        hash_kind hk = cfg->bits == dim && cfg->hash == HASH_SIGN ? HASH_SIGN : cfg->hash == HASH_SIGN ? HASH_PCA : cfg->hash;
        rc = hasher_fit(&h, hk, db, ndb, dim, cfg->bits, cfg->seed);
        if (!rc) {
            int W = hash_words(cfg->bits);
            uint64_t *cd = xmalloc((size_t)(ndb > 0 ? ndb : 1) * W * 8), *cq = xmalloc((size_t)(nq > 0 ? nq : 1) * W * 8);
            hasher_encode(&h, db, ndb, cd);
            hasher_encode(&h, q, nq, cq);
            bindex bx;
            rc = bindex_build(&bx, cfg->kind, cfg->bits, cd, ids, ndb, 0);
            if (!rc) {
                int32_t *d = xmalloc((size_t)nq * k * sizeof *d);
                bindex_search(&bx, cq, nq, k, nb_idx, d, count);
                for (size_t i = 0; i < (size_t)nq * k; i++) nb_sim[i] = d[i] < 0 ? -1 : hamming_similarity(d[i], cfg->bits);
                free(d);
                bindex_free(&bx);
            }
            free(cd); free(cq);
            hasher_free(&h);
        }
    }
    free(ids);
    return rc;
}

int knn_parse_vote(const char *vote, int *weighted) {
    if (vote && !strcmp(vote, "majority")) *weighted = 0;
    else if (vote && !strcmp(vote, "weighted")) *weighted = 1;
    else return er_fail(ER_INPUT, "--vote: '%s' (majority or weighted)", vote ? vote : "");
    return ER_OK;
}
