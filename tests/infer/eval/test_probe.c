/* The linear probe of the diagnosis table: its loss gradient against central differences, a
 * separable set learned perfectly under cross-validation, shuffled labels near chance, and the same
 * folds as the kNN protocol. */
#include <math.h>
#include <stdlib.h>

#include "infer/eval/knn_cv.h"
#include "infer/eval/probe_cv.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

enum { N = 120, DIM = 6, C = 3 };

static void blobs(float *x, int *y, uint64_t seed, float sep) {
    rng_t r = rng_make(seed, 0);
    for (int i = 0; i < N; i++) {
        y[i] = i % C;
        for (int j = 0; j < DIM; j++) x[i * DIM + j] = rng_normal(&r) + (j == y[i] ? sep : 0.0f);
    }
}

Test(probe, gradient_matches_central_differences) {
    float x[N * DIM];
    int y[N];
    blobs(x, y, 1, 1.0f);
    y[5] = -1; /* unlabelled rows do not count */
    double W[C * DIM], b[C], gW[C * DIM], gb[C];
    rng_t r = rng_make(2, 0);
    for (int k = 0; k < C * DIM; k++) W[k] = 0.3 * rng_normal(&r);
    for (int c = 0; c < C; c++) b[c] = 0.1 * c;
    probe_loss(x, y, N, DIM, C, W, b, 0.01, gW, gb);
    const double h = 1e-5;
    for (int k = 0; k < C * DIM; k++) {
        double s = W[k];
        W[k] = s + h; double lp = probe_loss(x, y, N, DIM, C, W, b, 0.01, NULL, NULL);
        W[k] = s - h; double lm = probe_loss(x, y, N, DIM, C, W, b, 0.01, NULL, NULL);
        W[k] = s;
        cr_assert(fabs((lp - lm) / (2 * h) - gW[k]) < 1e-6, "dW[%d] %g vs %g", k, (lp - lm) / (2 * h), gW[k]);
    }
    for (int c = 0; c < C; c++) {
        double s = b[c];
        b[c] = s + h; double lp = probe_loss(x, y, N, DIM, C, W, b, 0.01, NULL, NULL);
        b[c] = s - h; double lm = probe_loss(x, y, N, DIM, C, W, b, 0.01, NULL, NULL);
        b[c] = s;
        cr_assert(fabs((lp - lm) / (2 * h) - gb[c]) < 1e-6, "db[%d]", c);
    }
}

/* Values by hand: zero weights give log C; one row of 2 classes with logits (1, 0) and label 0 gives
 * log(1 + e^-1), plus l2/2 * ||W||^2. */
Test(probe, loss_values_by_hand) {
    float x[N * DIM];
    int y[N];
    blobs(x, y, 5, 1.0f);
    double W[C * DIM] = {0}, b[C] = {0};
    cr_assert_float_eq(probe_loss(x, y, N, DIM, C, W, b, 0.5, NULL, NULL), log(3.0), 1e-12);
    float x1[2] = {1, 0};
    int y1[1] = {0};
    double W2[4] = {1, 0, 0, 0}, b2[2] = {0, 0};
    cr_assert_float_eq(probe_loss(x1, y1, 1, 2, 2, W2, b2, 0.2, NULL, NULL), log(1 + exp(-1.0)) + 0.1, 1e-12);
}

static double cv_accuracy(const float *x, const int *y, int *fold) {
    int pred[N];
    double score[N * C];
    cr_assert_eq(probe_cv(x, N, DIM, y, NULL, C, 5, 7, 1e-3, pred, score, fold), 0);
    int right = 0;
    for (int i = 0; i < N; i++) {
        right += pred[i] == y[i];
        double s = 0;
        for (int c = 0; c < C; c++) s += score[i * C + c];
        cr_assert(fabs(s - 1) < 1e-9, "probabilities of row %d sum to %g", i, s);
    }
    return (double)right / N;
}

Test(probe, separable_learned_shuffled_at_chance_same_folds_as_knn) {
    float x[N * DIM];
    int y[N], fold[N], kfold[N];
    blobs(x, y, 3, 6.0f);
    double acc = cv_accuracy(x, y, fold);
    cr_assert(acc == 1.0, "separable blobs: accuracy %g", acc);
    /* labels unrelated to the features */
    rng_t r = rng_make(4, 0);
    int z[N];
    for (int i = 0; i < N; i++) z[i] = (int)rng_below(&r, C);
    acc = cv_accuracy(x, z, fold);
    cr_assert(acc < 0.5, "random labels: accuracy %g (chance 1/3)", acc);
    /* the kNN protocol with the same seed puts every item in the same fold */
    knn_cv_cfg kc = {.k = 3, .folds = 5, .seed = 7};
    int pred[N];
    double score[N * C];
    cr_assert_eq(knn_cv(x, N, DIM, z, NULL, C, &kc, pred, score, kfold), 0);
    for (int i = 0; i < N; i++) cr_assert_eq(fold[i], kfold[i], "item %d", i);
}
