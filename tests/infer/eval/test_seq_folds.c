/* test_seq_folds.c — the sequence protocol across leave-sequences-out folds (infer/eval/seq_folds.h):
 * with K files, every query's AP / Acc@1 is the one the single-file protocol gives it in the file of
 * its own fold (and never another file's); identical files give the single-file figures, 2-vs-2
 * included; the folds manifest is checked row by row; the commands take lists only with --folds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/manifest.h"
#include "infer/eval/seq_folds.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

int cmd_eval(int argc, char **argv);

enum { NSEQ = 6, LEN = 5, N = NSEQ * LEN, D = 3 };

/* 6 sequences of 5 frames (rows interleaved), sequences 0, 2, 4 in fold 0 and 1, 3, 5 in fold 1 */
static void make(emb_set *e, uint64_t seed, manifest *m) {
    emb_alloc(e, N, D);
    e->scene = xmalloc(sizeof(int64_t) * N), e->view = xmalloc(sizeof(int64_t) * N);
    rng_t r = rng_make(seed, 0);
    for (int i = 0; i < N; i++) {
        e->scene[i] = i % NSEQ, e->view[i] = i / NSEQ;
        for (int k = 0; k < D; k++) e->x[i * D + k] = rng_uniform(&r) - 0.5f + (k == (int)(e->scene[i] % D)) * 0.4f;
    }
    if (!m) return;
    manifest_init(m, ".");
    m->file = xstrdup("folds.csv");
    for (int i = 0; i < N; i++) {
        char sc[8], vw[8], sp[8];
        snprintf(sc, sizeof sc, "%d", i % NSEQ), snprintf(vw, sizeof vw, "%d", i / NSEQ), snprintf(sp, sizeof sp, "fold%d", i % NSEQ % 2);
        manifest_row row = {.path = "x.png", .scene = sc, .view = vw, .split = sp};
        manifest_add(m, &row);
    }
}

Test(eval_seq_folds, each_query_scored_in_its_folds_file) {
    emb_set es[2];
    manifest m;
    make(&es[0], 1, &m);
    make(&es[1], 2, NULL);
    int fold[N], K;
    cr_assert_eq(seq_fold_of_rows(&es[0], &m, fold, &K), ER_OK, "%s", er_msg());
    cr_assert_eq(K, 2);
    for (int i = 0; i < N; i++) cr_assert_eq(fold[i], i % NSEQ % 2);
    seq_gap g = {0, 0.25};
    seq_result both, one[2];
    cr_assert_eq(seq_eval_files(es, 2, fold, &g, &both), ER_OK, "%s", er_msg());
    for (int f = 0; f < 2; f++) cr_assert_eq(seq_eval_emb(&es[f], &g, &one[f]), ER_OK, "%s", er_msg());
    double sap = 0, sacc = 0;
    int differ = 0;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(both.ap[i], one[fold[i]].ap[i], "query %d: AP %g, its fold's file gives %g", i, both.ap[i], one[fold[i]].ap[i]);
        cr_assert_eq(both.top1[i], one[fold[i]].top1[i]);
        differ += one[0].ap[i] != one[1].ap[i];
        sap += both.ap[i], sacc += both.top1[i];
    }
    cr_assert(differ > N / 2, "the two files must rank differently for the test to see which one scored a query");
    cr_assert(fabs(both.map - sap / N) < 1e-12 && fabs(both.acc1 - sacc / N) < 1e-12);
    seq_result_free(&both), seq_result_free(&one[0]), seq_result_free(&one[1]);
    /* 2-vs-2: the pooled predictions are each file's for its own fold's queries: as many as one file's */
    mv_row rb[9], r1[9];
    reid_view_result kb[9], k1[9];
    int ns, nsh;
    cr_assert_eq(seq_two_vs_two_files(es, 2, fold, -1, 10, rb, kb, &ns, &nsh), ER_OK, "%s", er_msg());
    cr_assert_eq(seq_two_vs_two_files(es, 1, fold, -1, 10, r1, k1, &ns, &nsh), ER_OK, "%s", er_msg());
    mv_row r2[9];
    reid_view_result k2[9];
    cr_assert_eq(seq_two_vs_two_files(es + 1, 1, fold, -1, 10, r2, k2, &ns, &nsh), ER_OK, "%s", er_msg());
    for (int o = 0; o < 9; o++) {
        cr_assert_eq(kb[o].ngt, k1[o].ngt, "setting %d", o);
        cr_assert_eq(kb[o].npred, k1[o].npred, "setting %d", o);
        /* a query id is a row id (one view) or a scene value (Q1Q2), both with fold = id % 6 % 2 here */
        for (int64_t t = 0; t < kb[o].npred; t++) {
            const reid_pred *p = &kb[o].pred[t];
            const reid_view_result *own = p->q % NSEQ % 2 ? &k2[o] : &k1[o];
            int found = 0;
            for (int64_t u = 0; u < own->npred && !found; u++)
                found = own->pred[u].q == p->q && own->pred[u].r == p->r && own->pred[u].score == p->score;
            cr_assert(found, "setting %d: prediction (%lld, %lld) is not its fold's file's", o, (long long)p->q, (long long)p->r);
        }
        reid_view_result_free(&kb[o]), reid_view_result_free(&k1[o]), reid_view_result_free(&k2[o]);
    }
    /* identical files: the single-file figures exactly */
    emb_set same[2];
    make(&same[0], 1, NULL);
    make(&same[1], 1, NULL);
    seq_result a, b;
    cr_assert_eq(seq_eval_files(same, 2, fold, &g, &a), ER_OK);
    cr_assert_eq(seq_eval_files(same, 1, fold, &g, &b), ER_OK);
    cr_assert(a.map == b.map && a.acc1 == b.acc1 && a.recall_p90 == b.recall_p90);
    cr_assert_eq(seq_two_vs_two_files(same, 2, fold, -1, 10, rb, kb, &ns, &nsh), ER_OK, "%s", er_msg());
    cr_assert_eq(seq_two_vs_two_files(same, 1, fold, -1, 10, r1, k1, &ns, &nsh), ER_OK, "%s", er_msg());
    for (int o = 0; o < 9; o++) {
        cr_assert(fabs(rb[o].r.uap - r1[o].r.uap) < 1e-12 && rb[o].r.acc1 == r1[o].r.acc1, "setting %d: %g vs %g", o, rb[o].r.uap,
                  r1[o].r.uap);
        reid_view_result_free(&kb[o]), reid_view_result_free(&k1[o]);
    }
    seq_result_free(&a), seq_result_free(&b);
    emb_free(&same[0]), emb_free(&same[1]);
    /* a file of other frames is refused */
    es[1].view[3] = 9;
    cr_assert_eq(seq_eval_files(es, 2, fold, &g, &a), ER_INPUT);
    cr_assert(strstr(er_msg(), "file 1"), "%s", er_msg());
    emb_free(&es[0]), emb_free(&es[1]);
    manifest_free(&m);
}

/* --fold k: one file, only fold k's queries; the gallery stays every frame */
Test(eval_seq_folds, one_folds_queries) {
    emb_set es[2];
    manifest m;
    make(&es[0], 1, &m);
    make(&es[1], 2, NULL);
    int fold[N], K;
    cr_assert_eq(seq_fold_of_rows(&es[0], &m, fold, &K), ER_OK, "%s", er_msg());
    seq_gap g = {0, 0.25};
    seq_result all, part;
    cr_assert_eq(seq_eval_files(es + 1, 1, fold, &g, &all), ER_OK);
    cr_assert_eq(seq_eval_files(es + 1, 1, fold, &g, &part), ER_OK);
    uint8_t keep[N];
    for (int i = 0; i < N; i++) keep[i] = fold[i] == 1;
    cr_assert_eq(seq_keep_queries(&part, keep), ER_OK, "%s", er_msg());
    double sap = 0, sacc = 0;
    int nq = 0;
    int64_t pairs = 0;
    for (int i = 0; i < N; i++) {
        if (!keep[i]) { cr_assert(isnan(part.ap[i])); continue; }
        cr_assert_eq(part.ap[i], all.ap[i], "a kept query keeps its AP (the same gallery)");
        sap += all.ap[i], sacc += all.top1[i], nq++;
    }
    for (int64_t t = 0; t < all.npairs; t++) pairs += keep[all.pair_q[t]];
    cr_assert_eq(part.nqueries, nq);
    cr_assert_eq(part.nqseq, NSEQ / 2);
    cr_assert_eq(part.npairs, pairs);
    cr_assert(fabs(part.map - sap / nq) < 1e-12 && fabs(part.acc1 - sacc / nq) < 1e-12);
    /* the pooled two-file 2-vs-2 is fold 0 in file 0 plus fold 1 in file 1 */
    mv_row rb[9], r0[9], r1[9];
    reid_view_result kb[9], k0[9], k1[9];
    int ns, nsh;
    cr_assert_eq(seq_two_vs_two_files(es, 2, fold, -1, 10, rb, kb, &ns, &nsh), ER_OK, "%s", er_msg());
    cr_assert_eq(seq_two_vs_two_files(es, 1, fold, 0, 10, r0, k0, &ns, &nsh), ER_OK, "%s", er_msg());
    cr_assert_eq(seq_two_vs_two_files(es + 1, 1, fold, 1, 10, r1, k1, &ns, &nsh), ER_OK, "%s", er_msg());
    for (int o = 0; o < 9; o++) {
        cr_assert_eq(kb[o].npred, k0[o].npred + k1[o].npred, "setting %d", o);
        cr_assert(!memcmp(kb[o].pred, k0[o].pred, sizeof *kb[o].pred * (size_t)k0[o].npred), "setting %d: fold 0 first", o);
        cr_assert(!memcmp(kb[o].pred + k0[o].npred, k1[o].pred, sizeof *kb[o].pred * (size_t)k1[o].npred), "setting %d", o);
        reid_view_result_free(&kb[o]), reid_view_result_free(&k0[o]), reid_view_result_free(&k1[o]);
    }
    seq_result_free(&all), seq_result_free(&part);
    emb_free(&es[0]), emb_free(&es[1]);
    manifest_free(&m);
}

/* the view protocol across folds (reid_views_files): each pooled prediction and ground truth is the
 * file of its query's fold's (a row id, or a scene value when the query views are fused); identical
 * files give the one-file figures; folds by scene name need no row correspondence */
Test(eval_seq_folds, views_protocol_scored_in_each_folds_file) {
    emb_set es[2];
    manifest m;
    make(&es[0], 1, &m);
    make(&es[1], 2, NULL);
    int fold[N], fs[N], K;
    cr_assert_eq(seq_fold_of_rows(&es[0], &m, fold, &K), ER_OK, "%s", er_msg());
    /* by scene: the ids may be another manifest's rows */
    for (int i = 0; i < N; i++) es[0].ids[i] = 1000 + i;
    cr_assert_eq(seq_fold_of_scenes(&es[0], &m, fs, &K), ER_OK, "%s", er_msg());
    cr_assert_eq(K, 2);
    cr_assert(!memcmp(fs, fold, sizeof fold));
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < N; i++) es[f].ids[i] = 100 + i; /* row ids apart from the scene values */
    const int64_t qv1[] = {0}, qv2[] = {0, 1}, rv[] = {2, 3};
    for (int fused = 0; fused < 2; fused++) {
        reid_views_cfg c = {.qviews = fused ? qv2 : qv1, .nqviews = fused ? 2 : 1, .rviews = rv, .nrviews = 2, .k = 4};
        reid_view_result both, one[2];
        cr_assert_eq(reid_views_files(es, 2, fold, &c, &both), ER_OK, "%s", er_msg());
        for (int f = 0; f < 2; f++) cr_assert_eq(reid_eval_views(&es[f], &c, &one[f]), ER_OK, "%s", er_msg());
        cr_assert_eq(both.ngt, one[0].ngt, "every query once");
        cr_assert_eq(both.nqueries, (int)both.ngt);
        for (int64_t t = 0; t < both.npred; t++) {
            const reid_pred *p = &both.pred[t];
            int qf = (int)((fused ? p->q : es[0].scene[p->q - 100]) % 2); /* row id = 100 + index; fold = scene % 2 */
            const reid_view_result *own = &one[qf];
            int found = 0;
            for (int64_t u = 0; u < own->npred && !found; u++)
                found = own->pred[u].q == p->q && own->pred[u].r == p->r && own->pred[u].score == p->score;
            cr_assert(found, "fused %d: prediction (%lld, %lld) is not its fold's file's", fused, (long long)p->q, (long long)p->r);
        }
        int64_t want = 0;
        for (int f = 0; f < 2; f++)
            for (int64_t u = 0; u < one[f].npred; u++) want += (int)((fused ? one[f].pred[u].q : es[0].scene[one[f].pred[u].q - 100]) % 2) == f;
        cr_assert_eq(both.npred, want, "fused %d: only each file's own queries", fused);
        reid_view_result same;
        emb_set two[2] = {es[0], es[0]};
        cr_assert_eq(reid_views_files(two, 2, fold, &c, &same), ER_OK, "%s", er_msg());
        cr_assert(fabs(same.r.uap - one[0].r.uap) < 1e-12 && same.r.acc1 == one[0].r.acc1, "%g vs %g", same.r.uap, one[0].r.uap);
        reid_view_result_free(&both), reid_view_result_free(&one[0]), reid_view_result_free(&one[1]), reid_view_result_free(&same);
    }
    free(m.rows[0].scene), m.rows[0].scene = xstrdup("x"); /* scene 0's first row now elsewhere: still found */
    cr_assert_eq(seq_fold_of_scenes(&es[0], &m, fs, &K), ER_OK, "%s", er_msg());
    for (int i = 0; i < N; i++)
        if (m.rows[i].scene && !strcmp(m.rows[i].scene, "0")) free(m.rows[i].scene), m.rows[i].scene = xstrdup("y");
    cr_assert_eq(seq_fold_of_scenes(&es[0], &m, fs, &K), ER_INPUT);
    cr_assert(strstr(er_msg(), "scene '0'") && strstr(er_msg(), "folds.csv"), "%s", er_msg());
    emb_free(&es[0]), emb_free(&es[1]);
    manifest_free(&m);
}

Test(eval_seq_folds, the_folds_manifest_is_checked) {
    emb_set e;
    manifest m;
    make(&e, 1, &m);
    int fold[N], K;
    free(m.rows[4].split), m.rows[4].split = xstrdup("train");
    cr_assert_eq(seq_fold_of_rows(&e, &m, fold, &K), ER_INPUT);
    cr_assert(strstr(er_msg(), "folds.csv line 6") && strstr(er_msg(), "'train'"), "%s", er_msg());
    free(m.rows[4].split), m.rows[4].split = xstrdup("fold1");
    free(m.rows[7].scene), m.rows[7].scene = xstrdup("5");
    cr_assert_eq(seq_fold_of_rows(&e, &m, fold, &K), ER_INPUT);
    cr_assert(strstr(er_msg(), "line 9") && strstr(er_msg(), "scene"), "%s", er_msg());
    free(m.rows[7].scene), m.rows[7].scene = xstrdup("1");
    e.ids[2] = N + 3;
    cr_assert_eq(seq_fold_of_rows(&e, &m, fold, &K), ER_INPUT);
    cr_assert(strstr(er_msg(), "manifest row 33"), "%s", er_msg());
    emb_free(&e);
    manifest_free(&m);
}

Test(eval_seq_folds, commands) {
    const char *d = test_tmpdir();
    emb_set e0, e1;
    manifest m;
    make(&e0, 1, &m);
    make(&e1, 2, NULL);
    char *p0 = path_join(d, "e0.safetensors"), *p1 = path_join(d, "e1.safetensors"), *pm = path_join(d, "folds.csv");
    cr_assert_eq(emb_save(p0, &e0), ER_OK);
    cr_assert_eq(emb_save(p1, &e1), ER_OK);
    cr_assert_eq(manifest_save(pm, &m), ER_OK);
    char list[1024], three[1600];
    snprintf(list, sizeof list, "%s,%s", p0, p1);
    snprintf(three, sizeof three, "%s,%s,%s", p0, p1, p0);
    char *ok[] = {"eval", "sequence", "--emb", list, "--folds", pm, "--bootstrap", "10", NULL};
    cr_assert_eq(cmd_eval(8, ok), ER_OK, "%s", er_msg());
    char *cmp[] = {"eval", "compare", p0, list, "--sequence", "--folds", pm, "--bootstrap", "10", NULL};
    cr_assert_eq(cmd_eval(9, cmp), ER_OK, "%s", er_msg());
    char *nofolds[] = {"eval", "sequence", "--emb", list, NULL};
    cr_assert_eq(cmd_eval(4, nofolds), ER_INPUT);
    cr_assert(strstr(er_msg(), "--folds"), "%s", er_msg());
    char *wrongk[] = {"eval", "sequence", "--emb", three, "--folds", pm, NULL};
    cr_assert_eq(cmd_eval(6, wrongk), ER_INPUT);
    cr_assert(strstr(er_msg(), "3 files for the 2 folds"), "%s", er_msg());
    char *one[] = {"eval", "compare", p0, p1, "--sequence", "--folds", pm, "--fold", "1", "--bootstrap", "10", NULL};
    cr_assert_eq(cmd_eval(11, one), ER_OK, "%s", er_msg());
    char *onelist[] = {"eval", "sequence", "--emb", list, "--folds", pm, "--fold", "1", NULL};
    cr_assert_eq(cmd_eval(8, onelist), ER_INPUT);
    cr_assert(strstr(er_msg(), "give one file"), "%s", er_msg());
    char *nomanifest[] = {"eval", "sequence", "--emb", p0, "--fold", "1", NULL};
    cr_assert_eq(cmd_eval(6, nomanifest), ER_INPUT);
    cr_assert(strstr(er_msg(), "--fold 1 needs --folds"), "%s", er_msg());
    char *nofold[] = {"eval", "sequence", "--emb", p0, "--folds", pm, "--fold", "2", NULL};
    cr_assert_eq(cmd_eval(8, nofold), ER_INPUT);
    cr_assert(strstr(er_msg(), "folds 0..1"), "%s", er_msg());
    char *noseq[] = {"eval", "compare", p0, p1, "--ref-view", "2", "--folds", pm, "--fold", "1", NULL};
    cr_assert_eq(cmd_eval(10, noseq), ER_INPUT);
    cr_assert(strstr(er_msg(), "--fold needs --sequence"), "%s", er_msg());
    /* the view protocol across folds: a list per descriptor, each row's fold its scene's */
    char *views[] = {"eval", "compare", p0, list, "--ref-view", "2,3", "--query-view", "0,1", "--folds", pm, "--bootstrap", "10", NULL};
    cr_assert_eq(cmd_eval(12, views), ER_OK, "%s", er_msg());
    char *viewsnofolds[] = {"eval", "compare", p0, list, "--ref-view", "2,3", NULL};
    cr_assert_eq(cmd_eval(6, viewsnofolds), ER_INPUT);
    cr_assert(strstr(er_msg(), "give --folds"), "%s", er_msg());
    emb_free(&e0), emb_free(&e1);
    manifest_free(&m);
    free(p0), free(p1), free(pm);
}
