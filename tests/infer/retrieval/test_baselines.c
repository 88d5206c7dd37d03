/* test_baselines.c — `embed --baseline colorhist|thumbnail`: the descriptors from their definition
 * on hand-made images, and the command writing an ordinary embedding file with its distance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "infer/retrieval/baseline_desc.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_embed(int argc, char **argv);
int cmd_eval(int argc, char **argv);

static void set_rgb(image *im, int y, int x, float r, float g, float b) {
    IMG_AT(im, 0, y, x) = r, IMG_AT(im, 1, y, x) = g, IMG_AT(im, 2, y, x) = b;
}

Test(infer_baselines, colorhist_counts_joint_bins) {
    image im = {0};
    image_ensure(&im, 3, 2, 2);
    set_rgb(&im, 0, 0, 0, 0, 0);
    set_rgb(&im, 0, 1, 1, 1, 1);          /* 1.0 falls in the last bin */
    set_rgb(&im, 1, 0, 0.5f, 0.2f, 0.9f); /* bins 4, 1, 7 */
    set_rgb(&im, 1, 1, 0.5f, 0.2f, 0.9f);
    float h[512];
    cr_assert_eq(baseline_dim(BASELINE_COLORHIST), 512);
    baseline_descriptor(BASELINE_COLORHIST, &im, h);
    double sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    cr_expect_float_eq(sum, 1.0, 1e-6);
    cr_expect_float_eq(h[0], 0.25, 1e-7);
    cr_expect_float_eq(h[511], 0.25, 1e-7);
    cr_expect_float_eq(h[(4 * 8 + 1) * 8 + 7], 0.5, 1e-7);
    image_free(&im);
}

Test(infer_baselines, thumbnail_is_grey_area_average_minus_mean) {
    image im = {0};
    image_ensure(&im, 3, 32, 48);
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 48; x++) {
            float v = x < 24 ? 0.2f : 0.8f;
            set_rgb(&im, y, x, v, v, v);
        }
    float t[256];
    baseline_descriptor(BASELINE_THUMBNAIL, &im, t);
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++) cr_expect_float_eq(t[y * 16 + x], x < 8 ? -0.3f : 0.3f, 1e-6, "cell %d,%d = %g", y, x, t[y * 16 + x]);
    image_free(&im);
}

static void write_png(const char *path, float r, float g, float b, float stripe) {
    image im = {0};
    image_ensure(&im, 3, 20, 20);
    for (int y = 0; y < 20; y++)
        for (int x = 0; x < 20; x++) set_rgb(&im, y, x, x < 10 ? r : r * stripe, g, b);
    cr_assert_eq(image_save_png(path, &im), ER_OK, "%s", er_msg());
    image_free(&im);
}

Test(infer_baselines, embed_baseline_writes_an_embedding_file_with_its_distance) {
    const char *dir = test_tmpdir();
    char *man = path_join(dir, "m.csv");
    FILE *f = fopen(man, "w");
    fprintf(f, "path,scene,view\n");
    const float colour[4][3] = {{0.9f, 0.1f, 0.1f}, {0.1f, 0.9f, 0.1f}, {0.1f, 0.1f, 0.9f}, {0.9f, 0.9f, 0.1f}};
    for (int s = 0; s < 4; s++)
        for (int v = 0; v < 2; v++) {
            char name[32];
            snprintf(name, sizeof name, "s%d_v%d.png", s, v);
            char *p = path_join(dir, name);
            write_png(p, colour[s][0], colour[s][1], colour[s][2], v ? 0.7f : 1.0f);
            free(p);
            fprintf(f, "%s,%d,%d\n", name, 10 + s, v + 2);
        }
    fclose(f);
    char *out = path_join(dir, "hist.safetensors"), *out2 = path_join(dir, "thumb.safetensors");
    char *a[] = {"embed", "--baseline", "colorhist", "--manifest", man, "--out", out, NULL};
    cr_assert_eq(cmd_embed(7, a), ER_OK, "%s", er_msg());
    emb_set e;
    cr_assert_eq(emb_load(out, &e), ER_OK);
    cr_assert_eq(e.n, 8);
    cr_assert_eq(e.dim, 512);
    cr_assert_str_eq(e.distance, "chi2");
    cr_assert_eq(e.scene[7], 13);
    cr_assert_eq(e.view[7], 3);
    emb_free(&e);
    fflush(stdout);
    char *r[] = {"eval", "reid", "--emb", out, "--ref-view", "2", "--bootstrap", "0", NULL};
    cr_assert_eq(cmd_eval(8, r), ER_OK, "%s", er_msg());
    char *b[] = {"embed", "--baseline", "thumbnail", "--manifest", man, "--out", out2, NULL};
    cr_assert_eq(cmd_embed(7, b), ER_OK, "%s", er_msg());
    cr_assert_eq(emb_load(out2, &e), ER_OK);
    cr_assert_eq(e.dim, 256);
    cr_assert_str_eq(e.distance, "cosine");
    emb_free(&e);
    char *bad[] = {"embed", "--baseline", "sift", "--manifest", man, "--out", out2, NULL};
    cr_assert_eq(cmd_embed(7, bad), ER_INPUT);
    cr_assert(strstr(er_msg(), "--baseline") && strstr(er_msg(), "'sift'"), "%s", er_msg());
    free(man); free(out); free(out2);
}
