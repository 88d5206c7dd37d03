/* case_query.c — one new case, online (case_query.h). */
#include "infer/report/case_query.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "nn/base/base.h"

int case_query(const case_engine *e, const image *views, int V, const char *paths, report_data *out, case_timing *t) {
    memset(out, 0, sizeof *out);
    if (V < 1) return er_fail(ER_INPUT, "a case needs at least one image");
    model *m = e->m;
    if (m->dim != e->db->dim)
        return er_fail(ER_INPUT, "the model gives %d-d descriptors but %s holds %d-d ones", m->dim, e->index_path, e->db->dim);
    if (e->db->n < 1) return er_fail(ER_INPUT, "%s: no cases to search", e->index_path);
    double t0 = now_seconds();
    int S = m->img, D = m->dim, rc = ER_OK;
    size_t img = (size_t)3 * S * S;
    float *x = xmalloc((size_t)V * img * sizeof(float)), *q = xmalloc((size_t)D * sizeof(float));
    image dst = {0};
    aug_workspace ws = {0};
    model_input in = model_input_of(m);
    for (int v = 0; v < V && !rc; v++) {
        rc = aug_eval_input(&views[v], S, in.crop, in.mean, in.std, &ws, &dst);
        if (!rc) memcpy(x + (size_t)v * img, dst.data, img * sizeof(float));
    }
    image_free(&dst);
    aug_workspace_free(&ws);
    if (!rc && m->arch->scene_descriptor) {
        t->fusion = "scene encoder";
        rc = model_embed_scene(m, x, V, q);
    } else if (!rc) {
        t->fusion = V == 1 ? "single view" : "mean of views";
        rc = model_embed_mean(m, x, V, q);
    }
    free(x);
    double t1 = now_seconds();
    t->embed_ms = 1e3 * (t1 - t0);
    if (rc) { free(q); return rc; }
    int k = e->cfg.k < e->db->n ? e->cfg.k : (int)e->db->n, cnt = 0;
    int64_t *ids = xmalloc((size_t)k * sizeof(int64_t));
    int32_t *hd = xmalloc((size_t)k * sizeof(int32_t));
    float *fd = xmalloc((size_t)k * sizeof(float));
    rc = casedb_search(e->db, q, 1, k, e->cfg.use_float, ids, hd, fd, &cnt);
    if (!rc) {
        report_header(out, e->db, e->index_path, k, &e->cfg, 1);
        report_query *w = &out->q[0];
        w->id = 0;
        w->truth = -1;
        w->image = paths ? xstrdup(paths) : NULL;
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

/* ["a.png", "b.png"] from a ';'-joined list */
static void json_paths(html_buf *b, const char *paths) {
    hb_puts(b, "[");
    for (const char *p = paths; p && *p;) {
        size_t n = strcspn(p, ";");
        char one[4096];
        snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one - 1 ? n : sizeof one - 1), p);
        if (p != paths) hb_puts(b, ", ");
        json_str(b, one);
        p += n + (p[n] == ';');
    }
    hb_puts(b, "]");
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
