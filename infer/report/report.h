/* report.h — the explanation of a kNN diagnosis, as data: for each query, its image and truth, the
 * k retrieved cases (id, label, distance, image, scene / view / patient) and the vote over their
 * labels. Computed once with the case database's own search (casedb_search) and vote (knn.h), then
 * rendered by report_html.h into a static page (`endoret report`) or a live one (`endoret serve`).
 *
 * Queries come from an embedding file whose rows match a manifest (the query images): row i of
 * the embedding file is manifest row i when both have the same length, else manifest row ids[i]
 * (what `endoret embed --split` writes). Without a query file, every case of the database is a
 * query against all the others (leave-one-out: the case itself is never its own neighbour). */
#ifndef ENDORET_REPORT_H
#define ENDORET_REPORT_H

#include <stdint.h>

#include "infer/retrieval/casedb.h"
#include "infer/retrieval/embeddings.h"

typedef struct {
    int64_t id;           /* case id in the database */
    int64_t label;        /* -1 unknown */
    int32_t hamming;      /* Hamming distance (binary search), -1 with float search */
    float cosine;         /* cosine distance 1 - cos (float search), NaN with binary search */
    double sim;           /* similarity used by the weighted vote */
    char *image;          /* the case's image paths (its views, ';'-separated), NULL if none (owned) */
    char *mask;           /* its lesion masks, aligned with image, NULL if none recorded (owned) */
    int64_t scene, view;  /* -1 unknown */
    char *patient;        /* owned, may be NULL */
} report_neighbour;

typedef struct {
    int64_t id;           /* id in the query embedding file (or the case id, leave-one-out) */
    char *image;          /* query image path, NULL if unknown (owned) */
    char *mask;           /* its lesion masks, aligned with image, NULL if none recorded (owned) */
    int truth;            /* ground truth as a database label id, -1 unknown */
    char *truth_name;     /* ground-truth text as given (may name a label the database lacks) */
    char *scene, *view, *patient; /* as text, NULL unknown (owned) */
    int nnb;
    report_neighbour *nb; /* nnb, nearest first */
    int pred;             /* predicted label, -1 when no neighbour has a label */
    int agree;            /* neighbours whose label is the predicted one */
    int voters;           /* neighbours with a known label */
    double *score;        /* nclass normalised votes */
} report_query;

/* The vote's validated accuracy on the case base: every labelled case of the database is a query
 * against all the others (leave-one-out, itself excluded; other views of the same lesion stay, so
 * it can be optimistic), with the page's k, search and vote; 95 % Wilson score interval of the
 * proportion right (z = 1.96). */
typedef struct {
    int n, correct;       /* labelled cases scored (0: none, nothing to show), right votes */
    int k;
    double acc, lo, hi;   /* NaN when n == 0 */
} report_validation;

typedef struct {
    /* parameters (copied strings) */
    char *index_path, *query_path, *manifest_path, *model;
    int k, weighted, use_float;
    double tau;
    int bits, dim;
    const char *hash_name, *index_name; /* static strings */
    int64_t ncases;
    /* labels of the database */
    int nclass;
    char **label_names;
    /* queries */
    int nq;
    report_query *q;
    /* summary over queries with a known truth */
    int scored, correct;
    int64_t *conf;        /* nclass x nclass, row = truth, column = prediction */
    double accuracy;      /* NaN when no query is scored */
    report_validation valid; /* the vote's leave-one-out accuracy on the database (report_validate) */
} report_data;

typedef struct {
    int k;                /* neighbours (>= 1; capped at the number of cases) */
    int weighted;         /* 0 majority (ties -> nearest), 1 exp(sim / tau) */
    double tau;
    int use_float;        /* neighbours by float cosine instead of Hamming */
    int limit;            /* at most this many queries (0 = all) */
} report_cfg;

/* The options `endoret report` and `endoret serve` share: where cases and queries come from and how
 * the neighbours vote (declared as command-line options by cli/common_opts.h's OPT_REPORT). */
typedef struct {
    const char *index, *query, *manifest, *vote;
    report_cfg cfg;
} report_opts;
#define REPORT_OPTS_INIT {NULL, NULL, NULL, "majority", {0, 0, 0.1, 0, 0}} /* k 0: knn_default_k */
/* Checks the parsed options (ER_INPUT naming the flag), sets cfg.weighted from vote and an unset k
 * (0) to the vote's default, knn_default_k (infer/retrieval/knn.h). */
int report_opts_check(report_opts *o);

/* q == NULL: leave-one-out over the database's cases. qman: the query manifest (NULL = none; the
 * caller may pass the one named in q->manifest). Paths are stored as given / as the manifest
 * resolves them. */
int report_build(const casedb *db, const char *index_path, const emb_set *q, const char *query_path,
                 const char *qman_path, const report_cfg *cfg, report_data *out);
void report_free(report_data *r);
/* The parts report_build is made of, for one query found elsewhere (`serve`'s online cases): the
 * report's parameters and labels for nq queries (r->q allocated, zeroed) ... */
void report_header(report_data *r, const casedb *db, const char *index_path, int k, const report_cfg *cfg, int nq);
/* ... and a query's neighbours from casedb_search's cnt results (ids, Hamming or cosine distances),
 * skipping case `self` (-1: none), at most k, with the vote. */
void report_neighbours(const casedb *db, const report_cfg *cfg, const report_data *r, int k, int64_t self,
                       const int64_t *ids, const int32_t *hd, const float *fd, int cnt, report_query *w);
/* The vote's leave-one-out accuracy over the database's labelled cases (report_validation), with
 * cfg's search and vote and k neighbours (capped at n - 1). report_build calls it; serve copies it
 * into each new case's report, so it is computed once per start. */
int report_validate(const casedb *db, const report_cfg *cfg, int k, report_validation *out);
/* 1 when query i's vote is a tie (majority: two labels with the most votes; weighted: two equal
 * largest scores), so there is no majority to suggest. */
int report_is_tie(const report_data *r, int i);
/* Label name of a database label id, or "unknown". */
const char *report_label(const report_data *r, int64_t label);

#endif
