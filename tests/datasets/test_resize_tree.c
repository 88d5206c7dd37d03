/* resize_tree (datasets/resize_tree.h, `endoret data resize`): the same tree with smaller images in
 * their own format, masks by nearest neighbour (label values kept, the pixels image_resize's NEAREST
 * picks), small images and other files byte for byte, links skipped, an output inside the source
 * refused before anything is written, a corrupt image named. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/image.h"
#include "datasets/resize_tree.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

static void put_image(const char *dir, const char *rel, int c, int h, int w, int jpeg) {
    image im = {0};
    image_ensure(&im, c, h, w);
    for (int k = 0; k < c; k++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) /* masks: blocks of 0 and 1; colour: gradients */
                IMG_AT(&im, k, y, x) = c == 1 ? (float)(((x / 5) + (y / 7)) & 1) : (float)(x + y + 9 * k) / (w + h + 18);
    char *p = path_join(dir, rel), *d = path_dirname(p);
    cr_assert_eq(make_dirs(d), ER_OK);
    if (jpeg) {
        uint8_t *buf;
        size_t len;
        cr_assert_eq(image_encode_jpeg(&im, 95, &buf, &len), ER_OK);
        cr_assert_eq(write_file_atomic(p, buf, len), ER_OK);
        free(buf);
    } else {
        cr_assert_eq(image_save_png(p, &im), ER_OK, "%s", er_msg());
    }
    free(p), free(d);
    image_free(&im);
}

static int same_bytes(const char *a, const char *b) {
    char *x, *y;
    size_t lx, ly;
    if (read_file(a, &x, &lx) || read_file(b, &y, &ly)) return 0;
    int same = lx == ly && !memcmp(x, y, lx);
    free(x), free(y);
    return same;
}

static char *at(const char *dir, const char *rel) { return path_join(dir, rel); }

Test(datasets_resize_tree, smaller_images_same_names_masks_nearest_rest_verbatim) {
    char src[64], base[64]; /* test_tmpdir's buffer is reused by the next call */
    snprintf(src, sizeof src, "%s", test_tmpdir());
    snprintf(base, sizeof base, "%s", test_tmpdir());
    char dst[512];
    snprintf(dst, sizeof dst, "%s/out/small", base);
    put_image(src, "images/a.png", 3, 30, 40, 0);
    put_image(src, "images/sub/b.jpg", 3, 48, 64, 1);
    put_image(src, "masks/a_mask.png", 1, 30, 40, 0);
    put_image(src, "images/tiny.png", 3, 12, 10, 0); /* shorter side 10 <= 16: kept as it is */
    char *csv = at(src, "labels.csv"), *lnk = at(src, "images/link.png"), *a = at(src, "images/a.png");
    cr_assert_eq(write_file_atomic(csv, "file,sequence\nimages/a.png,s1\n", 31), ER_OK);
    cr_assert_eq(symlink(a, lnk), 0);
    resize_tree_opts o = {.side = 16, .quality = 90, .mask_dir = "masks"};
    resize_tree_stats st;
    cr_assert_eq(resize_tree(src, dst, &o, &st), ER_OK, "%s", er_msg());
    cr_assert_eq(st.images, 4);
    cr_assert_eq(st.masks, 1);
    cr_assert_eq(st.shrunk, 3);
    cr_assert_eq(st.copied, 1);
    cr_assert_eq(st.skipped, 1, "the symbolic link is skipped, not followed");
    struct { const char *rel; int h, w, c; } want[] = {{"images/a.png", 16, 21, 3}, {"images/sub/b.jpg", 16, 21, 3},
                                                       {"masks/a_mask.png", 16, 21, 1}, {"images/tiny.png", 12, 10, 3}};
    for (int i = 0; i < 4; i++) {
        char *p = at(dst, want[i].rel);
        image im = {0};
        cr_assert_eq(image_load(p, 0, &im), ER_OK, "%s: %s", want[i].rel, er_msg());
        cr_assert(im.h == want[i].h && im.w == want[i].w && im.c == want[i].c, "%s: %dx%dx%d", want[i].rel, im.c, im.h,
                  im.w);
        char *f = NULL;
        size_t len;
        cr_assert_eq(read_file(p, &f, &len), ER_OK);
        cr_assert_eq(!memcmp(f, "\x89PNG", 4), strstr(want[i].rel, ".png") != NULL, "%s keeps its format", want[i].rel);
        free(f);
        image_free(&im);
        free(p);
    }
    /* the mask: label values only, the very pixels nearest-neighbour resizing picks */
    image m = {0}, ms = {0}, ref = {0};
    char *mp = at(dst, "masks/a_mask.png"), *msp = at(src, "masks/a_mask.png");
    cr_assert_eq(image_load(mp, 0, &m), ER_OK);
    cr_assert_eq(image_load(msp, 0, &ms), ER_OK);
    image_resize(&ms, &ref, 16, 21, RESIZE_NEAREST);
    for (int i = 0; i < 16 * 21; i++) {
        cr_assert(m.data[i] == 0.0f || m.data[i] == 1.0f, "mask pixel %d = %g: not a label value", i, m.data[i]);
        cr_assert_eq(m.data[i], ref.data[i], "mask pixel %d", i);
    }
    char *tiny_s = at(src, "images/tiny.png"), *tiny_d = at(dst, "images/tiny.png"), *csv_d = at(dst, "labels.csv");
    char *lnk_d = at(dst, "images/link.png");
    cr_assert(same_bytes(tiny_s, tiny_d), "an image already small enough is copied byte for byte");
    cr_assert(same_bytes(csv, csv_d), "other files are copied byte for byte");
    cr_assert(access(lnk_d, F_OK) != 0, "no copy of the link");
    image_free(&m), image_free(&ms), image_free(&ref);
    free(mp), free(msp), free(tiny_s), free(tiny_d), free(csv_d), free(lnk_d), free(csv), free(lnk), free(a);
}

Test(datasets_resize_tree, refuses_an_output_inside_the_source_and_names_a_corrupt_image) {
    char src[64], base[64]; /* test_tmpdir's buffer is reused by the next call */
    snprintf(src, sizeof src, "%s", test_tmpdir());
    snprintf(base, sizeof base, "%s", test_tmpdir());
    put_image(src, "images/a.png", 3, 30, 40, 0);
    resize_tree_opts o = {.side = 16, .quality = 90, .mask_dir = "masks"};
    resize_tree_stats st;
    char inner[512], dst[512];
    snprintf(inner, sizeof inner, "%s/images/../new/deeper", src);
    cr_assert_eq(resize_tree(src, inner, &o, &st), ER_INPUT);
    cr_assert(strstr(er_msg(), "inside the source"), "%s", er_msg());
    char *made = at(src, "new");
    cr_assert(access(made, F_OK) != 0, "nothing was created inside the source");
    cr_assert_eq(resize_tree(src, src, &o, &st), ER_INPUT);
    o.side = 4;
    snprintf(dst, sizeof dst, "%s/out", base);
    cr_assert_eq(resize_tree(src, dst, &o, &st), ER_INPUT);
    cr_assert(strstr(er_msg(), "--side 4"), "%s", er_msg());
    o.side = 16;
    char *bad = at(src, "images/broken.png");
    cr_assert_eq(write_file_atomic(bad, "\x89PNG\r\n\x1a\nnot a png", 17), ER_OK);
    cr_assert_eq(resize_tree(src, dst, &o, &st), ER_INPUT);
    cr_assert(strstr(er_msg(), "broken.png"), "the message names the file: %s", er_msg());
    free(made), free(bad);
}
