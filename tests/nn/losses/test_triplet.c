/* Cosine triplet loss with the batch miner (nn/losses/triplet.h): value, counts and gradient against
 * torch float64 (tests/nn/losses/make_triplet_refs.py -> triplet_refs.h, PML's algorithm written
 * vectorised), the miner against a brute-force enumeration over the n^3 index cube, and the
 * gradient against finite differences. */
#include <math.h>

#include "nn/losses/triplet.h"
#include "tests/nn/gradcheck.h"
#include "tests/nn/losses/triplet_refs.h"
#include "tests/test_util.h"

static void check_ref(const float *E, const int *labels, int n, int D, const char *kind, double mm, double margin,
                      double loss, int64_t valid, int64_t mined, int64_t active, const double *grad) {
    miner_kind k;
    cr_assert_eq(miner_parse(kind, "loss.miner", &k), ER_OK);
    tensor *e = tensor_from_host_new(2, SHAPE(n, D), E);
    tensor_set_requires_grad(e, 1);
    triplet_stats st;
    tensor *l = triplet_loss(e, labels, k, mm, margin, &st);
    cr_assert_not_null(l, "%s", er_msg());
    cr_assert_eq(st.valid, valid, "valid %lld vs torch %lld", (long long)st.valid, (long long)valid);
    cr_assert_eq(st.mined, mined, "mined %lld vs torch %lld", (long long)st.mined, (long long)mined);
    cr_assert_eq(st.active, active, "active %lld vs torch %lld", (long long)st.active, (long long)active);
    cr_assert(fabs(tensor_item(l) - loss) < 2e-6 * fmax(1, fabs(loss)), "loss %.9g vs torch %.9g", tensor_item(l), loss);
    backward(l);
    for (int i = 0; i < n * D; i++)
        cr_assert(fabs(e->grad->data[i] - grad[i]) < 1e-5 + 1e-4 * fabs(grad[i]), "grad[%d] %g vs torch %g", i,
                  e->grad->data[i], grad[i]);
    nn_step_end();
    tensor_free(e);
}

Test(triplet, semihard_against_torch) {
    check_ref(REF_SEMI_E, REF_SEMI_LABELS, REF_SEMI_N, REF_SEMI_D, REF_SEMI_KIND, REF_SEMI_MINER_MARGIN, REF_SEMI_MARGIN,
              REF_SEMI_LOSS, REF_SEMI_VALID, REF_SEMI_MINED, REF_SEMI_ACTIVE, REF_SEMI_GRAD);
}
Test(triplet, hard_against_torch) {
    check_ref(REF_HARD_E, REF_HARD_LABELS, REF_HARD_N, REF_HARD_D, REF_HARD_KIND, REF_HARD_MINER_MARGIN, REF_HARD_MARGIN,
              REF_HARD_LOSS, REF_HARD_VALID, REF_HARD_MINED, REF_HARD_ACTIVE, REF_HARD_GRAD);
}
Test(triplet, all_against_torch) {
    check_ref(REF_ALL_E, REF_ALL_LABELS, REF_ALL_N, REF_ALL_D, REF_ALL_KIND, REF_ALL_MINER_MARGIN, REF_ALL_MARGIN,
              REF_ALL_LOSS, REF_ALL_VALID, REF_ALL_MINED, REF_ALL_ACTIVE, REF_ALL_GRAD);
}
/* nothing mined: scored on every in-batch triplet */
Test(triplet, empty_miner_falls_back_to_all_triplets) {
    check_ref(REF_EMPTY_E, REF_EMPTY_LABELS, REF_EMPTY_N, REF_EMPTY_D, REF_EMPTY_KIND, REF_EMPTY_MINER_MARGIN,
              REF_EMPTY_MARGIN, REF_EMPTY_LOSS, REF_EMPTY_VALID, REF_EMPTY_MINED, REF_EMPTY_ACTIVE, REF_EMPTY_GRAD);
}

/* the miner's list equals the set of index triples (decoded from one counter over n^3) whose
 * labels and margin satisfy each kind's definition, in the same order */
Test(triplet, miner_against_brute_force) {
    int n = 9;
    int labels[9] = {0, 1, 0, 2, 1, 0, 2, 2, 1};
    float S[81];
    rng_t r = rng_make(3, 4);
    for (int i = 0; i < 81; i++) S[i] = 2 * rng_uniform(&r) - 1;
    int32_t *got = malloc(sizeof(int32_t) * 3 * 729);
    for (int kind = -1; kind <= MINER_ALL; kind++) {
        int64_t cnt = triplet_mine(S, labels, n, kind, 0.3, got), j = 0;
        cr_assert_eq(cnt, triplet_mine(S, labels, n, kind, 0.3, NULL), "counting pass");
        for (int idx = 0; idx < n * n * n; idx++) {
            int a = idx / (n * n), p = idx / n % n, q = idx % n;
            if (a == p || labels[a] != labels[p] || labels[q] == labels[a]) continue;
            float m = S[a * n + p] - S[a * n + q];
            int keep = kind == -1 ? 1 : kind == MINER_SEMIHARD ? m > 0 && m <= 0.3f : kind == MINER_HARD ? m <= 0 : m <= 0.3f;
            if (!keep) continue;
            cr_assert(j < cnt, "kind %d: miner returned too few", kind);
            cr_assert(got[3 * j] == a && got[3 * j + 1] == p && got[3 * j + 2] == q, "kind %d triple %lld", kind, (long long)j);
            j++;
        }
        cr_assert_eq(j, cnt, "kind %d: %lld expected, miner %lld", kind, (long long)j, (long long)cnt);
    }
    /* every valid triplet: each of the 3 classes has 3 members -> 9 * 2 anchors-positives x 6 negatives */
    cr_assert_eq(triplet_mine(S, labels, n, -1, 0, NULL), 9 * 2 * 6);
    free(got);
}

static int gc_labels[6] = {0, 0, 1, 1, 2, 2};
static tensor *trip_fn(tensor **in, void *ctx) {
    (void)ctx; /* miner all with a wide margin keeps every triplet, margin 2 keeps all active: no set changes */
    return triplet_loss(in[0], gc_labels, MINER_ALL, 4.0, 2.0, NULL);
}

Test(triplet, gradcheck) {
    tensor *e = gc_rand(2, SHAPE(6, 4), 41, -1, 1);
    tensor *in[1] = {e};
    cr_assert_eq(gradcheck("triplet", trip_fn, NULL, 1, in, gc_default()), 0);
    gc_free(1, in);
}

Test(triplet, one_class_batch_is_zero_and_bad_names_fail) {
    int lab[4] = {1, 1, 1, 1};
    tensor *e = gc_rand(2, SHAPE(4, 3), 5, -1, 1);
    triplet_stats st;
    tensor *l = triplet_loss(e, lab, MINER_SEMIHARD, 0.3, 0.6, &st);
    cr_assert_not_null(l);
    cr_assert_eq(tensor_item(l), 0.0f);
    cr_assert_eq(st.valid, 0);
    nn_step_end();
    tensor_free(e);
    miner_kind k;
    cr_assert_eq(miner_parse("easy", "loss.miner", &k), ER_INPUT);
    cr_assert(strstr(er_msg(), "loss.miner"), "%s", er_msg());
}
