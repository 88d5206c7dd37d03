/* test_augment_views.c — the "views" preset: seeded, in place, mask carried with the geometry,
 * every switch doing what its key says (out-of-range strengths: tests/train/test_config_audit.c). */
#include <math.h>
#include <string.h>

#include "datasets/augment.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

/* A square image whose red channel is the mask (1 inside a 20x30 box, else 0.2), green a
 * horizontal ramp, blue a vertical ramp: every geometric step is visible in it. */
static void boxed(image *img, image *mask, int n) {
    image_ensure(img, 3, n, n), image_ensure(mask, 1, n, n);
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
            int in = y >= 10 && y < 30 && x >= 12 && x < 42;
            mask->data[y * n + x] = (float)in;
            IMG_AT(img, 0, y, x) = in ? 1.0f : 0.2f;
            IMG_AT(img, 1, y, x) = (float)x / n;
            IMG_AT(img, 2, y, x) = (float)y / n;
        }
}

static aug_view_params geometry_only(void) {
    aug_view_params p = aug_view_defaults();
    p.jitter_prob = p.grey_prob = p.blur_prob = p.jpeg_prob = 0;
    return p;
}

Test(datasets_augment_views, seeded_in_place_and_finite) {
    image src = {0}, msk = {0}, o2 = {0}, m2 = {0};
    aug_workspace ws = {0};
    boxed(&src, &msk, 64);
    aug_view_params p = aug_view_defaults();
    float *buf = xmalloc(sizeof(float) * 3 * 48 * 48), *mbuf = xmalloc(sizeof(float) * 48 * 48);
    for (int s = 0; s < 40; s++) {
        image o1 = {.c = 3, .h = 48, .w = 48, .data = buf, .cap = (size_t)3 * 48 * 48};
        image m1 = {.c = 1, .h = 48, .w = 48, .data = mbuf, .cap = (size_t)48 * 48};
        rng_t r1 = rng_make(5, rng_stream(RNG_AUGMENT, 0, s)), r2 = rng_make(5, rng_stream(RNG_AUGMENT, 0, s));
        cr_assert_eq(aug_views(&r1, &src, &msk, 48, &p, &ws, &o1, &m1), ER_OK, "%s", er_msg());
        cr_assert(o1.data == buf && m1.data == mbuf, "a batch buffer's storage is never replaced");
        cr_assert_eq(aug_views(&r2, &src, &msk, 48, &p, &ws, &o2, &m2), ER_OK);
        cr_assert_eq(memcmp(o1.data, o2.data, sizeof(float) * 3 * 48 * 48), 0, "same stream => same bytes");
        cr_assert_eq(memcmp(m1.data, m2.data, sizeof(float) * 48 * 48), 0);
        for (int i = 0; i < 3 * 48 * 48; i++) cr_assert(isfinite(o1.data[i]) && o1.data[i] >= -2.2f && o1.data[i] <= 2.7f);
        for (int i = 0; i < 48 * 48; i++) cr_assert(m1.data[i] == 0 || m1.data[i] == 1);
    }
    free(buf), free(mbuf);
    image_free(&src), image_free(&msk), image_free(&o2), image_free(&m2);
    aug_workspace_free(&ws);
}

/* With photometry off, the mask must sit where the image's red box went (crop, flips, rotation
 * applied to both): red (denormalised) is 1 inside the moved box and 0.2 or 0 (black corner)
 * outside, so nearly every pixel's mask agrees with red > 0.6 (bilinear edges aside). */
Test(datasets_augment_views, mask_follows_geometry) {
    image src = {0}, msk = {0}, o = {0}, m = {0};
    aug_workspace ws = {0};
    boxed(&src, &msk, 64);
    aug_view_params p = geometry_only();
    p.rotate = 40, p.crop_min = 0.3f;
    int boxes = 0;
    for (int s = 0; s < 60; s++) {
        rng_t r = rng_make(9, rng_stream(RNG_AUGMENT, 1, s));
        cr_assert_eq(aug_views(&r, &src, &msk, 40, &p, &ws, &o, &m), ER_OK);
        int agree = 0, inside = 0;
        for (int i = 0; i < 40 * 40; i++) {
            float red = o.data[i] * IMAGENET_STD[0] + IMAGENET_MEAN[0];
            agree += (red > 0.6f) == (m.data[i] > 0.5f);
            inside += m.data[i] > 0.5f;
        }
        cr_assert_geq(agree, 40 * 40 * 92 / 100, "sample %d: mask and image disagree on %d pixels", s, 1600 - agree);
        boxes += inside > 0;
    }
    cr_assert_gt(boxes, 10, "the box is inside some crops");
    image_free(&src), image_free(&msk), image_free(&o), image_free(&m);
    aug_workspace_free(&ws);
}

/* Each switch on its own: vflip 1 turns the blue ramp upside down (crop 1 = the whole image, no
 * rotation); grey 1 gives equal channels; jitter 0 with everything else off is the resize alone. */
Test(datasets_augment_views, each_switch_does_what_its_key_says) {
    image src = {0}, msk = {0}, o = {0}, m = {0};
    aug_workspace ws = {0};
    boxed(&src, &msk, 64);
    aug_view_params p = geometry_only();
    p.crop_min = 1, p.rotate = 0, p.vflip = 1;
    rng_t r = rng_make(2, 7);
    cr_assert_eq(aug_views(&r, &src, &msk, 32, &p, &ws, &o, &m), ER_OK);
    float top = o.data[2 * 1024 + 0 * 32 + 16] * IMAGENET_STD[2] + IMAGENET_MEAN[2];
    float bot = o.data[2 * 1024 + 31 * 32 + 16] * IMAGENET_STD[2] + IMAGENET_MEAN[2];
    cr_assert_gt(top, 0.9f, "vflip: the bottom rows (blue ~1) are on top, got %f", top);
    cr_assert_lt(bot, 0.1f, "%f", bot);
    p.vflip = 0, p.grey_prob = 1;
    cr_assert_eq(aug_views(&r, &src, &msk, 32, &p, &ws, &o, &m), ER_OK);
    for (int i = 0; i < 1024; i++) {
        float a = o.data[i] * IMAGENET_STD[0] + IMAGENET_MEAN[0], b = o.data[1024 + i] * IMAGENET_STD[1] + IMAGENET_MEAN[1];
        cr_assert_float_eq(a, b, 1e-5f, "grey: equal channels");
    }
    /* everything off: the whole image resized, possibly mirrored */
    p.grey_prob = 0;
    image ref = {0};
    image_resize_crop(&src, 0, 0, 64, 64, &ref, 32, 32, RESIZE_BILINEAR);
    image_normalize(&ref, IMAGENET_MEAN, IMAGENET_STD);
    int same = 0, mirrored = 0;
    for (int s = 0; s < 8; s++) {
        cr_assert_eq(aug_views(&r, &src, &msk, 32, &p, &ws, &o, &m), ER_OK);
        if (!memcmp(o.data, ref.data, sizeof(float) * 3 * 1024)) same++;
        image_hflip(&o);
        if (!memcmp(o.data, ref.data, sizeof(float) * 3 * 1024)) mirrored++;
    }
    cr_assert_eq(same + mirrored, 8, "crop 1, no rotation, no photometry = the resize or its mirror");
    cr_assert(same > 0 && mirrored > 0, "hflip at 0.5");
    image_free(&src), image_free(&msk), image_free(&o), image_free(&m), image_free(&ref);
    aug_workspace_free(&ws);
}
