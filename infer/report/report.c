/* report.c — see report.h. Search and vote are the case database's and knn.h's; this file only
 * gathers what the page shows next to them. */
#include "infer/report/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/manifest.h"
#include "infer/retrieval/knn.h"
#include "infer/eval/metrics.h"
#include "nn/base/base.h"

static char *dup_or_null(const char *s) { return s && *s ? xstrdup(s) : NULL; }


static int label_by_name(const casedb *db, const char *name) {
    if (!name) return -1;
    for (int c = 0; c < db->nlabel_names; c++) if (!strcmp(db->label_names[c], name)) return c;
    return -1;
}

const char *report_label(const report_data *r, int64_t label) {
    return label >= 0 && label < r->nclass ? r->label_names[label] : "unknown";
}

/* manifest row of query row i, -1 if none */
static int query_manifest_row(const manifest *m, const emb_set *q, int i) {
    if (!m) return -1;
    if (m->n == q->n) return i;
    return q->ids[i] >= 0 && q->ids[i] < m->n ? (int)q->ids[i] : -1;
}

void report_header(report_data *r, const casedb *db, const char *index_path, int k, const report_cfg *cfg, int nq) {
    r->index_path = xstrdup(index_path);
    r->model = dup_or_null(db->model);
    r->k = k; r->weighted = cfg->weighted; r->use_float = cfg->use_float; r->tau = cfg->tau;
    r->bits = db->bits; r->dim = db->dim;
    r->hash_name = hash_kind_name(db->hash.kind);
    r->index_name = index_kind_name(db->kind);
    r->ncases = db->n;
    int C = r->nclass = db->nlabel_names;
    r->label_names = xcalloc(C ? C : 1, sizeof(char *));
    for (int c = 0; c < C; c++) r->label_names[c] = xstrdup(db->label_names[c]);
    r->nq = nq;
    r->q = xcalloc(nq ? nq : 1, sizeof(report_query));
    r->conf = xcalloc((size_t)(C ? C * C : 1), sizeof(int64_t));
}

void report_neighbours(const casedb *db, const report_cfg *cfg, const report_data *r, int k, int64_t self,
                       const int64_t *ids, const int32_t *hd, const float *fd, int cnt, report_query *w) {
    int C = r->nclass;
    int64_t *lab = xmalloc((size_t)(cnt + 1) * 8);
    double *sim = xmalloc((size_t)(cnt + 1) * 8);
    w->nb = xcalloc(cnt + 1, sizeof(report_neighbour));
    int n = 0;
    for (int j = 0; j < cnt && n < k; j++) {
        int64_t id = ids[j];
        if (id == self) continue;
        int64_t row = casedb_row(db, id);
        report_neighbour *b = &w->nb[n];
        b->id = id;
        b->label = row >= 0 ? db->labels[row] : -1;
        b->hamming = cfg->use_float ? -1 : hd[j];
        b->cosine = cfg->use_float ? fd[j] : NAN;
        b->sim = cfg->use_float ? 1.0 - fd[j] : hamming_similarity(hd[j], db->bits);
        b->image = row >= 0 ? dup_or_null(db->paths[row]) : NULL;
        b->mask = row >= 0 ? dup_or_null(db->masks[row]) : NULL;
        b->scene = row >= 0 ? db->scene[row] : -1;
        b->view = row >= 0 ? db->view[row] : -1;
        b->patient = row >= 0 ? dup_or_null(db->patient[row]) : NULL;
        lab[n] = b->label;
        sim[n] = b->sim;
        n++;
    }
    w->nnb = n;
    w->score = xcalloc(C ? C : 1, sizeof(double));
    w->pred = C == 0 ? -1 : cfg->weighted ? knn_weighted(lab, sim, n, C, cfg->tau, w->score) : knn_majority(lab, n, C, w->score);
    for (int j = 0; j < n; j++) {
        w->voters += lab[j] >= 0;
        w->agree += w->pred >= 0 && lab[j] == w->pred;
    }
    free(lab);
    free(sim);
}

int report_is_tie(const report_data *r, int i) {
    const report_query *w = &r->q[i];
    if (w->pred < 0 || !w->score) return 0;
    for (int c = 0; c < r->nclass; c++)
        if (c != w->pred && w->score[c] == w->score[w->pred]) return 1;
    return 0;
}

int report_validate(const casedb *db, const report_cfg *cfg, int k, report_validation *out) {
    memset(out, 0, sizeof *out);
    out->acc = out->lo = out->hi = NAN;
    int64_t n = db->n;
    int C = db->nlabel_names;
    if (n < 2 || C < 1) return ER_OK;
    if (db->fx.n != n || db->fx.ids[0] != db->ids[0])
        return er_fail(ER_INPUT, "case database: embeddings are not in case order (modified since open)");
    if (k > n - 1) k = (int)(n - 1);
    out->k = k;
    int ks = k + 1; /* the case itself is dropped */
    int64_t *ids = xmalloc((size_t)n * ks * 8);
    int32_t *hd = xmalloc((size_t)n * ks * 4);
    float *fd = xmalloc((size_t)n * ks * 4);
    int *cnt = xmalloc((size_t)n * sizeof(int));
    int64_t *lab = xmalloc((size_t)ks * 8);
    double *sim = xmalloc((size_t)ks * 8), *score = xmalloc((size_t)C * 8);
    int rc = casedb_search(db, db->fx.x, (int)n, ks, cfg->use_float, ids, hd, fd, cnt);
    for (int64_t i = 0; i < n && !rc; i++) {
        int64_t truth = db->labels[i];
        if (truth < 0 || truth >= C) continue;
        int m = 0;
        for (int j = 0; j < cnt[i] && m < k; j++) {
            size_t at = (size_t)i * ks + j;
            if (ids[at] == db->ids[i]) continue;
            int64_t row = casedb_row(db, ids[at]);
            lab[m] = row >= 0 ? db->labels[row] : -1;
            sim[m] = cfg->use_float ? 1.0 - fd[at] : hamming_similarity(hd[at], db->bits);
            m++;
        }
        int pred = cfg->weighted ? knn_weighted(lab, sim, m, C, cfg->tau, score) : knn_majority(lab, m, C, score);
        out->n++;
        out->correct += pred == truth;
    }
    if (!rc && out->n) {
        out->acc = (double)out->correct / out->n;
        /* Wilson score interval, 95 %: unlike a percentile bootstrap it does not shrink to a point when
         * every case (or none) is right, which a small case base often gives */
        double z = 1.959963984540054, nn = out->n, p = out->acc, d = 1 + z * z / nn;
        double mid = (p + z * z / (2 * nn)) / d, half = z * sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / d;
        out->lo = mid - half;
        out->hi = mid + half;
    }
    free(ids); free(hd); free(fd); free(cnt); free(lab); free(sim); free(score);
    return rc;
}

int report_build(const casedb *db, const char *index_path, const emb_set *q, const char *query_path,
                 const char *qman_path, const report_cfg *cfg, report_data *out) {
    memset(out, 0, sizeof *out);
    if (cfg->k < 1) return er_fail(ER_INPUT, "--k must be >= 1");
    if (cfg->weighted && !(cfg->tau > 0)) return er_fail(ER_INPUT, "--tau must be > 0");
    if (db->n < (q ? 1 : 2)) return er_fail(ER_INPUT, "%s: too few cases to search (%lld)", index_path, (long long)db->n);
    if (q && q->dim != db->dim)
        return er_fail(ER_INPUT, "%s: %d-d embeddings but the database holds %d-d ones", query_path, q->dim, db->dim);
    int loo = q == NULL;
    int64_t avail = loo ? db->n - 1 : db->n;
    int k = cfg->k > avail ? (int)avail : cfg->k;
    int nq = loo ? (int)db->n : q->n;
    if (cfg->limit > 0 && nq > cfg->limit) nq = cfg->limit;
    const float *qx = loo ? db->fx.x : q->x;
    if (loo && (db->fx.n != db->n || (db->n && db->fx.ids[0] != db->ids[0])))
        return er_fail(ER_INPUT, "%s: embeddings are not in case order (database modified since open)", index_path);

    manifest m;
    int have_m = 0, rc = ER_OK;
    if (!loo) {
        if (qman_path) {
            if ((rc = manifest_load(qman_path, &m))) return rc;
            have_m = 1;
            if (m.n != q->n) {
                for (int i = 0; i < q->n && !rc; i++)
                    if (q->ids[i] < 0 || q->ids[i] >= m.n)
                        rc = er_fail(ER_INPUT, "--manifest: %s has %d rows; query %d (id %lld) matches none of them", qman_path,
                                     m.n, i, (long long)q->ids[i]);
                if (rc) { manifest_free(&m); return rc; }
            }
        } else if (q->manifest && manifest_load(q->manifest, &m) == ER_OK) {
            have_m = 1; /* the manifest named in the embedding file, when it is still there */
            if (m.n != q->n) {
                for (int i = 0; i < q->n; i++) if (q->ids[i] < 0 || q->ids[i] >= m.n) { manifest_free(&m); have_m = 0; break; }
            }
        }
    }

    report_validation valid;
    if ((rc = report_validate(db, cfg, cfg->k, &valid))) {
        if (have_m) manifest_free(&m);
        return rc;
    }
    report_data *r = out;
    report_header(r, db, index_path, k, cfg, nq);
    r->valid = valid;
    r->query_path = dup_or_null(query_path);
    r->manifest_path = have_m ? xstrdup(qman_path ? qman_path : q->manifest) : NULL;
    int C = r->nclass;
    /* a scene file's queries (scenes, no views: `embed --scene`) show every view of their scene */
    int *scene_of = NULL, nscene = 0;
    char **scene_joined = NULL;
    int *mscene_of = NULL, nmscene = 0;
    char **mscene_joined = NULL;
    if (have_m && q->scene && !q->view) {
        manifest_scene_paths(&m, &scene_of, &scene_joined, &nscene);
        manifest_scene_masks(&m, &mscene_of, &mscene_joined, &nmscene);
    }

    int ks = loo ? k + 1 : k; /* leave-one-out: one more, the case itself is dropped */
    int64_t *ids = xmalloc((size_t)(nq ? nq : 1) * ks * 8);
    int32_t *hd = xmalloc((size_t)(nq ? nq : 1) * ks * 4);
    float *fd = xmalloc((size_t)(nq ? nq : 1) * ks * 4);
    int *cnt = xmalloc((size_t)(nq ? nq : 1) * sizeof(int)), *truth = xmalloc((size_t)(nq ? nq : 1) * sizeof(int)),
        *pred = xmalloc((size_t)(nq ? nq : 1) * sizeof(int));
    rc = casedb_search(db, qx, nq, ks, cfg->use_float, ids, hd, fd, cnt);
    for (int i = 0; i < nq && !rc; i++) {
        report_query *w = &r->q[i];
        int64_t self = -1;
        if (loo) {
            self = db->ids[i];
            w->id = self;
            w->image = dup_or_null(db->paths[i]);
            w->mask = dup_or_null(db->masks[i]);
            w->truth = db->labels[i] >= 0 && db->labels[i] < C ? (int)db->labels[i] : -1;
            w->truth_name = w->truth >= 0 ? xstrdup(db->label_names[w->truth]) : NULL;
            if (db->scene[i] >= 0) { char b[32]; snprintf(b, sizeof b, "%lld", (long long)db->scene[i]); w->scene = xstrdup(b); }
            if (db->view[i] >= 0) { char b[32]; snprintf(b, sizeof b, "%lld", (long long)db->view[i]); w->view = xstrdup(b); }
            w->patient = dup_or_null(db->patient[i]);
        } else {
            w->id = q->ids[i];
            int mr = have_m ? query_manifest_row(&m, q, i) : -1;
            const manifest_row *row = mr >= 0 ? &m.rows[mr] : NULL;
            w->image = !row ? NULL : scene_joined && scene_of[mr] >= 0 ? xstrdup(scene_joined[scene_of[mr]]) : manifest_image_list(&m, mr);
            w->mask = !row ? NULL : scene_joined && scene_of[mr] >= 0 ? dup_or_null(mscene_joined[mscene_of[mr]]) : manifest_mask_list(&m, mr);
            if (q->labels && q->labels[i] >= 0 && q->labels[i] < q->nlabel_names) w->truth_name = xstrdup(q->label_names[q->labels[i]]);
            else if (row && row->label) w->truth_name = xstrdup(row->label);
            w->truth = label_by_name(db, w->truth_name);
            if (row) { w->scene = dup_or_null(row->scene); w->view = dup_or_null(row->view); w->patient = dup_or_null(row->patient); }
            if (!w->scene && q->scene && q->scene[i] >= 0) { char b[32]; snprintf(b, sizeof b, "%lld", (long long)q->scene[i]); w->scene = xstrdup(b); }
            if (!w->view && q->view && q->view[i] >= 0) { char b[32]; snprintf(b, sizeof b, "%lld", (long long)q->view[i]); w->view = xstrdup(b); }
        }
        report_neighbours(db, cfg, r, k, self, ids + (size_t)i * ks, hd + (size_t)i * ks, fd + (size_t)i * ks, cnt[i], w);
        truth[i] = w->truth;
        pred[i] = w->pred;
        if (w->truth >= 0) { r->scored++; r->correct += w->pred == w->truth; }
    }
    if (!rc && C) {
        confusion_matrix(truth, pred, nq, C, r->conf);
        r->accuracy = r->scored ? accuracy_from_confusion(r->conf, C) : NAN;
    } else r->accuracy = NAN;
    free(ids); free(hd); free(fd); free(cnt); free(truth); free(pred);
    if (scene_of) manifest_free_labels(scene_of, scene_joined, nscene);
    if (mscene_of) manifest_free_labels(mscene_of, mscene_joined, nmscene);
    if (have_m) manifest_free(&m);
    if (rc) report_free(r);
    return rc;
}

void report_free(report_data *r) {
    for (int i = 0; i < r->nq; i++) {
        report_query *w = &r->q[i];
        for (int j = 0; j < w->nnb; j++) { free(w->nb[j].image); free(w->nb[j].mask); free(w->nb[j].patient); }
        free(w->nb); free(w->score); free(w->image); free(w->mask); free(w->truth_name); free(w->scene); free(w->view); free(w->patient);
    }
    free(r->q);
    for (int c = 0; c < r->nclass; c++) free(r->label_names[c]);
    free(r->label_names);
    free(r->conf);
    free(r->index_path); free(r->query_path); free(r->manifest_path); free(r->model);
    memset(r, 0, sizeof *r);
}

int report_opts_check(report_opts *o) {
    int rc = knn_parse_vote(o->vote, &o->cfg.weighted);
    if (rc) return rc;
    if (!o->index) return er_fail(ER_INPUT, "--index is required");
    if (o->cfg.k == 0) o->cfg.k = knn_default_k(o->cfg.weighted); /* the same k as classify */
    if (o->cfg.k < 1) return er_fail(ER_INPUT, "--k must be >= 1");
    if (!(o->cfg.tau > 0)) return er_fail(ER_INPUT, "--tau must be > 0");
    if (o->cfg.limit < 0) return er_fail(ER_INPUT, "--limit must be >= 0");
    if (o->manifest && !o->query) return er_fail(ER_INPUT, "--manifest describes the query images: give --query too");
    return ER_OK;
}
