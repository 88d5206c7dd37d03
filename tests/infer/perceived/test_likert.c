/* Likert ground-truth loader: pair means, unordered pairs, malformed lines named. */
#include <string.h>

#include "infer/perceived/perceived_likert.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

Test(perceived_likert, means_and_unordered_pairs) {
    likert_gt g;
    const char *t = "a,b,score,observer\n5,3,+1,alice\n3,5,2,bob\n\n# comment\n1,2,-2,alice\n7,1,-1,carol\n";
    cr_assert_eq(likert_parse(t, "x.csv", &g), ER_OK, "%s", er_msg());
    cr_assert_eq(g.nrec, 4);
    cr_assert_eq(g.npairs, 3);
    cr_assert(g.pairs[0].a == 1 && g.pairs[0].b == 2 && g.pairs[0].score == -2);
    cr_assert(g.pairs[1].a == 1 && g.pairs[1].b == 7 && g.pairs[1].score == -1);
    cr_assert(g.pairs[2].a == 3 && g.pairs[2].b == 5 && g.pairs[2].score == 1.5 && g.pairs[2].nscores == 2);
    cr_assert_str_eq(g.rec[1].observer, "bob");
    cr_assert_eq(g.rec[0].pair, 2);
    int64_t ids[] = {7, 1, 2, 3, 5};
    int *ia, *ib;
    cr_assert_eq(likert_index_pairs(&g, ids, 5, "e.safetensors", &ia, &ib), ER_OK);
    cr_assert(ia[1] == 1 && ib[1] == 0 && ia[2] == 3 && ib[2] == 4);
    free(ia); free(ib);
    int64_t few[] = {1, 2};
    cr_assert_eq(likert_index_pairs(&g, few, 2, "e.safetensors", &ia, &ib), ER_INPUT);
    cr_assert(strstr(er_msg(), "e.safetensors"));
    /* issue 17 #9: the scores file and the line of the pair are named too (7,1 is on line 7) */
    cr_assert(strstr(er_msg(), "x.csv: line 7"), "%s", er_msg());
    likert_free(&g);
}

Test(perceived_likert, malformed_lines_named) {
    const char *bad[] = {"1,2,0,alice\n", "1,2,3,alice\n", "1,2,+1\n", "1,x,1,bob\n", "1,1,1,bob\n",
                         "1,2,1,bob,extra\n", "1,2,1.5,bob\n", "1,2,+-1,bob\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[128];
        snprintf(text, sizeof text, "a,b,score,observer\n3,4,2,ok\n%s", bad[i]);
        likert_gt g;
        cr_assert_eq(likert_parse(text, "pairs.csv", &g), ER_INPUT, "accepted: %s", bad[i]);
        cr_assert(strstr(er_msg(), "pairs.csv: line 3"), "message: %s", er_msg());
    }
}

Test(perceived_likert, missing_file) {
    likert_gt g;
    cr_assert_eq(likert_load("/nonexistent/pairs.csv", &g), ER_INPUT);
}

/* Garbage in: random bytes and random mutations of a valid file give ER_OK or ER_INPUT with a
 * message, never a crash (run under ASan by `make asan`). */
#include "infer/perceived/perceived_draw.h"
#include "nn/base/rng.h"

Test(perceived_likert, fuzz_parsers_no_crash) {
    const char *valid = "a,b,score,observer\n1,2,+1,alice\n3,4,-2,bob\n";
    const char *sheet = "pair,a,b,process,prior_distance,image_a,image_b\n0,1,2,0,0.5,x.png,y.png\n1,3,4,0,0.7,,\n";
    const char *dir = test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/s.csv", dir);
    rng_t r = rng_make(99, 1);
    char buf[256];
    const char alphabet[] = "0123456789,+-\n\r #abxyz.\"";
    for (int it = 0; it < 300; it++) {
        const char *base = it % 2 ? valid : sheet;
        size_t n = strlen(base);
        memcpy(buf, base, n + 1);
        int muts = 1 + rng_below(&r, 4);
        for (int m = 0; m < muts; m++) {
            size_t at = rng_below(&r, (uint32_t)n);
            if (it % 5 == 4) buf[at] = (char)(1 + rng_below(&r, 255)); /* any byte */
            else buf[at] = alphabet[rng_below(&r, sizeof alphabet - 1)];
        }
        if (it % 7 == 6) buf[rng_below(&r, (uint32_t)n)] = 0; /* truncation */
        likert_gt g;
        int rc = likert_parse(buf, "fuzz.csv", &g);
        cr_assert(rc == ER_OK || rc == ER_INPUT);
        if (rc == ER_OK) {
            for (int k = 0; k < g.npairs; k++) cr_assert(g.pairs[k].a < g.pairs[k].b && g.pairs[k].nscores > 0);
            likert_free(&g);
        } else {
            cr_assert(strstr(er_msg(), "fuzz.csv"), "%s", er_msg());
        }
        FILE *f = fopen(path, "wb"); /* plain write: no fsync per iteration */
        cr_assert(f);
        fwrite(buf, 1, strlen(buf), f);
        fclose(f);
        vss_sheet s;
        rc = vss_sheet_load(path, &s);
        cr_assert(rc == ER_OK || rc == ER_INPUT);
        if (rc == ER_OK) vss_sheet_free(&s);
    }
}
