/* test_seq_select.c — the hybrid weight chosen on training folds (infer/eval/seq_select.h): each inner
 * mAP equals the sequence protocol recomputed here from hand-made hybrid rows of the other folds only,
 * each query in its own fold's file; rewriting every row of fold k leaves fold k's choice as it was;
 * a learned descriptor that alone separates the sequences is chosen at weight 0 and a histogram that
 * alone does at weight 1; bad inputs are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/manifest.h"
#include "infer/eval/seq_select.h"
#include "infer/retrieval/hybrid.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

int cmd_embed(int argc, char **argv);

enum { NSEQ = 9, LEN = 6, N = NSEQ * LEN, K = 3, DA = 5, DH = NSEQ };

/* frame i: sequence i % NSEQ, position i / NSEQ, fold = sequence % K. `sep` 1: the learned rows
 * separate the sequences (one-hot-ish on a sequence code), 2: the histograms do (a peak on the
 * sequence's bin), 0: neither (noise only). */
static void make(emb_set *a, emb_set *h, uint64_t seed, int sep, int *fold) {
    emb_alloc(a, N, DA), emb_alloc(h, N, DH);
    a->scene = xmalloc(sizeof(int64_t) * N), a->view = xmalloc(sizeof(int64_t) * N);
    h->scene = xmalloc(sizeof(int64_t) * N), h->view = xmalloc(sizeof(int64_t) * N);
    h->distance = xstrdup("chi2");
    rng_t r = rng_make(seed, 0);
    for (int i = 0; i < N; i++) {
        int s = i % NSEQ;
        a->scene[i] = h->scene[i] = s, a->view[i] = h->view[i] = i / NSEQ;
        if (fold) fold[i] = s % K;
        for (int d = 0; d < DA; d++) a->x[i * DA + d] = rng_uniform(&r) - 0.5f + (sep == 1) * 3.0f * (float)((s >> (d % 4)) & 1) * (d == 4 ? 0 : 1);
        if (sep == 1) a->x[i * DA + 4] += 2.0f * (float)(s == 8);
        for (int d = 0; d < DH; d++) h->x[i * DH + d] = 0.05f + rng_uniform(&r) + (sep == 2) * 20.0f * (d == s);
    }
}

/* K learned files (seeds seed, seed + 1, ..) and the histograms of the first draw */
static void make_files(emb_set *es, emb_set *h, uint64_t seed, int sep, int *fold) {
    for (int f = 0; f < K; f++) {
        emb_set hk;
        make(&es[f], f ? &hk : h, seed + (uint64_t)f, sep, fold);
        if (f) emb_free(&hk);
    }
}

/* the hybrid row by hybrid.h's formula, computed here */
static void hybrid_row(const float *a, const float *h, double w, float *out) {
    double na = 0, sh = 0;
    for (int d = 0; d < DA; d++) na += (double)a[d] * a[d];
    for (int d = 0; d < DH; d++) sh += h[d];
    for (int d = 0; d < DA; d++) out[d] = (float)(sqrt(1 - w) * a[d] / sqrt(na));
    for (int d = 0; d < DH; d++) out[DA + d] = (float)(sqrt(w) * sqrt(h[d] / sh));
}

/* fold k's inner mAP for weight w, the long way: for each fold j != k, a file of the frames outside
 * fold k with file j's hybrid rows, the single-file protocol, then the APs of fold j's queries */
static double inner_map(const emb_set *es, const emb_set *h, const int *fold, int k, double w, const seq_gap *g) {
    double sum = 0;
    int nq = 0;
    for (int j = 0; j < K; j++) {
        if (j == k) continue;
        emb_set sub;
        int m = 0;
        for (int i = 0; i < N; i++) m += fold[i] != k;
        emb_alloc(&sub, m, DA + DH);
        sub.scene = xmalloc(sizeof(int64_t) * m), sub.view = xmalloc(sizeof(int64_t) * m);
        int *orig = xmalloc(sizeof(int) * m);
        m = 0;
        for (int i = 0; i < N; i++) {
            if (fold[i] == k) continue;
            hybrid_row(es[j].x + i * DA, h->x + i * DH, w, sub.x + (size_t)m * (DA + DH));
            sub.scene[m] = es[j].scene[i], sub.view[m] = es[j].view[i], orig[m] = i;
            m++;
        }
        seq_result r;
        cr_assert_eq(seq_eval_emb(&sub, g, &r), ER_OK, "%s", er_msg());
        for (int t = 0; t < m; t++)
            if (fold[orig[t]] == j && !isnan(r.ap[t])) sum += r.ap[t], nq++;
        seq_result_free(&r);
        emb_free(&sub);
        free(orig);
    }
    return sum / nq;
}

static const double GRID[] = {0, 0.25, 0.5, 0.75, 1};
enum { NG = sizeof GRID / sizeof *GRID };

Test(eval_seq_select, inner_map_is_the_protocol_on_the_other_folds_in_their_own_files) {
    emb_set es[K], h;
    int fold[N];
    make_files(es, &h, 10, 0, fold);
    seq_gap g = {0, 0.25};
    seq_weight_choice c;
    cr_assert_eq(seq_select_hybrid_weight(es, K, &h, fold, &g, GRID, NG, &c), ER_OK, "%s", er_msg());
    cr_assert_eq(c.nfolds, K);
    cr_assert_eq(c.ngrid, NG);
    for (int k = 0; k < K; k++) {
        int best = 0;
        for (int t = 0; t < NG; t++) {
            double want = inner_map(es, &h, fold, k, GRID[t], &g);
            cr_assert(fabs(c.map[k * NG + t] - want) < 1e-9, "fold %d weight %g: %.12f, by hand %.12f", k, GRID[t], c.map[k * NG + t], want);
            if (c.map[k * NG + t] > c.map[k * NG + best]) best = t;
        }
        cr_assert_eq(c.chosen[k], best, "fold %d: the first weight of the highest inner mAP", k);
    }
    /* rewrite every row of fold 1 (all files and the histograms): fold 1's scores stay bit-identical,
     * and the other folds' move (so the test sees a change where there must be one) */
    emb_set es2[K], h2;
    make_files(es2, &h2, 10, 0, NULL);
    rng_t r = rng_make(99, 1);
    for (int i = 0; i < N; i++)
        if (fold[i] == 1) {
            for (int f = 0; f < K; f++)
                for (int d = 0; d < DA; d++) es2[f].x[i * DA + d] = rng_uniform(&r) - 0.5f;
            for (int d = 0; d < DH; d++) h2.x[i * DH + d] = 0.05f + 5 * rng_uniform(&r);
        }
    seq_weight_choice c2;
    cr_assert_eq(seq_select_hybrid_weight(es2, K, &h2, fold, &g, GRID, NG, &c2), ER_OK, "%s", er_msg());
    int moved = 0;
    for (int t = 0; t < NG; t++) {
        cr_assert_eq(c2.map[1 * NG + t], c.map[1 * NG + t], "weight %g: fold 1's choice read fold 1's rows", GRID[t]);
        moved += c2.map[0 * NG + t] != c.map[0 * NG + t];
    }
    cr_assert_eq(c2.chosen[1], c.chosen[1]);
    cr_assert(moved > 0, "fold 0's inner scores include fold 1's frames as a gallery and must move");
    seq_weight_choice_free(&c), seq_weight_choice_free(&c2);
    for (int f = 0; f < K; f++) emb_free(&es[f]), emb_free(&es2[f]);
    emb_free(&h), emb_free(&h2);
}

Test(eval_seq_select, the_separating_half_is_chosen) {
    emb_set es[K], h;
    int fold[N];
    seq_gap g = {0, 0.25};
    seq_weight_choice c;
    /* learned rows separate the sequences, histograms are noise: weight 0 for every fold */
    make_files(es, &h, 20, 1, fold);
    cr_assert_eq(seq_select_hybrid_weight(es, K, &h, fold, &g, GRID, NG, &c), ER_OK, "%s", er_msg());
    for (int k = 0; k < K; k++) cr_assert_eq(GRID[c.chosen[k]], 0, "fold %d chose %g", k, GRID[c.chosen[k]]);
    seq_weight_choice_free(&c);
    for (int f = 0; f < K; f++) emb_free(&es[f]);
    emb_free(&h);
    /* the histograms separate them, learned rows are noise: weight 1 */
    make_files(es, &h, 30, 2, fold);
    cr_assert_eq(seq_select_hybrid_weight(es, K, &h, fold, &g, GRID, NG, &c), ER_OK, "%s", er_msg());
    for (int k = 0; k < K; k++) cr_assert_eq(GRID[c.chosen[k]], 1, "fold %d chose %g", k, GRID[c.chosen[k]]);
    seq_weight_choice_free(&c);
    /* refused: one file, a weight outside [0, 1], a fold without its file */
    cr_assert_eq(seq_select_hybrid_weight(es, 1, &h, fold, &g, GRID, NG, &c), ER_INPUT);
    cr_assert(strstr(er_msg(), "at least 2 folds"), "%s", er_msg());
    const double bad[] = {0.5, 1.5};
    cr_assert_eq(seq_select_hybrid_weight(es, K, &h, fold, &g, bad, 2, &c), ER_INPUT);
    cr_assert(strstr(er_msg(), "1.5"), "%s", er_msg());
    cr_assert_eq(seq_select_hybrid_weight(es, 2, &h, fold, &g, GRID, NG, &c), ER_INPUT);
    cr_assert(strstr(er_msg(), "fold 2") && strstr(er_msg(), "2 files"), "%s", er_msg());
    for (int f = 0; f < K; f++) emb_free(&es[f]);
    emb_free(&h);
}

/* `embed --hybrid E0,E1,E2 --hist H --folds F (--select-weight G | --hist-weight W) --out O0,O1,O2` */
Test(eval_seq_select, embed_hybrid_over_folds_command) {
    const char *d = test_tmpdir();
    emb_set es[K], h;
    int fold[N];
    make_files(es, &h, 20, 1, fold); /* the learned half separates: weight 0 everywhere */
    manifest m;
    manifest_init(&m, ".");
    char *pe[K], *po[K], *ph = path_join(d, "h.safetensors"), *pm = path_join(d, "folds.csv");
    char elist[2048] = "", olist[2048] = "";
    for (int f = 0; f < K; f++) {
        char name[32];
        snprintf(name, sizeof name, "e%d.safetensors", f), pe[f] = path_join(d, name);
        snprintf(name, sizeof name, "o%d.safetensors", f), po[f] = path_join(d, name);
        cr_assert_eq(emb_save(pe[f], &es[f]), ER_OK);
        snprintf(elist + strlen(elist), sizeof elist - strlen(elist), "%s%s", f ? "," : "", pe[f]);
        snprintf(olist + strlen(olist), sizeof olist - strlen(olist), "%s%s", f ? "," : "", po[f]);
    }
    cr_assert_eq(emb_save(ph, &h), ER_OK);
    for (int i = 0; i < N; i++) {
        char sc[8], vw[8], sp[8];
        snprintf(sc, sizeof sc, "%d", i % NSEQ), snprintf(vw, sizeof vw, "%d", i / NSEQ), snprintf(sp, sizeof sp, "fold%d", fold[i]);
        manifest_row row = {.path = "x.png", .scene = sc, .view = vw, .split = sp};
        manifest_add(&m, &row);
    }
    cr_assert_eq(manifest_save(pm, &m), ER_OK);
    for (int fixed = 0; fixed < 2; fixed++) {
        char *sel[] = {"embed", "--hybrid", elist, "--hist", ph, "--folds", pm, fixed ? "--hist-weight" : "--select-weight",
                       fixed ? "0.5" : "0.5,0,1", "--out", olist, NULL};
        cr_assert_eq(cmd_embed(11, sel), ER_OK, "%s", er_msg());
        for (int f = 0; f < K; f++) {
            emb_set o, want;
            cr_assert_eq(emb_load(po[f], &o), ER_OK);
            cr_assert_eq(emb_hybrid(&es[f], &h, fixed ? 0.5 : 0, &want), ER_OK);
            cr_assert(o.n == N && o.dim == want.dim && !memcmp(o.x, want.x, sizeof(float) * N * o.dim), "fold %d's output", f);
            emb_free(&o), emb_free(&want);
        }
    }
    char *both[] = {"embed", "--hybrid", elist, "--hist", ph, "--folds", pm, "--hist-weight", "0.5", "--select-weight", "0,1", "--out", olist, NULL};
    cr_assert_eq(cmd_embed(13, both), ER_INPUT);
    cr_assert(strstr(er_msg(), "one of --hist-weight and --select-weight"), "%s", er_msg());
    char *nofolds[] = {"embed", "--hybrid", pe[0], "--hist", ph, "--select-weight", "0,1", "--out", po[0], NULL};
    cr_assert_eq(cmd_embed(9, nofolds), ER_INPUT);
    cr_assert(strstr(er_msg(), "needs --folds"), "%s", er_msg());
    char *fewout[] = {"embed", "--hybrid", elist, "--hist", ph, "--folds", pm, "--hist-weight", "0.5", "--out", po[0], NULL};
    cr_assert_eq(cmd_embed(11, fewout), ER_INPUT);
    cr_assert(strstr(er_msg(), "1 file(s) for the 3"), "%s", er_msg());
    char *badgrid[] = {"embed", "--hybrid", elist, "--hist", ph, "--folds", pm, "--select-weight", "0,x", "--out", olist, NULL};
    cr_assert_eq(cmd_embed(11, badgrid), ER_INPUT);
    cr_assert(strstr(er_msg(), "--select-weight") && strstr(er_msg(), "0,x"), "%s", er_msg());
    char *outside[] = {"embed", "--hybrid", elist, "--hist", ph, "--folds", pm, "--select-weight", "0,1.5", "--out", olist, NULL};
    cr_assert_eq(cmd_embed(11, outside), ER_INPUT);
    cr_assert(strstr(er_msg(), "--select-weight") && strstr(er_msg(), "weight 1.5 is outside [0, 1]"), "%s", er_msg());
    for (int f = 0; f < K; f++) emb_free(&es[f]), free(pe[f]), free(po[f]);
    emb_free(&h), manifest_free(&m);
    free(ph), free(pm);
}
