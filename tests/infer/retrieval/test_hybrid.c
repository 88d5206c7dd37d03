/* test_hybrid.c — `embed --hybrid A --hist H --hist-weight W` (infer/retrieval/hybrid.h): the cosine of
 * two hybrid rows against (1 - w) cos(a, a') + w sum_k sqrt(p_k p'_k) computed here in double from the
 * raw rows; the ends w = 0 and w = 1; mismatched or non-histogram input refused with one message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/retrieval/embeddings.h"
#include "infer/retrieval/hybrid.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_embed(int argc, char **argv);

enum { N = 5, DA = 4, DH = 6 };
static const float A[N][DA] = {{1, 2, 0, -1}, {0.5f, -3, 2, 2}, {-1, -1, 4, 0}, {2, 0, 0, 0}, {0.1f, 0.2f, -0.3f, 0.4f}};
static const float H[N][DH] = {{3, 0, 1, 0, 0, 6}, {1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 2, 0}, {10, 5, 0, 0, 0, 5}, {0, 7, 0, 1, 0, 0}};

static void make(emb_set *a, emb_set *h) {
    emb_alloc(a, N, DA);
    emb_alloc(h, N, DH);
    memcpy(a->x, A, sizeof A), memcpy(h->x, H, sizeof H);
    a->scene = xmalloc(sizeof(int64_t) * N), a->view = xmalloc(sizeof(int64_t) * N);
    h->scene = xmalloc(sizeof(int64_t) * N), h->view = xmalloc(sizeof(int64_t) * N);
    for (int i = 0; i < N; i++) a->scene[i] = h->scene[i] = i / 2, a->view[i] = h->view[i] = i % 2;
    a->distance = xstrdup("cosine"), h->distance = xstrdup("chi2");
    a->model = xstrdup("learned"), h->model = xstrdup("hist");
}

static double expected(int i, int j, double w) {
    double d = 0, ni = 0, nj = 0, si = 0, sj = 0, bc = 0;
    for (int k = 0; k < DA; k++) d += A[i][k] * A[j][k], ni += A[i][k] * A[i][k], nj += A[j][k] * A[j][k];
    for (int k = 0; k < DH; k++) si += H[i][k], sj += H[j][k];
    for (int k = 0; k < DH; k++) bc += sqrt(H[i][k] / si * H[j][k] / sj);
    return (1 - w) * d / sqrt(ni * nj) + w * bc;
}

static double cosine(const emb_set *e, int i, int j) {
    double d = 0, ni = 0, nj = 0;
    for (int k = 0; k < e->dim; k++) {
        double x = e->x[(size_t)i * e->dim + k], y = e->x[(size_t)j * e->dim + k];
        d += x * y, ni += x * x, nj += y * y;
    }
    return d / sqrt(ni * nj);
}

Test(retrieval_hybrid, cosine_is_the_weighted_sum_of_cosine_and_bhattacharyya) {
    emb_set a, h, o;
    make(&a, &h);
    const double ws[] = {0, 0.25, 0.5, 0.9, 1};
    for (int t = 0; t < 5; t++) {
        cr_assert_eq(emb_hybrid(&a, &h, ws[t], &o), ER_OK, "%s", er_msg());
        cr_assert_eq(o.dim, DA + DH);
        cr_assert_str_eq(o.distance, "cosine");
        for (int i = 0; i < N; i++) {
            cr_assert_eq(o.scene[i], a.scene[i]);
            cr_assert_eq(o.view[i], a.view[i]);
            double n2 = 0;
            for (int k = 0; k < o.dim; k++) n2 += (double)o.x[(size_t)i * o.dim + k] * o.x[(size_t)i * o.dim + k];
            if (ws[t] > 0) cr_assert(fabs(n2 - 1) < 1e-5, "row %d norm^2 %g", i, n2);
            for (int j = 0; j < N; j++) {
                double got = ws[t] > 0 ? (n2 > 0 ? cosine(&o, i, j) : 0) : cosine(&o, i, j);
                cr_assert(fabs(got - expected(i, j, ws[t])) < 1e-5, "w %g rows %d %d: %.7f, expected %.7f", ws[t], i, j, got,
                          expected(i, j, ws[t]));
            }
        }
        emb_free(&o);
    }
    emb_free(&a), emb_free(&h);
}

Test(retrieval_hybrid, bad_input_is_one_message) {
    emb_set a, h, o;
    make(&a, &h);
    cr_assert_eq(emb_hybrid(&a, &h, 1.5, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "weight 1.5"), "%s", er_msg());
    h.view[3] = 7; /* another frame */
    cr_assert_eq(emb_hybrid(&a, &h, 0.5, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "different rows"), "%s", er_msg());
    h.view[3] = a.view[3];
    h.x[2 * DH + 1] = -0.5f;
    cr_assert_eq(emb_hybrid(&a, &h, 0.5, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "item 2") && strstr(er_msg(), "non-negative"), "%s", er_msg());
    h.x[2 * DH + 1] = 0;
    free(h.distance), h.distance = xstrdup("cosine"); /* not a histogram file */
    cr_assert_eq(emb_hybrid(&a, &h, 0.5, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "not chi2"), "%s", er_msg());
    free(h.distance), h.distance = xstrdup("chi2");
    free(a.distance), a.distance = xstrdup("chi2");
    cr_assert_eq(emb_hybrid(&a, &h, 0.5, &o), ER_INPUT);
    cr_assert(strstr(er_msg(), "hybrid (learned)"), "%s", er_msg()); /* a chi2 file of negative values: refused by its distance */
    emb_free(&a), emb_free(&h);
}

/* the command: the file it writes holds the hybrid rows; a missing --hist-weight is refused */
Test(retrieval_hybrid, embed_hybrid_command) {
    const char *d = test_tmpdir();
    char *pa = path_join(d, "a.safetensors"), *ph = path_join(d, "h.safetensors"), *po = path_join(d, "o.safetensors");
    emb_set a, h, o, m;
    make(&a, &h);
    cr_assert_eq(emb_save(pa, &a), ER_OK);
    cr_assert_eq(emb_save(ph, &h), ER_OK);
    char *argv[] = {"embed", "--hybrid", pa, "--hist", ph, "--hist-weight", "0.25", "--out", po, NULL};
    cr_assert_eq(cmd_embed(9, argv), ER_OK, "%s", er_msg());
    cr_assert_eq(emb_load(po, &o), ER_OK);
    cr_assert_eq(emb_hybrid(&a, &h, 0.25, &m), ER_OK);
    cr_assert_eq(o.n, N);
    cr_assert(!memcmp(o.x, m.x, sizeof(float) * N * (DA + DH)));
    cr_assert(strstr(o.model, "hybrid") && strstr(o.model, "Bhattacharyya"), "%s", o.model);
    char *noweight[] = {"embed", "--hybrid", pa, "--hist", ph, "--out", po, NULL};
    cr_assert_eq(cmd_embed(7, noweight), ER_INPUT);
    cr_assert(strstr(er_msg(), "--hist-weight"), "%s", er_msg());
    emb_free(&a), emb_free(&h), emb_free(&o), emb_free(&m);
    free(pa), free(ph), free(po);
}
