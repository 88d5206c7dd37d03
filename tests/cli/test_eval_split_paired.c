/* `endoret eval split --base-train/--base-test`: the paired comparison of an encoder with a baseline on
 * the same test rows, checked against a nearest-neighbour vote computed here (issue 34). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/eval/paired.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

int cmd_eval_split(int argc, char **argv);

enum { NTR = 40, NTE = 30 };

/* label of row i: a (even) / b (odd); good rows sit near (1, 0) / (0, 1), bad rows anywhere */
static void make(emb_set *e, int n, int good, rng_t *r) {
    emb_alloc(e, n, 2);
    e->labels = xmalloc(sizeof(int64_t) * n);
    e->nlabel_names = 2;
    e->label_names = xmalloc(sizeof(char *) * 2);
    e->label_names[0] = xstrdup("a"), e->label_names[1] = xstrdup("b");
    for (int i = 0; i < n; i++) {
        e->labels[i] = i % 2;
        e->x[2 * i] = good ? (i % 2 ? 0.1f : 1.0f) + 0.05f * (float)rng_normal(r) : (float)rng_normal(r);
        e->x[2 * i + 1] = good ? (i % 2 ? 1.0f : 0.1f) + 0.05f * (float)rng_normal(r) : (float)rng_normal(r);
    }
}

static double cosv(const float *a, const float *b) {
    return (a[0] * b[0] + a[1] * b[1]) / sqrt((a[0] * a[0] + a[1] * a[1]) * (b[0] * b[0] + b[1] * b[1]));
}

Test(eval_split_paired, difference_and_counts_match_a_vote_computed_here) {
    const char *dir = test_tmpdir();
    rng_t r = rng_make(7, 3);
    emb_set gtr, gte, btr, bte;
    make(&gtr, NTR, 1, &r), make(&gte, NTE, 1, &r), make(&btr, NTR, 0, &r), make(&bte, NTE, 0, &r);
    /* the baseline's 1-NN hits by brute force; the good encoder is right everywhere (checked below) */
    int wrong = 0;
    for (int q = 0; q < NTE; q++) {
        int best = 0;
        for (int i = 1; i < NTR; i++)
            if (cosv(bte.x + 2 * q, btr.x + 2 * i) > cosv(bte.x + 2 * q, btr.x + 2 * best)) best = i;
        wrong += btr.labels[best] != bte.labels[q];
    }
    cr_assert(wrong >= 6, "the random baseline should miss a fair share (missed %d)", wrong);
    char p[4][300], outp[300];
    const char *nm[4] = {"gtr", "gte", "btr", "bte"};
    emb_set *sets[4] = {&gtr, &gte, &btr, &bte};
    for (int i = 0; i < 4; i++) {
        snprintf(p[i], sizeof p[i], "%s/%s.safetensors", dir, nm[i]);
        cr_assert_eq(emb_save(p[i], sets[i]), ER_OK);
    }
    snprintf(outp, sizeof outp, "%s/out.txt", dir);
    fflush(stdout);
    cr_assert(freopen(outp, "w", stdout));
    char *argv[] = {"split", "--train", p[0], "--test", p[1], "--base-train", p[2], "--base-test", p[3], "--k", "1",
                    "--vote", "majority", "--json", NULL};
    int rc = cmd_eval_split(14, argv);
    fflush(stdout);
    cr_assert_eq(rc, ER_OK, "%s", er_msg());
    char *text;
    size_t len;
    cr_assert_eq(read_file(outp, &text, &len), ER_OK);
    cr_assert_float_eq(test_json_num(text, "accuracy"), 1.0, 1e-5, "%s", text);
    cr_assert_float_eq(test_json_num(text, "base_accuracy"), 1.0 - (double)wrong / NTE, 1e-5, "%s", text);
    cr_assert_float_eq(test_json_num(text, "delta"), (double)wrong / NTE, 1e-5, "%s", text);
    cr_assert_eq((int)test_json_num(text, "only_this"), wrong, "%s", text);
    cr_assert_eq((int)test_json_num(text, "only_base"), 0, "%s", text);
    cr_assert_float_eq(test_json_num(text, "p_mcnemar"), mcnemar_exact_p(wrong, 0), 1e-5, "%s", text);
    double lo = test_json_num(text, "delta_lo"), hi = test_json_num(text, "delta_hi");
    cr_assert(lo > 0 && lo <= (double)wrong / NTE && hi >= (double)wrong / NTE && hi <= 1, "%s", text);
    free(text);
    /* swapped: the baseline is the better one, so the difference is negative */
    char *sw[] = {"split", "--train", p[2], "--test", p[3], "--base-train", p[0], "--base-test", p[1], "--k", "1",
                  "--vote", "majority", "--json", NULL};
    cr_assert(freopen(outp, "w", stdout));
    rc = cmd_eval_split(14, sw);
    fflush(stdout);
    cr_assert_eq(rc, ER_OK, "%s", er_msg());
    cr_assert_eq(read_file(outp, &text, &len), ER_OK);
    cr_assert_float_eq(test_json_num(text, "delta"), -(double)wrong / NTE, 1e-5, "%s", text);
    cr_assert(test_json_num(text, "delta_hi") < 0, "%s", text);
    free(text);
    for (int i = 0; i < 4; i++) emb_free(sets[i]);
}

Test(eval_split_paired, other_rows_or_half_a_baseline_are_refused) {
    const char *dir = test_tmpdir();
    rng_t r = rng_make(8, 3);
    emb_set tr, te, other;
    make(&tr, NTR, 1, &r), make(&te, NTE, 1, &r), make(&other, NTR - 1, 0, &r);
    char a[300], b[300], c[300];
    snprintf(a, sizeof a, "%s/tr.safetensors", dir), snprintf(b, sizeof b, "%s/te.safetensors", dir);
    snprintf(c, sizeof c, "%s/other.safetensors", dir);
    cr_assert_eq(emb_save(a, &tr), ER_OK);
    cr_assert_eq(emb_save(b, &te), ER_OK);
    cr_assert_eq(emb_save(c, &other), ER_OK);
    char *half[] = {"split", "--train", a, "--test", b, "--base-train", a, NULL};
    cr_expect_eq(cmd_eval_split(7, half), ER_INPUT);
    cr_expect(strstr(er_msg(), "--base-test"), "%s", er_msg());
    char *rows[] = {"split", "--train", a, "--test", b, "--base-train", c, "--base-test", b, NULL};
    cr_expect_eq(cmd_eval_split(9, rows), ER_INPUT);
    cr_expect(strstr(er_msg(), c) && strstr(er_msg(), "same rows"), "%s", er_msg());
    emb_free(&tr), emb_free(&te), emb_free(&other);
}
