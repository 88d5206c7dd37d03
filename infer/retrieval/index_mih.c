/* index_mih.c — multi-index hashing (Norouzi, Punjani & Fleet, "Fast exact search in Hamming space
 * with multi-index hashing"), written from the paper's idea:
 *   the code is cut into m disjoint substrings; substring j of every item is a key into table j
 *   (direct-addressed buckets, CSR layout). By pigeonhole, an item within Hamming distance
 *   m*(r+1) - 1 of the query is within distance r of it in at least one substring.
 * k-NN search grows the substring radius r = 0, 1, ...; after table j has been probed at radius r
 * (tables < j at r, tables > j at r-1) every item not yet seen is at full distance
 * >= m*r + j + 1. The search stops as soon as the k-th best distance is strictly below that bound
 * (strictly, so that ties at the bound are resolved by id exactly as the brute force does). When
 * the next radius would probe more buckets than there are items, the rest is a linear scan (still
 * exact). Items added after the build sit in a pending list scanned by every query; it is folded
 * into the tables when it grows past max(4096, n/64). Deleted items are skipped. */
#include "infer/retrieval/index_internal.h"
#include "infer/retrieval/topk.h"
#include "nn/base/base.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int m;
    int b0[64], len[64];   /* substring bit ranges */
    uint32_t *off[64];     /* (1 << len) + 1 bucket offsets into items */
    uint32_t *items[64];   /* slots, bucket by bucket */
    uint64_t *icode[64];   /* 64-bit codes only: each item's code stored beside its slot, so a
                              candidate's distance is computed from memory read in sequence */
    int64_t nbuilt;        /* slots [0, nbuilt) are in the tables */
} mih_tables;

static inline uint32_t substr(const uint64_t *x, int b0, int len) {
    int w = b0 >> 6, o = b0 & 63;
    uint64_t v = x[w] >> o;
    if (o + len > 64) v |= x[w + 1] << (64 - o);
    return (uint32_t)(v & ((1ULL << len) - 1));
}

/* Norouzi et al. suggest substrings of ~log2 n bits (about one item per bucket). With each code
 * stored beside its slot a bucket is scanned sequentially, so fewer, fuller buckets win: measured
 * on clustered 64-bit codes, ~0.7 log2 n bits was best at 100k (12-13 bits), 1M and 10M (16 bits:
 * 0.23 vs 0.30 ms and 0.69 vs 1.06 ms per query against 21-bit substrings). */
static int choose_m(int bits, int64_t n) {
    int s = (int)lround(0.7 * log2((double)(n > 2 ? n : 2)));
    if (s < 8) s = 8;
    if (s > 24) s = 24;
    int m = bits / s;
    if (m < 1) m = 1;
    if (m > 64) m = 64;
    while ((bits + m - 1) / m > 24) m++;  /* direct-addressed tables: at most 2^24 buckets */
    return m;
}

static void fill_tables(bindex *ix, mih_tables *t) {
    int64_t n = ix->n;
    t->nbuilt = n;
    for (int j = 0; j < t->m; j++) {
        size_t nb = (size_t)1 << t->len[j];
        free(t->off[j]);
        free(t->items[j]);
        free(t->icode[j]);
        t->icode[j] = NULL;
        uint32_t *off = xcalloc(nb + 1, sizeof *off);
        for (int64_t s = 0; s < n; s++) off[substr(ix->codes + s * ix->words, t->b0[j], t->len[j]) + 1]++;
        for (size_t b = 0; b < nb; b++) off[b + 1] += off[b];
        uint32_t *pos = xmalloc((nb + 1) * sizeof *pos);
        memcpy(pos, off, (nb + 1) * sizeof *pos);
        uint32_t *items = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *items);
        for (int64_t s = 0; s < n; s++) items[pos[substr(ix->codes + s * ix->words, t->b0[j], t->len[j])]++] = (uint32_t)s;
        free(pos);
        if (ix->words == 1) {
            t->icode[j] = xmalloc((size_t)(n > 0 ? n : 1) * 8);
            for (int64_t p = 0; p < n; p++) t->icode[j][p] = ix->codes[items[p]];
        }
        t->off[j] = off;
        t->items[j] = items;
    }
}

void mih_build(bindex *ix) {
    mih_tables *t = xcalloc(1, sizeof *t);
    int m = ix->mih_m > 0 ? ix->mih_m : choose_m(ix->bits, ix->n);
    if (m > ix->bits) m = ix->bits;
    while ((ix->bits + m - 1) / m > 24) m++;
    if (m > 64) m = 64;
    ix->mih_m = m;
    t->m = m;
    for (int j = 0; j < m; j++) {
        t->b0[j] = ix->bits * j / m;
        t->len[j] = ix->bits * (j + 1) / m - t->b0[j];
    }
    fill_tables(ix, t);
    ix->impl = t;
}

int mih_substrings(const bindex *ix) { return ix->impl ? ((mih_tables *)ix->impl)->m : 0; }

void mih_insert(bindex *ix, int64_t slot) {
    mih_tables *t = ix->impl;
    int64_t pending = ix->n - t->nbuilt;
    if (pending > 4096 && pending > ix->n / 64) fill_tables(ix, t);
}

void mih_free(bindex *ix) {
    mih_tables *t = ix->impl;
    if (!t) return;
    for (int j = 0; j < t->m; j++) { free(t->off[j]); free(t->items[j]); free(t->icode[j]); }
    free(t);
    ix->impl = NULL;
}

static double binom(int n, int r) {
    if (r < 0 || r > n) return 0;
    double c = 1;
    for (int i = 1; i <= r; i++) c = c * (n - r + i) / i;
    return c;
}

/* per-thread scratch: the set of slots already pushed for the current query. Only items that
 * pass the distance bound are recorded (a few hundred per query), so a small open-addressing set
 * replaces an n-sized stamp array (no 40 MB per thread at n = 10M, no page faults). */
typedef struct { uint32_t *key; uint32_t *used; int cap, n; } mih_seen;

static void seen_clear(mih_seen *v) {
    for (int i = 0; i < v->n; i++) v->key[v->used[i]] = 0;
    v->n = 0;
}

static inline uint32_t seen_hash(uint32_t s) { return (s * 2654435761u) >> 7; }

static int seen_has(const mih_seen *v, uint32_t s) {
    for (uint32_t h = seen_hash(s) & (v->cap - 1);; h = (h + 1) & (v->cap - 1)) {
        if (!v->key[h]) return 0;
        if (v->key[h] == s + 1) return 1;
    }
}

static void seen_grow(mih_seen *v);

/* 1 if s was not in the set (and adds it) */
static int first_visit(mih_seen *v, uint32_t s) {
    uint32_t h = seen_hash(s) & (v->cap - 1);
    for (; v->key[h]; h = (h + 1) & (v->cap - 1))
        if (v->key[h] == s + 1) return 0;
    v->key[h] = s + 1;
    v->used[v->n++] = h;
    if (2 * v->n > v->cap) seen_grow(v);
    return 1;
}

static void seen_init(mih_seen *v, int cap) {
    v->cap = cap;
    v->n = 0;
    v->key = xcalloc((size_t)cap, sizeof *v->key);
    v->used = xmalloc((size_t)cap * sizeof *v->used);
}

static void seen_grow(mih_seen *v) {
    mih_seen w;
    seen_init(&w, 2 * v->cap);
    for (int i = 0; i < v->n; i++) first_visit(&w, v->key[v->used[i]] - 1);
    free(v->key);
    free(v->used);
    *v = w;
}

/* probe every bucket of table j at substring distance exactly r from the query */
static void probe(const bindex *ix, const mih_tables *t, int j, int r, const uint64_t *q,
                  mih_seen *v, topk_heap *h) {
    const int L = t->len[j], W = ix->words;
    const uint32_t key = substr(q, t->b0[j], L);
    const uint32_t *off = t->off[j], *items = t->items[j];
    const uint64_t *icode = t->icode[j];
    uint64_t lim = 1ULL << L;
    for (uint64_t mask = r ? (1ULL << r) - 1 : 0; mask < lim;) {
        uint32_t b = key ^ (uint32_t)mask;
        /* distance first, the seen-check only for items that could enter: an item rejected
         * here stays rejected later (the bound only shrinks), so only pushed items need a stamp */
        if (icode) {
            for (uint32_t p = off[b]; p < off[b + 1]; p++) {
                int32_t d = __builtin_popcountll(icode[p] ^ q[0]);
                if (d > topk_bound(h)) continue;
                uint32_t s = items[p];
                if (!first_visit(v, s) || ix->dead[s]) continue;
                topk_push(h, d, ix->ids[s]);
            }
        } else {
            for (uint32_t p = off[b]; p < off[b + 1]; p++) {
                uint32_t s = items[p];
                int32_t d = hamming(q, ix->codes + (int64_t)s * W, W);
                if (d > topk_bound(h)) continue;
                if (!first_visit(v, s) || ix->dead[s]) continue;
                topk_push(h, d, ix->ids[s]);
            }
        }
        if (r == 0) break;
        uint64_t c = mask & -mask, rr = mask + c; /* next mask with the same popcount (Gosper) */
        mask = (((rr ^ mask) >> 2) / c) | rr;
    }
}

static void search_one(const bindex *ix, const mih_tables *t, const uint64_t *q, int k, mih_seen *v,
                       topk_heap *h) {
    const int W = ix->words, m = t->m;
    seen_clear(v);
    for (int64_t s = t->nbuilt; s < ix->n; s++) /* pending items */
        if (!ix->dead[s]) {
            int32_t d = hamming(q, ix->codes + s * W, W);
            if (d <= topk_bound(h)) topk_push(h, d, ix->ids[s]);
        }
    if (k <= 0) return;
    int maxlen = 0;
    for (int j = 0; j < m; j++) if (t->len[j] > maxlen) maxlen = t->len[j];
    double live = (double)(ix->n - ix->ndead);
    for (int r = 0; r <= maxlen; r++) {
        double cost = 0;
        for (int j = 0; j < m; j++) cost += binom(t->len[j], r);
        if (r > 0 && cost > live) { /* enumerating would cost more than scanning: finish by scan */
            for (int64_t s = 0; s < t->nbuilt; s++)
                if (!ix->dead[s] && !seen_has(v, (uint32_t)s)) {
                    int32_t d = hamming(q, ix->codes + s * W, W);
                    if (d <= topk_bound(h)) topk_push(h, d, ix->ids[s]);
                }
            return;
        }
        for (int j = 0; j < m; j++) {
            if (r <= t->len[j]) probe(ix, t, j, r, q, v, h);
            /* unseen items now have distance >= m*r + j + 1 */
            if (h->n == h->k && h->e[0].d < m * r + j + 1) return;
        }
    }
}

void mih_search(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                int32_t *out_d, int *count) {
    const mih_tables *t = ix->impl;
    #pragma omp parallel if (nq >= 4)
    {
        topk_ent *e = xmalloc((size_t)(k > 0 ? k : 1) * sizeof *e);
        mih_seen v;
        seen_init(&v, 1024);
        #pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < nq; i++) {
            topk_heap h;
            topk_init(&h, e, k);
            search_one(ix, t, q + (size_t)i * ix->words, k, &v, &h);
            count[i] = topk_finish_row(&h, out_ids + (size_t)i * k, out_d + (size_t)i * k);
        }
        free(v.key);
        free(v.used);
        free(e);
    }
}

typedef struct { int32_t d; int64_t id; } dist_id;
static int cmp_dist_id(const void *a, const void *b) {
    const dist_id *x = a, *y = b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int64_t mih_range(const bindex *ix, const uint64_t *q, int r, int64_t *out_ids, int32_t *out_d) {
    const mih_tables *t = ix->impl;
    const int W = ix->words, m = t->m;
    int rs = (r + 1 + m - 1) / m - 1; /* substring radius: ceil((r+1)/m) - 1 = floor(r/m) */
    uint8_t *seen = xcalloc((size_t)(ix->n > 0 ? ix->n : 1), 1);
    dist_id *res = xmalloc((size_t)(ix->n > 0 ? ix->n : 1) * sizeof *res);
    int64_t c = 0;
    for (int j = 0; j < m; j++) {
        const int L = t->len[j];
        const uint32_t key = substr(q, t->b0[j], L);
        for (int rr = 0; rr <= rs && rr <= L; rr++) {
            for (uint64_t mask = rr ? (1ULL << rr) - 1 : 0; mask < (1ULL << L);) {
                uint32_t b = key ^ (uint32_t)mask;
                for (uint32_t p = t->off[j][b]; p < t->off[j][b + 1]; p++) {
                    uint32_t s = t->items[j][p];
                    if (seen[s] || ix->dead[s]) continue;
                    seen[s] = 1;
                    int32_t d = hamming(q, ix->codes + (int64_t)s * W, W);
                    if (d <= r) { res[c].d = d; res[c].id = ix->ids[s]; c++; }
                }
                if (rr == 0) break;
                uint64_t cc = mask & -mask, nx = mask + cc;
                mask = (((nx ^ mask) >> 2) / cc) | nx;
            }
        }
    }
    for (int64_t s = t->nbuilt; s < ix->n; s++)
        if (!ix->dead[s]) {
            int32_t d = hamming(q, ix->codes + s * W, W);
            if (d <= r) { res[c].d = d; res[c].id = ix->ids[s]; c++; }
        }
    qsort(res, (size_t)c, sizeof *res, cmp_dist_id);
    for (int64_t i = 0; i < c; i++) { out_ids[i] = res[i].id; out_d[i] = res[i].d; }
    free(res);
    free(seen);
    return c;
}
