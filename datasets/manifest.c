/* manifest.c — CSV manifest reader/writer (RFC 4180 quoting); see manifest.h. */
#include "datasets/manifest.h"
#include "datasets/view_list.h"
#include "datasets/csv.h"
#include "nn/base/paths.h"
#include "nn/base/base.h"

#include <stdlib.h>
#include <string.h>

static const char *const COLUMNS[7] = {"path", "label", "mask", "scene", "view", "patient", "split"};

static char **row_field(manifest_row *r, int col) {
    char **f[7] = {&r->path, &r->label, &r->mask, &r->scene, &r->view, &r->patient, &r->split};
    return f[col];
}

void manifest_init(manifest *m, const char *dir) {
    memset(m, 0, sizeof *m);
    m->dir = xstrdup(dir ? dir : ".");
}

static char *dup_or_null(const char *s) { return s && *s ? xstrdup(s) : NULL; }

void manifest_add(manifest *m, const manifest_row *row) {
    if (m->n == m->cap) m->rows = xrealloc(m->rows, sizeof *m->rows * (size_t)(m->cap = m->cap ? 2 * m->cap : 64));
    manifest_row *r = &m->rows[m->n++];
    memset(r, 0, sizeof *r);
    for (int c = 0; c < 7; c++) *row_field(r, c) = dup_or_null(*row_field((manifest_row *)row, c));
}

void manifest_free(manifest *m) {
    for (int i = 0; i < m->n; i++)
        for (int c = 0; c < 7; c++) free(*row_field(&m->rows[i], c));
    free(m->rows);
    free(m->file);
    free(m->dir);
    memset(m, 0, sizeof *m);
}

int manifest_load(const char *path, manifest *m) {
    char *text;
    size_t len;
    int rc = read_file(path, &text, &len);
    if (rc) return rc;
    char *dir = path_dirname(path);
    manifest_init(m, dir);
    free(dir);
    m->file = xstrdup(path);
    csv_reader r;
    csv_open(&r, text, len, path);
    int nf = csv_next(&r);
    int colmap[64];
    if (nf < 0) rc = ER_INPUT;
    else if (nf == 0) rc = er_fail(ER_INPUT, "%s: empty file (a manifest needs a header line with a 'path' column)", path);
    else if (nf > 64) rc = er_fail(ER_INPUT, "%s: line 1: %d columns in the header (at most 64)", path, nf);
    int field_of[7];
    if (rc == ER_OK) rc = csv_header(&r, nf, COLUMNS, NULL, 7, 7, field_of); /* unknown columns refused */
    for (int i = 0; rc == ER_OK && i < nf; i++) colmap[i] = -1;
    for (int c = 0; rc == ER_OK && c < 7; c++)
        if (field_of[c] >= 0) colmap[field_of[c]] = c;
    if (rc == ER_OK && field_of[0] < 0)
        rc = er_fail(ER_INPUT, "%s: line 1: header has no 'path' column (expected path,label,mask,scene,view,patient,split)", path);
    int ncols = nf;
    while (rc == ER_OK) {
        int k = csv_next(&r);
        if (k < 0) { rc = ER_INPUT; break; }
        if (k == 0) break;
        if (k == 1 && r.fields[0][0] == 0) continue; /* blank line */
        if (k != ncols) {
            rc = er_fail(ER_INPUT, "%s: line %d: %d columns, the header has %d", path, r.line, k, ncols);
            break;
        }
        manifest_row row = {0};
        for (int i = 0; i < k; i++)
            if (colmap[i] >= 0) *row_field(&row, colmap[i]) = r.fields[i];
        if (!row.path || !row.path[0]) {
            int col = 0;
            for (int i = 0; i < k; i++) if (colmap[i] == 0) col = i + 1;
            rc = er_fail(ER_INPUT, "%s: line %d, column %d (path): empty path", path, r.line, col);
            break;
        }
        manifest_add(m, &row);
    }
    csv_close(&r);
    free(text);
    if (rc) manifest_free(m);
    return rc;
}

static void put_field(FILE *f, const char *s) {
    if (!s) return;
    if (!strpbrk(s, ",\"\n\r")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int manifest_save(const char *path, const manifest *m) {
    atomic_file af;
    int rc = atomic_open(&af, path);
    if (rc) return rc;
    fputs("path,label,mask,scene,view,patient,split\n", af.f);
    for (int i = 0; i < m->n; i++) {
        for (int c = 0; c < 7; c++) {
            if (c) fputc(',', af.f);
            put_field(af.f, *row_field(&m->rows[i], c));
        }
        fputc('\n', af.f);
    }
    return atomic_commit(&af);
}

/* resolved against the manifest's folder and normalised ("out/kv/../../../x" -> "../x", paths.h) */
char *manifest_image_path(const manifest *m, int i) { return path_join_clean(m->dir, m->rows[i].path); }

char *manifest_mask_path(const manifest *m, int i) {
    return m->rows[i].mask ? path_join_clean(m->dir, m->rows[i].mask) : NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void manifest_field_ids(const manifest *m, manifest_field field, int **ids, char ***names, int *n) {
    static const int col_of[] = {[MF_LABEL] = 1, [MF_SCENE] = 3, [MF_VIEW] = 4, [MF_PATIENT] = 5, [MF_SPLIT] = 6};
    int col = col_of[field];
    char **all = xmalloc(sizeof(char *) * (size_t)(m->n ? m->n : 1));
    int cnt = 0;
    for (int i = 0; i < m->n; i++) {
        char *v = *row_field(&m->rows[i], col);
        if (v) all[cnt++] = v;
    }
    qsort(all, (size_t)cnt, sizeof(char *), cmp_str);
    int u = 0;
    for (int i = 0; i < cnt; i++)
        if (!u || strcmp(all[u - 1], all[i])) all[u++] = all[i];
    char **out = xmalloc(sizeof(char *) * (size_t)(u ? u : 1));
    for (int i = 0; i < u; i++) out[i] = xstrdup(all[i]);
    int *id = xmalloc(sizeof(int) * (size_t)(m->n ? m->n : 1));
    for (int i = 0; i < m->n; i++) {
        char *v = *row_field(&m->rows[i], col);
        id[i] = -1;
        if (!v) continue;
        char **hit = bsearch(&v, out, (size_t)u, sizeof(char *), cmp_str);
        id[i] = (int)(hit - out);
    }
    free(all);
    *ids = id;
    *names = out;
    *n = u;
}

char *manifest_image_list(const manifest *m, int i) {
    char *p = manifest_image_path(m, i);
    char *list = view_list_join(&p, 1);
    free(p);
    return list;
}

/* each scene's path_of(row) in row order, joined as a view list; a scene where path_of gives NULL for
 * some row gets NULL (a mask list is all or nothing: a view list cannot hold an empty entry) */
static void scene_lists(const manifest *m, char *(*path_of)(const manifest *, int), int **scene_of, char ***joined, int *n) {
    char **names;
    manifest_field_ids(m, MF_SCENE, scene_of, &names, n);
    int *count = xcalloc((size_t)(*n ? *n : 1), sizeof(int)), *at = xcalloc((size_t)(*n ? *n : 1), sizeof(int));
    for (int r = 0; r < m->n; r++)
        if ((*scene_of)[r] >= 0) count[(*scene_of)[r]]++;
    /* each scene's paths in row order, one flat array; a view list escapes a ';' inside a path */
    char **paths = xmalloc(sizeof(char *) * (size_t)(m->n ? m->n : 1));
    for (int k = 1; k < *n; k++) at[k] = at[k - 1] + count[k - 1];
    for (int r = 0; r < m->n; r++)
        if ((*scene_of)[r] >= 0) paths[at[(*scene_of)[r]]++] = path_of(m, r);
    for (int k = 0, base = 0; k < *n; base += count[k], k++) {
        free(names[k]);
        int all = 1;
        for (int i = 0; i < count[k]; i++) all &= paths[base + i] != NULL;
        names[k] = all ? view_list_join(paths + base, count[k]) : NULL;
    }
    int total = 0;
    for (int k = 0; k < *n; k++) total += count[k];
    for (int i = 0; i < total; i++) free(paths[i]);
    free(paths);
    free(count);
    free(at);
    *joined = names;
}

void manifest_scene_paths(const manifest *m, int **scene_of, char ***joined, int *n) {
    scene_lists(m, manifest_image_path, scene_of, joined, n);
}

void manifest_scene_masks(const manifest *m, int **scene_of, char ***joined, int *n) {
    scene_lists(m, manifest_mask_path, scene_of, joined, n);
}

char *manifest_mask_list(const manifest *m, int i) {
    char *p = manifest_mask_path(m, i);
    char *list = p ? view_list_join(&p, 1) : NULL;
    free(p);
    return list;
}

static int parse_id(const char *v, int64_t *out) {
    if (!*v || strlen(v) > 18) return 0; /* 18 digits always fit an int64 */
    int64_t x = 0;
    for (const char *c = v; *c; c++) {
        if (*c < '0' || *c > '9') return 0;
        x = x * 10 + (*c - '0');
    }
    *out = x;
    return 1;
}

void manifest_field_values(const manifest *m, manifest_field field, int64_t **vals, char ***names, int *n) {
    int *ids;
    manifest_field_ids(m, field, &ids, names, n);
    int64_t *v = xmalloc(sizeof *v * (size_t)(m->n ? m->n : 1));
    int all_int = 1;
    for (int i = 0; i < *n && all_int; i++) all_int = parse_id((*names)[i], &v[0]);
    for (int i = 0; i < m->n; i++) {
        v[i] = ids[i];
        if (all_int && ids[i] >= 0) parse_id((*names)[ids[i]], &v[i]);
    }
    free(ids);
    if (all_int) {
        manifest_free_labels(NULL, *names, *n);
        *names = NULL;
        *n = 0;
    }
    *vals = v;
}

void manifest_label_ids(const manifest *m, int **ids, char ***names, int *nlabels) {
    manifest_field_ids(m, MF_LABEL, ids, names, nlabels);
}

void manifest_free_labels(int *ids, char **names, int nlabels) {
    free(ids);
    for (int i = 0; i < nlabels; i++) free(names[i]);
    free(names);
}

int manifest_class_ids(const char *path, const char *split, const char *column, const char *key, int **out, int *n, int *nclass) {
    manifest m;
    int rc = manifest_load(path, &m);
    if (rc) return rc;
    int *ids = NULL, k = 0, nl = 0;
    char **names = NULL;
    int scene = !strcmp(column, "scene");
    if (scene) manifest_field_ids(&m, MF_SCENE, &ids, &names, &nl);
    else manifest_label_ids(&m, &ids, &names, &nl);
    *out = xmalloc(sizeof(int) * (size_t)(m.n ? m.n : 1));
    for (int i = 0; i < m.n && !rc; i++) {
        if (split && split[0] && !(m.rows[i].split && !strcmp(m.rows[i].split, split))) continue;
        if (ids[i] < 0) rc = er_fail(ER_INPUT, "%s: row %d (%s) has no %s (%s = %s)", path, i + 2, m.rows[i].path,
                                     column, key, column);
        (*out)[k++] = ids[i];
    }
    *n = k;
    *nclass = nl;
    manifest_free_labels(ids, names, nl);
    manifest_free(&m);
    if (rc) { free(*out); *out = NULL; }
    return rc;
}
