/* `bow train|embed` end to end on rendered synthetic scenes, then `vss draw` and `eval perceived`
 * on the written embedding file (the chain a user runs). */
#include <math.h>
#include <string.h>

#include "infer/perceived/bow_model.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_synth(int argc, char **argv);
int cmd_bow(int argc, char **argv);
int cmd_vss(int argc, char **argv);
int cmd_eval_perceived(int argc, char **argv);

Test(perceived_cmd, bow_train_embed_draw_eval) {
    const char *dir = test_tmpdir();
    char data[300], man[400], voc[300], emb[300], embs[300], sheet[300], gt[300], outp[300];
    snprintf(data, sizeof data, "%s/synth", dir);
    snprintf(man, sizeof man, "%s/manifest.csv", data);
    snprintf(voc, sizeof voc, "%s/vocab.safetensors", dir);
    snprintf(emb, sizeof emb, "%s/bow.safetensors", dir);
    snprintf(embs, sizeof embs, "%s/bow_scene.safetensors", dir);
    snprintf(sheet, sizeof sheet, "%s/sheet.csv", dir);
    snprintf(gt, sizeof gt, "%s/pairs.csv", dir);
    snprintf(outp, sizeof outp, "%s/stdout.txt", dir);
    fflush(stdout);
    cr_assert(freopen(outp, "w", stdout));
    char *s1[] = {"synth", "--out", data, "--scenes", "6", "--views", "2", "--size", "64", "--seed", "3", NULL};
    cr_assert_eq(cmd_synth(11, s1), 0, "%s", er_msg());
    char *t1[] = {"bow", "train", "--manifest", man, "--out", voc, "--k", "12", "--step", "8", "--radius", "12", "--iters", "10", NULL};
    cr_assert_eq(cmd_bow(14, t1), 0, "%s", er_msg());
    char *e1[] = {"bow", "embed", "--manifest", man, "--vocab", voc, "--out", emb, NULL};
    cr_assert_eq(cmd_bow(8, e1), 0, "%s", er_msg());
    char *e2[] = {"bow", "embed", "--manifest", man, "--vocab", voc, "--out", embs, "--pool", "scene", NULL};
    cr_assert_eq(cmd_bow(10, e2), 0, "%s", er_msg());
    emb_set e;
    cr_assert_eq(emb_load(emb, &e), ER_OK, "%s", er_msg());
    cr_assert(e.n == 12 && e.dim == 12 && e.distance && !strcmp(e.distance, "chi2") && e.scene);
    for (int i = 0; i < e.n; i++) {
        double s = 0;
        for (int k = 0; k < e.dim; k++) { cr_assert(e.x[i * e.dim + k] >= 0); s += e.x[i * e.dim + k]; }
        cr_assert_float_eq(s, 1.0, 1e-5);
    }
    emb_set p;
    cr_assert_eq(emb_load(embs, &p), ER_OK);
    cr_assert_eq(p.n, 6);
    /* the pooled signature of scene 0 is the normalised mean of its two frames */
    for (int k = 0; k < e.dim; k++) {
        int r0 = -1, r1 = -1;
        for (int i = 0; i < e.n; i++) if (e.scene[i] == p.scene[0]) { if (r0 < 0) r0 = i; else r1 = i; }
        cr_assert_float_eq(p.x[k], 0.5f * (e.x[r0 * e.dim + k] + e.x[r1 * e.dim + k]), 1e-5);
    }
    emb_free(&p);
    char *d1[] = {"vss", "draw", "--emb", emb, "--n", "20", "--seed", "2", "--out", sheet, NULL};
    cr_assert_eq(cmd_vss(10, d1), 0, "%s", er_msg());
    /* score the drawn couples "perfectly": the label of the prior distance order */
    FILE *in = fopen(sheet, "r"), *out = fopen(gt, "w");
    char line[2048];
    cr_assert(fgets(line, sizeof line, in));
    fprintf(out, "a,b,score,observer\n");
    int nl = 0;
    while (fgets(line, sizeof line, in)) {
        long long a, b;
        double d;
        int pair, proc;
        cr_assert(sscanf(line, "%d,%lld,%lld,%d,%lf", &pair, &a, &b, &proc, &d) == 5);
        cr_assert(e.scene[a] != e.scene[b]); /* other patients (= scenes here) only */
        fprintf(out, "%lld,%lld,%+d,t\n", a, b, d < 0.3 ? 2 : d < 0.5 ? 1 : d < 0.7 ? -1 : -2);
        nl++;
    }
    fclose(in);
    fclose(out);
    cr_assert_eq(nl, 20);
    char *v1[] = {"perceived", "--gt", gt, "--emb", emb, "--json", NULL};
    cr_assert_eq(cmd_eval_perceived(6, v1), 0, "%s", er_msg());
    fflush(stdout);
    char *text;
    size_t len;
    read_file(outp, &text, &len);
    const char *j = strstr(text, "{\"n_pairs\":20");
    cr_assert(j, "%s", text);
    /* scores are a decreasing function of the distance: the rank correlations are large */
    const char *k = strstr(j, "\"kendall_tau_b\":");
    cr_assert(k && strtod(k + 16, NULL) > 0.7, "%s", j);
    free(text);
    emb_free(&e);
}
