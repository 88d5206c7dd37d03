/* importers.c — dataset layout importers (see importers.h). */
#include "datasets/importers.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "nn/base/base.h"

typedef struct {
    char **v;
    int n, cap;
} strlist;

static void sl_push(strlist *l, const char *s) {
    if (l->n == l->cap) l->v = xrealloc(l->v, sizeof(char *) * (l->cap = l->cap ? 2 * l->cap : 16));
    l->v[l->n++] = xstrdup(s);
}
static void sl_free(strlist *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_image_name(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}
static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Sorted entries of a folder (no dot files): dirs or image files. */
static int list_dir(const char *dir, int want_dirs, strlist *out) {
    DIR *d = opendir(dir);
    if (!d) return er_fail(ER_INPUT, "%s: cannot open folder", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = path_join(dir, e->d_name);
        int isd = is_dir(p);
        if (want_dirs ? isd : (!isd && is_image_name(e->d_name))) sl_push(out, e->d_name);
        free(p);
    }
    closedir(d);
    if (out->n > 1) qsort(out->v, out->n, sizeof(char *), cmp_str);
    return ER_OK;
}

/* Image files under dir, recursively, as paths relative to dir, sorted. */
static int list_images_rec(const char *dir, const char *prefix, strlist *out) {
    strlist files = {0}, dirs = {0};
    int rc = list_dir(dir, 0, &files);
    if (!rc) rc = list_dir(dir, 1, &dirs);
    for (int i = 0; !rc && i < files.n; i++) {
        char *p = prefix[0] ? path_join(prefix, files.v[i]) : xstrdup(files.v[i]);
        sl_push(out, p);
        free(p);
    }
    for (int i = 0; !rc && i < dirs.n; i++) {
        char *sub = path_join(dir, dirs.v[i]);
        char *pre = prefix[0] ? path_join(prefix, dirs.v[i]) : xstrdup(dirs.v[i]);
        rc = list_images_rec(sub, pre, out);
        free(sub), free(pre);
    }
    sl_free(&files), sl_free(&dirs);
    return rc;
}

/* Path of `target` relative to folder `from` (both resolved with realpath): "../" once per
 * component of `from` past the common prefix, then the rest of `target`. Caller frees. */
static char *relative_path(const char *from, const char *target) {
    char a[PATH_MAX], b[PATH_MAX];
    if (!realpath(from, a) || !realpath(target, b)) return xstrdup(target);
    size_t la = strlen(a), common = 0; /* length of the shared folder prefix in a (and b) */
    for (size_t i = 0;; i++) {
        int end_a = i == la || a[i] == '/', end_b = b[i] == 0 || b[i] == '/';
        if (end_a && end_b) common = i;
        if (i == la || !b[i] || a[i] != b[i]) break;
    }
    size_t ups = 0;
    for (size_t i = common; i < la; i++)
        if (a[i] == '/' || i == common) ups += i == common ? (common < la) : 1;
    const char *rest = b + common + (b[common] == '/');
    char *out = xmalloc(3 * ups + strlen(rest) + 2);
    out[0] = 0;
    for (size_t u = 0; u < ups; u++) strcat(out, "../");
    strcat(out, rest);
    return out;
}

static char *out_dir_of(const char *out_path) {
    char *d = path_dirname(out_path);
    make_dirs(d);
    return d;
}

static void add_row(manifest *m, const char *outdir, const char *img, const char *mask, const char *label,
                    const char *scene, const char *view) {
    char *ri = relative_path(outdir, img), *rm = mask ? relative_path(outdir, mask) : NULL;
    manifest_row row = {ri, (char *)label, rm, (char *)scene, (char *)view, NULL, NULL};
    manifest_add(m, &row);
    free(ri), free(rm);
}

int import_class_folders(const char *src, const char *out_path, manifest *m) {
    char *outdir = out_dir_of(out_path);
    manifest_init(m, outdir);
    strlist classes = {0};
    int rc = list_dir(src, 1, &classes);
    if (!rc && !classes.n) rc = er_fail(ER_INPUT, "%s: no class sub-folders found", src);
    for (int c = 0; !rc && c < classes.n; c++) {
        char *cdir = path_join(src, classes.v[c]);
        strlist files = {0};
        rc = list_images_rec(cdir, "", &files);
        for (int i = 0; !rc && i < files.n; i++) {
            char *p = path_join(cdir, files.v[i]);
            add_row(m, outdir, p, NULL, classes.v[c], NULL, NULL);
            free(p);
        }
        sl_free(&files);
        free(cdir);
    }
    if (!rc && !m->n) rc = er_fail(ER_INPUT, "%s: no images (.png/.jpg/.jpeg) in the class folders", src);
    sl_free(&classes);
    free(outdir);
    return rc;
}

static char *stem(const char *name) {
    char *s = xstrdup(name), *dot = strrchr(s, '.');
    if (dot) *dot = 0;
    return s;
}

int import_image_mask(const char *src, const char *out_path, const char *label, manifest *m) {
    char *outdir = out_dir_of(out_path);
    manifest_init(m, outdir);
    char *idir = path_join(src, "images"), *mdir = path_join(src, "masks");
    strlist imgs = {0}, masks = {0};
    int rc = is_dir(idir) && is_dir(mdir) ? ER_OK
                                          : er_fail(ER_INPUT, "%s: expected images/ and masks/ sub-folders", src);
    if (!rc) rc = list_dir(idir, 0, &imgs);
    if (!rc) rc = list_dir(mdir, 0, &masks);
    char **mstems = xmalloc(sizeof(char *) * (masks.n + 1));
    for (int j = 0; j < masks.n; j++) mstems[j] = stem(masks.v[j]);
    for (int i = 0; !rc && i < imgs.n; i++) {
        char *st = stem(imgs.v[i]);
        int found = -1;
        for (int j = 0; j < masks.n && found < 0; j++)
            if (!strcmp(st, mstems[j])) found = j;
        if (found < 0) {
            rc = er_fail(ER_INPUT, "%s/%s: no mask with the same name in %s", idir, imgs.v[i], mdir);
        } else {
            char *ip = path_join(idir, imgs.v[i]), *mp = path_join(mdir, masks.v[found]);
            add_row(m, outdir, ip, mp, label, NULL, NULL);
            free(ip), free(mp);
        }
        free(st);
    }
    if (!rc && !m->n) rc = er_fail(ER_INPUT, "%s: no images in images/", src);
    for (int j = 0; j < masks.n; j++) free(mstems[j]);
    free(mstems);
    sl_free(&imgs), sl_free(&masks);
    free(idir), free(mdir), free(outdir);
    return rc;
}

/* One scene folder: its images are the views, numbered 0.. in name order. */
static int add_scene(manifest *m, const char *outdir, const char *sdir, const char *scene, const char *label) {
    strlist files = {0};
    int rc = list_dir(sdir, 0, &files);
    char view[16];
    for (int i = 0; !rc && i < files.n; i++) {
        char *p = path_join(sdir, files.v[i]);
        snprintf(view, sizeof view, "%d", i);
        add_row(m, outdir, p, NULL, label, scene, view);
        free(p);
    }
    sl_free(&files);
    return rc;
}

/* a folder of segmentation masks is never a scene: its "views" would be masks */
static int is_mask_folder(const char *name) {
    static const char *const MASK_NAMES[] = {"mask", "masks", "label", "labels", "annotations", "segmentations", "groundtruth", "gt"};
    for (size_t i = 0; i < sizeof MASK_NAMES / sizeof *MASK_NAMES; i++)
        if (!strcasecmp(name, MASK_NAMES[i])) return 1;
    return 0;
}

int import_scenes(const char *src, const char *out_path, manifest *m) {
    char *outdir = out_dir_of(out_path);
    manifest_init(m, outdir);
    strlist top = {0};
    int rc = list_dir(src, 1, &top);
    if (!rc && !top.n) rc = er_fail(ER_INPUT, "%s: no scene sub-folders found", src);
    for (int i = 0; !rc && i < top.n; i++)
        if (is_mask_folder(top.v[i]))
            rc = er_fail(ER_INPUT, "%s: sub-folder '%s' holds masks, not a scene's views (images/ + masks/ is "
                         "--layout image-mask; --layout scenes wants one folder of views per scene)", src, top.v[i]);
    for (int i = 0; !rc && i < top.n; i++) {
        char *d = path_join(src, top.v[i]);
        strlist sub = {0};
        rc = list_dir(d, 1, &sub);
        if (!rc && sub.n) { /* SRC/<class>/<scene>/ */
            for (int j = 0; !rc && j < sub.n; j++) {
                char *sd = path_join(d, sub.v[j]);
                char *scene = path_join(top.v[i], sub.v[j]); /* unique across classes */
                rc = add_scene(m, outdir, sd, scene, top.v[i]);
                free(sd), free(scene);
            }
        } else if (!rc) {
            rc = add_scene(m, outdir, d, top.v[i], NULL);
        }
        sl_free(&sub);
        free(d);
    }
    if (!rc && !m->n) rc = er_fail(ER_INPUT, "%s: no images found in the scene folders", src);
    sl_free(&top);
    free(outdir);
    return rc;
}
