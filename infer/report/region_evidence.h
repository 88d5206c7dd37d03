/* region_evidence.h — why a past case was retrieved: where the query's images and the case's images
 * resemble each other (issue #32 item 2). Shown over the thumbnails of `report` and `serve` as
 * "regions that resemble the other image"; it is what the encoder matched on, not a diagnosis and
 * not a lesion outline.
 *
 * Features: the encoder's spatial features of each view, computed by the same forward (same
 * kernels, eval mode, same preprocessing) as its descriptor:
 *   ViT (and a scene model's image encoder): the patch tokens after the final norm ([CLS] and
 *        register tokens dropped), a grid of img / patch per side;
 *   ResNet: the last stage's map before the global average pool (img / 32 per side).
 * Every position's vector is L2-normalised.
 *
 * Evidence of a pair of views (query view a, case view b): a region of one image is evidence when
 * its best match in the other image is closer than its best match in past cases in general (a
 * reference bank: a few views spread over the case base):
 *   query map  eq(i) = max_j cos(q_i, c_j) - mean_r max_j cos(q_i, r_j)
 *   case map   ec(j) = max_i cos(c_j, q_i) - mean_r max_i cos(c_j, r_i)
 * so what every image has (the dark corners of the endoscope's vignette, plain mucosa) scores about
 * zero, and what these two images share beyond that scores high. Measured on synthetic scenes with
 * known lesion masks (tests/infer/report/test_region_evidence.c, bench/RESULTS_report.md): the plain
 * best match (without the bank) put its peak on the lesion less often than chance; this rule about
 * three times as often as chance. The match of a pair of views is mean_i max_j cos(q_i, c_j).
 * A case with several views: each case view is paired with the query view it matches best, and the
 * case view with the highest match is "the view that matched best" (likewise each query view with
 * the case view it matches best). */
#ifndef ENDORET_REGION_EVIDENCE_H
#define ENDORET_REGION_EVIDENCE_H

#include "infer/report/report.h"
#include "nn/models/model.h"

/* The spatial features of V views: f [V][gh * gw][D], each position unit-length (not centred). */
typedef struct {
    int V, gh, gw, D;
    float *f;
} region_feats;

/* 1 when the model's family has spatial features (ViT, scene model, ResNet); 0 otherwise (no error). */
int region_supported(const model *m);
/* Features of V model inputs x (V x 3 x img x img, as model_embed takes them). Not thread-safe (one
 * forward of the model at a time, as model_embed). ER_INPUT for a family without features. */
int region_feats_of(model *m, const float *x, int V, region_feats *out);
void region_feats_free(region_feats *f);

/* The evidence between a query and one case. */
typedef struct {
    int gh, gw, qviews, cviews;
    float *q;        /* qviews x gh*gw: each query view's map against the case view it matches best */
    float *c;        /* cviews x gh*gw: each case view's map against the query view it matches best */
    float *cmatch;   /* cviews: each case view's match (mean best cosine) */
    int best;        /* the case view with the highest match */
} region_pair;

/* ref: the reference bank (region_refs_of; V >= 1). ER_INPUT when the grids differ (features of two
 * models). */
int region_pair_of(const region_feats *q, const region_feats *c, const region_feats *ref, region_pair *out);

/* The evidence engine of a page: the model and its reference bank. */
typedef struct region_engine {
    model *m;
    region_feats ref;
} region_engine;

enum { REGION_REFS = 8 }; /* views in the reference bank */
/* The time one page's evidence may take on a 2-core CPU: a query card with k = 6 single-view
 * neighbours on a ViT-S/16 at 224 px (7 forwards and the maps); measured in bench/RESULTS_report.md
 * (0.71 s at load average 3.0 on this shared machine, the 7 descriptor forwards alone 0.68 s; 1.4-1.7 s
 * at load 10-13 before the query's bank matches were shared by the card's pairs) and checked against
 * those forwards by tests/infer/report/test_region_evidence.c. Pages wait for it; a scene case of V views costs
 * about V times as much per neighbour. */
enum { REGION_PAGE_BUDGET_MS = 2000 };

/* The bank from the first view of up to REGION_REFS of the n cases' view lists (paths, NULL
 * entries skipped), spread evenly over them; unreadable images are skipped. ER_INPUT when the model
 * has no spatial features or no image can be read. e->m = m (not owned). */
int region_engine_init(region_engine *e, model *m, char *const *paths, int64_t n);
void region_engine_free(region_engine *e);
void region_pair_free(region_pair *p);

/* The evidence a report query's card shows: one pair per neighbour, and the query's own map (per
 * view: the mean over the neighbours of their query maps). */
typedef struct region_query {
    int nnb, qviews, gh, gw;
    region_pair *nb;   /* nnb; gh == 0 where the case's images could not be read */
    float *query;      /* qviews x gh*gw, NULL when no neighbour has evidence */
    float crop;        /* the share of the short side the model sees (model_input crop) */
    double ms;         /* wall time spent (reading, preprocessing, forward, maps) */
} region_query;

/* Past cases of a card that get evidence, nearest first (the weighted vote shows k = 290): the page
 * budget holds for a card, not for hundreds of forwards. */
enum { REGION_MAX_CASES = 12 };

/* Evidence of query i of r (its REGION_MAX_CASES nearest cases): the query's views (x: qv model inputs, e.g. an uploaded case's) or,
 * with x NULL, the files of r->q[i].image; every neighbour's views from its image files (at most 16
 * per case). Images that cannot be read leave their pair empty (gh 0); ER_INPUT only when the query
 * itself has none. */
int region_query_of(const region_engine *e, const report_data *r, int i, const float *x, int qv, region_query *out);
void region_query_free(region_query *e);

#endif
