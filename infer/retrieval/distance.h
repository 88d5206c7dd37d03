/* distance.h — the distance an embedding file declares (metadata "distance") and exact top-k
 * search under it, so every metric ranks a file the way its producer meant:
 *   cosine  1 - cos on L2-normalised rows (learned encoders, thumbnails); ISC score -2 (1 - cos)
 *   chi2    sum_k (x_k - y_k)^2 / (x_k + y_k) on L1-normalised non-negative histograms (bag of
 *           words, colour histograms); ISC score -chi2
 * Scores are "higher = closer", as the ISC2021 metrics expect. */
#ifndef ENDORET_DISTANCE_H
#define ENDORET_DISTANCE_H

#include "infer/retrieval/embeddings.h"
#include "infer/retrieval/hash.h"

typedef enum { DIST_COSINE, DIST_CHI2 } emb_distance;

/* The file's distance (absent = cosine). ER_INPUT naming `what` for another value (hamming codes
 * are not float descriptors) or, for chi2, a negative value. */
int emb_distance_of(const emb_set *e, const char *what, emb_distance *d);
const char *emb_distance_name(emb_distance d);
/* For the code that ranks by cosine only (hash indexes, the case database, sweeps): ER_INPUT
 * naming `what` and the file's distance when it is not cosine, instead of ranking it wrongly. */
int emb_require_cosine(const emb_set *e, const char *what);
/* Scale a row to the distance's unit: L2 for cosine, L1 for chi2 (a zero row stays zero). */
void dist_normalise(emb_distance d, float *x, int dim);
/* Exact top-k of nq queries among nr references: ids ascending by distance (ties by id), the ISC
 * score of each, cnt[i] = min(k, nr). out arrays hold nq * k. */
int dist_topk(emb_distance d, const float *ref, const int64_t *ref_ids, int nr, const float *q, int nq, int dim, int k,
              int64_t *out_ids, double *out_score, int *cnt);

/* The same on binary codes: a hasher of `kind` fitted on the references (seed for ITQ), Hamming
 * top-k, score -4 H (= -|a - b|^2 of +-1 codes). Cosine files only: hashing assumes cosine. */
int dist_topk_hashed(hash_kind kind, int bits, uint64_t seed, const float *ref, const int64_t *ref_ids, int nr,
                     const float *q, int nq, int dim, int k, int64_t *out_ids, double *out_score, int *cnt);

#endif
