/* Dense SIFT invariances and k-means fixed-point properties. */
#include <math.h>
#include <string.h>

#include "infer/perceived/dsift.h"
#include "infer/perceived/kmeans.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static float *texture(int w, int h, uint64_t seed) {
    float *im = xmalloc((size_t)w * h * sizeof(float));
    rng_t r = rng_make(seed, 1);
    double a[6];
    for (int i = 0; i < 6; i++) a[i] = rng_uniform_double(&r);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            im[y * w + x] = (float)(sin(0.31 * x + 3 * a[0]) * cos(0.17 * y + 3 * a[1]) + 0.5 * sin(0.05 * (x + 2 * y) * (1 + a[2])) +
                                    0.3 * sin(0.45 * x * a[3] - 0.2 * y) + 0.2 * rng_uniform(&r) + 0.4 * exp(-((x - 14.0) * (x - 14.0) + (y - 25.0) * (y - 25.0)) / 30));
    return im;
}

static double cosine(const float *a, const float *b, int n) {
    double s = 0, na = 0, nb = 0;
    for (int i = 0; i < n; i++) { s += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
    return s / sqrt(na * nb);
}

Test(perceived_dsift, grid_count_and_norm) {
    dsift_cfg c = {10, 15, 1, 1};
    int w = 70, h = 50;
    cr_assert_eq(dsift_count(w, h, &c), ((70 - 30) / 10 + 1) * ((50 - 30) / 10 + 1));
    float *im = texture(w, h, 1);
    int n = dsift_count(w, h, &c);
    float *d = xmalloc((size_t)n * DSIFT_DIM * sizeof(float)), cen[2 * 64];
    cr_assert_eq(dsift_compute(im, w, h, &c, d, cen), n);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int k = 0; k < DSIFT_DIM; k++) { s += d[i * DSIFT_DIM + k] * d[i * DSIFT_DIM + k]; cr_assert(d[i * DSIFT_DIM + k] >= 0); }
        cr_assert_float_eq(s, 1.0, 1e-4);
    }
    /* disks lie inside the image: centre - r >= -0.5 and centre + r <= size - 0.5 (pixel extents) */
    cr_assert(cen[0] >= 14.5f && cen[1] >= 14.5f && cen[2 * n - 2] <= w - 15.5f && cen[2 * n - 1] <= h - 15.5f);
    /* default configuration (auto downscale) on a bigger image, and a flat image -> zero descriptors */
    dsift_cfg_default(&c);
    float *big = xcalloc(200 * 160, sizeof(float));
    int nb = dsift_count(200, 160, &c);
    float *db = xmalloc((size_t)nb * DSIFT_DIM * sizeof(float));
    cr_assert_eq(dsift_compute(big, 200, 160, &c, db, NULL), nb);
    for (int k = 0; k < nb * DSIFT_DIM; k++) cr_assert(db[k] == 0);
    free(big); free(db); free(d); free(im);
}

/* Affine intensity change a*I + b (a > 0) leaves descriptors unchanged; a 90-degree rotation of
 * the image about the disk centre leaves the rotation-normalised descriptor unchanged. */
Test(perceived_dsift, intensity_and_rotation_invariance) {
    const int S = 41;
    dsift_cfg c = {20, 20, 1, 1};
    float *im = texture(S, S, 5), *aff = xmalloc(S * S * sizeof(float)), *rot = xmalloc(S * S * sizeof(float));
    for (int i = 0; i < S * S; i++) aff[i] = 3.5f * im[i] + 10.f;
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) rot[x * S + (S - 1 - y)] = im[y * S + x];
    float d0[DSIFT_DIM], d1[DSIFT_DIM], d2[DSIFT_DIM], d3[DSIFT_DIM];
    cr_assert_eq(dsift_count(S, S, &c), 1);
    dsift_compute(im, S, S, &c, d0, NULL);
    dsift_compute(aff, S, S, &c, d1, NULL);
    dsift_compute(rot, S, S, &c, d2, NULL);
    for (int k = 0; k < DSIFT_DIM; k++) cr_assert(fabsf(d0[k] - d1[k]) < 1e-4, "bin %d: %f vs %f", k, d0[k], d1[k]);
    double cr = cosine(d0, d2, DSIFT_DIM);
    cr_assert(cr > 0.98, "rotated: cosine %f", cr);
    /* without rotation normalisation the rotated descriptor differs */
    c.rotate = 0;
    dsift_compute(im, S, S, &c, d0, NULL);
    dsift_compute(rot, S, S, &c, d3, NULL);
    cr_assert(cosine(d0, d3, DSIFT_DIM) < cr - 0.1, "unnormalised %f vs normalised %f", cosine(d0, d3, DSIFT_DIM), cr);
    free(im); free(aff); free(rot);
}

/* A horizontal ramp has every gradient at angle 0: with rotate = 0 all energy is in orientation 0. */
Test(perceived_dsift, ramp_orientation) {
    const int S = 41;
    float im[41 * 41];
    for (int y = 0; y < S; y++) for (int x = 0; x < S; x++) im[y * S + x] = 0.1f * x;
    dsift_cfg c = {20, 20, 1, 0};
    float d[DSIFT_DIM];
    dsift_compute(im, S, S, &c, d, NULL);
    for (int k = 0; k < DSIFT_DIM; k++)
        if (k % 8) cr_assert(d[k] == 0, "bin %d = %f", k, d[k]);
        else cr_assert(d[k] > 0);
}

/* Three separated blobs: k-means recovers them; result is a fixed point (each point on its
 * nearest centre, each centre the mean of its points); same seed -> same centres. */
Test(perceived_kmeans, blobs_fixed_point) {
    const int n = 300, dim = 4, k = 3;
    float *x = xmalloc(n * dim * sizeof(float)), c[12], c2[12];
    rng_t r = rng_make(2, 2);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++) x[i * dim + j] = 10.f * (i % 3) * (j == i % 3 ? 1 : 0) + rng_normal(&r);
    double inertia;
    int it = kmeans_fit(x, n, dim, k, 100, 7, c, &inertia);
    cr_assert(it >= 1 && it < 100);
    int lab[300];
    float d2[300];
    kmeans_assign(x, n, dim, c, k, lab, d2);
    for (int i = 3; i < n; i++) cr_assert_eq(lab[i], lab[i % 3], "point %d", i); /* blobs intact */
    double mean[12] = {0}, cnt[3] = {0}, s = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < dim; j++) mean[lab[i] * dim + j] += x[i * dim + j];
        cnt[lab[i]]++;
        s += d2[i];
    }
    for (int j = 0; j < k * dim; j++) cr_assert_float_eq(c[j], mean[j] / cnt[j / dim], 1e-4);
    cr_assert_float_eq(inertia, s, 1e-3 * s);
    kmeans_fit(x, n, dim, k, 100, 7, c2, NULL);
    cr_assert(!memcmp(c, c2, sizeof c));
    /* k = n: every point its own centre, zero inertia */
    kmeans_fit(x, 5, dim, 5, 10, 1, x + 100 * dim, &inertia);
    cr_assert_float_eq(inertia, 0.0, 1e-9);
    free(x);
}
