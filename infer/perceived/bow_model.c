/* bow_model.c — see bow_model.h. */
#include "infer/perceived/bow_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "infer/perceived/kmeans.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

int bow_vocab_save(const char *path, const bow_vocab *v) {
    st_writer *w = st_writer_new();
    int64_t shape[2] = {v->k, DSIFT_DIM};
    st_add(w, "words", ST_F32, 2, shape, v->words);
    char buf[32];
    st_add_meta(w, "endoret.kind", "bow_vocabulary");
    snprintf(buf, sizeof buf, "%d", v->sift.step); st_add_meta(w, "step", buf);
    snprintf(buf, sizeof buf, "%d", v->sift.radius); st_add_meta(w, "radius", buf);
    snprintf(buf, sizeof buf, "%d", v->sift.downscale); st_add_meta(w, "downscale", buf);
    snprintf(buf, sizeof buf, "%d", v->sift.rotate); st_add_meta(w, "rotate", buf);
    int rc = st_write(w, path);
    st_writer_free(w);
    return rc;
}

static int meta_int(const st_file *f, const char *path, const char *key, int lo, int hi, int *out) {
    const char *s = st_meta(f, key);
    char *e;
    if (!s) return er_fail(ER_INPUT, "%s: metadata \"%s\" missing (not a bow vocabulary?)", path, key);
    long v = strtol(s, &e, 10);
    if (*e || e == s || v < lo || v > hi) return er_fail(ER_INPUT, "%s: metadata \"%s\" = '%s' is not an integer in %d..%d", path, key, s, lo, hi);
    *out = (int)v;
    return ER_OK;
}

int bow_vocab_load(const char *path, bow_vocab *v) {
    memset(v, 0, sizeof *v);
    st_file f;
    int rc = st_open(path, &f);
    if (rc) return rc;
    const char *kind = st_meta(&f, "endoret.kind");
    const st_tensor *t = st_find(&f, "words");
    if (!kind || strcmp(kind, "bow_vocabulary")) rc = er_fail(ER_INPUT, "%s: not a bow vocabulary (endoret.kind)", path);
    else if (!t || t->ndim != 2 || t->shape[1] != DSIFT_DIM || t->shape[0] < 1 || t->shape[0] > 1000000)
        rc = er_fail(ER_INPUT, "%s: \"words\" must be F32 [K, %d]", path, DSIFT_DIM);
    if (!rc) rc = meta_int(&f, path, "step", 1, 100000, &v->sift.step);
    if (!rc) rc = meta_int(&f, path, "radius", 1, 100000, &v->sift.radius);
    if (!rc) rc = meta_int(&f, path, "downscale", 0, 100000, &v->sift.downscale);
    if (!rc) rc = meta_int(&f, path, "rotate", 0, 1, &v->sift.rotate);
    if (!rc) {
        v->k = (int)t->shape[0];
        v->words = xmalloc((size_t)v->k * DSIFT_DIM * sizeof(float));
        rc = st_read_f32(&f, "words", v->words, (int64_t)v->k * DSIFT_DIM);
        for (int i = 0; !rc && i < v->k * DSIFT_DIM; i++)
            if (!(v->words[i] == v->words[i]) || v->words[i] > 1e30f || v->words[i] < -1e30f) rc = er_fail(ER_INPUT, "%s: non-finite word value", path);
    }
    st_close(&f);
    if (rc) bow_vocab_free(v);
    return rc;
}

void bow_vocab_free(bow_vocab *v) {
    free(v->words);
    v->words = NULL;
    v->k = 0;
}

float *bow_image_descriptors(const float *gray, int w, int h, const dsift_cfg *c, int *n) {
    *n = dsift_count(w, h, c);
    float *d = xmalloc((size_t)*n * DSIFT_DIM * sizeof(float));
    dsift_compute(gray, w, h, c, d, NULL);
    return d;
}

int bow_vocab_train(float *const *desc, const int *ndesc, int nimg, int k, int max_desc, int iters, uint64_t seed,
                    const dsift_cfg *sift, bow_vocab *v) {
    int64_t total = 0;
    for (int i = 0; i < nimg; i++) total += ndesc[i];
    if (total < k) return er_fail(ER_INPUT, "bow: %lld descriptors for %d words; need at least as many descriptors as words", (long long)total, k);
    int per = nimg ? (max_desc + nimg - 1) / nimg : 0;
    if (per < 1) per = 1;
    int64_t cap = 0;
    for (int i = 0; i < nimg; i++) cap += ndesc[i] < per ? ndesc[i] : per;
    if (cap < k) per = 1 << 30, cap = total; /* too few per image: take all */
    float *x = xmalloc((size_t)cap * DSIFT_DIM * sizeof(float));
    int64_t m = 0;
    int *idx = NULL, idx_cap = 0;
    for (int i = 0; i < nimg; i++) {
        int take = ndesc[i] < per ? ndesc[i] : per;
        if (ndesc[i] > idx_cap) { idx_cap = ndesc[i]; idx = xrealloc(idx, idx_cap * sizeof(int)); }
        for (int j = 0; j < ndesc[i]; j++) idx[j] = j;
        if (take < ndesc[i]) {
            rng_t r = rng_make(seed, rng_stream(RNG_SAMPLING, 0xb0, (uint32_t)i));
            rng_shuffle(&r, idx, ndesc[i]);
        }
        for (int j = 0; j < take; j++) memcpy(x + (size_t)m++ * DSIFT_DIM, desc[i] + (size_t)idx[j] * DSIFT_DIM, DSIFT_DIM * sizeof(float));
    }
    free(idx);
    v->sift = *sift;
    v->k = k;
    v->words = xmalloc((size_t)k * DSIFT_DIM * sizeof(float));
    kmeans_fit(x, (int)m, DSIFT_DIM, k, iters, seed, v->words, NULL);
    free(x);
    return ER_OK;
}

void bow_signature(const bow_vocab *v, const float *desc, int n, float *hist) {
    memset(hist, 0, v->k * sizeof(float));
    if (n <= 0) return;
    int *lab = xmalloc((size_t)n * sizeof(int));
    kmeans_assign(desc, n, DSIFT_DIM, v->words, v->k, lab, NULL);
    for (int i = 0; i < n; i++) hist[lab[i]] += 1.f;
    for (int j = 0; j < v->k; j++) hist[j] /= (float)n;
    free(lab);
}

typedef struct { int64_t g; int i; } grp_row;
static int cmp_grp_row(const void *pa, const void *pb) {
    const grp_row *a = pa, *b = pb;
    if (a->g != b->g) return a->g < b->g ? -1 : 1;
    return a->i - b->i;
}

int bow_pool(const float *h, int n, int K, const int64_t *group, float **out, int64_t **gid, int **first_row) {
    /* group of each row via a sort by (group, row): O(n log n) */
    int *g = xmalloc((n ? n : 1) * sizeof(int)), ng = 0;
    int64_t *ids = xmalloc((n ? n : 1) * sizeof(int64_t));
    int *first = xmalloc((n ? n : 1) * sizeof(int));
    grp_row *t = xmalloc((n ? n : 1) * sizeof *t);
    for (int i = 0; i < n; i++) t[i] = (grp_row){group && group[i] >= 0 ? group[i] : -1, i};
    qsort(t, n, sizeof *t, cmp_grp_row);
    int *leader = xmalloc((n ? n : 1) * sizeof(int)); /* first row of the row's group */
    for (int s = 0; s < n; s++) leader[t[s].i] = (t[s].g >= 0 && s > 0 && t[s - 1].g == t[s].g) ? leader[t[s - 1].i] : t[s].i;
    free(t);
    /* number groups in order of first appearance */
    int *num = xmalloc((n ? n : 1) * sizeof(int));
    for (int i = 0; i < n; i++) {
        if (leader[i] == i) { num[i] = ng; ids[ng] = group ? group[i] : i; first[ng] = i; ng++; }
        g[i] = num[leader[i]];
    }
    free(num);
    free(leader);
    float *o = xcalloc((size_t)(ng ? ng : 1) * K, sizeof(float));
    for (int i = 0; i < n; i++)
        for (int k = 0; k < K; k++) o[(size_t)g[i] * K + k] += h[(size_t)i * K + k];
    for (int j = 0; j < ng; j++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += o[(size_t)j * K + k];
        if (s > 0) for (int k = 0; k < K; k++) o[(size_t)j * K + k] = (float)(o[(size_t)j * K + k] / s);
    }
    free(g);
    *out = o;
    *gid = ids;
    if (first_row) *first_row = first; else free(first);
    return ng;
}
