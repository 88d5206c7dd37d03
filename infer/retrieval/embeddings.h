/* embeddings.h — the embedding file every encoder writes and every index/metric reads.
 *
 * Format: a safetensors file with
 *   "embeddings"  F32 [n, dim]  one descriptor per item (row i = data row i of the manifest when
 *                               made by `embed`/`bow embed`)
 *   "ids"         I64 [n]       item ids (query/reference ids in GT files, pair ids in Likert files);
 *                               written as 0..n-1 when the producer has no ids of its own
 *   "labels"      I64 [n]       optional: label id per item, -1 = unknown
 *   "scene","view" I64 [n]      optional: scene / view ids (multi-view protocols), -1 = unknown
 *   metadata: "endoret.kind" = "embeddings"; "model" = encoder description; "manifest" = the
 *             manifest it was computed on (may be absent); "distance" = "cosine" | "chi2" |
 *             "hamming" (the descriptor's natural distance; absent = cosine); "label_names" =
 *             label names in id order separated by '\n' (absent when there are no labels).
 * Descriptors are stored as produced (not necessarily L2-normalised; indexes normalise as needed). */
#ifndef ENDORET_EMBEDDINGS_H
#define ENDORET_EMBEDDINGS_H

#include <stdint.h>

typedef struct {
    int n, dim;
    float *x;                /* n * dim, row-major, owned */
    int64_t *ids;            /* n, owned, never NULL after emb_load */
    int64_t *labels;         /* n or NULL */
    int64_t *scene, *view;   /* n or NULL */
    int nlabel_names;
    char **label_names;      /* nlabel_names or NULL */
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

#endif
