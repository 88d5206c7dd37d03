/* Bag of visual words: vocabulary file round trip and validation, L1 signatures, scene pooling,
 * and the cross-validation driver on synthetic descriptors. */
#include <math.h>
#include <string.h>

#include "infer/perceived/bow_cv.h"
#include "infer/perceived/bow_model.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

Test(perceived_bow, vocab_roundtrip_signature_pool) {
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/v.safetensors", dir);
    bow_vocab v = {{7, 21, 3, 0}, 3, xcalloc(3 * DSIFT_DIM, sizeof(float))};
    for (int j = 0; j < 3; j++) v.words[j * DSIFT_DIM + j] = 1.f; /* word j = unit vector e_j */
    cr_assert_eq(bow_vocab_save(path, &v), ER_OK);
    bow_vocab u;
    cr_assert_eq(bow_vocab_load(path, &u), ER_OK, "%s", er_msg());
    cr_assert(u.k == 3 && u.sift.step == 7 && u.sift.radius == 21 && u.sift.downscale == 3 && u.sift.rotate == 0);
    cr_assert(!memcmp(u.words, v.words, 3 * DSIFT_DIM * sizeof(float)));
    /* 4 descriptors: near e_0, e_0, e_2, e_1 -> histogram 2/4, 1/4, 1/4 */
    float d[4 * DSIFT_DIM] = {0}, h[3];
    d[0] = 0.9f; d[DSIFT_DIM] = 1.1f; d[2 * DSIFT_DIM + 2] = 0.8f; d[3 * DSIFT_DIM + 1] = 1.f;
    bow_signature(&u, d, 4, h);
    cr_assert(h[0] == 0.5f && h[1] == 0.25f && h[2] == 0.25f);
    bow_signature(&u, d, 0, h);
    cr_assert(h[0] == 0 && h[1] == 0 && h[2] == 0);
    /* pooling: frames 0,2 in scene 5; frame 1 in scene 9; frame 3 unknown (own group) */
    float fh[4 * 3] = {1, 0, 0, 0, 1, 0, 0, 0.5f, 0.5f, 0, 0, 1};
    int64_t grp[4] = {5, 9, 5, -1}, *gid;
    float *ph;
    int *first;
    int ng = bow_pool(fh, 4, 3, grp, &ph, &gid, &first);
    cr_assert_eq(ng, 3);
    cr_assert(gid[0] == 5 && gid[1] == 9 && first[2] == 3);
    cr_assert(ph[0] == 0.5f && ph[1] == 0.25f && ph[2] == 0.25f && ph[4] == 1.f && ph[8] == 1.f);
    free(ph); free(gid); free(first);
    bow_vocab_free(&u);
    /* a file that is not a vocabulary */
    write_file_atomic(path, "garbage", 7);
    cr_assert_eq(bow_vocab_load(path, &u), ER_INPUT);
    free(v.words);
}

/* Items with descriptors drawn around class-specific prototypes; 12 patients of 2 items; couples
 * scored by class. The cross-validation driver runs, pools test couples, and the BoW distance
 * correlates positively with the scores before and after learning. */
Test(perceived_bow, cv_on_synthetic_descriptors) {
    const int n = 24, per = 40;
    float *buf = xmalloc((size_t)n * per * DSIFT_DIM * sizeof(float)), *desc[24];
    int nd[24];
    int64_t patient[24];
    rng_t r = rng_make(8, 8);
    for (int i = 0; i < n; i++) {
        desc[i] = buf + (size_t)i * per * DSIFT_DIM;
        nd[i] = per;
        patient[i] = i / 2;
        int cls = (i / 2) % 2;
        for (int t = 0; t < per; t++) {
            int proto = rng_below(&r, 4) + (rng_uniform(&r) < 0.7f ? 4 * cls : 4 * (1 - cls));
            for (int k = 0; k < DSIFT_DIM; k++) desc[i][t * DSIFT_DIM + k] = 0.05f * rng_normal(&r) + (k % 8 == proto ? 1.f : 0.f);
        }
    }
    char text[8192];
    int len = snprintf(text, sizeof text, "a,b,score,observer\n");
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (patient[i] == patient[j] || (i + j) % 2) continue;
            int same = (i / 2) % 2 == (j / 2) % 2;
            len += snprintf(text + len, sizeof text - len, "%d,%d,%d,o\n", i, j, same ? ((i + j) % 4 ? 2 : 1) : -2);
        }
    likert_gt gt;
    cr_assert_eq(likert_parse(text, "gt", &gt), ER_OK);
    bow_cv_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.m = 2; cfg.q = 3; cfg.k = 8; cfg.max_desc = 2000; cfg.iters = 20; cfg.seed = 3;
    chi2_cfg_default(&cfg.metric);
    cfg.metric.max_iter = 30;
    dsift_cfg sc;
    dsift_cfg_default(&sc);
    bow_cv_result res;
    cr_assert_eq(bow_cv_run(desc, nd, patient, n, &gt, &sc, &cfg, &res), ER_OK, "%s", er_msg());
    cr_assert_eq(res.reps_used, 2);
    cr_assert(res.n_test > 10, "%f", res.n_test);
    cr_assert(res.before.kendall > 0.3 && res.after.kendall > 0.3, "tau %f %f", res.before.kendall, res.after.kendall);
    cr_assert(isfinite(res.steiger.z));
    /* ids outside the items are rejected */
    likert_gt bad;
    likert_parse("0,99,1,o\n", "gt", &bad);
    cr_assert_eq(bow_cv_run(desc, nd, patient, n, &bad, &sc, &cfg, &res), ER_INPUT);
    likert_free(&bad);
    likert_free(&gt);
    free(buf);
}
