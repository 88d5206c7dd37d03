/* reid_views.h — re-identification inside one embedding file with scene and view ids: the
 * references are the rows of the chosen reference views, the queries the rows of the chosen query
 * views, a query's only true match is its own scene's reference. This covers copy detection
 * (`data copies`: reference view 0, every other view a query) and EndoFinder's Q1/Q2 x R1/R2
 * settings (several views on a side are fused, see below).
 *
 *   one reference view      each scene's row of that view is a reference (two rows = ER_INPUT)
 *   several reference views a scene's reference is the mean of its views' normalised rows (L2 for
 *                           cosine, L1 for chi2: EndoFinder's descriptor averaging); a scene lacking
 *                           one of them has no reference
 *   no query views (NULL)   every row of another view, one query per row
 *   one query view          every row of that view, one query per row
 *   several query views     one query per scene: the mean of its views' normalised rows
 * Only queries whose scene has a reference take part; every reference is in the gallery. Top-k by
 * the file's distance (or Hamming on hashed descriptors when bits > 0), then reid_metrics.
 * View values are the file's own (the manifest's integers or names, infer/retrieval/embeddings.h). */
#ifndef ENDORET_REID_VIEWS_H
#define ENDORET_REID_VIEWS_H

#include "infer/eval/metrics.h"
#include "infer/retrieval/distance.h"
#include "infer/retrieval/hash.h"

typedef struct {
    const int64_t *qviews; int nqviews;  /* NULL / 0 = every view that is not a reference view */
    const int64_t *rviews; int nrviews;  /* >= 1 */
    int k;                               /* predictions per query */
    int bits; hash_kind hash; uint64_t seed; /* bits > 0: Hamming on codes fitted on the references */
} reid_views_cfg;

/* The ISC2021 protocol's number of predictions per query: the one default of every `eval`. */
#define REID_DEFAULT_K 10

/* pred / gt are kept (owned) so intervals and paired tests can resample the queries. */
struct reid_view_result {
    reid_result r;
    int nqueries, nrefs, nscenes, k;
    emb_distance dist;
    reid_pred *pred; int64_t npred;
    reid_gt *gt; int64_t ngt;
};
int reid_eval_views(const emb_set *e, const reid_views_cfg *c, reid_view_result *out);
void reid_view_result_free(reid_view_result *r);

#endif
