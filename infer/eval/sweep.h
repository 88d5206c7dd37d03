/* sweep.h — hash length x k sweep over a database + query set: for each code length (and the
 * float baseline, bits = 0) the hash is fitted on the database, the queries are searched with the
 * chosen exact index, and for each k we record re-identification uAP / Acc@1 (ISC definitions,
 * top-k predictions per query, when query -> database matches are known), kNN majority-vote
 * accuracy / ROC AUC / F1 of the query labels, and the measured search latency. With B bootstrap
 * replicates, uAP and Acc@1 carry the 95 % interval `eval reid` prints (reid_bootstrap: queries
 * resampled, BOOTSTRAP_SEED) and the kNN accuracy the interval of its mean over queries
 * (bootstrap_mean_interval, as `eval classify`); B = 0: NaN. */
#ifndef ENDORET_SWEEP_H
#define ENDORET_SWEEP_H

#include <stdint.h>

#include "infer/retrieval/embeddings.h"
#include "infer/retrieval/hash.h"
#include "infer/retrieval/index.h"
#include "infer/eval/metrics.h"

typedef struct {
    int bits, k;                 /* bits 0 = float cosine */
    double uap, acc1, recall_p90; /* NaN without ground truth */
    double knn_acc, knn_auc, knn_f1;
    double uap_lo, uap_hi, acc1_lo, acc1_hi, knn_acc_lo, knn_acc_hi; /* 95 % intervals, NaN when none */
    double ms_per_query;
} sweep_row;

/* gt: ngt (query id, database id) pairs or NULL. rows: (nbits + 1) * nk, float first. */
int sweep_run(const emb_set *db, const emb_set *q, const reid_gt *gt, int64_t ngt, const int *bits, int nbits,
              const int *ks, int nk, hash_kind hk, index_kind kind, uint64_t seed, int bootstrap, sweep_row *rows);
/* A row's measurements in the order of its CSV and JSON columns (after bits and k): their names,
 * declared once for both. */
enum { SWEEP_NCOLS = 13 };
extern const char *const SWEEP_COLUMNS[SWEEP_NCOLS];
void sweep_row_values(const sweep_row *r, double v[SWEEP_NCOLS]);
int sweep_write_csv(const char *path, const sweep_row *rows, int nrows);
void sweep_print_table(const sweep_row *rows, int nrows, int markdown);
int sweep_write_svg(const char *path, const sweep_row *rows, int nrows, const int *ks, int nk, const char *title);

#endif
