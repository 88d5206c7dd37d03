/* datasets/image_cache: a split cached with the requested short side (never upscaled), u8 planes
 * that read back within half a grey level, masks for the rows that have one, and the eval set with
 * its scene/view ids; an empty split is one ER_INPUT message naming the file. */
#include <math.h>
#include <string.h>

#include "datasets/image_cache.h"
#include "datasets/manifest.h"
#include "datasets/synth.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

static char *make_data(const char *dir) {
    synth_config sc = {.scenes = 3, .views = 2, .size = 32, .seed = 5, .threads = 1};
    cr_assert_eq(synth_write_dataset(dir, &sc), 0, "%s", er_msg());
    return path_join(dir, "manifest.csv");
}

Test(image_cache, split_short_side_masks_and_roundtrip) {
    char *man = make_data(test_tmpdir());
    image_cache c;
    cr_assert_eq(image_cache_load(&c, man, "", 20), 0, "%s", er_msg());
    cr_assert_eq(c.n, 6);
    image im = {0}, ref = {0};
    manifest m;
    cr_assert_eq(manifest_load(man, &m), 0);
    for (int i = 0; i < c.n; i++) {
        cr_assert_eq(c.imgs[i].c, 3);
        cr_assert_eq(c.imgs[i].h < c.imgs[i].w ? c.imgs[i].h : c.imgs[i].w, 20, "short side %dx%d", c.imgs[i].h, c.imgs[i].w);
        cr_assert_not_null(c.masks[i].px, "synth rows have masks");
        cr_assert_eq(c.masks[i].h, c.imgs[i].h);
        /* u8 -> fp32 matches the bilinear resize of the decoded image within 0.5/255 */
        char *p = manifest_image_path(&m, i);
        cr_assert_eq(image_load(p, 3, &im), 0);
        free(p);
        image r = {0};
        image_resize(&im, &r, c.imgs[i].h, c.imgs[i].w, RESIZE_BILINEAR);
        image_cache_get(&c.imgs[i], &ref);
        size_t n = (size_t)3 * r.h * r.w;
        for (size_t k = 0; k < n; k++)
            cr_assert(fabsf(ref.data[k] - fminf(fmaxf(r.data[k], 0), 1)) <= 0.5f / 255 + 1e-6f, "pixel %zu", k);
        image_free(&r);
    }
    image_cache_free(&c);
    /* never upscaled: a side larger than the image keeps its size */
    cr_assert_eq(image_cache_load(&c, man, NULL, 1000), 0, "%s", er_msg());
    cr_assert_eq(c.imgs[0].h, 32);
    image_cache_free(&c);
    cr_assert_eq(image_cache_load(&c, man, "nosuchsplit", 20), ER_INPUT);
    cr_assert(strstr(er_msg(), "manifest.csv") && strstr(er_msg(), "nosuchsplit"), "%s", er_msg());
    image_cache_free(&c);
    float *x;
    int64_t *scene, *view;
    int n;
    cr_assert_eq(eval_set_load(man, "", 16, &x, &scene, &view, &n), 0, "%s", er_msg());
    cr_assert_eq(n, 6);
    for (int i = 0; i < n; i++) cr_assert_eq(scene[i], i / 2, "rows are scene-major: row %d scene %lld", i, (long long)scene[i]);
    cr_assert_neq(view[0], view[1]);
    free(x); free(scene); free(view);
    image_free(&im); image_free(&ref);
    manifest_free(&m);
    free(man);
}

Test(image_cache, scenes_min_keeps_scenes_with_enough_views) {
    /* rows of scenes 0 (3 rows), 1 (1 row), 2 (none), 3 (2 rows); one row without a scene */
    int scene[] = {0, 3, 0, 1, -1, 3, 0};
    image_cache c = {.n = 7, .scene = scene};
    int *first, *count, *rows, ns, fewer;
    cr_assert_eq(image_cache_scenes_min(&c, 2, &first, &count, &rows, &ns, &fewer), 4, "scene ids in the cache");
    cr_assert_eq(ns, 2);
    cr_expect_eq(fewer, 1, "scene 1 has one row; scene 2 none is not counted");
    cr_expect(count[0] == 3 && count[1] == 2);
    cr_expect(rows[first[0]] == 0 && rows[first[0] + 1] == 2 && rows[first[0] + 2] == 6, "scene 0's rows in order");
    cr_expect(rows[first[1]] == 1 && rows[first[1] + 1] == 5, "scene 3's rows in order");
    free(first); free(count); free(rows);
    int none[] = {-1, -1};
    image_cache d = {.n = 2, .scene = none};
    cr_expect_eq(image_cache_scenes_min(&d, 2, &first, &count, &rows, &ns, &fewer), 0, "no scene column");
    free(first); free(count); free(rows);
}
