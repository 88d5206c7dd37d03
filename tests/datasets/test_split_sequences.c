/* test_split_sequences.c — leave-sequences-out folds of a sequence manifest (issue 31): `data split
 * --by scene --folds K --holdout-fold F` on hand-made manifests. No sequence is split across folds,
 * every sequence is held out in exactly one of the K runs, the same seed gives the same folds, and bad
 * input is one message (exit 2). */
#include <stdlib.h>
#include <string.h>

#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_data(int argc, char **argv);

/* 7 sequences of 1..13 frames (scene = sequence, view = frame position), rows interleaved */
static char *write_sequences(const char *dir, int *nrows) {
    char *man = path_join(dir, "seq.csv");
    static char txt[8192];
    snprintf(txt, sizeof txt, "path,label,scene,view\n");
    const int len[7] = {13, 1, 5, 9, 2, 7, 4};
    int n = 0;
    for (int f = 0; f < 13; f++)
        for (int s = 0; s < 7; s++)
            if (f < len[s]) {
                snprintf(txt + strlen(txt), sizeof txt - strlen(txt), "s%d_%02d.png,polyp,seq%d,%d\n", s, f, s, f);
                n++;
            }
    cr_assert_eq(write_file_atomic(man, txt, strlen(txt)), ER_OK);
    *nrows = n;
    return man;
}

static void holdout(const char *man, const char *out, int k, int f, int seed) {
    char ks[8], fs[8], ss[8];
    snprintf(ks, sizeof ks, "%d", k), snprintf(fs, sizeof fs, "%d", f), snprintf(ss, sizeof ss, "%d", seed);
    char *a[] = {"data", "split", (char *)man, "--by", "scene", "--folds", ks, "--seed", ss, "--holdout-fold", fs,
                 "--out", (char *)out, NULL};
    cr_assert_eq(cmd_data(13, a), ER_OK, "%s", er_msg());
}

Test(datasets_split_sequences, every_sequence_held_out_once_and_whole) {
    const char *d = test_tmpdir();
    int n;
    char *man = write_sequences(d, &n), *out = path_join(d, "h.csv"), *again = path_join(d, "h2.csv");
    for (int k = 2; k <= 5; k++) {
        int held[7] = {0}, rows_held = 0;
        for (int f = 0; f < k; f++) {
            holdout(man, out, k, f, 5);
            holdout(man, again, k, f, 5);
            manifest m, m2;
            cr_assert_eq(manifest_load(out, &m), ER_OK);
            cr_assert_eq(manifest_load(again, &m2), ER_OK);
            cr_assert_eq(m.n, n);
            char split_of[7] = {0}; /* 't' test, 'r' train: one value per sequence */
            int test_seqs = 0;
            for (int i = 0; i < m.n; i++) {
                cr_assert_str_eq(m.rows[i].split, m2.rows[i].split, "same seed, same folds");
                int s = m.rows[i].scene[3] - '0', t = !strcmp(m.rows[i].split, "test");
                cr_assert(t || !strcmp(m.rows[i].split, "train"), "%s", m.rows[i].split);
                char c = t ? 't' : 'r';
                cr_assert(!split_of[s] || split_of[s] == c, "k %d fold %d: sequence %d split across train and test", k, f, s);
                if (!split_of[s]) { split_of[s] = c; test_seqs += t; }
                rows_held += t;
            }
            cr_assert(test_seqs >= 1, "k %d fold %d holds out no sequence", k, f);
            for (int s = 0; s < 7; s++) held[s] += split_of[s] == 't';
            manifest_free(&m), manifest_free(&m2);
        }
        for (int s = 0; s < 7; s++) cr_assert_eq(held[s], 1, "k %d: sequence %d held out %d times", k, s, held[s]);
        cr_assert_eq(rows_held, n, "k %d: every frame scored once as held out", k);
    }
    free(man), free(out), free(again);
}

Test(datasets_split_sequences, bad_input_is_one_message) {
    const char *d = test_tmpdir();
    int n;
    char *man = write_sequences(d, &n), *out = path_join(d, "h.csv"), *plain = path_join(d, "plain.csv");
    /* more folds than sequences: a fold would hold out nothing */
    char *a1[] = {"data", "split", man, "--by", "scene", "--folds", "8", "--holdout-fold", "0", "--out", out, NULL};
    cr_assert_eq(cmd_data(11, a1), ER_INPUT);
    cr_assert(strstr(er_msg(), "7 groups") && strstr(er_msg(), "k=8"), "%s", er_msg());
    /* a fold that does not exist */
    char *a2[] = {"data", "split", man, "--by", "scene", "--folds", "3", "--holdout-fold", "3", "--out", out, NULL};
    cr_assert_eq(cmd_data(11, a2), ER_INPUT);
    cr_assert(strstr(er_msg(), "--holdout-fold 3"), "%s", er_msg());
    /* no scene column: the message names the option and the file */
    const char *txt = "path,label\na.png,polyp\nb.png,polyp\nc.png,polyp\n";
    cr_assert_eq(write_file_atomic(plain, txt, strlen(txt)), ER_OK);
    char *a3[] = {"data", "split", plain, "--by", "scene", "--folds", "2", "--holdout-fold", "0", "--out", out, NULL};
    cr_assert_eq(cmd_data(11, a3), ER_INPUT);
    cr_assert(strstr(er_msg(), "--by scene") && strstr(er_msg(), "plain.csv") && strstr(er_msg(), "'scene'"), "%s", er_msg());
    free(man), free(out), free(plain);
}
