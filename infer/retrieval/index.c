/* index.c — the parts every binary index shares: slots, ids, tombstones, dispatch, the brute-force
 * reference, and the checksummed file format. */
#include "infer/retrieval/index_internal.h"
#include "infer/retrieval/topk.h"
#include "nn/base/base.h"

#include <stdlib.h>
#include <string.h>

const char *index_kind_name(index_kind k) {
    return k == INDEX_SCAN ? "scan" : k == INDEX_BALLTREE ? "balltree" : k == INDEX_MIH ? "mih" : "?";
}

int index_kind_parse(const char *s, index_kind *k) {
    if (!strcmp(s, "scan")) *k = INDEX_SCAN;
    else if (!strcmp(s, "balltree")) *k = INDEX_BALLTREE;
    else if (!strcmp(s, "mih")) *k = INDEX_MIH;
    else return er_fail(ER_INPUT, "--kind: '%s' is not an index kind (scan, balltree, mih)", s);
    return ER_OK;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void reserve(bindex *ix, int64_t cap) {
    if (cap <= ix->cap) return;
    int64_t nc = ix->cap ? ix->cap : 64;
    while (nc < cap) nc *= 2;
    uint64_t *codes = xmalloc_aligned((size_t)nc * ix->words * 8);
    if (ix->n) memcpy(codes, ix->codes, (size_t)ix->n * ix->words * 8);
    free(ix->codes);
    ix->codes = codes;
    ix->ids = xrealloc(ix->ids, (size_t)nc * sizeof(int64_t));
    ix->dead = xrealloc(ix->dead, (size_t)nc);
    ix->cap = nc;
}

static uint64_t id_hash(int64_t id) {
    uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ULL;
    return x ^ (x >> 29);
}

static void idmap_put(bindex *ix, int64_t slot) {
    uint64_t h = id_hash(ix->ids[slot]) & (ix->idmap_cap - 1);
    while (ix->idmap[h]) h = (h + 1) & (ix->idmap_cap - 1);
    ix->idmap[h] = slot + 1;
}

/* keep the table at most half full: rebuild at twice the slot capacity */
static void idmap_rebuild(bindex *ix) {
    free(ix->idmap);
    ix->idmap_cap = 16;
    while (ix->idmap_cap < 2 * ix->cap) ix->idmap_cap *= 2;
    ix->idmap = xcalloc((size_t)ix->idmap_cap, sizeof *ix->idmap);
    for (int64_t s = 0; s < ix->n; s++) idmap_put(ix, s);
}

static void build_structure(bindex *ix) {
    if (ix->kind == INDEX_BALLTREE) balltree_build(ix);
    else if (ix->kind == INDEX_MIH) mih_build(ix);
}

int bindex_build(bindex *ix, index_kind kind, int bits, const uint64_t *codes, const int64_t *ids,
                 int64_t n, int mih_m) {
    memset(ix, 0, sizeof *ix);
    if (bits < 1 || bits > 4096) return er_fail(ER_INPUT, "index: %d bits is out of range 1..4096", bits);
    if (n < 0 || n >= INT32_MAX) return er_fail(ER_INPUT, "index: %lld items is out of range", (long long)n);
    ix->kind = kind;
    ix->bits = bits;
    ix->words = (bits + 63) / 64;
    ix->mih_m = mih_m;
    if (n > 0) {
        int64_t *s = xmalloc((size_t)n * sizeof *s);
        memcpy(s, ids, (size_t)n * sizeof *s);
        qsort(s, (size_t)n, sizeof *s, cmp_i64);
        for (int64_t i = 1; i < n; i++)
            if (s[i] == s[i - 1]) {
                long long d = (long long)s[i];
                free(s);
                return er_fail(ER_INPUT, "index: duplicate id %lld", d);
            }
        free(s);
    }
    reserve(ix, n > 0 ? n : 1);
    if (n) {
        memcpy(ix->codes, codes, (size_t)n * ix->words * 8);
        memcpy(ix->ids, ids, (size_t)n * sizeof(int64_t));
        memset(ix->dead, 0, (size_t)n);
    }
    ix->n = n;
    idmap_rebuild(ix);
    /* bits beyond `bits` must be zero or they would count in the distance */
    int tail = bits % 64;
    if (tail)
        for (int64_t i = 0; i < n; i++) ix->codes[i * ix->words + ix->words - 1] &= (~0ULL >> (64 - tail));
    build_structure(ix);
    return ER_OK;
}

void bindex_free(bindex *ix) {
    if (ix->kind == INDEX_BALLTREE) balltree_free(ix);
    else if (ix->kind == INDEX_MIH) mih_free(ix);
    free(ix->codes);
    free(ix->ids);
    free(ix->dead);
    free(ix->idmap);
    memset(ix, 0, sizeof *ix);
}

int64_t bindex_count(const bindex *ix) { return ix->n - ix->ndead; }

static int64_t find_slot(const bindex *ix, int64_t id) {
    if (!ix->idmap) return -1;
    for (uint64_t h = id_hash(id) & (ix->idmap_cap - 1);; h = (h + 1) & (ix->idmap_cap - 1)) {
        int64_t e = ix->idmap[h];
        if (!e) return -1;
        if (ix->ids[e - 1] == id && !ix->dead[e - 1]) return e - 1;
    }
}

int bindex_add(bindex *ix, const uint64_t *code, int64_t id) {
    if (find_slot(ix, id) >= 0) return er_fail(ER_INPUT, "index add: id %lld is already present", (long long)id);
    if (ix->n + 1 >= INT32_MAX) return er_fail(ER_INPUT, "index add: index is full");
    reserve(ix, ix->n + 1);
    int64_t s = ix->n++;
    memcpy(ix->codes + s * ix->words, code, (size_t)ix->words * 8);
    int tail = ix->bits % 64;
    if (tail) ix->codes[s * ix->words + ix->words - 1] &= (~0ULL >> (64 - tail));
    ix->ids[s] = id;
    ix->dead[s] = 0;
    if (2 * (ix->n + 1) > ix->idmap_cap) idmap_rebuild(ix);
    else idmap_put(ix, s);
    if (ix->kind == INDEX_BALLTREE) balltree_insert(ix, s);
    else if (ix->kind == INDEX_MIH) mih_insert(ix, s);
    return ER_OK;
}

int bindex_delete(bindex *ix, int64_t id) {
    int64_t s = find_slot(ix, id);
    if (s < 0) return er_fail(ER_INPUT, "index delete: id %lld is not in the index", (long long)id);
    ix->dead[s] = 1;
    ix->ndead++;
    return ER_OK;
}

void bindex_search(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                   int32_t *out_d, int *count) {
    if (ix->kind == INDEX_BALLTREE) balltree_search(ix, q, nq, k, out_ids, out_d, count);
    else if (ix->kind == INDEX_MIH) mih_search(ix, q, nq, k, out_ids, out_d, count);
    else scan_search(ix, q, nq, k, out_ids, out_d, count);
}

void bindex_search_ref(const bindex *ix, const uint64_t *q, int nq, int k, int64_t *out_ids,
                       int32_t *out_d, int *count) {
    topk_ent *e = xmalloc((size_t)(k > 0 ? k : 1) * sizeof *e);
    for (int i = 0; i < nq; i++) {
        topk_heap h;
        topk_init(&h, e, k);
        for (int64_t s = 0; s < ix->n; s++)
            if (!ix->dead[s]) topk_push(&h, hamming(q + (size_t)i * ix->words, ix->codes + s * ix->words, ix->words), ix->ids[s]);
        count[i] = topk_finish_row(&h, out_ids + (size_t)i * k, out_d + (size_t)i * k);
    }
    free(e);
}

/* ---- file format ---- */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}
#define FNV0 0xcbf29ce484222325ULL

typedef struct { char magic[8]; int32_t kind, bits, mih_m, pad; int64_t n; } bidx_header;

int bindex_save(const bindex *ix, const char *path) {
    bidx_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "ERBIDX01", 8);
    h.kind = ix->kind; h.bits = ix->bits; h.mih_m = ix->mih_m;
    h.n = bindex_count(ix);
    atomic_file af;
    int rc = atomic_open(&af, path);
    if (rc) return rc;
    uint64_t sum = fnv1a(FNV0, &h, sizeof h);
    fwrite(&h, sizeof h, 1, af.f);
    for (int64_t s = 0; s < ix->n; s++)
        if (!ix->dead[s]) {
            fwrite(ix->codes + s * ix->words, 8, (size_t)ix->words, af.f);
            sum = fnv1a(sum, ix->codes + s * ix->words, (size_t)ix->words * 8);
        }
    for (int64_t s = 0; s < ix->n; s++)
        if (!ix->dead[s]) {
            fwrite(&ix->ids[s], 8, 1, af.f);
            sum = fnv1a(sum, &ix->ids[s], 8);
        }
    fwrite(&sum, 8, 1, af.f);
    if (ferror(af.f)) {
        atomic_abort(&af);
        return er_fail(ER_RUNTIME, "%s: write failed", path);
    }
    return atomic_commit(&af);
}

int bindex_load(const char *path, bindex *ix) {
    memset(ix, 0, sizeof *ix);
    char *data;
    size_t len;
    int rc = read_file(path, &data, &len);
    if (rc) return rc;
    bidx_header h;
    if (len < sizeof h + 8) { free(data); return er_fail(ER_INPUT, "%s: truncated index file (%zu bytes)", path, len); }
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, "ERBIDX01", 8)) { free(data); return er_fail(ER_INPUT, "%s: not an endoret binary index (bad magic)", path); }
    if (h.kind < 0 || h.kind > 2 || h.bits < 1 || h.bits > 4096 || h.n < 0 || h.n >= INT32_MAX) {
        free(data);
        return er_fail(ER_INPUT, "%s: corrupt header (kind %d, bits %d, n %lld)", path, h.kind, h.bits, (long long)h.n);
    }
    int words = (h.bits + 63) / 64;
    size_t need = sizeof h + (size_t)h.n * words * 8 + (size_t)h.n * 8 + 8;
    if (len != need) {
        free(data);
        return er_fail(ER_INPUT, "%s: size %zu bytes, expected %zu for %lld codes of %d bits (truncated or corrupt)",
                       path, len, need, (long long)h.n, h.bits);
    }
    uint64_t sum = fnv1a(FNV0, data, need - 8), stored;
    memcpy(&stored, data + need - 8, 8);
    if (sum != stored) { free(data); return er_fail(ER_INPUT, "%s: checksum mismatch (corrupt index file)", path); }
    uint64_t *codes = xmalloc((size_t)h.n * words * 8 + 8);
    int64_t *ids = xmalloc((size_t)h.n * 8 + 8);
    memcpy(codes, data + sizeof h, (size_t)h.n * words * 8);
    memcpy(ids, data + sizeof h + (size_t)h.n * words * 8, (size_t)h.n * 8);
    free(data);
    rc = bindex_build(ix, (index_kind)h.kind, h.bits, codes, ids, h.n, h.mih_m);
    free(codes);
    free(ids);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", er_msg());
        return er_fail(rc, "%s: %s", path, msg);
    }
    return ER_OK;
}
