/* test_data.c — importers, `data check`, k-fold helpers. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/image.h"
#include "datasets/importers.h"
#include "datasets/kfold.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

static void write_png(const char *dir, const char *rel, int c, int h, int w, float v) {
    char *p = path_join(dir, rel), *d = path_dirname(p);
    make_dirs(d);
    image im = {0};
    image_ensure(&im, c, h, w);
    for (int i = 0; i < c * h * w; i++) im.data[i] = v;
    cr_assert_eq(image_save_png(p, &im), ER_OK);
    image_free(&im);
    free(p), free(d);
}

Test(datasets_data, import_image_mask_and_check) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "seg");
    write_png(src, "images/a.png", 3, 8, 9, 0.5f);
    write_png(src, "images/b.png", 3, 8, 9, 0.2f);
    write_png(src, "masks/a.png", 1, 8, 9, 1.0f);
    write_png(src, "masks/b.png", 1, 8, 9, 0.0f);
    char *out = path_join(root, "out/manifest.csv");
    manifest m;
    cr_assert_eq(import_image_mask(src, out, "polyp", &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 2);
    cr_assert_str_eq(m.rows[0].path, "../seg/images/a.png");
    cr_assert_str_eq(m.rows[1].mask, "../seg/masks/b.png");
    cr_assert_str_eq(m.rows[0].label, "polyp");
    cr_assert_eq(manifest_save(out, &m), ER_OK);
    manifest_free(&m);
    int nbad = -1;
    cr_assert_eq(data_check_manifest(out, 1, 0, &nbad), ER_OK, "%s", er_msg());
    cr_assert_eq(nbad, 0);
    /* mask of another size */
    write_png(src, "masks/b.png", 1, 8, 10, 0.0f);
    cr_assert_eq(data_check_manifest(out, 1, 0, &nbad), ER_INPUT);
    cr_assert(strstr(er_msg(), "masks/b.png") && strstr(er_msg(), "line 3"), "%s", er_msg());
    /* corrupt image: truncated PNG */
    write_png(src, "masks/b.png", 1, 8, 9, 0.0f);
    char *a = path_join(src, "images/a.png");
    truncate(a, 40);
    cr_assert_eq(data_check_manifest(out, 2, 0, &nbad), ER_INPUT);
    cr_assert(strstr(er_msg(), "images/a.png"), "%s", er_msg());
    cr_assert_eq(nbad, 1);
    /* missing file */
    unlink(a);
    cr_assert_eq(data_check_manifest(out, 2, 0, &nbad), ER_INPUT);
    cr_assert(strstr(er_msg(), "images/a.png"), "%s", er_msg());
    /* image without a mask is an import error naming it */
    write_png(src, "images/c.png", 3, 8, 9, 0.5f);
    cr_assert_eq(import_image_mask(src, out, NULL, &m), ER_INPUT);
    cr_assert(strstr(er_msg(), "c.png"), "%s", er_msg());
    manifest_free(&m);
    free(src), free(out), free(a);
}

Test(datasets_data, import_class_folders_and_scenes) {
    const char *root = test_tmpdir();
    char *src = path_join(root, "cls");
    write_png(src, "polyp/x1.png", 3, 4, 4, 0.1f);
    write_png(src, "polyp/sub/x2.png", 3, 4, 4, 0.1f);
    write_png(src, "normal/y1.png", 3, 4, 4, 0.1f);
    char *notes = path_join(src, "normal/readme.txt");
    write_file_atomic(notes, "x", 1);
    char *out = path_join(src, "m.csv");
    manifest m;
    cr_assert_eq(import_class_folders(src, out, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 3);
    cr_assert_str_eq(m.rows[0].label, "normal");
    cr_assert_str_eq(m.rows[0].path, "normal/y1.png");
    cr_assert_str_eq(m.rows[2].path, "polyp/sub/x2.png");
    manifest_free(&m);
    /* scenes, nested under class folders */
    char *sc = path_join(root, "scenes");
    write_png(sc, "adenoma/lesion1/f0.png", 3, 4, 4, 0.1f);
    write_png(sc, "adenoma/lesion1/f1.png", 3, 4, 4, 0.1f);
    write_png(sc, "hyper/lesion2/f0.png", 3, 4, 4, 0.1f);
    char *out2 = path_join(root, "scenes.csv");
    cr_assert_eq(import_scenes(sc, out2, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 3);
    cr_assert_str_eq(m.rows[1].scene, "adenoma/lesion1");
    cr_assert_str_eq(m.rows[1].view, "1");
    cr_assert_str_eq(m.rows[2].label, "hyper");
    manifest_free(&m);
    /* empty source */
    char *empty = path_join(root, "empty");
    make_dirs(empty);
    cr_assert_eq(import_class_folders(empty, out, &m), ER_INPUT);
    manifest_free(&m);
    cr_assert_eq(import_scenes("/nonexistent/endoret", out, &m), ER_INPUT);
    manifest_free(&m);
    /* an image + mask dataset is refused, naming the mask folder */
    char *seg = path_join(root, "seg_as_scenes");
    write_png(seg, "images/a.png", 3, 4, 4, 0.1f);
    write_png(seg, "masks/a.png", 1, 4, 4, 1.0f);
    cr_assert_eq(import_scenes(seg, out, &m), ER_INPUT);
    cr_assert(strstr(er_msg(), "'masks'") && strstr(er_msg(), "image-mask"), "%s", er_msg());
    manifest_free(&m);
    free(seg);
    free(src), free(notes), free(out), free(sc), free(out2), free(empty);
}

Test(datasets_data, manifest_error_names_line) {
    const char *root = test_tmpdir();
    char *p = path_join(root, "bad.csv");
    const char *txt = "path,label\na.png,x\nb.png,y,extra\n";
    write_file_atomic(p, txt, strlen(txt));
    int nbad;
    cr_assert_eq(data_check_manifest(p, 1, 0, &nbad), ER_INPUT);
    cr_assert(strstr(er_msg(), "bad.csv") && strstr(er_msg(), "line 3"), "%s", er_msg());
    free(p);
}

Test(datasets_data, stratified_kfold_balanced_deterministic) {
    int n = 103, k = 5, lab[103], f1[103], f2[103];
    for (int i = 0; i < n; i++) lab[i] = i % 3 == 0 ? 0 : (i % 7 == 0 ? -1 : 1 + (i % 2));
    cr_assert_eq(kfold_stratified(lab, n, k, 9, f1), ER_OK);
    cr_assert_eq(kfold_stratified(lab, n, k, 9, f2), ER_OK);
    cr_assert_eq(memcmp(f1, f2, sizeof f1), 0);
    int cnt[5][4] = {{0}}, size[5] = {0};
    for (int i = 0; i < n; i++) {
        cr_assert(f1[i] >= 0 && f1[i] < k);
        cnt[f1[i]][lab[i] + 1]++, size[f1[i]]++;
    }
    for (int l = 0; l < 4; l++) {
        int mn = 1 << 30, mx = 0;
        for (int f = 0; f < k; f++) mn = cnt[f][l] < mn ? cnt[f][l] : mn, mx = cnt[f][l] > mx ? cnt[f][l] : mx;
        cr_assert_leq(mx - mn, 1, "label %d spread %d..%d", l - 1, mn, mx);
    }
    for (int f = 1; f < k; f++) cr_assert_leq(abs(size[f] - size[0]), 1);
    cr_assert_eq(kfold_stratified(lab, n, 1, 9, f1), ER_INPUT);
}

Test(datasets_data, grouped_kfold_keeps_groups_together) {
    int n = 200, k = 4, g[200], fold[200];
    for (int i = 0; i < n; i++) g[i] = i % 11 == 0 ? -1 : (i * 37) % 29;
    cr_assert_eq(kfold_grouped(g, n, k, 3, fold), ER_OK);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (g[i] >= 0 && g[i] == g[j]) cr_assert_eq(fold[i], fold[j]);
    int size[4] = {0};
    for (int i = 0; i < n; i++) size[fold[i]]++;
    for (int f = 0; f < k; f++) cr_assert(size[f] > 30 && size[f] < 70, "fold %d has %d", f, size[f]);
    int same[200];
    for (int i = 0; i < n; i++) same[i] = 0;
    cr_assert_eq(kfold_grouped(same, n, k, 3, fold), ER_INPUT); /* one group cannot fill 4 folds */
}
