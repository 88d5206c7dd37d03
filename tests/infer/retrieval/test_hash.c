/* Hashing: sign bits, PCA directions (eigen-decomposition residuals), ITQ orthogonality and its
 * lower quantisation error; packing and zeroed tail bits. */
#include "tests/test_util.h"
#include "infer/retrieval/hash.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <math.h>
#include <string.h>

Test(infer_hash, sign_bits_and_packing) {
    float x[2 * 70];
    for (int j = 0; j < 70; j++) { x[j] = (j % 3 == 0) ? -1.0f : (j % 3 == 1 ? 0.0f : 2.0f); x[70 + j] = -x[j] - 0.5f; }
    hasher h;
    cr_assert_eq(hasher_fit(&h, HASH_SIGN, x, 2, 70, 70, 0), ER_OK);
    uint64_t c[4];
    hasher_encode(&h, x, 2, c);
    for (int j = 0; j < 70; j++) {
        int want = x[j] >= 0; /* sign(0) = +1, as EndoFinder's hash layer */
        cr_expect_eq((int)(c[j / 64] >> (j % 64) & 1), want, "bit %d", j);
        cr_expect_eq((int)(c[2 + j / 64] >> (j % 64) & 1), x[70 + j] >= 0, "row 2 bit %d", j);
    }
    cr_expect_eq(c[1] >> 6, 0, "bits beyond 70 are zero");
    hasher_free(&h);
    cr_expect_eq(hasher_fit(&h, HASH_SIGN, x, 2, 70, 64, 0), ER_INPUT, "sign hashing gives dim bits only");
    cr_expect_eq(hasher_fit(&h, HASH_PCA, x, 2, 70, 71, 0), ER_INPUT, "bits > dim rejected");
}

Test(infer_hash, jacobi_eigen_residual) {
    int n = 12;
    double a[144], a0[144], w[12], v[144];
    rng_t r = rng_make(1, 2);
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) a[i * n + j] = a[j * n + i] = rng_normal(&r);
    memcpy(a0, a, sizeof a);
    sym_eigen(a, n, w, v);
    for (int e = 0; e < n; e++) {
        if (e) cr_expect_geq(w[e - 1], w[e], "descending");
        double norm = 0;
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < n; j++) s += a0[i * n + j] * v[e * n + j];
            cr_expect_float_eq(s, w[e] * v[e * n + i], 1e-9, "A v = w v");
            norm += v[e * n + i] * v[e * n + i];
        }
        cr_expect_float_eq(norm, 1.0, 1e-9);
    }
}

static double quant_error(const hasher *h, const float *x, int n, int d) {
    /* || B - V ||^2 with V the projected centred normalised data, B = sign(V) (ITQ's objective) */
    double err = 0;
    for (int i = 0; i < n; i++) {
        double s = 0, row[64];
        for (int j = 0; j < d; j++) s += (double)x[i * d + j] * x[i * d + j];
        for (int j = 0; j < d; j++) row[j] = x[i * d + j] / sqrt(s) - h->mean[j];
        for (int b = 0; b < h->bits; b++) {
            double v = 0;
            for (int j = 0; j < d; j++) v += h->proj[b * d + j] * row[j];
            double bb = v >= 0 ? 1 : -1;
            err += (bb - v) * (bb - v);
        }
    }
    return err;
}

Test(infer_hash, pca_and_itq) {
    int n = 600, d = 16, bits = 8;
    float *x = malloc((size_t)n * d * 4);
    rng_t r = rng_make(3, 4);
    /* anisotropic data: coordinate j has scale 1/(1+j) around a common offset */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) x[i * d + j] = 3.0f + rng_normal(&r) / (1.0f + j);
    hasher p, q;
    cr_assert_eq(hasher_fit(&p, HASH_PCA, x, n, d, bits, 0), ER_OK);
    cr_assert_eq(hasher_fit(&q, HASH_ITQ, x, n, d, bits, 0), ER_OK);
    /* projections have orthonormal rows in both cases (ITQ: an orthogonal rotation of PCA's) */
    for (int pass = 0; pass < 2; pass++) {
        const hasher *h = pass ? &q : &p;
        for (int a = 0; a < bits; a++)
            for (int b = 0; b < bits; b++) {
                double s = 0;
                for (int j = 0; j < d; j++) s += (double)h->proj[a * d + j] * h->proj[b * d + j];
                cr_expect_float_eq(s, a == b ? 1.0 : 0.0, 1e-4, "%s rows %d,%d", pass ? "itq" : "pca", a, b);
            }
    }
    /* the first PCA direction is (nearly) the largest-variance coordinate after normalisation */
    double best = 0;
    int bj = -1;
    for (int j = 0; j < d; j++) if (fabs(p.proj[j]) > best) { best = fabs(p.proj[j]); bj = j; }
    cr_expect_eq(bj, 0, "first principal direction along coordinate 0");
    /* ITQ lowers the quantisation error of the PCA projection */
    double ep = quant_error(&p, x, n, d), eq = quant_error(&q, x, n, d);
    cr_expect_lt(eq, ep, "ITQ %.3f vs PCA %.3f", eq, ep);
    /* restoring a hasher from its stored arrays gives the same codes */
    hasher c;
    cr_assert_eq(hasher_set(&c, HASH_ITQ, d, bits, q.mean, q.proj), ER_OK);
    uint64_t c1[600], c2[600];
    hasher_encode(&q, x, n, c1);
    hasher_encode(&c, x, n, c2);
    cr_expect_eq(memcmp(c1, c2, sizeof c1), 0);
    /* balanced bits: PCA on centred data splits each bit roughly in half */
    int ones = 0;
    for (int i = 0; i < n; i++) ones += (int)(c1[i] & 1);
    cr_expect(ones > n / 5 && ones < 4 * n / 5, "bit 0 set in %d of %d", ones, n);
    hasher_free(&p); hasher_free(&q); hasher_free(&c);
    free(x);
}

/* 10 embeddings span at most 9 centred dimensions: 12 PCA bits are refused with the numbers */
Test(infer_hash, pca_refuses_more_bits_than_usable_dimensions) {
    int n = 10, d = 16;
    float x[10 * 16];
    rng_t r = rng_make(5, 6);
    for (int i = 0; i < n * d; i++) x[i] = rng_normal(&r);
    hasher h;
    cr_assert_eq(hasher_fit(&h, HASH_PCA, x, n, d, 12, 0), ER_INPUT);
    cr_expect(strstr(er_msg(), "12 bits") && strstr(er_msg(), "10 training embeddings") && strstr(er_msg(), "only 9 usable"),
              "%s", er_msg());
    cr_assert_eq(hasher_fit(&h, HASH_PCA, x, n, d, 9, 0), ER_OK, "%s", er_msg());
    hasher_free(&h);
}
