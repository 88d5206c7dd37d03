/* index.h — exact nearest-neighbour indexes over binary codes (Hamming distance) and over float
 * embeddings (cosine distance). Every index returns the same top-k: ascending (distance, id), so
 * ties are broken by the smaller id, whichever structure found them.
 *
 * Binary kinds (one struct, one search entry point, kind-specific structure in `impl`):
 *   scan      linear scan with hardware popcount (AVX-512 VPOPCNTDQ for 64-bit codes when present),
 *             OpenMP over queries, or over the database for small query batches;
 *   balltree  ball tree over codes with Hamming distance (EndoFinder's index);
 *   mih       multi-index hashing (Norouzi et al.): m substring tables, radius grown until the
 *             top-k is provably exact, linear-scan fallback when that is cheaper.
 * Items live in slots; delete marks a slot dead (the structure skips it), add appends a slot and
 * inserts it into the structure (ball tree: into a leaf, growing radii; MIH: a pending list that
 * is folded into the tables when it grows past n/64). Save writes codes+ids; load rebuilds the
 * structure deterministically (same structure as the original build). */
#ifndef ENDORET_INDEX_H
#define ENDORET_INDEX_H

#include <stdint.h>

typedef enum { INDEX_SCAN = 0, INDEX_BALLTREE = 1, INDEX_MIH = 2 } index_kind;

typedef struct bindex {
    index_kind kind;
    int bits, words;        /* words = ceil(bits / 64); unused high bits of the last word are 0 */
    int64_t n, cap;         /* slots used / allocated */
    uint64_t *codes;        /* cap * words, 64-byte aligned */
    int64_t *ids;           /* cap */
    uint8_t *dead;          /* cap; 1 = deleted */
    int64_t ndead;
    int mih_m;              /* MIH substrings (0 = choose from n and bits) */
    int64_t *idmap;         /* open addressing id -> slot + 1 (0 = empty); dead slots stay */
    int64_t idmap_cap;
    void *impl;             /* kind-specific structure */
} bindex;

const char *index_kind_name(index_kind k);
int index_kind_parse(const char *s, index_kind *k); /* ER_INPUT naming the value */

/* Build over n codes (copied). Ids must be unique (ER_INPUT naming the duplicate). mih_m = 0 picks
 * the number of substrings from n (substrings of ~0.7 log2 n bits). */
int bindex_build(bindex *ix, index_kind kind, int bits, const uint64_t *codes, const int64_t *ids,
                 int64_t n, int mih_m);
void bindex_free(bindex *ix);
int64_t bindex_count(const bindex *ix); /* live items */
int bindex_add(bindex *ix, const uint64_t *code, int64_t id);  /* ER_INPUT if id exists */
int bindex_delete(bindex *ix, int64_t id);                     /* ER_INPUT if id is absent */
/* nq queries (nq * words), top-k each: out_ids / out_d are nq * k, count[q] = results found
 * (min(k, live items)); unused slots are id -1, distance -1. */
void bindex_search(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                   int32_t *out_d, int *count);
/* Same results by brute force (the reference the tests and the sweep compare against). */
void bindex_search_ref(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                       int32_t *out_d, int *count);
/* Binary file: magic "ERBIDX01", kind, bits, n (live), codes, ids, FNV-1a 64 checksum. */
int bindex_save(const bindex *ix, const char *path);
int bindex_load(const char *path, bindex *ix);

/* Hamming distance of two codes of `words` words. */
static inline int32_t hamming(const uint64_t *a, const uint64_t *b, int words) {
    int32_t d = 0;
    for (int w = 0; w < words; w++) d += __builtin_popcountll(a[w] ^ b[w]);
    return d;
}

/* ---- introspection and special searches of one index kind ---- */
/* single query over the database, OpenMP over database chunks (low latency for one query) */
void scan_search_one_parallel(const bindex *ix, const uint64_t *q, int k, int64_t *out_ids,
                              int32_t *out_d, int *count);
int scan_has_vpopcnt(void);
int balltree_stats(const bindex *ix, int *depth, int64_t *leaves);
/* All live items within Hamming radius r of q, found through the tables only (no linear
 * fallback): ids sorted ascending by (distance, id); returns the count (out arrays hold n). */
int64_t mih_range(const bindex *ix, const uint64_t *q, int r, int64_t *out_ids, int32_t *out_d);
int mih_substrings(const bindex *ix);

/* ---- float index: exact cosine search through sgemm ---- */
typedef struct {
    int dim;
    int64_t n, cap;
    float *x;        /* cap * dim, L2-normalised rows */
    int64_t *ids;
    uint8_t *dead;
    int64_t ndead;
    int64_t *idmap;  /* open addressing id -> slot + 1 (0 empty): add / delete find an id in O(1) */
    int64_t idmap_cap;
} findex;

/* Rows are L2-normalised on the way in (a zero row stays zero). */
int findex_build(findex *ix, int dim, const float *x, const int64_t *ids, int64_t n);
int findex_add(findex *ix, const float *x, int64_t id);
int findex_delete(findex *ix, int64_t id);
void findex_free(findex *ix);
/* Cosine distance 1 - cos, ascending, ties by id. */
void findex_search(const findex *ix, const float *q, int nq, int k, int64_t *out_ids, float *out_d,
                   int *count);
void findex_search_ref(const findex *ix, const float *q, int nq, int k, int64_t *out_ids,
                       float *out_d, int *count);

#endif
