/* test_reid_views.c — `eval reid --emb E --ref-view V` (copy detection: several queries per scene
 * against one reference view), checked against a brute-force computation written here from the
 * ISC2021 definitions (full cosine matrix, top-k per query, pooled precision/recall curve). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/retrieval/embeddings.h"
#include "infer/eval/metrics.h"
#include "infer/eval/reid_views.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

int cmd_eval(int argc, char **argv);

typedef struct { double s; int tp; } scored_pair;
static int by_score_desc(const void *a, const void *b) {
    const scored_pair *x = a, *y = b;
    return x->s > y->s ? -1 : x->s < y->s ? 1 : 0;
}

/* independent reference: returns uAP, Acc@1, R@P90 */
static void brute_force(const emb_set *e, int64_t rv, int k, double *uap, double *acc1, double *rp90, int *nq_out) {
    int n = e->n, D = e->dim;
    scored_pair *all = malloc(sizeof *all * (size_t)n * n);
    int np = 0, nq = 0, top1 = 0;
    for (int i = 0; i < n; i++) {
        if (e->view[i] == rv) continue;
        int has_ref = 0;
        for (int j = 0; j < n; j++) has_ref |= e->view[j] == rv && e->scene[j] == e->scene[i];
        if (!has_ref) continue;
        nq++;
        scored_pair *row = malloc(sizeof *row * (size_t)n);
        int m = 0;
        for (int j = 0; j < n; j++) {
            if (e->view[j] != rv) continue;
            double dot = 0, ni = 0, nj = 0;
            for (int d = 0; d < D; d++) {
                double a = e->x[(size_t)i * D + d], b = e->x[(size_t)j * D + d];
                dot += a * b, ni += a * a, nj += b * b;
            }
            row[m].s = dot / sqrt(ni * nj);
            row[m].tp = e->scene[j] == e->scene[i];
            m++;
        }
        qsort(row, (size_t)m, sizeof *row, by_score_desc);
        top1 += row[0].tp;
        for (int t = 0; t < k && t < m; t++) all[np++] = row[t];
        free(row);
    }
    qsort(all, (size_t)np, sizeof *all, by_score_desc);
    double ap = 0, best = 0;
    int tp = 0;
    for (int t = 0; t < np; t++) {
        if (!all[t].tp) continue;
        tp++;
        ap += (double)tp / (t + 1); /* precision at each true positive, divided by #GT below */
    }
    tp = 0;
    for (int t = 0; t < np; t++) {
        tp += all[t].tp;
        if ((double)tp / (t + 1) >= 0.9 && (double)tp / nq > best) best = (double)tp / nq;
    }
    *uap = ap / nq;
    *acc1 = (double)top1 / nq;
    *rp90 = best;
    *nq_out = nq;
    free(all);
}

/* S scenes; view 0 = reference; views 1..V = noisy copies of it (noise sd `noise`); scene
 * `orphan` (if >= 0) has no reference. Rows are interleaved so references are not first. */
static void make_set(emb_set *e, int S, int V, int D, float noise, int orphan, uint64_t seed) {
    emb_alloc(e, S * (V + 1), D);
    e->scene = malloc(sizeof(int64_t) * e->n);
    e->view = malloc(sizeof(int64_t) * e->n);
    rng_t r = rng_make(seed, 1);
    float *base = malloc(sizeof(float) * S * D);
    for (int i = 0; i < S * D; i++) base[i] = rng_normal(&r);
    int row = 0;
    for (int v = V; v >= 0; v--)
        for (int s = 0; s < S; s++, row++) {
            e->scene[row] = s;
            e->view[row] = v == 0 && s == orphan ? 7 : v;
            e->ids[row] = 1000 + 3 * row; /* ids that are not row numbers */
            for (int d = 0; d < D; d++) e->x[(size_t)row * D + d] = base[s * D + d] + (v ? noise * rng_normal(&r) : 0);
        }
    free(base);
}

Test(infer_reid_views, matches_brute_force) {
    const float noises[] = {0.3f, 1.0f, 2.0f};
    const int ks[] = {1, 3, 10};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            emb_set e;
            make_set(&e, 23, 4, 12, noises[a], a == 1 ? 5 : -1, 40 + a);
            reid_view_result res;
            cr_assert_eq(reid_eval_ref_view(&e, 0, ks[b], &res), ER_OK, "%s", er_msg());
            double uap, acc1, rp90;
            int nq;
            brute_force(&e, 0, ks[b], &uap, &acc1, &rp90, &nq);
            cr_assert_eq(res.nqueries, nq);
            cr_assert_eq(res.nrefs, a == 1 ? 22 : 23);
            cr_assert_float_eq(res.r.uap, uap, 1e-6, "noise %g k %d: uAP %g vs %g", noises[a], ks[b], res.r.uap, uap);
            cr_assert_float_eq(res.r.acc1, acc1, 1e-9, "noise %g k %d: acc1 %g vs %g", noises[a], ks[b], res.r.acc1, acc1);
            cr_assert_float_eq(res.r.recall_p90, rp90, 1e-9, "noise %g k %d: R@P90 %g vs %g", noises[a], ks[b], res.r.recall_p90, rp90);
            if (a == 0) cr_assert_gt(res.r.acc1, 0.9); /* small noise: the source is found */
            if (a == 2) cr_assert_lt(res.r.uap, 0.9);  /* large noise: the test can tell */
            reid_view_result_free(&res);
            emb_free(&e);
        }
}

Test(infer_reid_views, exact_copies_are_perfect_and_errors_are_clear) {
    emb_set e;
    make_set(&e, 6, 3, 5, 0.0f, -1, 3);
    reid_view_result res;
    cr_assert_eq(reid_eval_ref_view(&e, 0, 10, &res), ER_OK, "%s", er_msg());
    cr_assert_eq(res.nqueries, 18);
    cr_assert_eq(res.nrefs, 6);
    cr_assert_float_eq(res.r.uap, 1.0, 1e-12);
    cr_assert_float_eq(res.r.acc1, 1.0, 1e-12);
    cr_assert_float_eq(res.r.recall_p90, 1.0, 1e-12);
    reid_view_result_free(&res);
    /* no such reference view */
    cr_assert_eq(reid_eval_ref_view(&e, 9, 10, &res), ER_INPUT);
    cr_assert(strstr(er_msg(), "reference view 9"), "%s", er_msg());
    /* two references in one scene */
    e.view[0] = 0; /* row 0 is scene 0, view 3 -> now a second reference of scene 0 */
    cr_assert_eq(reid_eval_ref_view(&e, 0, 10, &res), ER_INPUT);
    cr_assert(strstr(er_msg(), "two rows"), "%s", er_msg());
    /* no view column */
    free(e.view);
    e.view = NULL;
    cr_assert_eq(reid_eval_ref_view(&e, 0, 10, &res), ER_INPUT);
    cr_assert(strstr(er_msg(), "scene"), "%s", er_msg());
    emb_free(&e);
}

Test(infer_reid_views, cli_json) {
    const char *dir = test_tmpdir();
    char *p = path_join(dir, "e.safetensors");
    emb_set e;
    make_set(&e, 8, 2, 6, 0.0f, -1, 9);
    cr_assert_eq(emb_save(p, &e), ER_OK, "%s", er_msg());
    emb_free(&e);
    char *argv[] = {"reid", "reid", "--emb", p, "--ref-view", "0", "--json", NULL};
    fflush(stdout);
    cr_assert_eq(cmd_eval(7, argv), ER_OK, "%s", er_msg());
    char *bad[] = {"reid", "reid", "--emb", p, NULL};
    cr_assert_eq(cmd_eval(4, bad), ER_INPUT);
    cr_assert(strstr(er_msg(), "--ref-view"), "%s", er_msg());
    char *mixed[] = {"reid", "reid", "--emb", p, "--ref-view", "0", "--query", p, NULL};
    cr_assert_eq(cmd_eval(8, mixed), ER_INPUT);
    free(p);
}
