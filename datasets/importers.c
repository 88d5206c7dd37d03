/* importers.c — dataset layout importers (see importers.h). */
#include "datasets/importers.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "datasets/csv.h"
#include "datasets/image.h"
#include "nn/base/paths.h"
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
        if (want_dirs ? isd : (!isd && image_name_ok(e->d_name))) sl_push(out, e->d_name);
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

static char *out_dir_of(const char *out_path) {
    char *d = path_dirname(out_path);
    make_dirs(d);
    return d;
}

static void add_row_full(manifest *m, const char *outdir, const char *img, const char *mask, const char *label,
                         const char *scene, const char *view, const char *patient, const char *split) {
    char *ri = path_relative(outdir, img), *rm = mask ? path_relative(outdir, mask) : NULL;
    manifest_row row = {ri, (char *)label, rm, (char *)scene, (char *)view, (char *)patient, (char *)split};
    manifest_add(m, &row);
    free(ri), free(rm);
}
static void add_row(manifest *m, const char *outdir, const char *img, const char *mask, const char *label,
                    const char *scene, const char *view) {
    add_row_full(m, outdir, img, mask, label, scene, view, NULL, NULL);
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

/* ---------------------------------------------------------------- sequences */

int natural_cmp(const char *a, const char *b) {
    const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;
    int zeros = 0; /* first difference in leading zeros of equal numbers: fewer first */
    while (*p && *q) {
        if (isdigit(*p) && isdigit(*q)) {
            const unsigned char *p0 = p, *q0 = q;
            while (*p == '0') p++;
            while (*q == '0') q++;
            const unsigned char *ps = p, *qs = q;
            while (isdigit(*p)) p++;
            while (isdigit(*q)) q++;
            size_t lp = (size_t)(p - ps), lq = (size_t)(q - qs);
            if (lp != lq) return lp < lq ? -1 : 1;
            int c = memcmp(ps, qs, lp);
            if (c) return c < 0 ? -1 : 1;
            if (!zeros && ps - p0 != qs - q0) zeros = ps - p0 < qs - q0 ? -1 : 1;
        } else {
            if (*p != *q) return *p < *q ? -1 : 1;
            p++, q++;
        }
    }
    if (*p || *q) return *p ? 1 : -1;
    return zeros ? zeros : strcmp(a, b);
}
static int cmp_nat(const void *a, const void *b) { return natural_cmp(*(char *const *)a, *(char *const *)b); }

int seq_pick_views(int n, int V, int gap, int *idx) {
    if (n < 1 || V < 1 || gap < 1 || (int64_t)(V - 1) * gap + 1 > n) return 0;
    int ok = 1;
    for (int k = 0; k < V; k++) { /* the centres of V equal parts */
        idx[k] = (int)((int64_t)(2 * k + 1) * n / (2 * V));
        if (k && idx[k] - idx[k - 1] < gap) ok = 0;
    }
    if (!ok) /* too close: spread over the whole sequence, first to last frame */
        for (int k = 0; k < V; k++) idx[k] = (int)((int64_t)k * (n - 1) / (V - 1));
    return 1;
}

seq_import_opts seq_import_defaults(void) { return (seq_import_opts){.views = 4, .min_gap = 1}; }

void seq_import_stats_free(seq_import_stats *st) {
    for (int i = 0; i < st->nskipped; i++) free(st->skipped[i]);
    free(st->skipped);
    free(st->skipped_frames);
    memset(st, 0, sizeof *st);
}

typedef struct {
    char *name, *label, *patient, *split; /* owned; NULL = none */
    int line;                             /* map line that named it first (0: a folder) */
    strlist frames;                       /* full paths */
} sequence;

typedef struct {
    sequence *v;
    int n, cap, last;
} seqset;

static char *dup_nonempty(const char *s) { return s && *s ? xstrdup(s) : NULL; }

static sequence *seq_get(seqset *S, const char *name, int line, int *created) {
    *created = 0;
    if (S->last < S->n && !strcmp(S->v[S->last].name, name)) return &S->v[S->last];
    for (int i = 0; i < S->n; i++)
        if (!strcmp(S->v[i].name, name)) return &S->v[S->last = i];
    if (S->n == S->cap) S->v = xrealloc(S->v, sizeof *S->v * (size_t)(S->cap = S->cap ? 2 * S->cap : 64));
    sequence *q = &S->v[S->last = S->n++];
    memset(q, 0, sizeof *q);
    q->name = xstrdup(name);
    q->line = line;
    *created = 1;
    return q;
}

static void seqset_free(seqset *S) {
    for (int i = 0; i < S->n; i++) {
        sequence *q = &S->v[i];
        free(q->name), free(q->label), free(q->patient), free(q->split);
        sl_free(&q->frames);
    }
    free(S->v);
    memset(S, 0, sizeof *S);
}

/* a folder of masks is never a sequence (also masks_seq1, Masks, ... as PolypGen names them) */
static int is_mask_like(const char *name) { return is_mask_folder(name) || !strncasecmp(name, "mask", 4); }

static int refuse_mask_folders(const char *dir, const strlist *dirs) {
    for (int i = 0; i < dirs->n; i++)
        if (is_mask_like(dirs->v[i]))
            return er_fail(ER_INPUT, "%s: sub-folder '%s' holds masks, not a sequence's frames (images/ + masks/ is "
                           "--layout image-mask; --layout sequences wants one folder of frames per sequence, or a "
                           "flat frames folder with --map)", dir, dirs->v[i]);
    return ER_OK;
}

/* One sequence folder: its frames (no sub-folders, at least one frame). */
static int seq_folder(seqset *S, const char *dir, const char *name, const char *label) {
    strlist files = {0}, dirs = {0};
    int rc = list_dir(dir, 0, &files);
    if (!rc) rc = list_dir(dir, 1, &dirs);
    if (!rc && dirs.n)
        rc = er_fail(ER_INPUT, "%s: sequence folder with sub-folders ('%s'): expected SRC/<sequence>/<frames> or "
                     "SRC/<class>/<sequence>/<frames>", dir, dirs.v[0]);
    if (!rc && !files.n) rc = er_fail(ER_INPUT, "%s: empty sequence (no .png/.jpg/.jpeg frames)", dir);
    if (!rc) {
        int created;
        sequence *q = seq_get(S, name, 0, &created);
        if (!created) rc = er_fail(ER_INPUT, "%s: sequence '%s' found twice", dir, name);
        else {
            q->label = dup_nonempty(label);
            for (int i = 0; i < files.n; i++) {
                char *p = path_join(dir, files.v[i]);
                sl_push(&q->frames, p);
                free(p);
            }
        }
    }
    sl_free(&files), sl_free(&dirs);
    return rc;
}

static int seq_from_folders(const char *src, const seq_import_opts *o, seqset *S) {
    if (!is_dir(src)) return er_fail(ER_INPUT, "%s: no such folder", src);
    strlist top = {0}, files = {0};
    int rc = list_dir(src, 1, &top);
    if (!rc) rc = list_dir(src, 0, &files);
    if (!rc && files.n && !top.n)
        rc = er_fail(ER_INPUT, "%s: %d frames but no sequence folders (a flat frames folder needs --map FILE saying "
                     "which sequence each frame belongs to)", src, files.n);
    else if (!rc && files.n)
        rc = er_fail(ER_INPUT, "%s: frames ('%s') beside sequence folders: every frame belongs in its sequence's folder",
                     src, files.v[0]);
    else if (!rc && !top.n) rc = er_fail(ER_INPUT, "%s: no sequence sub-folders found", src);
    if (!rc) rc = refuse_mask_folders(src, &top);
    for (int i = 0; !rc && i < top.n; i++) {
        char *d = path_join(src, top.v[i]);
        strlist sub = {0}, own = {0};
        rc = list_dir(d, 1, &sub);
        if (!rc) rc = list_dir(d, 0, &own);
        if (!rc && sub.n && own.n)
            rc = er_fail(ER_INPUT, "%s: both frames ('%s') and sub-folders ('%s'): a sequence folder holds frames, a "
                         "class folder holds sequence folders", d, own.v[0], sub.v[0]);
        if (!rc && sub.n) { /* SRC/<class>/<sequence>/ */
            rc = refuse_mask_folders(d, &sub);
            for (int j = 0; !rc && j < sub.n; j++) {
                char *sd = path_join(d, sub.v[j]), *name = path_join(top.v[i], sub.v[j]);
                rc = seq_folder(S, sd, name, top.v[i]);
                free(sd), free(name);
            }
        } else if (!rc) {
            rc = seq_folder(S, d, top.v[i], o->label);
        }
        sl_free(&sub), sl_free(&own);
        free(d);
    }
    sl_free(&top), sl_free(&files);
    return rc;
}

enum { MC_FRAME, MC_SEQ, MC_START, MC_END, MC_LABEL, MC_PATIENT, MC_SPLIT,
       MC_IGN0, MC_IGN1, MC_IGN2, MC_IGN3, MC_IGN4, MC_IGN5, /* read and ignored (each its own id: a repeat is refused) */
       MC_N };

/* label / patient / split of a sequence must be the same on all its lines */
static int seq_attr(const char *map, int line, sequence *q, int created, char **slot, const char *what, const char *v) {
    if (created) {
        *slot = dup_nonempty(v);
        return ER_OK;
    }
    const char *old = *slot ? *slot : "", *now = v ? v : "";
    if (strcmp(old, now))
        return er_fail(ER_INPUT, "%s: line %d: sequence '%s' has %s '%s' here but '%s' at line %d", map, line, q->name,
                       what, now, old, q->line);
    return ER_OK;
}

/* The frame number of a file name: its last run of digits (-1 when it has none or too many). */
static int64_t frame_number(const char *name) {
    const char *end = strrchr(name, '.');
    if (!end) end = name + strlen(name);
    const char *e = end;
    while (e > name && !isdigit((unsigned char)e[-1])) e--;
    const char *b = e;
    while (b > name && isdigit((unsigned char)b[-1])) b--;
    if (b == e) return -1;
    while (b < e - 1 && *b == '0') b++;
    if (e - b > 18) return -1;
    int64_t x = 0;
    for (; b < e; b++) x = x * 10 + (*b - '0');
    return x;
}

/* A range end: a file name of the (naturally sorted) listing, or a frame number. */
static int range_end(const char *map, int line, const char *src, const strlist *names, const int64_t *nums,
                     const char *what, const char *v, int *pos) {
    if (!*v) return er_fail(ER_INPUT, "%s: line %d: empty %s", map, line, what);
    char **hit = bsearch(&v, names->v, (size_t)names->n, sizeof(char *), cmp_nat);
    if (hit) {
        *pos = (int)(hit - names->v);
        return ER_OK;
    }
    int digits = strlen(v) <= 18;
    for (const char *c = v; *c && digits; c++) digits = isdigit((unsigned char)*c) != 0;
    if (!digits)
        return er_fail(ER_INPUT, "%s: line %d: %s '%s': no frame of that name in %s (give a file name or a frame "
                       "number)", map, line, what, v, src);
    int64_t x = 0;
    for (const char *c = v; *c; c++) x = x * 10 + (*c - '0');
    int found = -1;
    for (int i = 0; i < names->n; i++)
        if (nums[i] == x) {
            if (found >= 0)
                return er_fail(ER_INPUT, "%s: line %d: %s %s is ambiguous: both '%s' and '%s' in %s have that number "
                               "(give the file name)", map, line, what, v, names->v[found], names->v[i], src);
            found = i;
        }
    if (found < 0) return er_fail(ER_INPUT, "%s: line %d: %s %s: no frame numbered %s in %s", map, line, what, v, v, src);
    *pos = found;
    return ER_OK;
}

typedef struct {
    const char *frame;
    int line;
} frame_ref;
static int cmp_frame_ref(const void *a, const void *b) {
    const frame_ref *x = a, *y = b;
    int c = strcmp(x->frame, y->frame);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int seq_from_map(const char *src, const seq_import_opts *o, seqset *S, int *unmapped) {
    const char *map = o->map;
    if (!is_dir(src)) return er_fail(ER_INPUT, "%s: no such folder (the frames folder that --map %s refers to)", src, map);
    char *text;
    size_t len;
    int rc = read_file(map, &text, &len);
    if (rc) return rc;
    csv_reader r;
    csv_open(&r, text, len, map);
    int col[MC_N], ncols = csv_next(&r);
    for (int c = 0; c < MC_N; c++) col[c] = -1;
    if (ncols < 0) rc = ER_INPUT;
    else if (ncols == 0)
        rc = er_fail(ER_INPUT, "%s: empty file (expected a header: frame,sequence[,label,patient,split] or "
                     "sequence,start,end[,label,patient,split])", map);
    if (!rc) { /* the manifest's header rule; `pathology` is another name of `label` */
        /* file / sequence_id and the informational columns: CVC-ColonDB's labels.csv as it ships (importers.h) */
        static const char *const names[] = {"frame", "sequence", "start", "end", "label", "patient", "split", "pathology",
                                            "file", "sequence_id", "mask", "frame_number", "frame_index_in_sequence",
                                            "sequence_length", "width", "height"};
        static const int ids[] = {MC_FRAME, MC_SEQ, MC_START, MC_END, MC_LABEL, MC_PATIENT, MC_SPLIT, MC_LABEL,
                                  MC_FRAME, MC_SEQ, MC_IGN0, MC_IGN1, MC_IGN2, MC_IGN3, MC_IGN4, MC_IGN5};
        rc = csv_header(&r, ncols, names, ids, (int)(sizeof ids / sizeof *ids), MC_N, col);
    }
    int ranges = col[MC_START] >= 0 || col[MC_END] >= 0;
    if (!rc && col[MC_SEQ] < 0) rc = er_fail(ER_INPUT, "%s: line 1: no 'sequence' column", map);
    else if (!rc && col[MC_FRAME] >= 0 && ranges)
        rc = er_fail(ER_INPUT, "%s: line 1: both 'frame' and 'start'/'end' columns: give one frame per line "
                     "(frame,sequence,...) or runs of frames (sequence,start,end,...)", map);
    else if (!rc && col[MC_FRAME] < 0 && !(col[MC_START] >= 0 && col[MC_END] >= 0))
        rc = er_fail(ER_INPUT, "%s: line 1: needs a 'frame' column (frame,sequence,...) or both 'start' and 'end' "
                     "(sequence,start,end,...)", map);
    /* ranges: the frames of SRC in natural order, their numbers, the line that took each */
    strlist names = {0};
    int64_t *nums = NULL;
    int *owner = NULL;
    frame_ref *refs = NULL;
    int nrefs = 0, crefs = 0, nlines = 0;
    if (!rc && ranges) {
        rc = list_dir(src, 0, &names);
        if (names.n > 1) qsort(names.v, names.n, sizeof(char *), cmp_nat);
        nums = xmalloc(sizeof *nums * (size_t)(names.n + 1));
        owner = xcalloc((size_t)names.n + 1, sizeof *owner);
        for (int i = 0; i < names.n; i++) nums[i] = frame_number(names.v[i]);
        if (!rc && !names.n) rc = er_fail(ER_INPUT, "%s: no frames (.png/.jpg/.jpeg) in this folder", src);
    }
    while (!rc) {
        int k = csv_next(&r);
        if (k < 0) { rc = ER_INPUT; break; }
        if (k == 0) break;
        if (k == 1 && !r.fields[0][0]) continue; /* blank line */
        if (k != ncols) { rc = er_fail(ER_INPUT, "%s: line %d: %d columns, the header has %d", map, r.line, k, ncols); break; }
        nlines++;
        const char *f[MC_N];
        for (int c = 0; c < MC_N; c++) f[c] = col[c] >= 0 ? r.fields[col[c]] : NULL;
        if (!f[MC_SEQ][0]) { rc = er_fail(ER_INPUT, "%s: line %d: empty sequence", map, r.line); break; }
        int created;
        sequence *q = seq_get(S, f[MC_SEQ], r.line, &created);
        rc = seq_attr(map, r.line, q, created, &q->label, "label", f[MC_LABEL]);
        if (!rc) rc = seq_attr(map, r.line, q, created, &q->patient, "patient", f[MC_PATIENT]);
        if (!rc) rc = seq_attr(map, r.line, q, created, &q->split, "split", f[MC_SPLIT]);
        if (rc) break;
        if (!ranges) {
            const char *fr = f[MC_FRAME];
            if (!fr[0]) { rc = er_fail(ER_INPUT, "%s: line %d: empty frame", map, r.line); break; }
            char *p = path_join(src, fr);
            struct stat st;
            if (stat(p, &st) || !S_ISREG(st.st_mode))
                rc = er_fail(ER_INPUT, "%s: line %d: frame '%s' not found (looked for %s)", map, r.line, fr, p);
            else if (!image_name_ok(fr))
                rc = er_fail(ER_INPUT, "%s: line %d: frame '%s' is not a .png/.jpg/.jpeg file", map, r.line, fr);
            else {
                sl_push(&q->frames, p);
                if (nrefs == crefs) refs = xrealloc(refs, sizeof *refs * (size_t)(crefs = crefs ? 2 * crefs : 256));
                refs[nrefs++] = (frame_ref){q->frames.v[q->frames.n - 1], r.line};
            }
            free(p);
        } else {
            int a, b;
            rc = range_end(map, r.line, src, &names, nums, "start", f[MC_START], &a);
            if (!rc) rc = range_end(map, r.line, src, &names, nums, "end", f[MC_END], &b);
            if (!rc && a > b)
                rc = er_fail(ER_INPUT, "%s: line %d: empty sequence: start '%s' comes after end '%s' in %s (frames in "
                             "natural order of their names)", map, r.line, names.v[a], names.v[b], src);
            for (int i = a; !rc && i <= b; i++) {
                if (owner[i]) {
                    rc = er_fail(ER_INPUT, "%s: line %d: frame '%s' is already in the run of line %d", map, r.line,
                                 names.v[i], owner[i]);
                    break;
                }
                owner[i] = r.line;
                char *p = path_join(src, names.v[i]);
                sl_push(&q->frames, p);
                free(p);
            }
        }
    }
    if (!rc && !nlines) rc = er_fail(ER_INPUT, "%s: no lines after the header", map);
    if (!rc && refs) { /* a frame listed twice (frame paths point into the sequences' lists) */
        qsort(refs, (size_t)nrefs, sizeof *refs, cmp_frame_ref);
        for (int i = 1; !rc && i < nrefs; i++)
            if (!strcmp(refs[i].frame, refs[i - 1].frame))
                rc = er_fail(ER_INPUT, "%s: line %d: frame '%s' is already listed at line %d", map, refs[i].line,
                             refs[i].frame, refs[i - 1].line);
    }
    if (!rc && ranges)
        for (int i = 0; i < names.n; i++) *unmapped += !owner[i];
    free(refs), free(nums), free(owner);
    sl_free(&names);
    csv_close(&r);
    free(text);
    return rc;
}

int import_sequences(const char *src, const char *out_path, const seq_import_opts *o, manifest *m,
                     seq_import_stats *st) {
    memset(st, 0, sizeof *st);
    char *outdir = out_dir_of(out_path);
    manifest_init(m, outdir);
    int rc = ER_OK;
    if (o->views < 0 || o->views > 1000) rc = er_fail(ER_INPUT, "data import: --views %d: must be 0 (every frame) or 1..1000", o->views);
    else if (o->min_gap < 1) rc = er_fail(ER_INPUT, "data import: --min-gap %d: must be >= 1", o->min_gap);
    seqset S = {0};
    if (!rc) rc = o->map ? seq_from_map(src, o, &S, &st->unmapped) : seq_from_folders(src, o, &S);
    if (!rc && S.n > 1) {
        sequence tmp; /* natural order of the names (insertion sort keeps it simple and stable) */
        for (int i = 1; i < S.n; i++) {
            tmp = S.v[i];
            int j = i;
            for (; j > 0 && natural_cmp(S.v[j - 1].name, tmp.name) > 0; j--) S.v[j] = S.v[j - 1];
            S.v[j] = tmp;
        }
    }
    int *idx = xmalloc(sizeof(int) * (size_t)(o->views > 0 ? o->views : 1)), longest = 0;
    char view[16];
    for (int i = 0; !rc && i < S.n; i++) {
        sequence *q = &S.v[i];
        if (q->frames.n > 1) qsort(q->frames.v, q->frames.n, sizeof(char *), cmp_nat);
        st->sequences++;
        st->frames += q->frames.n;
        if (q->frames.n > longest) longest = q->frames.n;
        if (o->views == 0) { /* every frame, view = its position in the sequence (the sequence protocol's input) */
            for (int k = 0; k < q->frames.n; k++) {
                snprintf(view, sizeof view, "%d", k);
                add_row_full(m, outdir, q->frames.v[k], NULL, q->label ? q->label : o->label, q->name, view, q->patient, q->split);
            }
            continue;
        }
        if (!seq_pick_views(q->frames.n, o->views, o->min_gap, idx)) {
            st->skipped = xrealloc(st->skipped, sizeof(char *) * (size_t)(st->nskipped + 1));
            st->skipped_frames = xrealloc(st->skipped_frames, sizeof(int) * (size_t)(st->nskipped + 1));
            st->skipped[st->nskipped] = xstrdup(q->name);
            st->skipped_frames[st->nskipped++] = q->frames.n;
            continue;
        }
        for (int k = 0; k < o->views; k++) {
            snprintf(view, sizeof view, "%d", k);
            add_row_full(m, outdir, q->frames.v[idx[k]], NULL, q->label ? q->label : o->label, q->name, view, q->patient, q->split);
        }
    }
    if (!rc && !m->n)
        rc = er_fail(ER_INPUT, "%s: no sequence has the %lld frames that %d views %d frame(s) apart need (%d sequences, "
                     "the longest has %d frames)", o->map ? o->map : src, (long long)(o->views - 1) * o->min_gap + 1, o->views,
                     o->min_gap, S.n, longest);
    free(idx);
    seqset_free(&S);
    free(outdir);
    return rc;
}
