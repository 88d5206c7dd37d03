/* case_query.h — one new case, online (EndoFinder's "online retrieval"): its 1..N view images ->
 * the case descriptor -> the case database's search -> the kNN vote, as a one-query report
 * (report.h) that report_html renders and case_query_json writes.
 *
 * The descriptor is the model's scene descriptor when its family has one (EndoFinder-Scene: the
 * scene encoder over the views' [CLS]), else the image descriptor of a single view, or the mean of
 * the views' descriptors (the paper's averaging baseline). Images are preprocessed as `embed`
 * (datasets/augment.h aug_eval), so an online case and an embedded one give the same descriptor. */
#ifndef ENDORET_CASE_QUERY_H
#define ENDORET_CASE_QUERY_H

#include "datasets/augment.h"
#include "datasets/image.h"
#include "infer/report/report.h"
#include "infer/report/report_html.h"
#include "infer/retrieval/casedb.h"
#include "nn/models/model.h"

typedef struct {
    model *m;
    const casedb *db;
    const char *index_path;
    report_cfg cfg;
    report_validation valid; /* the vote's accuracy on the database, computed once at start, shown on each case's page */
} case_engine;

typedef struct {
    const char *fusion;          /* "scene encoder" | "single view" | "mean of views" */
    double embed_ms, search_ms;  /* decoding + preprocessing (serve adds them) + encoder; search + vote */
} case_timing;

/* The model's input of one view: 3 x img x img floats. */
size_t case_input_floats(const case_engine *e);
/* One decoded RGB view -> its model input x (case_input_floats floats), as `embed` preprocesses
 * it; ws / tmp: the caller's scratch, reused over the views. */
int case_input(const case_engine *e, const image *view, aug_workspace *ws, image *tmp, float *x);
/* x: the V views' model inputs -> the case descriptor -> the search -> the vote: a one-query
 * report whose query has no image path (the caller shows the views it decoded). t->embed_ms is the
 * encoder's time (the caller adds its decoding and preprocessing). ER_INPUT when V < 1 or the
 * model's width is not the database's. Not thread-safe: one caller at a time per model. */
int case_query(const case_engine *e, const float *x, int V, report_data *out, case_timing *t);
/* The case descriptor alone (m->dim floats into q), as case_query computes it: t->fusion and
 * t->embed_ms are set. Filing a case stores this descriptor. */
int case_descriptor(const case_engine *e, const float *x, int V, float *q, case_timing *t);
/* The answer as one JSON object: the vote, the neighbours (id, label, distance, image paths) and the
 * timings. */
void case_query_json(html_buf *b, const report_data *r, const case_timing *t, int V);

#endif
