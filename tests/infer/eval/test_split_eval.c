/* infer/eval/split_eval.h: train / test weighted kNN against a brute-force vote written here, the
 * few-label subsets (per-class shares, seeded), alignment / uniformity against their definitions, and
 * the probe's train / test form (probe_cv.h) on separable data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/eval/probe_cv.h"
#include "infer/eval/split_eval.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

Test(split_eval, weighted_knn_matches_brute_force) {
    enum { NB = 60, NQ = 25, D = 5, C = 3, K = 7 };
    float bank[NB * D], q[NQ * D];
    int lab[NB], pred[NQ], maj[NQ];
    rng_t r = rng_make(3, 1);
    for (int i = 0; i < NB * D; i++) bank[i] = rng_normal(&r);
    for (int i = 0; i < NQ * D; i++) q[i] = rng_normal(&r);
    for (int i = 0; i < NB; i++) lab[i] = i % 5 == 4 ? -1 : (int)rng_below(&r, C); /* some rows unlabelled */
    cr_assert_eq(knn_split(bank, lab, NB, q, NQ, D, C, K, 1, 0.1, pred), 0);
    cr_assert_eq(knn_split(bank, lab, NB, q, NQ, D, C, K, 0, 0.1, maj), 0);
    for (int i = 0; i < NQ; i++) {
        double sim[NB];
        int idx[NB];
        for (int j = 0; j < NB; j++) {
            double dot = 0, nq = 0, nb = 0;
            for (int d = 0; d < D; d++) dot += q[i * D + d] * bank[j * D + d], nq += q[i * D + d] * q[i * D + d],
                                         nb += bank[j * D + d] * bank[j * D + d];
            sim[j] = dot / sqrt(nq * nb);
            idx[j] = j;
        }
        for (int a = 0; a < K; a++) /* selection sort of the top K by similarity */
            for (int b = a + 1; b < NB; b++)
                if (sim[idx[b]] > sim[idx[a]]) { int t = idx[a]; idx[a] = idx[b]; idx[b] = t; }
        double score[C] = {0};
        int votes[C] = {0};
        for (int a = 0; a < K; a++)
            if (lab[idx[a]] >= 0) score[lab[idx[a]]] += exp(sim[idx[a]] / 0.1), votes[lab[idx[a]]]++;
        int best = 0;
        for (int c = 1; c < C; c++) best = score[c] > score[best] ? c : best;
        cr_assert_eq(pred[i], best, "query %d: weighted vote %d, brute force %d", i, pred[i], best);
        int mv = 0;
        for (int c = 1; c < C; c++) mv = votes[c] > votes[mv] ? c : mv;
        cr_assert_eq(votes[maj[i]], votes[mv], "query %d: majority", i);
    }
}

Test(split_eval, label_subset_takes_a_share_of_each_class) {
    enum { N = 205 };
    int lab[N];
    uint8_t keep[N], again[N];
    for (int i = 0; i < N; i++) lab[i] = i < 100 ? 0 : i < 200 ? 1 : i < 203 ? 2 : -1;
    int kept = label_subset(lab, N, 10, 5, keep);
    int per[3] = {0};
    for (int i = 0; i < N; i++) if (keep[i]) { cr_assert(lab[i] >= 0); per[lab[i]]++; }
    cr_assert(per[0] == 10 && per[1] == 10 && per[2] == 1 && kept == 21, "%d %d %d", per[0], per[1], per[2]);
    cr_assert_eq(label_subset(lab, N, 10, 5, again), 21);
    cr_assert(!memcmp(keep, again, N), "same seed, same subset");
    label_subset(lab, N, 10, 6, again);
    cr_assert(memcmp(keep, again, N), "another seed, another subset");
    cr_assert_eq(label_subset(lab, N, 100, 5, keep), 203);
}

Test(split_eval, alignment_and_uniformity_by_definition) {
    /* 4 unit vectors: two identical pairs (groups 0, 1) at right angles */
    const float x[4 * 2] = {1, 0, 2, 0, 0, 1, 0, 3};
    const int g[4] = {0, 0, 1, 1};
    double al, un;
    int64_t np;
    align_uniform(x, 4, 2, g, &al, &un, &np);
    cr_assert_eq(np, 2);
    cr_assert(fabs(al) < 1e-12, "identical pairs: alignment 0, got %g", al);
    /* pairs: 2 at distance 0, 4 at squared distance 2 -> log((2 + 4 e^-4) / 6) */
    cr_assert(fabs(un - log((2 + 4 * exp(-4.0)) / 6)) < 1e-12, "%.15g", un);
}

Test(split_eval, probe_split_separates_separable_classes) {
    enum { N = 80, D = 3 };
    float x[N * D], t[N * D];
    int y[N], yt[N], pred[N];
    rng_t r = rng_make(9, 0);
    for (int i = 0; i < N; i++) {
        y[i] = yt[i] = i % 2;
        for (int d = 0; d < D; d++) {
            x[i * D + d] = rng_normal(&r) * 0.3f + (d == 0 ? (y[i] ? 2.0f : -2.0f) : 0);
            t[i * D + d] = rng_normal(&r) * 0.3f + (d == 0 ? (yt[i] ? 2.0f : -2.0f) : 0);
        }
    }
    y[0] = -1; /* unlabelled rows are not trained on */
    cr_assert_eq(probe_split(x, y, N, t, N, D, 2, 1e-3, pred, NULL), 0);
    int right = 0;
    for (int i = 0; i < N; i++) right += pred[i] == yt[i];
    cr_assert_eq(right, N, "%d of %d", right, N);
}

int cmd_eval(int argc, char **argv);

/* labelled embeddings: n rows of 2-d points, class c around angle c */
static char *labelled_file(const char *dir, const char *name, int n, const char *const *labels, int nl) {
    emb_set e;
    emb_alloc(&e, n, 2);
    e.labels = malloc(sizeof(int64_t) * n);
    e.nlabel_names = nl;
    e.label_names = malloc(sizeof(char *) * nl);
    for (int c = 0; c < nl; c++) e.label_names[c] = strdup(labels[c]);
    for (int i = 0; i < n; i++) {
        e.labels[i] = i % nl;
        e.x[2 * i] = cosf((float)(i % nl) + 0.01f * i), e.x[2 * i + 1] = sinf((float)(i % nl) + 0.01f * i);
    }
    char *p = path_join(dir, name);
    cr_assert_eq(emb_save(p, &e), 0, "%s", er_msg());
    emb_free(&e);
    return p;
}

/* `eval split` and `eval align`: separable classes are found; bad options and files are one message
 * naming the option, exit 2 (ER_INPUT); a test label the training file lacks is named */
Test(split_eval, cli_split_align_and_bad_input) {
    const char *d = test_tmpdir();
    const char *ab[] = {"a", "b"}, *abz[] = {"a", "b", "z"};
    char *tr = labelled_file(d, "tr.safetensors", 40, ab, 2), *te = labelled_file(d, "te.safetensors", 20, ab, 2);
    char *odd = labelled_file(d, "odd.safetensors", 9, abz, 3);
    char *ok[] = {"eval", "split", "--train", tr, "--test", te, "--k", "5", "--json", NULL};
    cr_assert_eq(cmd_eval(9, ok), ER_OK, "%s", er_msg());
    char *probe[] = {"eval", "split", "--train", tr, "--test", te, "--classifier", "probe", "--label-percent", "10", NULL};
    cr_assert_eq(cmd_eval(10, probe), ER_OK, "%s", er_msg());
    char *al[] = {"eval", "align", "--emb", te, "--json", NULL};
    cr_assert_eq(cmd_eval(5, al), ER_OK, "%s", er_msg());
    struct { char *argv[12]; int argc; const char *want; } bad[] = {
        {{"eval", "split", "--test", te}, 4, "--train"},
        {{"eval", "split", "--train", tr, "--test", te, "--label-percent", "0"}, 8, "--label-percent"},
        {{"eval", "split", "--train", tr, "--test", te, "--classifier", "svm"}, 8, "--classifier"},
        {{"eval", "split", "--train", tr, "--test", te, "--vote", "max"}, 8, "--vote"},
        {{"eval", "split", "--train", tr, "--test", te, "--k", "0"}, 8, "--k"},
        {{"eval", "split", "--train", tr, "--test", odd}, 6, "label 'z'"},
        {{"eval", "align", "--emb", te, "--group", "patient"}, 6, "--group"},
        {{"eval", "align", "--emb", te, "--group", "scene"}, 6, "no scene column"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(cmd_eval(bad[i].argc, bad[i].argv), ER_INPUT, "case %zu accepted", i);
        cr_assert(strstr(er_msg(), bad[i].want), "case %zu: %s", i, er_msg());
    }
    free(tr); free(te); free(odd);
}

Test(split_eval, knn_split_accuracy_counts_the_votes_that_hit) {
    enum { NB = 40, NQ = 17, D = 4, C = 3, K = 5 };
    float bank[NB * D], q[NQ * D];
    int lab[NB], ql[NQ], pred[NQ], hits = 0;
    rng_t r = rng_make(5, 2);
    for (int i = 0; i < NB * D; i++) bank[i] = rng_normal(&r);
    for (int i = 0; i < NQ * D; i++) q[i] = rng_normal(&r);
    for (int i = 0; i < NB; i++) lab[i] = (int)rng_below(&r, C);
    for (int i = 0; i < NQ; i++) ql[i] = (int)rng_below(&r, C);
    cr_assert_eq(knn_split(bank, lab, NB, q, NQ, D, C, K, 1, 0.1, pred), 0);
    for (int i = 0; i < NQ; i++) hits += pred[i] == ql[i];
    double acc = -1;
    cr_assert_eq(knn_split_accuracy(bank, lab, NB, q, ql, NQ, D, C, K, 1, 0.1, &acc), 0);
    cr_expect_float_eq(acc, (double)hits / NQ, 1e-12, "%g, by hand %d / %d", acc, hits, NQ);
    cr_expect_neq(knn_split_accuracy(bank, lab, NB, q, ql, NQ, D, C, 0, 1, 0.1, &acc), 0, "k = 0 is refused");
}
