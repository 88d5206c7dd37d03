/* embeddings.c — read/write the embedding file (format in embeddings.h). */
#include "infer/retrieval/embeddings.h"
#include "checkpoints/safetensors.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void emb_alloc(emb_set *e, int n, int dim) {
    memset(e, 0, sizeof *e);
    e->n = n;
    e->dim = dim;
    e->x = xcalloc((size_t)n * (size_t)dim, sizeof(float));
    e->ids = xmalloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) e->ids[i] = i;
}

static void names_free(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* names in id order, one per line, as one metadata value */
static void add_names_meta(st_writer *w, const char *key, char **names, int n) {
    if (!n) return;
    size_t len = 0;
    for (int i = 0; i < n; i++) len += strlen(names[i]) + 1;
    char *all = xmalloc(len + 1), *p = all;
    for (int i = 0; i < n; i++) p += sprintf(p, "%s%s", i ? "\n" : "", names[i]);
    st_add_meta(w, key, all);
    free(all);
}

static void read_names_meta(st_file *f, const char *key, char ***names, int *n) {
    const char *m = st_meta(f, key);
    if (!m || !*m) return;
    int cnt = 1;
    for (const char *c = m; *c; c++) cnt += *c == '\n';
    *names = xmalloc(sizeof(char *) * (size_t)cnt);
    const char *s = m;
    for (int i = 0; i < cnt; i++) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        (*names)[i] = xmalloc(len + 1);
        memcpy((*names)[i], s, len);
        (*names)[i][len] = 0;
        s = nl ? nl + 1 : s + len;
    }
    *n = cnt;
}

void emb_free(emb_set *e) {
    free(e->x);
    free(e->ids);
    free(e->labels);
    free(e->scene);
    free(e->view);
    names_free(e->label_names, e->nlabel_names);
    names_free(e->scene_names, e->nscene_names);
    names_free(e->view_names, e->nview_names);
    free(e->manifest);
    free(e->model);
    free(e->distance);
    memset(e, 0, sizeof *e);
}

int emb_save(const char *path, const emb_set *e) {
    st_writer *w = st_writer_new();
    int64_t shape2[2] = {e->n, e->dim}, shape1[1] = {e->n};
    st_add(w, "embeddings", ST_F32, 2, shape2, e->x);
    int64_t *ids = NULL;
    if (e->ids) st_add(w, "ids", ST_I64, 1, shape1, e->ids);
    else {
        ids = xmalloc(sizeof *ids * (size_t)(e->n ? e->n : 1));
        for (int i = 0; i < e->n; i++) ids[i] = i;
        st_add(w, "ids", ST_I64, 1, shape1, ids);
    }
    if (e->labels) st_add(w, "labels", ST_I64, 1, shape1, e->labels);
    if (e->scene) st_add(w, "scene", ST_I64, 1, shape1, e->scene);
    if (e->view) st_add(w, "view", ST_I64, 1, shape1, e->view);
    st_add_meta(w, "endoret.kind", "embeddings");
    if (e->model) st_add_meta(w, "model", e->model);
    if (e->manifest) st_add_meta(w, "manifest", e->manifest);
    if (e->distance) st_add_meta(w, "distance", e->distance);
    add_names_meta(w, "label_names", e->label_names, e->nlabel_names);
    add_names_meta(w, "scene_names", e->scene_names, e->nscene_names);
    add_names_meta(w, "view_names", e->view_names, e->nview_names);
    int rc = st_write(w, path);
    st_writer_free(w);
    free(ids);
    return rc;
}

static int read_optional_i64(st_file *f, const char *name, int n, int64_t **out) {
    const st_tensor *t = st_find(f, name);
    if (!t) return ER_OK;
    if (t->ndim != 1 || t->shape[0] != n)
        return er_fail(ER_INPUT, "%s: '%s' must have shape [%d] (one per embedding)", f->path, name, n);
    *out = xmalloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    return st_read_i64(f, name, *out, n);
}

int emb_load(const char *path, emb_set *e) {
    memset(e, 0, sizeof *e);
    st_file f;
    int rc = st_open(path, &f);
    if (rc) return rc;
    const st_tensor *t = st_find(&f, "embeddings");
    if (!t) rc = er_fail(ER_INPUT, "%s: no 'embeddings' tensor (not an endoret embedding file?)", path);
    else if (t->ndim != 2 || t->shape[0] > 0x7fffffff || t->shape[1] > 0x7fffffff || t->shape[1] < 1)
        rc = er_fail(ER_INPUT, "%s: 'embeddings' must be a 2-D [n, dim] tensor with dim >= 1", path);
    if (rc) { st_close(&f); return rc; }
    e->n = (int)t->shape[0];
    e->dim = (int)t->shape[1];
    e->x = xmalloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
    rc = st_read_f32(&f, "embeddings", e->x, t->numel);
    for (int64_t i = 0; rc == ER_OK && i < t->numel; i++)
        if (!isfinite(e->x[i])) rc = er_fail(ER_INPUT, "%s: embedding %lld has a non-finite value (NaN/Inf)", path, (long long)(i / e->dim));
    if (rc == ER_OK) rc = read_optional_i64(&f, "ids", e->n, &e->ids);
    if (rc == ER_OK && !e->ids) {
        e->ids = xmalloc(sizeof(int64_t) * (size_t)(e->n ? e->n : 1));
        for (int i = 0; i < e->n; i++) e->ids[i] = i;
    }
    if (rc == ER_OK) rc = read_optional_i64(&f, "labels", e->n, &e->labels);
    if (rc == ER_OK) rc = read_optional_i64(&f, "scene", e->n, &e->scene);
    if (rc == ER_OK) rc = read_optional_i64(&f, "view", e->n, &e->view);
    if (rc == ER_OK) {
        const char *m;
        if ((m = st_meta(&f, "model"))) e->model = xstrdup(m);
        if ((m = st_meta(&f, "manifest"))) e->manifest = xstrdup(m);
        if ((m = st_meta(&f, "distance"))) e->distance = xstrdup(m);
        read_names_meta(&f, "label_names", &e->label_names, &e->nlabel_names);
        read_names_meta(&f, "scene_names", &e->scene_names, &e->nscene_names);
        read_names_meta(&f, "view_names", &e->view_names, &e->nview_names);
        if (e->labels)
            for (int i = 0; i < e->n; i++)
                if (e->labels[i] < -1 || (e->nlabel_names && e->labels[i] >= e->nlabel_names)) {
                    rc = er_fail(ER_INPUT, "%s: label %lld of item %d is outside the %d label names", path,
                                 (long long)e->labels[i], i, e->nlabel_names);
                    break;
                }
    }
    st_close(&f);
    if (rc) emb_free(e);
    return rc;
}

int emb_load_arg(const char *path, const char *what, emb_set *e) {
    if (!path || !*path) return er_fail(ER_INPUT, "%s is required (an embedding .safetensors file)", what);
    int rc = emb_load(path, e);
    if (rc) return rc;
    if (e->n < 1) { emb_free(e); return er_fail(ER_INPUT, "%s: %s holds no embeddings", what, path); }
    return ER_OK;
}

int emb_view_id(const emb_set *e, const char *value, const char *what, int64_t *id) {
    for (int i = 0; i < e->nview_names; i++)
        if (!strcmp(e->view_names[i], value)) { *id = i; return ER_OK; }
    char *end;
    long long v = strtoll(value, &end, 10);
    if (!e->nview_names && *value && !*end && v >= 0) { *id = v; return ER_OK; }
    return er_fail(ER_INPUT, "%s: '%s' is not a view of the embedding file (%s)", what, value,
                   e->nview_names ? "its views are names" : "its views are integers >= 0");
}

const char *emb_view_name(const emb_set *e, int64_t v, char *buf, int size) {
    if (v >= 0 && v < e->nview_names) snprintf(buf, (size_t)size, "%s", e->view_names[v]);
    else snprintf(buf, (size_t)size, "%lld", (long long)v);
    return buf;
}

static char **names_copy(char **names, int n) {
    char **c = n ? xmalloc(sizeof(char *) * (size_t)n) : NULL;
    for (int i = 0; i < n; i++) c[i] = xstrdup(names[i]);
    return c;
}

void emb_fill_from_manifest(emb_set *e, const manifest *m, const int *rows, int all_columns) {
    int *lab, nlab, nsc, nvw;
    char **lnames, **snames, **vnames;
    int64_t *sc, *vw;
    manifest_label_ids(m, &lab, &lnames, &nlab);
    manifest_field_values(m, MF_SCENE, &sc, &snames, &nsc);
    manifest_field_values(m, MF_VIEW, &vw, &vnames, &nvw);
    int has_lab = all_columns || nlab, has_sc = all_columns, has_vw = all_columns;
    for (int i = 0; i < m->n; i++) has_sc |= sc[i] >= 0, has_vw |= vw[i] >= 0;
    if (has_lab) e->labels = xmalloc(sizeof(int64_t) * (size_t)(e->n ? e->n : 1));
    if (has_sc) e->scene = xmalloc(sizeof(int64_t) * (size_t)(e->n ? e->n : 1));
    if (has_vw) e->view = xmalloc(sizeof(int64_t) * (size_t)(e->n ? e->n : 1));
    for (int k = 0; k < e->n; k++) {
        int r = rows ? rows[k] : k;
        e->ids[k] = r;
        if (has_lab) e->labels[k] = lab[r];
        if (has_sc) e->scene[k] = sc[r];
        if (has_vw) e->view[k] = vw[r];
    }
    e->label_names = names_copy(lnames, nlab), e->nlabel_names = nlab;
    e->scene_names = names_copy(snames, nsc), e->nscene_names = nsc;
    e->view_names = names_copy(vnames, nvw), e->nview_names = nvw;
    manifest_free_labels(lab, lnames, nlab);
    manifest_free_labels(NULL, snames, nsc);
    manifest_free_labels(NULL, vnames, nvw);
    free(sc);
    free(vw);
}

int emb_view_list(const emb_set *e, const char *list, const char *what, int64_t **v, int *n) {
    *v = NULL;
    *n = 0;
    if (!list) return ER_OK;
    char *copy = xstrdup(list), *save = NULL;
    int rc = ER_OK;
    *v = xmalloc(sizeof **v * (strlen(list) + 1));
    for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) rc = emb_view_id(e, t, what, &(*v)[(*n)++]);
    if (!rc && !*n) rc = er_fail(ER_INPUT, "%s: no view given", what);
    free(copy);
    if (rc) { free(*v); *v = NULL; *n = 0; }
    return rc;
}
