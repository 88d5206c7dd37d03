/* multiview.h — the multi-view re-identification protocol of EndoFinder (scene paper, table 3):
 * each polyp (scene) has four views labelled Q1, Q2 (query group) and R1, R2 (reference group).
 * For every non-empty subset of {Q1,Q2} and of {R1,R2} (9 settings) the query descriptor is the
 * mean of the chosen query views' L2-normalised embeddings and the reference descriptor the mean
 * of the chosen reference views'; queries are matched to references by the file's distance
 * (cosine, or chi2 for histograms; Hamming on the hashed mean when bits > 0), the ground truth
 * being the same scene, and uAP / Acc@1 / Recall@P90 are computed with the ISC metrics over the
 * top-k predictions per query (k = REID_DEFAULT_K = 10 by default, the ISC2021 protocol's). Views
 * are the embedding file's `view` values: 0,1,2,3 = Q1,Q2,R1,R2 (views beyond 3 are ignored); a
 * file lacking one of them is ER_INPUT naming it. A setting's queries are the scenes having all its
 * query and reference views; its gallery every scene having its reference views
 * (infer/eval/reid_views.h). */
#ifndef ENDORET_MULTIVIEW_H
#define ENDORET_MULTIVIEW_H

#include "infer/retrieval/embeddings.h"
#include "infer/eval/metrics.h"

typedef struct {
    int qmask, rmask;  /* bit 0 = Q1 / R1, bit 1 = Q2 / R2 */
    int nscenes;
    reid_result r;
} mv_row;

/* rows[9] in the order: Q1-R1, Q2-R1, Q1-R2, Q1Q2-R1, Q1-R1R2, Q1Q2-R1R2 ... see multiview.c.
 * multiview_eval_keep's keep (9 or NULL): each setting's predictions, for intervals (free with reid_view_result_free). */
typedef struct reid_view_result reid_view_result;
int multiview_eval_keep(const emb_set *e, int k, int bits, uint64_t seed, mv_row rows[9], reid_view_result *keep);
int multiview_eval(const emb_set *e, int k, int bits, uint64_t seed, mv_row rows[9]);

#endif
