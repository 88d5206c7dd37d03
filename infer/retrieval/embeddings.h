/* embeddings.h — the embedding file every encoder writes and every index/metric reads.
 *
 * Format: a safetensors file with
 *   "embeddings"  F32 [n, dim]  one descriptor per item (row i = data row i of the manifest when
 *                               made by `embed`/`bow embed`)
 *   "ids"         I64 [n]       item ids (query/reference ids in GT files, pair ids in Likert files);
 *                               written as 0..n-1 when the producer has no ids of its own
 *   "labels"      I64 [n]       optional: label id per item, -1 = unknown
 *   "scene","view" I64 [n]      optional: scene / view ids (multi-view protocols), -1 = unknown: the
 *                               manifest's own integers, or (when a column holds other strings) the
 *                               index into "scene_names" / "view_names"
 *   metadata: "endoret.kind" = "embeddings"; "model" = encoder description; "manifest" = the
 *             manifest it was computed on (may be absent); "distance" = "cosine" | "chi2" |
 *             "hamming" (the descriptor's natural distance; absent = cosine); "label_names" =
 *             label names in id order separated by '\n' (absent when there are no labels);
 *             "scene_names", "view_names" = the same for string scene / view values (absent when
 *             they are integers).
 * Descriptors are stored as produced (not necessarily L2-normalised; indexes normalise as needed). */
#ifndef ENDORET_EMBEDDINGS_H
#define ENDORET_EMBEDDINGS_H

#include <stdint.h>

#include "datasets/manifest.h"

typedef struct {
    int n, dim;
    float *x;                /* n * dim, row-major, owned */
    int64_t *ids;            /* n, owned, never NULL after emb_load */
    int64_t *labels;         /* n or NULL */
    int64_t *scene, *view;   /* n or NULL */
    int nlabel_names;
    char **label_names;      /* nlabel_names or NULL */
    int nscene_names, nview_names;
    char **scene_names, **view_names; /* string values of scene / view ids, or NULL (integers) */
    char *manifest, *model, *distance; /* owned, may be NULL */
} emb_set;

/* Allocate x (zeroed) and ids (0..n-1); everything else NULL. */
void emb_alloc(emb_set *e, int n, int dim);
int emb_save(const char *path, const emb_set *e);
/* Validates shapes (ids/labels/scene/view length n) and that every value is finite. */
int emb_load(const char *path, emb_set *e);
/* emb_load of a command's option: a missing path or an empty file is ER_INPUT naming the option
 * (`what`, e.g. "--query"). */
int emb_load_arg(const char *path, const char *what, emb_set *e);
void emb_free(emb_set *e);
/* Fill ids (= manifest row numbers), labels + label_names, scene, view (+ their names when the
 * values are strings) from the manifest rows rows[0..e->n-1] (rows NULL = rows 0..n-1). A column
 * the manifest lacks is left NULL unless `all_columns` (then it is written as -1). */
void emb_fill_from_manifest(emb_set *e, const manifest *m, const int *rows, int all_columns);
/* Resolve a user's view (or scene) value to the id stored in the file: a name of view_names when
 * the file has them, else a decimal integer. ER_INPUT naming `what` when it is neither. */
int emb_view_id(const emb_set *e, const char *value, const char *what, int64_t *id);
/* A comma-separated list of views ("2" or "2,3") resolved with emb_view_id into a malloc'd array;
 * list NULL gives *v = NULL, *n = 0. */
int emb_view_list(const emb_set *e, const char *list, const char *what, int64_t **v, int *n);
/* The printable value of view id v (its name, or the integer) into buf. */
const char *emb_view_name(const emb_set *e, int64_t v, char *buf, int size);

#endif
