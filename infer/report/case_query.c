/* case_query.c — one new case, online (case_query.h). */
#include "infer/report/case_query.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/view_list.h"
#include "nn/base/base.h"

size_t case_input_floats(const case_engine *e) { return (size_t)3 * e->m->img * e->m->img; }

int case_input(const case_engine *e, const image *view, aug_workspace *ws, image *tmp, float *x) {
    model_input in = model_input_of(e->m);
    int rc = aug_eval_input(view, e->m->img, in.crop, in.mean, in.std, ws, tmp);
    if (!rc) memcpy(x, tmp->data, case_input_floats(e) * sizeof(float));
    return rc;
}

int case_descriptor(const case_engine *e, const float *x, int V, float *q, case_timing *t) {
    if (V < 1) return er_fail(ER_INPUT, "a case needs at least one image");
    model *m = e->m;
    if (m->dim != e->db->dim)
        return er_fail(ER_INPUT, "the model gives %d-d descriptors but %s holds %d-d ones", m->dim, e->index_path, e->db->dim);
    double t0 = now_seconds();
    int rc;
    if (m->arch->scene_descriptor) {
        t->fusion = "scene encoder";
        rc = model_embed_scene(m, x, V, q);
    } else {
        t->fusion = V == 1 ? "single view" : "mean of views";
        rc = model_embed_mean(m, x, V, q);
    }
    t->embed_ms = 1e3 * (now_seconds() - t0);
    return rc;
}

int case_query(const case_engine *e, const float *x, int V, report_data *out, case_timing *t) {
    memset(out, 0, sizeof *out);
    if (V >= 1 && e->m->dim == e->db->dim && e->db->n < 1) return er_fail(ER_INPUT, "%s: no cases to search", e->index_path);
    float *q = xmalloc((size_t)e->m->dim * sizeof(float));
    int rc = case_descriptor(e, x, V, q, t);
    double t1 = now_seconds();
    if (rc) { free(q); return rc; }
    int k = e->cfg.k < e->db->n ? e->cfg.k : (int)e->db->n, cnt = 0;
    int64_t *ids = xmalloc((size_t)k * sizeof(int64_t));
    int32_t *hd = xmalloc((size_t)k * sizeof(int32_t));
    float *fd = xmalloc((size_t)k * sizeof(float));
    rc = casedb_search(e->db, q, 1, k, e->cfg.use_float, ids, hd, fd, &cnt);
    if (!rc) {
        report_header(out, e->db, e->index_path, k, &e->cfg, 1);
        out->valid = e->valid;
        report_query *w = &out->q[0];
        w->id = 0;
        w->truth = -1;
        report_neighbours(e->db, &e->cfg, out, k, -1, ids, hd, fd, cnt, w);
        out->accuracy = NAN;
    }
    free(ids); free(hd); free(fd); free(q);
    t->search_ms = 1e3 * (now_seconds() - t1);
    return rc;
}

static void json_str(html_buf *b, const char *s) {
    hb_puts(b, "\"");
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') hb_printf(b, "\\%c", ch);
        else if (ch < 0x20) hb_printf(b, "\\u%04x", ch);
        else hb_printf(b, "%c", ch);
    }
    hb_puts(b, "\"");
}

/* ["a.png", "b.png"] from a view list */
static void json_paths(html_buf *b, const char *paths) {
    int n;
    char **views = view_list_split(paths, &n);
    hb_puts(b, "[");
    for (int v = 0; v < n; v++) {
        if (v) hb_puts(b, ", ");
        json_str(b, views[v]);
    }
    hb_puts(b, "]");
    view_list_free(views, n);
}

void case_query_json(html_buf *b, const report_data *r, const case_timing *t, int V) {
    const report_query *w = &r->q[0];
    hb_printf(b, "{\"views\": %d, \"fusion\": ", V);
    json_str(b, t->fusion);
    hb_puts(b, ", \"predicted\": ");
    if (w->pred >= 0) json_str(b, report_label(r, w->pred));
    else hb_puts(b, "null");
    hb_printf(b, ", \"agree\": %d, \"voters\": %d, \"k\": %d, \"vote\": \"%s\", \"scores\": {", w->agree, w->voters, r->k,
              r->weighted ? "weighted" : "majority");
    for (int c = 0; c < r->nclass; c++) {
        if (c) hb_puts(b, ", ");
        json_str(b, r->label_names[c]);
        hb_printf(b, ": %.6f", w->score[c]);
    }
    hb_puts(b, "}, \"neighbours\": [");
    for (int j = 0; j < w->nnb; j++) {
        const report_neighbour *n = &w->nb[j];
        hb_printf(b, "%s{\"case\": %lld, \"label\": ", j ? ", " : "", (long long)n->id);
        json_str(b, report_label(r, n->label));
        if (n->hamming >= 0) hb_printf(b, ", \"hamming\": %d", n->hamming);
        else hb_printf(b, ", \"cosine_distance\": %.6f", n->cosine);
        hb_puts(b, ", \"images\": ");
        json_paths(b, n->image);
        hb_puts(b, "}");
    }
    hb_printf(b, "], \"embed_ms\": %.2f, \"search_ms\": %.2f, \"total_ms\": %.2f}\n", t->embed_ms, t->search_ms,
              t->embed_ms + t->search_ms);
}
