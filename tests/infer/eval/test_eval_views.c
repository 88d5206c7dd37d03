/* test_eval_views.c — issue 19: the user's scene/view values survive into embedding files, every
 * re-ID evaluation ranks by the file's distance, query/reference view lists, one default k,
 * multi-view refuses a file without its views. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/manifest.h"
#include "infer/eval/multiview.h"
#include "infer/eval/reid_views.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

int cmd_eval(int argc, char **argv);

/* run `endoret eval ...` with stdout captured into out (NUL-terminated) */
static int eval_captured(int argc, char **argv, char *out, int size) {
    char *path = path_join(test_tmpdir(), "stdout.txt");
    fflush(stdout);
    int saved = dup(1), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 1);
    close(fd);
    int rc = cmd_eval(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, (size_t)size - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    free(path);
    return rc;
}

/* S scenes with views `views` (values as given), each view a noisy copy of the scene's base
 * (non-negative: valid histograms too) */
static void make_scenes(emb_set *e, int S, const int64_t *views, int V, int D, float noise, uint64_t seed) {
    emb_alloc(e, S * V, D);
    e->scene = malloc(sizeof(int64_t) * e->n);
    e->view = malloc(sizeof(int64_t) * e->n);
    rng_t r = rng_make(seed, 2);
    float *base = malloc(sizeof(float) * S * D);
    for (int i = 0; i < S * D; i++) base[i] = rng_uniform(&r);
    for (int v = 0, row = 0; v < V; v++)
        for (int s = 0; s < S; s++, row++) {
            e->scene[row] = 100 + 7 * s; /* scene values that are not ranks */
            e->view[row] = views[v];
            for (int d = 0; d < D; d++) e->x[(size_t)row * D + d] = fabsf(base[s * D + d] + noise * rng_normal(&r));
        }
    free(base);
}

Test(infer_eval_views, manifest_values_survive_into_the_embedding_file) {
    manifest m;
    manifest_init(&m, ".");
    const char *scenes[] = {"1", "2", "11", "29"}, *views[] = {"2", "3"};
    for (int s = 0; s < 4; s++)
        for (int v = 0; v < 2; v++) {
            manifest_row row = {"x.png", NULL, NULL, (char *)scenes[s], (char *)views[v], NULL, NULL};
            manifest_add(&m, &row);
        }
    emb_set e;
    emb_alloc(&e, m.n, 2);
    emb_fill_from_manifest(&e, &m, NULL, 1);
    cr_assert_eq(e.scene[2], 2, "scene '2' stays 2 (the sorted-string rank would be 2 only by chance: '11' sorts before it)");
    cr_assert_eq(e.scene[4], 11);
    cr_assert_eq(e.scene[6], 29);
    cr_assert_eq(e.view[0], 2);
    cr_assert_eq(e.view[1], 3);
    cr_assert_eq(e.nview_names, 0);
    /* an R-only file (views 2 and 3) answers --ref-view 3 */
    for (int i = 0; i < e.n; i++) e.x[i * 2] = 1.0f, e.x[i * 2 + 1] = (float)e.scene[i];
    char *p = path_join(test_tmpdir(), "r_only.safetensors");
    cr_assert_eq(emb_save(p, &e), ER_OK, "%s", er_msg());
    char out[4096];
    char *argv[] = {"eval", "reid", "--emb", p, "--ref-view", "3", "--json", NULL};
    cr_assert_eq(eval_captured(7, argv, out, sizeof out), ER_OK, "%s", er_msg());
    cr_assert(strstr(out, "\"queries\": 4, \"references\": 4"), "%s", out);
    emb_free(&e);
    manifest_free(&m);
    /* string values are kept as names and matched by name, also after a round trip */
    manifest_init(&m, ".");
    const char *sv[] = {"front", "back"};
    for (int s = 0; s < 3; s++)
        for (int v = 0; v < 2; v++) {
            char sc[8];
            snprintf(sc, sizeof sc, "p%d", s);
            manifest_row row = {"x.png", NULL, NULL, sc, (char *)sv[v], NULL, NULL};
            manifest_add(&m, &row);
        }
    emb_alloc(&e, m.n, 2);
    emb_fill_from_manifest(&e, &m, NULL, 1);
    for (int i = 0; i < e.n; i++) e.x[i * 2] = 1.0f, e.x[i * 2 + 1] = (float)e.scene[i];
    cr_assert_eq(emb_save(p, &e), ER_OK);
    emb_free(&e);
    cr_assert_eq(emb_load(p, &e), ER_OK);
    cr_assert_eq(e.nview_names, 2);
    cr_assert_eq(e.nscene_names, 3);
    cr_assert_str_eq(e.scene_names[e.scene[2]], "p1");
    int64_t id;
    cr_assert_eq(emb_view_id(&e, "front", "--ref-view", &id), ER_OK);
    cr_assert_str_eq(e.view_names[id], "front");
    cr_assert_eq(emb_view_id(&e, "side", "--ref-view", &id), ER_INPUT);
    cr_assert(strstr(er_msg(), "--ref-view") && strstr(er_msg(), "'side'"), "%s", er_msg());
    char *argv2[] = {"eval", "reid", "--emb", p, "--ref-view", "back", "--query-view", "front", "--json", NULL};
    cr_assert_eq(eval_captured(9, argv2, out, sizeof out), ER_OK, "%s", er_msg());
    cr_assert(strstr(out, "\"acc1\": 1,"), "%s", out);
    emb_free(&e);
    manifest_free(&m);
    free(p);
}

/* chi2 between L1-normalised rows, written here from the definition */
static double chi2_ref(const float *a, const float *b, int D) {
    double sa = 0, sb = 0, d = 0;
    for (int i = 0; i < D; i++) sa += a[i], sb += b[i];
    for (int i = 0; i < D; i++) {
        double x = a[i] / sa, y = b[i] / sb;
        if (x + y > 0) d += (x - y) * (x - y) / (x + y);
    }
    return d;
}

static double cosine_ref(const float *a, const float *b, int D) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < D; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return 1 - ab / sqrt(aa * bb);
}

/* Acc@1 of view qv against view rv by a given distance, brute force */
static double acc1_ref(const emb_set *e, int64_t qv, int64_t rv, double (*dist)(const float *, const float *, int)) {
    int nq = 0, hit = 0;
    for (int i = 0; i < e->n; i++) {
        if (e->view[i] != qv) continue;
        double best = INFINITY;
        int bj = -1;
        for (int j = 0; j < e->n; j++) {
            if (e->view[j] != rv) continue;
            double d = dist(e->x + (size_t)i * e->dim, e->x + (size_t)j * e->dim, e->dim);
            if (d < best) best = d, bj = j;
        }
        nq++;
        hit += e->scene[bj] == e->scene[i];
    }
    return (double)hit / nq;
}

Test(infer_eval_views, chi2_files_are_ranked_by_chi2) {
    const int64_t views[] = {0, 1};
    emb_set e;
    make_scenes(&e, 40, views, 2, 16, 0.25f, 7);
    int64_t rv = 1, qv = 0;
    reid_views_cfg c = {.qviews = &qv, .nqviews = 1, .rviews = &rv, .nrviews = 1, .k = 10};
    reid_view_result cos_res, chi_res;
    cr_assert_eq(reid_eval_views(&e, &c, &cos_res), ER_OK, "%s", er_msg());
    e.distance = xstrdup("chi2");
    cr_assert_eq(reid_eval_views(&e, &c, &chi_res), ER_OK, "%s", er_msg());
    double a_cos = acc1_ref(&e, 0, 1, cosine_ref), a_chi = acc1_ref(&e, 0, 1, chi2_ref);
    cr_assert_float_eq(cos_res.r.acc1, a_cos, 1e-12);
    cr_assert_float_eq(chi_res.r.acc1, a_chi, 1e-12, "chi2 Acc@1 %g vs brute force %g", chi_res.r.acc1, a_chi);
    cr_assert(fabs(a_cos - a_chi) > 1e-9, "the data must tell the two distances apart (%g vs %g)", a_cos, a_chi);
    cr_assert_eq(chi_res.dist, DIST_CHI2);
    /* hashing assumes cosine: refused on a chi2 file */
    c.bits = 8;
    reid_view_result_free(&chi_res);
    cr_assert_eq(reid_eval_views(&e, &c, &chi_res), ER_INPUT);
    cr_assert(strstr(er_msg(), "chi2"), "%s", er_msg());
    reid_view_result_free(&cos_res);
    emb_free(&e);
}

Test(infer_eval_views, view_lists_fuse_like_multiview_and_one_view_selects) {
    const int64_t views[] = {0, 1, 2, 3};
    emb_set e;
    make_scenes(&e, 30, views, 4, 12, 0.6f, 11);
    /* Q1 alone against R1 alone: brute force on those rows only (Q2, R2 are not in the gallery) */
    int64_t q1 = 0, r1 = 2;
    reid_views_cfg c = {.qviews = &q1, .nqviews = 1, .rviews = &r1, .nrviews = 1, .k = 10};
    reid_view_result res;
    cr_assert_eq(reid_eval_views(&e, &c, &res), ER_OK, "%s", er_msg());
    cr_assert_eq(res.nqueries, 30);
    cr_assert_eq(res.nrefs, 30);
    cr_assert_float_eq(res.r.acc1, acc1_ref(&e, 0, 2, cosine_ref), 1e-12);
    reid_view_result_free(&res);
    /* Q1Q2 against R1R2 equals multiview's last row */
    int64_t qv[2] = {0, 1}, rv[2] = {2, 3};
    reid_views_cfg c2 = {.qviews = qv, .nqviews = 2, .rviews = rv, .nrviews = 2, .k = 10};
    cr_assert_eq(reid_eval_views(&e, &c2, &res), ER_OK, "%s", er_msg());
    mv_row rows[9];
    cr_assert_eq(multiview_eval(&e, 10, 0, 0, rows), ER_OK, "%s", er_msg());
    cr_assert_eq(rows[8].qmask, 3);
    cr_assert_eq(rows[8].rmask, 3);
    cr_assert_float_eq(res.r.uap, rows[8].r.uap, 1e-12);
    cr_assert_eq(res.nqueries, 30);
    reid_view_result_free(&res);
    /* a view on both sides is refused */
    int64_t both[2] = {0, 2};
    reid_views_cfg c3 = {.qviews = both, .nqviews = 2, .rviews = rv, .nrviews = 2, .k = 10};
    cr_assert_eq(reid_eval_views(&e, &c3, &res), ER_INPUT);
    /* the command: Q1 vs R1 by lists of one */
    char *p = path_join(test_tmpdir(), "four_views.safetensors");
    cr_assert_eq(emb_save(p, &e), ER_OK);
    char out[4096];
    char *argv[] = {"eval", "reid", "--emb", p, "--query-view", "0,1", "--ref-view", "2,3", "--bootstrap", "0", "--json", NULL};
    cr_assert_eq(eval_captured(11, argv, out, sizeof out), ER_OK, "%s", er_msg());
    cr_assert(strstr(out, "\"queries\": 30, \"references\": 30, \"k\": 10"), "%s", out);
    free(p);
    emb_free(&e);
}

Test(infer_eval_views, multiview_without_its_views_is_an_error) {
    const int64_t views[] = {0, 1};
    emb_set e;
    make_scenes(&e, 5, views, 2, 4, 0.1f, 3);
    mv_row rows[9];
    cr_assert_eq(multiview_eval(&e, 10, 0, 0, rows), ER_INPUT);
    cr_assert(strstr(er_msg(), "2 (R1), 3 (R2)"), "%s", er_msg());
    emb_free(&e);
}

/* reid and multiview print the same k by default (ISC2021's 10), so one pair gives one uAP */
Test(infer_eval_views, one_default_k_printed_with_the_result) {
    const int64_t views[] = {0, 1, 2, 3};
    emb_set e;
    make_scenes(&e, 20, views, 4, 8, 1.0f, 5);
    char *p = path_join(test_tmpdir(), "k_default.safetensors");
    cr_assert_eq(emb_save(p, &e), ER_OK);
    emb_free(&e);
    char mv[8192], re[4096];
    char *a1[] = {"eval", "multiview", "--emb", p, "--bootstrap", "0", "--json", NULL};
    char *a2[] = {"eval", "reid", "--emb", p, "--query-view", "0", "--ref-view", "2", "--bootstrap", "0", "--json", NULL};
    cr_assert_eq(eval_captured(7, a1, mv, sizeof mv), ER_OK, "%s", er_msg());
    cr_assert_eq(eval_captured(11, a2, re, sizeof re), ER_OK, "%s", er_msg());
    cr_assert(strstr(mv, "\"query_views\": \"Q1\", \"ref_views\": \"R1\", \"scenes\": 20, \"k\": 10,"), "%s", mv);
    cr_assert(strstr(re, "\"k\": 10"), "%s", re);
    const char *u1 = strstr(mv, "\"uAP\": "), *u2 = strstr(re, "\"uAP\": ");
    cr_assert(u1 && u2);
    cr_assert_float_eq(atof(u1 + 7), atof(u2 + 7), 1e-12, "multiview Q1-R1 %s vs reid %s", u1, u2);
    free(p);
}

int cmd_index(int argc, char **argv);
int cmd_sweep(int argc, char **argv);

/* code that ranks by cosine only refuses a chi2 file, naming the distance, instead of ranking it wrongly */
Test(infer_eval_views, cosine_only_commands_refuse_chi2_files) {
    const int64_t views[] = {0, 1};
    emb_set e;
    make_scenes(&e, 6, views, 2, 8, 0.1f, 9);
    e.labels = calloc((size_t)e.n, sizeof(int64_t));
    for (int i = 0; i < e.n; i++) e.labels[i] = i % 2;
    e.distance = xstrdup("chi2");
    char *p = path_join(test_tmpdir(), "hist.safetensors"), *db = path_join(test_tmpdir(), "cases.db");
    cr_assert_eq(emb_save(p, &e), ER_OK);
    emb_free(&e);
    char *build[] = {"index", "build", "--emb", p, "--out", db, NULL};
    cr_assert_eq(cmd_index(6, build), ER_INPUT);
    cr_assert(strstr(er_msg(), "--emb") && strstr(er_msg(), "chi2"), "%s", er_msg());
    char *sweep[] = {"sweep", "--db", p, "--query", p, NULL};
    cr_assert_eq(cmd_sweep(5, sweep), ER_INPUT);
    cr_assert(strstr(er_msg(), "chi2"), "%s", er_msg());
    char *classify[] = {"eval", "classify", "--emb", p, NULL};
    cr_assert_eq(cmd_eval(4, classify), ER_INPUT);
    cr_assert(strstr(er_msg(), "chi2"), "%s", er_msg());
    free(p);
    free(db);
}

/* issue 33: `sweep` without --bits sweeps the default code lengths that fit the descriptor, then
 * the descriptor's own size (a 24-d one: 16 and 24 instead of failing on 32); an explicit length
 * above the size is still refused, naming it. */
Test(infer_eval_views, sweep_default_bits_fit_the_descriptor) {
    char *out = path_join(test_tmpdir(), "sw24");
    char *sweep[] = {"sweep", "--synthetic", "--dim", "24", "--n", "200", "--queries", "20", "--clusters", "10",
                     "--k", "1", "--out", out, NULL};
    cr_assert_eq(cmd_sweep(14, sweep), ER_OK, "%s", er_msg());
    char *csv = path_join(out, "sweep.csv");
    size_t len;
    char *txt = NULL;
    cr_assert_eq(read_file(csv, &txt, &len), 0, "%s", er_msg());
    int seen16 = 0, seen24 = 0, over = 0;
    for (char *line = strchr(txt, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        int b = atoi(line + 1);
        seen16 |= b == 16;
        seen24 |= b == 24;
        over |= b > 24;
    }
    cr_expect(seen16 && seen24 && !over, "code lengths in %s:\n%s", csv, txt);
    char *explicit32[] = {"sweep", "--synthetic", "--dim", "24", "--n", "200", "--queries", "20", "--bits", "32", NULL};
    cr_assert_eq(cmd_sweep(10, explicit32), ER_INPUT);
    cr_expect(strstr(er_msg(), "32 bits"), "%s", er_msg());
    free(txt);
    free(csv);
    free(out);
}
