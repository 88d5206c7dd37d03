/* hybrid.c — see hybrid.h. */
#include "infer/retrieval/hybrid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/retrieval/distance.h"
#include "nn/base/base.h"

static int same_i64(const int64_t *x, const int64_t *y, int n) {
    if (!x || !y) return x == y;
    return !memcmp(x, y, sizeof *x * (size_t)n);
}

static char **names_copy(char **names, int n) {
    if (!names) return NULL;
    char **c = xmalloc(sizeof *c * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) c[i] = xstrdup(names[i]);
    return c;
}

int emb_hybrid(const emb_set *a, const emb_set *h, double w, emb_set *out) {
    memset(out, 0, sizeof *out);
    if (!(w >= 0 && w <= 1)) return er_fail(ER_INPUT, "hybrid: histogram weight %g: must be in [0, 1]", w);
    if (a->n != h->n) return er_fail(ER_INPUT, "hybrid: %d learned rows but %d histogram rows", a->n, h->n);
    if (!same_i64(a->ids, h->ids, a->n) || !same_i64(a->scene, h->scene, a->n) || !same_i64(a->view, h->view, a->n))
        return er_fail(ER_INPUT, "hybrid: the two files hold different rows (ids, scene or view differ): embed the same manifest");
    emb_distance da, dh;
    int rc = emb_distance_of(a, "hybrid (learned)", &da);
    if (!rc) rc = emb_distance_of(h, "hybrid (histogram)", &dh);
    if (rc) return rc;
    if (da != DIST_COSINE) return er_fail(ER_INPUT, "hybrid: the learned file's distance is %s, not cosine", emb_distance_name(da));
    if (dh != DIST_CHI2)
        return er_fail(ER_INPUT, "hybrid: the histogram file's distance is %s, not chi2 (embed --baseline colorhist)", emb_distance_name(dh));
    for (int i = 0; i < h->n; i++) {
        double s = 0;
        for (int k = 0; k < h->dim; k++) {
            float v = h->x[(size_t)i * h->dim + k];
            if (v < 0) return er_fail(ER_INPUT, "hybrid: histogram row %d has a negative bin (%g): not a histogram", i, v);
            s += v;
        }
        if (!(s > 0)) return er_fail(ER_INPUT, "hybrid: histogram row %d sums to 0", i);
    }
    const int D = a->dim + h->dim;
    emb_alloc(out, a->n, D);
    const double wa = sqrt(1 - w), wh = sqrt(w);
    for (int i = 0; i < a->n; i++) {
        const float *x = a->x + (size_t)i * a->dim, *y = h->x + (size_t)i * h->dim;
        float *o = out->x + (size_t)i * D;
        double na = 0, sh = 0;
        for (int k = 0; k < a->dim; k++) na += (double)x[k] * x[k];
        for (int k = 0; k < h->dim; k++) sh += y[k];
        na = sqrt(na);
        for (int k = 0; k < a->dim; k++) o[k] = na > 0 ? (float)(wa * x[k] / na) : 0.0f; /* a zero row stays zero */
        for (int k = 0; k < h->dim; k++) o[a->dim + k] = (float)(wh * sqrt(y[k] / sh));
    }
    memcpy(out->ids, a->ids, sizeof *out->ids * (size_t)a->n);
#define COPY(f) if (a->f) { out->f = xmalloc(sizeof *out->f * (size_t)a->n); memcpy(out->f, a->f, sizeof *out->f * (size_t)a->n); }
    COPY(labels) COPY(scene) COPY(view)
#undef COPY
    out->nlabel_names = a->nlabel_names, out->label_names = names_copy(a->label_names, a->nlabel_names);
    out->nscene_names = a->nscene_names, out->scene_names = names_copy(a->scene_names, a->nscene_names);
    out->nview_names = a->nview_names, out->view_names = names_copy(a->view_names, a->nview_names);
    if (a->manifest) out->manifest = xstrdup(a->manifest);
    char buf[2048];
    snprintf(buf, sizeof buf, "hybrid: %.4g x cosine of (%s) + %.4g x Bhattacharyya of (%s)", 1 - w, a->model ? a->model : "?", w,
             h->model ? h->model : "?");
    out->model = xstrdup(buf);
    out->distance = xstrdup("cosine");
    return ER_OK;
}
