/* index_balltree.c — a ball tree over binary codes with Hamming distance (the index EndoFinder
 * describes; written from the definition). Every node is a ball (center code, radius = max
 * Hamming distance from the center to any item below). Exact search descends best-first (the
 * child with the smaller lower bound first) and prunes a ball when its lower bound
 * max(0, d(q, center) - radius) exceeds the current k-th distance; equal bounds are not pruned
 * because an item at that distance with a smaller id could still enter the top-k.
 * Build: split on two far-apart pivots (farthest from the first item, then farthest from that):
 * the half of the items relatively nearer to the first pivot goes left (balanced; a natural
 * nearer-pivot split measured slower on clustered codes), centers are the bitwise majority of up to 256
 * items. Leaves hold item slots in growable arrays so an insert needs no rebuild: it walks down
 * to the nearer child, widening radii on the way. */
#include "infer/retrieval/index_internal.h"
#include "infer/retrieval/topk.h"
#include "nn/base/base.h"

#include <stdlib.h>
#include <string.h>

enum { LEAF_SIZE = 32, MAJ_SAMPLE = 256 };

typedef struct {
    int32_t radius;
    int32_t left, right;      /* children, -1 for a leaf */
    int32_t nitem, capitem;   /* leaf items */
    int64_t *items;           /* slots */
    uint64_t *codes;          /* the leaf's codes, contiguous (nitem * words): a leaf scan streams
                                 memory instead of gathering codes scattered over the database */
} bt_node;

typedef struct {
    int nnode, capnode;
    bt_node *nodes;
    uint64_t *centers;        /* capnode * words */
} bt_tree;

static int new_node(bt_tree *t, int words) {
    if (t->nnode == t->capnode) {
        t->capnode = t->capnode ? 2 * t->capnode : 64;
        t->nodes = xrealloc(t->nodes, (size_t)t->capnode * sizeof *t->nodes);
        t->centers = xrealloc(t->centers, (size_t)t->capnode * words * 8);
    }
    memset(&t->nodes[t->nnode], 0, sizeof(bt_node));
    t->nodes[t->nnode].left = t->nodes[t->nnode].right = -1;
    return t->nnode++;
}

static void majority_center(const bindex *ix, const int64_t *s, int64_t n, uint64_t *c) {
    const int W = ix->words;
    int64_t step = n > MAJ_SAMPLE ? n / MAJ_SAMPLE : 1, cnt = 0;
    int *ones = xcalloc((size_t)W * 64, sizeof *ones);
    for (int64_t i = 0; i < n; i += step, cnt++) {
        const uint64_t *x = ix->codes + s[i] * W;
        for (int w = 0; w < W; w++)
            for (uint64_t v = x[w]; v; v &= v - 1) ones[w * 64 + __builtin_ctzll(v)]++;
    }
    for (int w = 0; w < W; w++) {
        c[w] = 0;
        for (int b = 0; b < 64; b++)
            if (2 * ones[w * 64 + b] > cnt) c[w] |= 1ULL << b;
    }
    free(ones);
}

static int64_t farthest(const bindex *ix, const int64_t *s, int64_t n, const uint64_t *from) {
    int64_t best = 0;
    int32_t bd = -1;
    for (int64_t i = 0; i < n; i++) {
        int32_t d = hamming(from, ix->codes + s[i] * ix->words, ix->words);
        if (d > bd) { bd = d; best = i; }
    }
    return best;
}

/* builds the subtree over s[0..n) (reorders s); returns the node index */
static int build_rec(bindex *ix, bt_tree *t, int64_t *s, int64_t n) {
    const int W = ix->words;
    int id = new_node(t, W);
    uint64_t *c = t->centers + (size_t)id * W;
    majority_center(ix, s, n, c);
    int32_t r = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t d = hamming(c, ix->codes + s[i] * W, W);
        if (d > r) r = d;
    }
    t->nodes[id].radius = r;
    int64_t split = 0;
    if (n > LEAF_SIZE) {
        int64_t a = farthest(ix, s, n, ix->codes + s[0] * W);
        const uint64_t *pa = ix->codes + s[a] * W;
        int64_t b = farthest(ix, s, n, pa);
        const uint64_t *pb = ix->codes + s[b] * W;
        /* balanced split: key = d(x,a) - d(x,b) in [-bits, bits]; the half with the smaller keys
         * (nearer to a) goes left, found with a counting pass so a level costs O(n) and the depth
         * stays log2(n / LEAF_SIZE) even on clustered or duplicated codes */
        int B = ix->bits;
        int64_t *hist = xcalloc((size_t)2 * B + 1, sizeof *hist);
        int32_t *key = xmalloc((size_t)n * sizeof *key);
        for (int64_t i = 0; i < n; i++) {
            const uint64_t *x = ix->codes + s[i] * W;
            key[i] = hamming(pa, x, W) - hamming(pb, x, W);
            hist[key[i] + B]++;
        }
        int64_t half = n / 2, below = 0;
        int m = 0;
        while (below + hist[m] <= half && m < 2 * B) below += hist[m++];
        int64_t take_eq = half - below; /* items with key == m - B that still go left */
        int64_t *tmp = xmalloc((size_t)n * sizeof *tmp);
        int64_t lo = 0, hi = n - 1;
        for (int64_t i = 0; i < n; i++) {
            int kk = key[i] + B;
            if (kk < m || (kk == m && take_eq-- > 0)) tmp[lo++] = s[i];
            else tmp[hi--] = s[i];
        }
        memcpy(s, tmp, (size_t)n * sizeof *s);
        free(tmp);
        free(key);
        free(hist);
        split = lo;
    }
    if (n <= LEAF_SIZE || split == 0 || split == n) {
        bt_node *nd = &t->nodes[id];
        nd->nitem = nd->capitem = (int32_t)n;
        nd->items = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
        memcpy(nd->items, s, (size_t)n * sizeof(int64_t));
        nd->codes = xmalloc((size_t)(n > 0 ? n : 1) * W * 8);
        for (int64_t i = 0; i < n; i++) memcpy(nd->codes + i * W, ix->codes + s[i] * W, (size_t)W * 8);
        return id;
    }
    int l = build_rec(ix, t, s, split);
    int rr = build_rec(ix, t, s + split, n - split);
    t->nodes[id].left = l;   /* t->nodes may have moved: index, never keep pointers across calls */
    t->nodes[id].right = rr;
    return id;
}

void balltree_build(bindex *ix) {
    bt_tree *t = xcalloc(1, sizeof *t);
    int64_t *s = xmalloc((size_t)(ix->n > 0 ? ix->n : 1) * sizeof *s);
    int64_t m = 0;
    for (int64_t i = 0; i < ix->n; i++)
        if (!ix->dead[i]) s[m++] = i;
    build_rec(ix, t, s, m);
    free(s);
    ix->impl = t;
}

void balltree_insert(bindex *ix, int64_t slot) {
    bt_tree *t = ix->impl;
    const int W = ix->words;
    const uint64_t *x = ix->codes + slot * W;
    int id = 0;
    for (;;) {
        bt_node *nd = &t->nodes[id];
        int32_t d = hamming(x, t->centers + (size_t)id * W, W);
        if (d > nd->radius) nd->radius = d;
        if (nd->left < 0) break;
        int32_t dl = hamming(x, t->centers + (size_t)nd->left * W, W);
        int32_t dr = hamming(x, t->centers + (size_t)nd->right * W, W);
        id = dl <= dr ? nd->left : nd->right;
    }
    bt_node *nd = &t->nodes[id];
    if (nd->nitem == nd->capitem) {
        nd->capitem = nd->capitem ? 2 * nd->capitem : 8;
        nd->items = xrealloc(nd->items, (size_t)nd->capitem * sizeof(int64_t));
        nd->codes = xrealloc(nd->codes, (size_t)nd->capitem * W * 8);
    }
    memcpy(nd->codes + (size_t)nd->nitem * W, x, (size_t)W * 8);
    nd->items[nd->nitem++] = slot;
}

static void search_rec(const bindex *ix, const bt_tree *t, int id, const uint64_t *q, int32_t dc,
                       topk_heap *h) {
    const bt_node *nd = &t->nodes[id];
    int32_t lb = dc - nd->radius;
    if (lb > topk_bound(h)) return;
    const int W = ix->words;
    if (nd->left < 0) {
        for (int i = 0; i < nd->nitem; i++) {
            int32_t d = hamming(q, nd->codes + (size_t)i * W, W);
            if (d <= topk_bound(h)) {
                int64_t s = nd->items[i];
                if (!ix->dead[s]) topk_push(h, d, ix->ids[s]);
            }
        }
        return;
    }
    int32_t dl = hamming(q, t->centers + (size_t)nd->left * W, W);
    int32_t dr = hamming(q, t->centers + (size_t)nd->right * W, W);
    int32_t bl = dl - t->nodes[nd->left].radius, br = dr - t->nodes[nd->right].radius;
    if (bl <= br) {
        search_rec(ix, t, nd->left, q, dl, h);
        search_rec(ix, t, nd->right, q, dr, h);
    } else {
        search_rec(ix, t, nd->right, q, dr, h);
        search_rec(ix, t, nd->left, q, dl, h);
    }
}

void balltree_search(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                     int32_t *out_d, int *count) {
    const bt_tree *t = ix->impl;
    #pragma omp parallel if (nq >= 4)
    {
        topk_ent *e = xmalloc((size_t)(k > 0 ? k : 1) * sizeof *e);
        #pragma omp for schedule(dynamic, 4)
        for (int i = 0; i < nq; i++) {
            const uint64_t *qi = q + (size_t)i * ix->words;
            topk_heap h;
            topk_init(&h, e, k);
            if (k > 0 && t->nnode > 0) search_rec(ix, t, 0, qi, hamming(qi, t->centers, ix->words), &h);
            count[i] = topk_finish_row(&h, out_ids + (size_t)i * k, out_d + (size_t)i * k);
        }
        free(e);
    }
}

int balltree_stats(const bindex *ix, int *depth, int64_t *leaves) {
    const bt_tree *t = ix->impl;
    *leaves = 0;
    *depth = 0;
    if (!t) return 0;
    int *dep = xcalloc((size_t)t->nnode + 1, sizeof *dep);
    for (int i = 0; i < t->nnode; i++) {   /* children always come after their parent */
        if (t->nodes[i].left < 0) { (*leaves)++; if (dep[i] + 1 > *depth) *depth = dep[i] + 1; }
        else { dep[t->nodes[i].left] = dep[t->nodes[i].right] = dep[i] + 1; }
    }
    free(dep);
    return t->nnode;
}

void balltree_free(bindex *ix) {
    bt_tree *t = ix->impl;
    if (!t) return;
    for (int i = 0; i < t->nnode; i++) { free(t->nodes[i].items); free(t->nodes[i].codes); }
    free(t->nodes);
    free(t->centers);
    free(t);
    ix->impl = NULL;
}
