/* embeddings.h — the embedding file every encoder writes and every index/metric reads.
 *
 * Format: a safetensors file with
 *   "embeddings"  F32 [n, dim]   row i = descriptor of data row i of the manifest (manifest order)
 *   metadata: "endoret.kind" = "embeddings", "manifest" = path of the manifest it was computed on
 *             (as given to `embed`; may be empty), "model" = free text describing the encoder,
 *             "distance" = "cosine" | "chi2" | "hamming" (the natural distance of the descriptor).
 * Descriptors are stored as produced (not necessarily L2-normalised; indexes normalise as needed). */
#ifndef ENDORET_EMBEDDINGS_H
#define ENDORET_EMBEDDINGS_H

typedef struct {
    int n, dim;
    float *x;        /* n * dim, row-major, owned */
    char *manifest;  /* owned, may be NULL */
    char *model;     /* owned, may be NULL */
    char *distance;  /* owned, may be NULL (= cosine) */
} emb_set;

int emb_save(const char *path, const emb_set *e);
int emb_load(const char *path, emb_set *e);
void emb_free(emb_set *e);

#endif
