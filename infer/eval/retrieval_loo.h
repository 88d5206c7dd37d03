/* retrieval_loo.h — labelled retrieval inside one set, each item a query against all the others
 * (self excluded, unlike the reference's compute_retrieval_metrics that keeps self, last but
 * relevant: spec section 2.9): cosine ranking (ties: lower index first), Recall@1/5 (hit_at_k) and
 * AP over the full ranking (ap_ranked, infer/eval/metrics.h); queries without another item of their
 * class are skipped. Optionally the same per class (macro means are the caller's). */
#ifndef ENDORET_RETRIEVAL_LOO_H
#define ENDORET_RETRIEVAL_LOO_H

typedef struct {
    int queries;          /* queries with a relevant item */
    double recall1, recall5, map;
} retrieval_scores;

/* E [n, D] (any scale: rows are normalised here), labels [n] (< 0: not a query, still ranked).
 * per_class: NULL or nclass entries (classes 0..nclass-1). ER_INPUT when no query has a relevant item. */
int retrieval_loo(const float *E, const int *labels, int n, int D, retrieval_scores *all, int nclass,
                  retrieval_scores *per_class);

#endif
