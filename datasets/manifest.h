/* manifest.h — a dataset is a CSV manifest with a header line. Known columns (any order, any subset
 * except `path`, extra columns ignored):  path,label,mask,scene,view,patient,split
 * Paths (path, mask) are relative to the manifest's folder unless absolute. Fields may be quoted
 * ("a,b" and "" escapes, RFC 4180). Empty field or absent column = unknown (NULL).
 * Errors name the file, line and column. */
#ifndef ENDORET_MANIFEST_H
#define ENDORET_MANIFEST_H

#include <stdint.h>

typedef struct {
    char *path, *label, *mask, *scene, *view, *patient, *split; /* owned; NULL = unknown */
} manifest_row;

typedef struct {
    char *file;  /* the manifest's own path (owned, may be NULL for an in-memory manifest) */
    char *dir;   /* folder that relative paths are resolved against (owned) */
    int n, cap;
    manifest_row *rows;
} manifest;

int manifest_load(const char *path, manifest *m);
/* Write atomically, all 7 columns, quoting where needed. Paths are written as stored. */
int manifest_save(const char *path, const manifest *m);
void manifest_init(manifest *m, const char *dir);
/* Append a row; strings are copied (NULL allowed except path). */
void manifest_add(manifest *m, const manifest_row *row);
void manifest_free(manifest *m);
/* Full path of a row's image / mask: the row's path resolved against the manifest's folder and
 * normalised (nn/base/paths.h: "out/kv/../../../data/x.jpg" -> "../data/x.jpg"). Caller frees; NULL if
 * the row has no mask. */
char *manifest_image_path(const manifest *m, int i);
char *manifest_mask_path(const manifest *m, int i);
/* Row i's image path as a one-view list (datasets/view_list.h): what a case database or a report
 * stores for a one-image case, so a ';' in the path stays in it. Caller frees. */
char *manifest_image_list(const manifest *m, int i);
/* Row i's mask path as a one-view list; NULL when the row has no mask. Caller frees. */
char *manifest_mask_list(const manifest *m, int i);
/* Map labels to dense ids 0..nlabels-1 in sorted label order; rows with unknown label get -1.
 * ids (n ints) and names (nlabels strings) are allocated; free with manifest_free_labels. */
void manifest_label_ids(const manifest *m, int **ids, char ***names, int *nlabels);
void manifest_free_labels(int *ids, char **names, int nlabels);
/* The class ids of the rows of `split` ('' = all; manifest order, as image_cache_load keeps them) by
 * `column`, label or scene (dense over the whole manifest, *nclass of them); ER_INPUT naming the
 * row and the config key `key` when a row has none. */
int manifest_class_ids(const char *path, const char *split, const char *column, const char *key, int **out, int *n, int *nclass);
/* Same dense-id mapping for any string column (scene, patient, view, split). */
typedef enum { MF_LABEL, MF_SCENE, MF_VIEW, MF_PATIENT, MF_SPLIT } manifest_field;
void manifest_field_ids(const manifest *m, manifest_field field, int **ids, char ***names, int *n);
/* The image paths of each scene in row order as a view list (datasets/view_list.h: joined by ';', a
 * ';' or '\' inside a path escaped), a case's views: *joined[k] for scene id k
 * of manifest_field_ids(MF_SCENE), which *scene_of receives (n rows, -1 = no scene). One pass over
 * the rows. Free with manifest_free_labels(*scene_of, *joined, *n). */
void manifest_scene_paths(const manifest *m, int **scene_of, char ***joined, int *n);
/* The same for the rows' masks: a scene's list is NULL unless every row of it has a mask (a view
 * list cannot hold an empty entry, so masks stay aligned with the image paths or are absent). */
void manifest_scene_masks(const manifest *m, int **scene_of, char ***joined, int *n);
/* The user's own values of a column, for ids that must survive into files (scene, view): when
 * every present value is a non-negative decimal integer, vals[i] is that integer and *names is
 * NULL (*n = 0); otherwise vals[i] is the rank in manifest_field_ids's sorted names, returned in
 * *names (*n of them). Unknown = -1. Free with manifest_free_labels((int *)NULL, names, n) and free(vals). */
void manifest_field_values(const manifest *m, manifest_field field, int64_t **vals, char ***names, int *n);

#endif
