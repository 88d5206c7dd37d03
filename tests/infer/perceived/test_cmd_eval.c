/* `endoret eval perceived` end to end on a synthetic ground truth written to a temp folder. */
#include <math.h>
#include <string.h>

#include "infer/retrieval/embeddings.h"
#include "infer/perceived/perceived_stats.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

int cmd_eval_perceived(int argc, char **argv);

/* 30 items on a circle (angle theta_i); a good descriptor = (cos, sin) of the angle, a bad one =
 * random. Scores: Likert level from the angle gap with noise. */
static void make_files(const char *dir, char *gt, char *good, char *bad, double *x_good_sim, double *score, int *npairs) {
    const int n = 30;
    emb_set g, b;
    emb_alloc(&g, n, 2);
    emb_alloc(&b, n, 3);
    rng_t r = rng_make(5, 1);
    double th[30];
    for (int i = 0; i < n; i++) {
        th[i] = 2 * M_PI * rng_uniform_double(&r);
        g.x[2 * i] = cos(th[i]); g.x[2 * i + 1] = sin(th[i]);
        for (int k = 0; k < 3; k++) b.x[3 * i + k] = rng_normal(&r);
        g.ids[i] = b.ids[i] = 1000 + 3 * i;
    }
    snprintf(good, 256, "%s/good.safetensors", dir);
    snprintf(bad, 256, "%s/bad.safetensors", dir);
    cr_assert_eq(emb_save(good, &g), ER_OK);
    cr_assert_eq(emb_save(bad, &b), ER_OK);
    snprintf(gt, 256, "%s/pairs.csv", dir);
    FILE *f = fopen(gt, "w");
    fprintf(f, "a,b,score,observer\n");
    int np = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j += 3) {
            double c = cos(th[i] - th[j]) + 0.3 * rng_normal(&r);
            int s = c > 0.7 ? 2 : c > 0.1 ? 1 : c > -0.5 ? -1 : -2;
            fprintf(f, "%lld,%lld,%+d,obs%d\n", (long long)g.ids[i], (long long)g.ids[j], s, np % 3);
            x_good_sim[np] = cos(th[i] - th[j]); /* = -(cosine distance) + 1 */
            score[np] = s;
            np++;
        }
    fclose(f);
    *npairs = np;
    emb_free(&g);
    emb_free(&b);
}

Test(perceived_cmd, eval_json_and_files) {
    const char *dir = test_tmpdir();
    char gt[256], good[256], bad[256], emb[600], outp[300], outdir[300];
    double sim[200], score[200];
    int np;
    make_files(dir, gt, good, bad, sim, score, &np);
    snprintf(emb, sizeof emb, "%s,%s", good, bad);
    snprintf(outp, sizeof outp, "%s/stdout.txt", dir);
    snprintf(outdir, sizeof outdir, "%s/figs", dir);
    fflush(stdout);
    cr_assert(freopen(outp, "w", stdout));
    char *argv[] = {"perceived", "--gt", gt, "--emb", emb, "--distance", "cosine", "--json", "--out", outdir, NULL};
    int rc = cmd_eval_perceived(10, argv);
    fflush(stdout);
    cr_assert_eq(rc, 0, "%s", er_msg());
    char *text;
    size_t len;
    cr_assert_eq(read_file(outp, &text, &len), ER_OK);
    cr_assert_eq((int)test_json_num(text, "n_pairs"), np);
    /* the first method's coefficients equal an independent computation on sim = cos(gap) */
    cr_assert_float_eq(test_json_num(text, "pearson"), corr_pearson(sim, score, np), 1e-5);
    cr_assert_float_eq(test_json_num(text, "spearman"), corr_spearman(sim, score, np), 1e-5);
    cr_assert_float_eq(test_json_num(text, "kendall_tau_b"), corr_kendall_tau_b(sim, score, np), 1e-5);
    cr_assert(test_json_num(text, "kendall_tau_b") > 0.4);
    /* Steiger: the good descriptor beats the random one */
    const char *c = strstr(text, "\"comparisons\":[{\"a\":0,\"b\":1");
    cr_assert(c, "%s", text);
    cr_assert(test_json_num(c, "steiger_z_tau") > 2 && test_json_num(c, "steiger_p_greater_tau") < 0.05);
    free(text);
    const char *files[] = {"histograms.csv", "hist_good.svg", "hist_bad.svg", "recall.csv", "recall.svg", "recall_scored.csv", "recall_scored.svg"};
    for (int i = 0; i < 7; i++) {
        char p[400];
        snprintf(p, sizeof p, "%s/%s", outdir, files[i]);
        cr_assert_eq(read_file(p, &text, &len), ER_OK, "%s", p);
        cr_assert(len > 50);
        free(text);
    }
}

Test(perceived_cmd, eval_errors) {
    const char *dir = test_tmpdir();
    char gt[256], good[256], bad[256];
    double sim[200], score[200];
    int np;
    make_files(dir, gt, good, bad, sim, score, &np);
    char *a1[] = {"perceived", "--gt", gt, "--emb", good, "--distance", "euclid", NULL};
    cr_assert_eq(cmd_eval_perceived(7, a1), ER_INPUT);
    cr_assert(strstr(er_msg(), "euclid"));
    char *a2[] = {"perceived", "--gt", gt, "--emb", good, "--distance", "chi2", NULL};
    cr_assert_eq(cmd_eval_perceived(7, a2), ER_INPUT); /* negative components */
    char bgt[300];
    snprintf(bgt, sizeof bgt, "%s/bad.csv", dir);
    FILE *f = fopen(bgt, "w");
    fprintf(f, "a,b,score,observer\n1000,1003,1,x\n1000,1006,7,x\n");
    fclose(f);
    char *a3[] = {"perceived", "--gt", bgt, "--emb", good, NULL};
    cr_assert_eq(cmd_eval_perceived(5, a3), ER_INPUT);
    cr_assert(strstr(er_msg(), "line 3"), "%s", er_msg());
    f = fopen(bgt, "w");
    fprintf(f, "1000,1003,1,x\n1000,1006,-1,x\n1000,9,2,x\n");
    fclose(f);
    cr_assert_eq(cmd_eval_perceived(5, a3), ER_INPUT);
    cr_assert(strstr(er_msg(), "9"), "%s", er_msg());
}
