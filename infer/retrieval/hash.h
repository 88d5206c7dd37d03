/* hash.h — binary codes from float embeddings (the paper's hash layer and its extensions).
 *   sign  bit j = (x_j >= 0) of the L2-normalised embedding (sign(0) = +1 as in EndoFinder's
 *         HashLayer); bits must equal the embedding dimension.
 *   pca   centre, project on the top-`bits` principal directions, then sign (bits <= dim).
 *   itq   pca followed by the iterative-quantisation rotation (Gong & Lazebnik): alternate
 *         B = sign(V R) and R = polar factor of V^T B, 50 iterations.
 * Codes are packed little-endian: bit j lives in word j / 64 at position j % 64; unused high bits
 * of the last word are zero. The fitted mean and projection are stored with the case database. */
#ifndef ENDORET_HASH_H
#define ENDORET_HASH_H

#include <stdint.h>

typedef enum { HASH_SIGN = 0, HASH_PCA = 1, HASH_ITQ = 2 } hash_kind;

typedef struct {
    hash_kind kind;
    int dim, bits;
    float *mean;  /* dim, NULL for sign */
    float *proj;  /* bits x dim, NULL for sign */
} hasher;

const char *hash_kind_name(hash_kind k);
int hash_kind_parse(const char *s, hash_kind *k);
static inline int hash_words(int bits) { return (bits + 63) / 64; }

/* Fit on n training rows (rows are L2-normalised internally, x is not modified). */
int hasher_fit(hasher *h, hash_kind kind, const float *x, int64_t n, int dim, int bits, uint64_t seed);
/* Restore a fitted hasher (arrays copied; mean/proj may be NULL for sign). */
int hasher_set(hasher *h, hash_kind kind, int dim, int bits, const float *mean, const float *proj);
/* codes: n * hash_words(bits) words. */
void hasher_encode(const hasher *h, const float *x, int64_t n, uint64_t *codes);
void hasher_free(hasher *h);

/* Symmetric eigen-decomposition by cyclic Jacobi rotations (double precision): a is n x n
 * (destroyed), eigenvalues descending in w, eigenvectors as rows of v (n x n). */
void sym_eigen(double *a, int n, double *w, double *v);

#endif
