/* multiview.h — the multi-view re-identification protocol of EndoFinder (scene paper, table 3):
 * each polyp (scene) has four views labelled Q1, Q2 (query group) and R1, R2 (reference group).
 * For every non-empty subset of {Q1,Q2} and of {R1,R2} (9 settings) the query descriptor is the
 * mean of the chosen query views' L2-normalised embeddings and the reference descriptor the mean
 * of the chosen reference views'; queries are matched to references by cosine (or by Hamming on
 * the hashed mean when bits > 0), the ground truth being the same scene, and uAP / Acc@1 /
 * Recall@P90 are computed with the ISC metrics over the top-k predictions per query (k = 1 as in
 * the scene code; 10 as in the image code). Views are read from the embedding file's `view`
 * column: view ids 0,1,2,3 = Q1,Q2,R1,R2 (views beyond 3 are ignored). Only scenes having every
 * view a setting needs take part in that setting. */
#ifndef ENDORET_MULTIVIEW_H
#define ENDORET_MULTIVIEW_H

#include "infer/retrieval/embeddings.h"
#include "infer/eval/metrics.h"

typedef struct {
    int qmask, rmask;  /* bit 0 = Q1 / R1, bit 1 = Q2 / R2 */
    int nscenes;
    reid_result r;
} mv_row;

/* rows[9] in the order: Q1-R1, Q2-R1, Q1-R2, Q1Q2-R1, Q1-R1R2, Q1Q2-R1R2 ... see multiview.c */
int multiview_eval(const emb_set *e, int k, int bits, uint64_t seed, mv_row rows[9]);

#endif
