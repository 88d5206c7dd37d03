/* image_cache.c — training split as u8 planes, and the eval set (see image_cache.h). */
#include "datasets/image_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "nn/base/progress.h"

static void to_u8(const image *im, u8_image *o) {
    o->c = im->c; o->h = im->h; o->w = im->w;
    size_t n = (size_t)im->c * im->h * im->w;
    o->px = xmalloc(n);
    for (size_t i = 0; i < n; i++) {
        float v = im->data[i] * 255.0f + 0.5f;
        o->px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

void image_cache_get(const u8_image *s, image *im) {
    image_ensure(im, s->c, s->h, s->w);
    size_t n = (size_t)s->c * s->h * s->w;
    for (size_t i = 0; i < n; i++) im->data[i] = s->px[i] * (1.0f / 255.0f);
}

static int in_split(const manifest *m, int i, const char *split) {
    return !split || !split[0] || (m->rows[i].split && !strcmp(m->rows[i].split, split));
}

int image_cache_load(image_cache *c, const char *path, const char *split, int side) {
    memset(c, 0, sizeof *c);
    manifest m;
    int rc = manifest_load(path, &m);
    if (rc) return rc;
    c->imgs = xcalloc(m.n ? m.n : 1, sizeof(u8_image));
    c->masks = xcalloc(m.n ? m.n : 1, sizeof(u8_image));
    c->scene = xcalloc(m.n ? m.n : 1, sizeof(int));
    c->view = xcalloc(m.n ? m.n : 1, sizeof(int));
    c->label = xcalloc(m.n ? m.n : 1, sizeof(int));
    c->pos = xcalloc(m.n ? m.n : 1, sizeof(int64_t));
    int64_t *vval;
    char **vvn;
    int nvv;
    manifest_field_values(&m, MF_VIEW, &vval, &vvn, &nvv);
    int *sid, *vid, *lid, ns, nv, nl;
    char **sn, **vn, **ln;
    manifest_label_ids(&m, &lid, &ln, &nl);
    c->nlabels = nl;
    manifest_field_ids(&m, MF_SCENE, &sid, &sn, &ns);
    manifest_field_ids(&m, MF_VIEW, &vid, &vn, &nv);
    int k = 0, nsplit = 0;
    image im = {0}, r = {0};
    for (int i = 0; i < m.n; i++) nsplit += in_split(&m, i, split);
    progress pr;
    progress_begin(&pr, "decode", "images", nsplit);
    for (int i = 0; i < m.n && rc == ER_OK; i++) {
        if (!in_split(&m, i, split)) continue;
        c->scene[k] = sid[i];
        c->view[k] = vid[i];
        c->pos[k] = vval[i];
        c->label[k] = lid[i];
        char *p = manifest_image_path(&m, i);
        rc = image_load(p, 3, &im);
        free(p);
        if (rc) break;
        /* cache with short side `side` (never upscaled) */
        int s = im.h < im.w ? im.h : im.w;
        int h = im.h, w = im.w;
        if (s > side) { h = (int)lround((double)im.h * side / s); w = (int)lround((double)im.w * side / s); }
        image_resize(&im, &r, h, w, RESIZE_BILINEAR);
        to_u8(&r, &c->imgs[k]);
        char *mp = manifest_mask_path(&m, i);
        if (mp) {
            rc = image_load(mp, 1, &im);
            free(mp);
            if (rc) break;
            image_resize(&im, &r, h, w, RESIZE_NEAREST);
            to_u8(&r, &c->masks[k]);
        }
        k++;
        progress_add(&pr, 1);
    }
    progress_end(&pr);
    image_free(&im);
    image_free(&r);
    manifest_free_labels(sid, sn, ns);
    manifest_free_labels(vid, vn, nv);
    manifest_free_labels(lid, ln, nl);
    manifest_free_labels(NULL, vvn, nvv);
    free(vval);
    manifest_free(&m);
    c->n = k;
    if (!rc && k == 0) rc = er_fail(ER_INPUT, "%s: no rows with split '%s'", path, split ? split : "");
    return rc;
}

void rows_group_by(const int *key, int n, int nkeys, int **first, int **count, int **rows) {
    *first = xcalloc((size_t)nkeys + 1, sizeof(int));
    *count = xcalloc((size_t)nkeys + 1, sizeof(int));
    *rows = xmalloc((size_t)(n ? n : 1) * sizeof(int));
    for (int i = 0; i < n; i++) if (key[i] >= 0) (*count)[key[i]]++;
    for (int s = 1; s <= nkeys; s++) (*first)[s] = (*first)[s - 1] + (*count)[s - 1];
    int *fill = xcalloc((size_t)nkeys + 1, sizeof(int));
    for (int i = 0; i < n; i++)
        if (key[i] >= 0) (*rows)[(*first)[key[i]] + fill[key[i]]++] = i;
    free(fill);
}

void image_cache_scenes(const image_cache *c, int **first, int **count, int **rows, int *nscene) {
    int ns = 0;
    for (int i = 0; i < c->n; i++) if (c->scene[i] + 1 > ns) ns = c->scene[i] + 1;
    rows_group_by(c->scene, c->n, ns, first, count, rows);
    *nscene = ns;
}

int image_cache_scenes_min(const image_cache *c, int min_views, int **first, int **count, int **rows, int *nscene,
                           int *nfewer) {
    int ns, kept = 0;
    image_cache_scenes(c, first, count, rows, &ns);
    *nfewer = 0;
    for (int s = 0; s < ns; s++) {
        if ((*count)[s] == 0) continue;
        if ((*count)[s] < min_views) { ++*nfewer; continue; }
        (*first)[kept] = (*first)[s]; /* kept <= s: compacted in place */
        (*count)[kept++] = (*count)[s];
    }
    *nscene = kept;
    return ns;
}

void image_cache_free(image_cache *c) {
    for (int i = 0; c->imgs && i < c->n; i++) free(c->imgs[i].px);
    for (int i = 0; c->masks && i < c->n; i++) free(c->masks[i].px);
    free(c->imgs);
    free(c->masks);
    free(c->scene);
    free(c->view);
    free(c->pos);
    free(c->label);
    memset(c, 0, sizeof *c);
}

/* Rows i of m with keep[i] (in order) preprocessed by aug_eval_input into x [n, 3, side, side]
 * (malloc'd); row[k] receives the manifest row of image k. ER_INPUT naming a file that cannot be read. */
static int load_rows(const manifest *m, const uint8_t *keep, int side, float crop, const float mean[3],
                     const float std[3], float **x, int *row, int *n) {
    const int S = side;
    *x = xmalloc((size_t)(m->n ? m->n : 1) * 3 * S * S * sizeof(float));
    image src = {0}, dst = {0};
    aug_workspace ws = {0};
    int k = 0, rc = ER_OK;
    for (int i = 0; i < m->n && !rc; i++) {
        if (!keep[i]) continue;
        char *p = manifest_image_path(m, i);
        rc = image_load(p, 3, &src);
        free(p);
        if (!rc) rc = aug_eval_input(&src, S, crop, mean, std, &ws, &dst);
        if (rc) break;
        memcpy(*x + (size_t)k * 3 * S * S, dst.data, (size_t)3 * S * S * sizeof(float));
        row[k++] = i;
    }
    *n = k;
    image_free(&src);
    image_free(&dst);
    aug_workspace_free(&ws);
    if (rc) { free(*x); *x = NULL; *n = 0; }
    return rc;
}

int eval_set_load(const char *path, const char *split, int side, float **x, int64_t **scene, int64_t **view,
                  int *n) {
    *x = NULL; *scene = *view = NULL; *n = 0;
    manifest m;
    int rc = manifest_load(path, &m);
    if (rc) return rc;
    int *sc, *vw, nsc, nvw, *row = xmalloc((m.n ? m.n : 1) * sizeof(int));
    char **scn, **vwn;
    manifest_field_ids(&m, MF_SCENE, &sc, &scn, &nsc);
    manifest_field_ids(&m, MF_VIEW, &vw, &vwn, &nvw);
    uint8_t *keep = xmalloc(m.n ? m.n : 1);
    for (int i = 0; i < m.n; i++) keep[i] = (uint8_t)in_split(&m, i, split);
    rc = load_rows(&m, keep, side, 1.0f, IMAGENET_MEAN, IMAGENET_STD, x, row, n); /* = aug_eval */
    if (!rc) {
        *scene = xmalloc((*n ? *n : 1) * sizeof(int64_t));
        *view = xmalloc((*n ? *n : 1) * sizeof(int64_t));
        for (int k = 0; k < *n; k++) (*scene)[k] = sc[row[k]], (*view)[k] = vw[row[k]];
    }
    manifest_free_labels(sc, scn, nsc);
    manifest_free_labels(vw, vwn, nvw);
    manifest_free(&m);
    free(keep);
    free(row);
    if (!rc && *n == 0) rc = er_fail(ER_INPUT, "%s: no eval rows", path);
    return rc;
}

int labelled_set_load(const char *path, const char *split, int side, float crop, const float mean[3],
                      const float std[3], float **x, int **label, int *n, int *nclass) {
    *x = NULL; *label = NULL; *n = 0; *nclass = 0;
    manifest m;
    int rc = manifest_load(path, &m);
    if (rc) return rc;
    int *ids, nl, *row = xmalloc((m.n ? m.n : 1) * sizeof(int));
    char **names;
    manifest_label_ids(&m, &ids, &names, &nl);
    uint8_t *keep = xmalloc(m.n ? m.n : 1);
    for (int i = 0; i < m.n; i++) keep[i] = (uint8_t)(in_split(&m, i, split) && ids[i] >= 0);
    rc = load_rows(&m, keep, side, crop, mean, std, x, row, n);
    if (!rc) {
        *label = xmalloc((*n ? *n : 1) * sizeof(int));
        for (int k = 0; k < *n; k++) (*label)[k] = ids[row[k]];
        *nclass = nl;
    }
    manifest_free_labels(ids, names, nl);
    manifest_free(&m);
    free(keep);
    free(row);
    if (!rc && *n == 0) {
        rc = er_fail(ER_INPUT, "%s: no labelled rows in split '%s'", path, split && split[0] ? split : "(all)");
        free(*x); free(*label); *x = NULL; *label = NULL;
    }
    return rc;
}
