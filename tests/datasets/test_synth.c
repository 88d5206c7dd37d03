/* test_synth.c — synthetic scene generator: determinism, label balance, splits, masks, views. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "datasets/manifest.h"
#include "datasets/synth.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

Test(datasets_synth, same_seed_same_pixels_other_seed_differs) {
    image a = {0}, am = {0}, b = {0}, bm = {0};
    synth_scene s1, s2;
    synth_scene_make(42, 3, 1, &s1);
    synth_scene_make(42, 3, 1, &s2);
    synth_render_view(&s1, 2, 48, &a, &am);
    synth_render_view(&s2, 2, 48, &b, &bm);
    cr_assert_eq(memcmp(a.data, b.data, sizeof(float) * 3 * 48 * 48), 0);
    cr_assert_eq(memcmp(am.data, bm.data, sizeof(float) * 48 * 48), 0);
    synth_scene_make(43, 3, 1, &s2);
    synth_render_view(&s2, 2, 48, &b, &bm);
    cr_assert_neq(memcmp(a.data, b.data, sizeof(float) * 3 * 48 * 48), 0);
    image_free(&a), image_free(&am), image_free(&b), image_free(&bm);
}

Test(datasets_synth, labels_balanced_and_splits_stratified) {
    int n = 101, lab[101], c[2] = {0, 0};
    const char *split[101];
    synth_labels(5, n, lab);
    for (int i = 0; i < n; i++) {
        cr_assert(lab[i] == 0 || lab[i] == 1);
        c[lab[i]]++;
    }
    cr_assert(abs(c[0] - c[1]) <= 1, "%d vs %d", c[0], c[1]);
    synth_splits(5, n, lab, split);
    int cnt[3][2] = {{0}};
    for (int i = 0; i < n; i++) {
        int k = !strcmp(split[i], "train") ? 0 : !strcmp(split[i], "val") ? 1 : !strcmp(split[i], "test") ? 2 : -1;
        cr_assert_geq(k, 0);
        cnt[k][lab[i]]++;
    }
    for (int k = 0; k < 3; k++) cr_assert(abs(cnt[k][0] - cnt[k][1]) <= 1, "split %d unbalanced", k);
    cr_assert_gt(cnt[0][0], cnt[1][0]);
}

Test(datasets_synth, masks_present_views_differ) {
    image img = {0}, m = {0}, prev = {0};
    int with_lesion = 0, total = 0;
    double view_diff = 0;
    for (int sc = 0; sc < 12; sc++) {
        synth_scene s;
        synth_scene_make(1, sc, sc % 2, &s);
        for (int v = 0; v < 3; v++) {
            synth_render_view(&s, v, 64, &img, &m);
            double fg = 0;
            for (int i = 0; i < 64 * 64; i++) {
                cr_assert(m.data[i] == 0 || m.data[i] == 1);
                fg += m.data[i];
            }
            for (int i = 0; i < 3 * 64 * 64; i++) cr_assert(img.data[i] >= 0 && img.data[i] <= 1);
            with_lesion += fg > 0;
            total++;
            if (v > 0) {
                double d = 0;
                for (int i = 0; i < 3 * 64 * 64; i++) d += fabs(img.data[i] - prev.data[i]);
                view_diff += d / (3 * 64 * 64);
            }
            image_copy(&prev, &img);
        }
    }
    cr_assert_geq(with_lesion, total - 2, "the lesion should be visible in (nearly) every view: %d/%d", with_lesion,
                  total);
    cr_assert_gt(view_diff / 24, 0.04, "views of a scene should differ substantially (mean abs diff %f)",
                 view_diff / 24);
    /* background-only variant: no lesion pixels */
    synth_scene bg;
    synth_scene_make(1, 0, -1, &bg);
    synth_render_view(&bg, 0, 64, &img, &m);
    for (int i = 0; i < 64 * 64; i++) cr_assert_eq(m.data[i], 0);
    image_free(&img), image_free(&m), image_free(&prev);
}

/* Label cues: malignant scenes are more lobulated and more gyrus-textured on average, while the
 * colour distribution is shared (so colour alone does not give the label). */
Test(datasets_synth, label_depends_on_shape_texture_not_colour) {
    double lob[2] = {0}, mix[2] = {0}, tint[2] = {0};
    int n[2] = {0};
    for (int sc = 0; sc < 400; sc++) {
        synth_scene s;
        int l = sc % 2;
        synth_scene_make(9, sc, l, &s);
        double a = 0;
        for (int m = 0; m < 4; m++) a += hypot(s.lob[m][0], s.lob[m][1]);
        lob[l] += a, mix[l] += s.tex_mix, tint[l] += s.lesion_tint[0] / s.lesion_tint[1];
        n[l]++;
    }
    for (int l = 0; l < 2; l++) lob[l] /= n[l], mix[l] /= n[l], tint[l] /= n[l];
    cr_assert_gt(lob[1], lob[0] * 1.5);
    cr_assert_gt(mix[1], mix[0] + 0.3);
    cr_assert_float_eq(tint[0], tint[1], 0.05, "colour should not separate the labels (%f vs %f)", tint[0], tint[1]);
}

static int files_equal(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    if (read_file(a, &x, &nx) || read_file(b, &y, &ny)) return 0;
    int eq = nx == ny && !memcmp(x, y, nx);
    free(x), free(y);
    return eq;
}

Test(datasets_synth, dataset_files_byte_identical_for_same_seed) {
    const char *d = test_tmpdir();
    char *d1 = path_join(d, "a"), *d2 = path_join(d, "b");
    synth_config c1 = {6, 2, 40, 77, 1, 2}, c2 = {6, 2, 40, 77, 1, 1}; /* different thread counts */
    cr_assert_eq(synth_write_dataset(d1, &c1), ER_OK, "%s", er_msg());
    cr_assert_eq(synth_write_dataset(d2, &c2), ER_OK, "%s", er_msg());
    char *m1 = path_join(d1, "manifest.csv"), *m2 = path_join(d2, "manifest.csv");
    cr_assert(files_equal(m1, m2));
    manifest m;
    cr_assert_eq(manifest_load(m1, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 6 * 3); /* 2 views + 1 background view per scene */
    int bg = 0;
    for (int i = 0; i < m.n; i++) {
        char *p1 = manifest_image_path(&m, i), *q1 = manifest_mask_path(&m, i);
        char *p2 = path_join(d2, m.rows[i].path), *q2 = path_join(d2, m.rows[i].mask);
        cr_assert(files_equal(p1, p2), "%s differs", m.rows[i].path);
        cr_assert(files_equal(q1, q2), "%s differs", m.rows[i].mask);
        cr_assert(m.rows[i].scene && m.rows[i].view && m.rows[i].split && m.rows[i].label);
        bg += !strcmp(m.rows[i].label, "none");
        free(p1), free(q1), free(p2), free(q2);
    }
    cr_assert_eq(bg, 6);
    manifest_free(&m);
    free(d1), free(d2), free(m1), free(m2);
}

Test(datasets_synth, bad_config_rejected) {
    synth_config c = {0, 2, 40, 1, 0, 1};
    cr_assert_eq(synth_write_dataset("/tmp/endoret_never", &c), ER_INPUT);
}
