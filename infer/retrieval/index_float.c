/* index_float.c — exact cosine search over float embeddings: rows are L2-normalised once, a batch
 * of queries is multiplied against database blocks with the blocked sgemm, and each query keeps a
 * top-k heap of (1 - cos, id). The reference is the same arithmetic as plain dot products. */
#include "infer/retrieval/index.h"
#include "infer/retrieval/topk.h"
#include "kernels/gemm.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { FBLOCK = 8192, FQBATCH = 256 };

static void l2norm_row(float *x, int d) {
    double s = 0;
    for (int i = 0; i < d; i++) s += (double)x[i] * x[i];
    if (s > 0) {
        float inv = (float)(1.0 / sqrt(s));
        for (int i = 0; i < d; i++) x[i] *= inv;
    }
}

static void freserve(findex *ix, int64_t cap) {
    if (cap <= ix->cap) return;
    int64_t nc = ix->cap ? ix->cap : 64;
    while (nc < cap) nc *= 2;
    float *x = xmalloc_aligned((size_t)nc * ix->dim * sizeof(float));
    if (ix->n) memcpy(x, ix->x, (size_t)ix->n * ix->dim * sizeof(float));
    free(ix->x);
    ix->x = x;
    ix->ids = xrealloc(ix->ids, (size_t)nc * sizeof(int64_t));
    ix->dead = xrealloc(ix->dead, (size_t)nc);
    ix->cap = nc;
}

static uint64_t fid_hash(int64_t id) {
    uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ULL;
    return x ^ (x >> 29);
}

static void fidmap_put(findex *ix, int64_t slot) {
    uint64_t h = fid_hash(ix->ids[slot]) & (ix->idmap_cap - 1);
    while (ix->idmap[h]) h = (h + 1) & (ix->idmap_cap - 1);
    ix->idmap[h] = slot + 1;
}

/* at most half full: rebuilt at twice the slot capacity (dead slots stay in; lookups skip them) */
static void fidmap_rebuild(findex *ix) {
    free(ix->idmap);
    ix->idmap_cap = 16;
    while (ix->idmap_cap < 2 * ix->cap) ix->idmap_cap *= 2;
    ix->idmap = xcalloc((size_t)ix->idmap_cap, sizeof *ix->idmap);
    for (int64_t s = 0; s < ix->n; s++) fidmap_put(ix, s);
}

/* the live slot of id, or -1 (was a scan of every row per add / delete: quadratic for a batch) */
static int64_t fslot(const findex *ix, int64_t id) {
    if (!ix->idmap) return -1;
    for (uint64_t h = fid_hash(id) & (ix->idmap_cap - 1);; h = (h + 1) & (ix->idmap_cap - 1)) {
        int64_t e = ix->idmap[h];
        if (!e) return -1;
        if (ix->ids[e - 1] == id && !ix->dead[e - 1]) return e - 1;
    }
}

int findex_build(findex *ix, int dim, const float *x, const int64_t *ids, int64_t n) {
    memset(ix, 0, sizeof *ix);
    if (dim < 1) return er_fail(ER_INPUT, "float index: dimension %d", dim);
    ix->dim = dim;
    freserve(ix, n > 0 ? n : 1);
    for (int64_t i = 0; i < n; i++) {
        for (int j = 0; j < dim; j++)
            if (!isfinite(x[i * dim + j])) {
                findex_free(ix);
                return er_fail(ER_INPUT, "float index: row %lld has a non-finite value", (long long)i);
            }
    }
    if (n) {
        memcpy(ix->x, x, (size_t)n * dim * sizeof(float));
        memcpy(ix->ids, ids, (size_t)n * sizeof(int64_t));
        memset(ix->dead, 0, (size_t)n);
    }
    ix->n = n;
    fidmap_rebuild(ix);
    #pragma omp parallel for if (n >= 4096)
    for (int64_t i = 0; i < n; i++) l2norm_row(ix->x + i * dim, dim);
    return ER_OK;
}

int findex_add(findex *ix, const float *x, int64_t id) {
    if (fslot(ix, id) >= 0) return er_fail(ER_INPUT, "float index add: id %lld is already present", (long long)id);
    freserve(ix, ix->n + 1);
    memcpy(ix->x + ix->n * ix->dim, x, (size_t)ix->dim * sizeof(float));
    l2norm_row(ix->x + ix->n * ix->dim, ix->dim);
    ix->ids[ix->n] = id;
    ix->dead[ix->n] = 0;
    ix->n++;
    if (2 * (ix->n + 1) > ix->idmap_cap) fidmap_rebuild(ix);
    else fidmap_put(ix, ix->n - 1);
    return ER_OK;
}

int findex_delete(findex *ix, int64_t id) {
    int64_t s = fslot(ix, id);
    if (s >= 0) { ix->dead[s] = 1; ix->ndead++; return ER_OK; }
    return er_fail(ER_INPUT, "float index delete: id %lld is not in the index", (long long)id);
}

void findex_free(findex *ix) {
    free(ix->x);
    free(ix->ids);
    free(ix->dead);
    free(ix->idmap);
    memset(ix, 0, sizeof *ix);
}

static void write_outf(topkf_heap *h, int k, int64_t *ids, float *d, int *count) {
    int c = topkf_finish(h);
    *count = c;
    for (int j = 0; j < k; j++) {
        ids[j] = j < c ? h->e[j].id : -1;
        d[j] = j < c ? h->e[j].d : -1.0f;
    }
}

void findex_search(const findex *ix, const float *q, int nq, int k, int64_t *out_ids, float *out_d,
                   int *count) {
    const int D = ix->dim;
    float *qn = xmalloc_aligned((size_t)FQBATCH * D * sizeof(float));
    float *sim = xmalloc_aligned((size_t)FQBATCH * FBLOCK * sizeof(float));
    topkf_ent *e = xmalloc((size_t)FQBATCH * (k > 0 ? k : 1) * sizeof *e);
    topkf_heap *h = xmalloc((size_t)FQBATCH * sizeof *h);
    for (int q0 = 0; q0 < nq; q0 += FQBATCH) {
        int b = nq - q0 < FQBATCH ? nq - q0 : FQBATCH;
        memcpy(qn, q + (size_t)q0 * D, (size_t)b * D * sizeof(float));
        for (int i = 0; i < b; i++) {
            l2norm_row(qn + (size_t)i * D, D);
            topkf_init(&h[i], e + (size_t)i * k, k);
        }
        for (int64_t s0 = 0; s0 < ix->n; s0 += FBLOCK) {
            int nb = (int)(ix->n - s0 < FBLOCK ? ix->n - s0 : FBLOCK);
            sgemm(SGEMM_FP32, 0, 1, b, nb, D, 1.0f, qn, D, ix->x + s0 * D, D, 0.0f, sim, nb);
            #pragma omp parallel for schedule(static) if (b >= 8)
            for (int i = 0; i < b; i++) {
                const float *si = sim + (size_t)i * nb;
                for (int j = 0; j < nb; j++) {
                    float d = 1.0f - si[j];
                    if (d <= topkf_bound(&h[i]) && !ix->dead[s0 + j]) topkf_push(&h[i], d, ix->ids[s0 + j]);
                }
            }
        }
        for (int i = 0; i < b; i++)
            write_outf(&h[i], k, out_ids + (size_t)(q0 + i) * k, out_d + (size_t)(q0 + i) * k, count + q0 + i);
    }
    free(qn);
    free(sim);
    free(e);
    free(h);
}

void findex_search_ref(const findex *ix, const float *q, int nq, int k, int64_t *out_ids,
                       float *out_d, int *count) {
    const int D = ix->dim;
    float *qn = xmalloc((size_t)D * sizeof(float));
    topkf_ent *e = xmalloc((size_t)(k > 0 ? k : 1) * sizeof *e);
    for (int i = 0; i < nq; i++) {
        memcpy(qn, q + (size_t)i * D, (size_t)D * sizeof(float));
        l2norm_row(qn, D);
        topkf_heap h;
        topkf_init(&h, e, k);
        for (int64_t s = 0; s < ix->n; s++) {
            if (ix->dead[s]) continue;
            double dot = 0;
            for (int j = 0; j < D; j++) dot += (double)qn[j] * ix->x[s * D + j];
            topkf_push(&h, (float)(1.0 - dot), ix->ids[s]);
        }
        write_outf(&h, k, out_ids + (size_t)i * k, out_d + (size_t)i * k, count + i);
    }
    free(qn);
    free(e);
}
