/* metrics.h — the papers' evaluation numbers, each written from its definition (see
 * ../shared/spec): ISC2021 re-identification metrics (EndoFinder), Recall@k and mAP (dual-backbone
 * paper), classification metrics, and fold assignment for cross-validation. */
#ifndef ENDORET_METRICS_H
#define ENDORET_METRICS_H

#include <stdint.h>

#include "infer/retrieval/embeddings.h"

/* ---- re-identification (ISC2021 code, as used by SSCD and EndoFinder) ---- */
typedef struct { int64_t q, r; double score; } reid_pred;   /* higher score = more similar */
typedef struct { int64_t q, r; } reid_gt;
typedef struct { double uap, acc1, recall_p90, thr_p90; int has_p90; } reid_result;
/* Micro AP over all predictions pooled and sorted by score (false positives first among equal
 * scores); Acc@1 = share of GT pairs whose reference is ranked first by its query (pessimistic on
 * ties); Recall@P90 = largest recall at any cut with precision >= 0.9 (0 when none).
 * A duplicate (q, r) prediction is ER_INPUT. */
int reid_metrics(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, reid_result *out);
/* Re-ID against one reference view (copy detection) by the file's distance: reid_eval_views
 * (infer/eval/reid_views.h) with that reference view and every other view a query. */
typedef struct reid_view_result reid_view_result;
int reid_eval_ref_view(const emb_set *e, int64_t ref_view, int k, reid_view_result *out);

/* ---- retrieval with labels (dual-backbone paper) ---- */
/* AP of one ranked list: rel[i] = 1 if rank i (0-based) is relevant; nrel = relevant items in the
 * whole gallery. cutoff <= 0: the full ranking, AP = sum_r P@r rel_r / nrel; cutoff = k: AP@k,
 * sum over r <= k divided by min(nrel, k). Returns NaN when nrel == 0 (query skipped). */
double ap_ranked(const uint8_t *rel, int n, int64_t nrel, int cutoff);
/* 1 if any of the first k is relevant */
int hit_at_k(const uint8_t *rel, int n, int k);

/* ---- classification ---- */
/* conf is nclass x nclass (row = truth, column = prediction); unknown truths (-1) are skipped. */
void confusion_matrix(const int *truth, const int *pred, int n, int nclass, int64_t *conf);
double accuracy_from_confusion(const int64_t *conf, int nclass);
/* Sensitivity (recall) of class c: its correct rows over its rows (NaN when it has none). */
double sensitivity_from_confusion(const int64_t *conf, int nclass, int c);
/* F1 of class `pos` (binary F1 when pos >= 0) or the macro mean over classes (pos < 0). */
double f1_from_confusion(const int64_t *conf, int nclass, int pos);
/* ROC AUC of scores for a binary truth (1 = positive): Mann-Whitney U with mid-ranks for ties
 * (the same value as sklearn's roc_auc_score). NaN when one class is absent. */
double roc_auc(const double *score, const int *truth, int n);

/* ---- cross-validation folds ---- */
/* Stratified: each class's items are shuffled (seeded) and dealt round-robin, so each fold has the
 * class proportions within one item. Items with label -1 are dealt as their own stratum. */
void folds_stratified(const int *label, int n, int k, uint64_t seed, int *fold);
/* Grouped: all items of a group share a fold (no patient in two folds). Groups are shuffled
 * (seeded), then placed largest first into the fold holding the fewest items; an item of group -1
 * is a group of its own. ER_INPUT when there are fewer groups than folds (an empty fold), as
 * `data split` (datasets/kfold.h) refuses it. */
int folds_grouped(const int *group, int n, int k, uint64_t seed, int *fold);

#endif
