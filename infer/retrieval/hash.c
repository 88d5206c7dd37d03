/* hash.c — sign / PCA / ITQ hashing of L2-normalised embeddings. */
#include "infer/retrieval/hash.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *hash_kind_name(hash_kind k) {
    return k == HASH_SIGN ? "sign" : k == HASH_PCA ? "pca" : k == HASH_ITQ ? "itq" : "?";
}

int hash_kind_parse(const char *s, hash_kind *k) {
    if (!strcmp(s, "sign")) *k = HASH_SIGN;
    else if (!strcmp(s, "pca")) *k = HASH_PCA;
    else if (!strcmp(s, "itq")) *k = HASH_ITQ;
    else return er_fail(ER_INPUT, "--hash: '%s' is not a hashing method (sign, pca, itq)", s);
    return ER_OK;
}

static void normalized_row(const float *x, int d, double *out) {
    double s = 0;
    for (int i = 0; i < d; i++) s += (double)x[i] * x[i];
    double inv = s > 0 ? 1.0 / sqrt(s) : 0.0;
    for (int i = 0; i < d; i++) out[i] = x[i] * inv;
}

void sym_eigen(double *a, int n, double *w, double *v) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) v[i * n + j] = i == j; /* v: columns accumulate rotations */
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, diag = 0;
        for (int i = 0; i < n; i++) {
            diag += a[i * n + i] * a[i * n + i];
            for (int j = i + 1; j < n; j++) off += a[i * n + j] * a[i * n + j];
        }
        if (off <= 1e-22 * (diag > 0 ? diag : 1)) break; /* off-diagonal mass ~1e-11 of the diagonal */
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = a[p * n + q];
                if (fabs(apq) < 1e-300) continue;
                double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) { /* columns p, q */
                    double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) { /* rows p, q */
                    double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < n; k++) {
                    double vkp = v[k * n + p], vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    /* sort descending; output eigenvectors as rows */
    int *ord = xmalloc((size_t)n * sizeof *ord);
    for (int i = 0; i < n; i++) ord[i] = i;
    for (int i = 1; i < n; i++) { /* insertion sort, n is small */
        int o = ord[i], j = i;
        while (j > 0 && a[ord[j - 1] * n + ord[j - 1]] < a[o * n + o]) { ord[j] = ord[j - 1]; j--; }
        ord[j] = o;
    }
    double *vt = xmalloc((size_t)n * n * sizeof *vt);
    for (int r = 0; r < n; r++) {
        w[r] = a[ord[r] * n + ord[r]];
        for (int k = 0; k < n; k++) vt[r * n + k] = v[k * n + ord[r]];
    }
    memcpy(v, vt, (size_t)n * n * sizeof *v);
    free(vt);
    free(ord);
}

int hasher_set(hasher *h, hash_kind kind, int dim, int bits, const float *mean, const float *proj) {
    memset(h, 0, sizeof *h);
    if (dim < 1 || bits < 1) return er_fail(ER_INPUT, "hash: dim %d, bits %d", dim, bits);
    if (kind == HASH_SIGN && bits != dim)
        return er_fail(ER_INPUT, "hash: sign hashing gives %d bits (the embedding size), not bits = %d; use pca or itq", dim, bits);
    if (kind != HASH_SIGN && bits > dim)
        return er_fail(ER_INPUT, "hash: %s hashing needs bits <= embedding size (%d > %d)", hash_kind_name(kind), bits, dim);
    h->kind = kind; h->dim = dim; h->bits = bits;
    if (kind != HASH_SIGN) {
        if (!mean || !proj) return er_fail(ER_INPUT, "hash: %s hashing without its projection", hash_kind_name(kind));
        h->mean = xmalloc((size_t)dim * sizeof(float));
        h->proj = xmalloc((size_t)bits * dim * sizeof(float));
        memcpy(h->mean, mean, (size_t)dim * sizeof(float));
        memcpy(h->proj, proj, (size_t)bits * dim * sizeof(float));
    }
    return ER_OK;
}

void hasher_free(hasher *h) {
    free(h->mean);
    free(h->proj);
    memset(h, 0, sizeof *h);
}

/* R <- polar factor of M (b x b): M (M^T M)^(-1/2), the orthogonal matrix closest to M */
static void polar(const double *M, int b, double *R) {
    double *mtm = xcalloc((size_t)b * b, sizeof *mtm), *w = xmalloc((size_t)b * sizeof *w);
    double *v = xmalloc((size_t)b * b * sizeof *v), *isq = xcalloc((size_t)b * b, sizeof *isq);
    for (int i = 0; i < b; i++)
        for (int j = 0; j < b; j++) {
            double s = 0;
            for (int k = 0; k < b; k++) s += M[k * b + i] * M[k * b + j];
            mtm[i * b + j] = s;
        }
    sym_eigen(mtm, b, w, v);
    double wmax = w[0] > 0 ? w[0] : 1;
    for (int r = 0; r < b; r++) { /* isq = sum_r v_r v_r^T / sqrt(w_r) */
        double f = 1.0 / sqrt(w[r] > 1e-12 * wmax ? w[r] : 1e-12 * wmax);
        for (int i = 0; i < b; i++)
            for (int j = 0; j < b; j++) isq[i * b + j] += f * v[r * b + i] * v[r * b + j];
    }
    for (int i = 0; i < b; i++)
        for (int j = 0; j < b; j++) {
            double s = 0;
            for (int k = 0; k < b; k++) s += M[i * b + k] * isq[k * b + j];
            R[i * b + j] = s;
        }
    free(mtm); free(w); free(v); free(isq);
}

int hasher_fit(hasher *h, hash_kind kind, const float *x, int64_t n, int dim, int bits, uint64_t seed) {
    memset(h, 0, sizeof *h);
    if (kind == HASH_SIGN) return hasher_set(h, kind, dim, bits, NULL, NULL);
    if (bits > dim || bits < 1)
        return er_fail(ER_INPUT, "hash: %s hashing needs 1 <= bits <= embedding size (%d bits, %d dims)", hash_kind_name(kind), bits, dim);
    if (n < 2) return er_fail(ER_INPUT, "hash: %s hashing needs at least 2 training embeddings", hash_kind_name(kind));
    double *row = xmalloc((size_t)dim * sizeof *row), *mean = xcalloc((size_t)dim, sizeof *mean);
    for (int64_t i = 0; i < n; i++) {
        normalized_row(x + i * dim, dim, row);
        for (int j = 0; j < dim; j++) mean[j] += row[j];
    }
    for (int j = 0; j < dim; j++) mean[j] /= (double)n;
    double *cov = xcalloc((size_t)dim * dim, sizeof *cov);
    for (int64_t i = 0; i < n; i++) {
        normalized_row(x + i * dim, dim, row);
        for (int j = 0; j < dim; j++) row[j] -= mean[j];
        for (int a = 0; a < dim; a++) {
            double ra = row[a];
            for (int b = a; b < dim; b++) cov[a * dim + b] += ra * row[b];
        }
    }
    for (int a = 0; a < dim; a++)
        for (int b = 0; b < a; b++) cov[a * dim + b] = cov[b * dim + a];
    double *w = xmalloc((size_t)dim * sizeof *w), *v = xmalloc((size_t)dim * dim * sizeof *v);
    sym_eigen(cov, dim, w, v);
    if (kind == HASH_PCA) { /* a bit beyond the data's rank thresholds noise and collapses retrieval */
        int usable = 0;
        for (int j = 0; j < dim; j++) usable += w[j] > 1e-9 * (w[0] > 0 ? w[0] : 1);
        if (bits > usable) {
            free(row); free(mean); free(cov); free(w); free(v);
            return er_fail(ER_INPUT, "hash: pca hashing with %d bits, but the %lld training embeddings span only %d "
                           "usable dimensions (of %d): use --bits <= %d or --hash itq", bits, (long long)n, usable, dim, usable);
        }
    }
    double *P = xmalloc((size_t)bits * dim * sizeof *P); /* bits x dim, top directions */
    memcpy(P, v, (size_t)bits * dim * sizeof *P);
    if (kind == HASH_ITQ) {
        /* V = centred data projected (n x bits); R random orthogonal; 50 ITQ iterations */
        double *V = xmalloc((size_t)n * bits * sizeof *V);
        for (int64_t i = 0; i < n; i++) {
            normalized_row(x + i * dim, dim, row);
            for (int j = 0; j < dim; j++) row[j] -= mean[j];
            for (int b = 0; b < bits; b++) {
                double s = 0;
                for (int j = 0; j < dim; j++) s += P[(size_t)b * dim + j] * row[j];
                V[i * bits + b] = s;
            }
        }
        double *R = xmalloc((size_t)bits * bits * sizeof *R), *G = xmalloc((size_t)bits * bits * sizeof *G);
        rng_t rng = rng_make(seed, rng_stream(RNG_SAMPLING, 0x17a, 0));
        for (int i = 0; i < bits * bits; i++) G[i] = rng_normal(&rng);
        polar(G, bits, R);
        double *VR = xmalloc((size_t)bits * sizeof *VR);
        for (int it = 0; it < 50; it++) {
            memset(G, 0, (size_t)bits * bits * sizeof *G); /* G = V^T B */
            for (int64_t i = 0; i < n; i++) {
                const double *vi = V + i * bits;
                for (int c = 0; c < bits; c++) {
                    double s = 0;
                    for (int a = 0; a < bits; a++) s += vi[a] * R[a * bits + c];
                    VR[c] = s >= 0 ? 1.0 : -1.0;
                }
                for (int a = 0; a < bits; a++)
                    for (int c = 0; c < bits; c++) G[a * bits + c] += vi[a] * VR[c];
            }
            polar(G, bits, R);
        }
        /* final projection rows: (P^T R)^T = R^T P */
        double *PR = xcalloc((size_t)bits * dim, sizeof *PR);
        for (int c = 0; c < bits; c++)
            for (int a = 0; a < bits; a++) {
                double r = R[a * bits + c];
                for (int j = 0; j < dim; j++) PR[(size_t)c * dim + j] += r * P[(size_t)a * dim + j];
            }
        memcpy(P, PR, (size_t)bits * dim * sizeof *P);
        free(PR); free(VR); free(R); free(G); free(V);
    }
    float *meanf = xmalloc((size_t)dim * sizeof *meanf), *Pf = xmalloc((size_t)bits * dim * sizeof *Pf);
    for (int j = 0; j < dim; j++) meanf[j] = (float)mean[j];
    for (size_t i = 0; i < (size_t)bits * dim; i++) Pf[i] = (float)P[i];
    int rc = hasher_set(h, kind, dim, bits, meanf, Pf);
    free(meanf); free(Pf); free(P); free(w); free(v); free(cov); free(row); free(mean);
    return rc;
}

void hasher_encode(const hasher *h, const float *x, int64_t n, uint64_t *codes) {
    const int W = hash_words(h->bits), D = h->dim;
    #pragma omp parallel if (n >= 256) /* a parallel region costs more than a few rows */
    {
        double *row = xmalloc((size_t)D * sizeof *row);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            uint64_t *c = codes + i * W;
            memset(c, 0, (size_t)W * 8);
            normalized_row(x + i * D, D, row);
            for (int b = 0; b < h->bits; b++) {
                double s;
                if (h->kind == HASH_SIGN) s = row[b];
                else {
                    s = 0;
                    const float *p = h->proj + (size_t)b * D;
                    for (int j = 0; j < D; j++) s += p[j] * (row[j] - h->mean[j]);
                }
                if (s >= 0) c[b >> 6] |= 1ULL << (b & 63);
            }
        }
        free(row);
    }
}
