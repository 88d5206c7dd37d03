/* test_transforms.c — resize against torch's antialiased interpolate, geometry/colour invariants,
 * CIELAB against published values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

/* Same formula as tests/datasets/ref/resize_ref.py */
static void pattern_image(image *im, int C, int H, int W) {
    image_ensure(im, C, H, W);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                uint32_t h = (uint32_t)c * 7919u + (uint32_t)y * 104729u + (uint32_t)x * 1299709u;
                h = (h ^ (h >> 13)) * 0x5bd1e995u;
                h ^= h >> 15;
                IMG_AT(im, c, y, x) = (float)(h % 256) / 255.0f;
            }
}

static const char *ref_path(void) {
    static char p[512];
    const char *root = getenv("ENDORET_REPO");
    snprintf(p, sizeof p, "%s/tests/datasets/ref/resize_ref.txt", root ? root : ".");
    return p;
}

Test(datasets_transforms, resize_matches_torch_antialias) {
    FILE *f = fopen(ref_path(), "r");
    cr_assert(f, "missing %s (run from the repo root)", ref_path());
    image src = {0}, dst = {0};
    pattern_image(&src, 3, 21, 29);
    char mode[32];
    int h, w, cases = 0;
    while (fscanf(f, "%31s %d %d", mode, &h, &w) == 3) {
        resize_mode m = !strcmp(mode, "bicubic") ? RESIZE_BICUBIC : RESIZE_BILINEAR;
        image_resize(&src, &dst, h, w, m);
        cr_assert(dst.c == 3 && dst.h == h && dst.w == w);
        double maxd = 0;
        for (int i = 0; i < 3 * h * w; i++) {
            float ref;
            cr_assert_eq(fscanf(f, "%f", &ref), 1);
            double d = fabs(ref - dst.data[i]);
            if (d > maxd) maxd = d;
        }
        cr_assert_lt(maxd, 2e-5, "%s %dx%d: max diff %g vs torch", mode, h, w, maxd);
        cases++;
    }
    cr_assert_eq(cases, 7);
    fclose(f);
    image_free(&src), image_free(&dst);
}

Test(datasets_transforms, resize_constant_and_identity) {
    image a = {0}, b = {0};
    image_ensure(&a, 3, 40, 60);
    for (int i = 0; i < 3 * 40 * 60; i++) a.data[i] = 0.3f;
    resize_mode modes[3] = {RESIZE_NEAREST, RESIZE_BILINEAR, RESIZE_BICUBIC};
    for (int k = 0; k < 3; k++) {
        image_resize(&a, &b, 7, 13, modes[k]);
        for (int i = 0; i < 3 * 7 * 13; i++) cr_assert_float_eq(b.data[i], 0.3f, 1e-5);
        image_resize(&a, &b, 91, 100, modes[k]);
        for (int i = 0; i < 3 * 91 * 100; i++) cr_assert_float_eq(b.data[i], 0.3f, 1e-5);
    }
    pattern_image(&a, 3, 10, 12);
    image_resize(&a, &b, 10, 12, RESIZE_BICUBIC);
    cr_assert_eq(memcmp(a.data, b.data, sizeof(float) * 360), 0);
    image_free(&a), image_free(&b);
}

Test(datasets_transforms, flips_twice_identity_and_flip_moves_pixels) {
    image a = {0}, b = {0};
    pattern_image(&a, 3, 9, 14);
    image_copy(&b, &a);
    image_hflip(&b);
    cr_assert_float_eq(IMG_AT(&b, 1, 2, 0), IMG_AT(&a, 1, 2, 13), 0);
    image_hflip(&b);
    cr_assert_eq(memcmp(a.data, b.data, sizeof(float) * 3 * 9 * 14), 0);
    image_vflip(&b);
    cr_assert_float_eq(IMG_AT(&b, 2, 0, 5), IMG_AT(&a, 2, 8, 5), 0);
    image_vflip(&b);
    cr_assert_eq(memcmp(a.data, b.data, sizeof(float) * 3 * 9 * 14), 0);
    image_free(&a), image_free(&b);
}

Test(datasets_transforms, crop_inside_and_outside_bounds) {
    image a = {0}, b = {0};
    pattern_image(&a, 3, 20, 30);
    image_crop(&a, &b, 3, 5, 10, 12);
    cr_assert(b.c == 3 && b.h == 10 && b.w == 12);
    cr_assert_float_eq(IMG_AT(&b, 2, 0, 0), IMG_AT(&a, 2, 3, 5), 0);
    cr_assert_float_eq(IMG_AT(&b, 0, 9, 11), IMG_AT(&a, 0, 12, 16), 0);
    image_crop(&a, &b, -2, 25, 4, 8); /* pads with zeros like torchvision */
    cr_assert_float_eq(IMG_AT(&b, 0, 0, 0), 0, 0);
    cr_assert_float_eq(IMG_AT(&b, 0, 2, 0), IMG_AT(&a, 0, 0, 25), 0);
    cr_assert_float_eq(IMG_AT(&b, 0, 3, 7), 0, 0);
    image_center_crop(&a, &b, 10, 10);
    cr_assert_float_eq(IMG_AT(&b, 1, 0, 0), IMG_AT(&a, 1, 5, 10), 0);
    image_free(&a), image_free(&b);
}

Test(datasets_transforms, rrc_params_inside_bounds_and_scale) {
    const float scale[2] = {0.08f, 1.0f}, ratio[2] = {0.75f, 4.0f / 3};
    int within = 0;
    for (int s = 0; s < 2000; s++) {
        rng_t r = rng_make(7, rng_stream(RNG_AUGMENT, 0, s));
        int H = 50 + s % 300, W = 60 + (s * 7) % 400, t, l, ch, cw;
        rrc_params(&r, H, W, scale, ratio, &t, &l, &ch, &cw);
        cr_assert(t >= 0 && l >= 0 && ch >= 1 && cw >= 1 && t + ch <= H && l + cw <= W, "crop %d %d %d %d in %dx%d", t,
                  l, ch, cw, H, W);
        double area = (double)ch * cw / ((double)H * W), ar = (double)cw / ch;
        within += area >= 0.07 && area <= 1.0 && ar > 0.7 && ar < 1.4;
    }
    cr_assert_gt(within, 1950, "crops should follow the scale/ratio ranges (%d/2000)", within);
}

Test(datasets_transforms, color_jitter_zero_strength_is_identity) {
    image a = {0}, b = {0};
    pattern_image(&a, 3, 16, 16);
    image_copy(&b, &a);
    rng_t r = rng_make(3, 1);
    image_color_jitter(&b, &r, 0, 0, 0, 0);
    cr_assert_eq(memcmp(a.data, b.data, sizeof(float) * 768), 0);
    image_adjust_brightness(&b, 1), image_adjust_contrast(&b, 1), image_adjust_saturation(&b, 1);
    image_adjust_hue(&b, 0);
    for (int i = 0; i < 768; i++) cr_assert_float_eq(a.data[i], b.data[i], 1e-6);
    /* a full turn of hue and saturation 0 = grayscale */
    image_adjust_hue(&b, 0.5f), image_adjust_hue(&b, -0.5f);
    for (int i = 0; i < 768; i++) cr_assert_float_eq(a.data[i], b.data[i], 1e-5);
    image_copy(&b, &a);
    image_adjust_saturation(&b, 0);
    image_grayscale(&a);
    for (int i = 0; i < 768; i++) cr_assert_float_eq(a.data[i], b.data[i], 1e-6);
    cr_assert_float_eq(a.data[5], a.data[256 + 5], 0);
    image_free(&a), image_free(&b);
}

Test(datasets_transforms, jitter_changes_image_and_is_seeded) {
    image a = {0}, b = {0}, c = {0};
    pattern_image(&a, 3, 16, 16);
    image_copy(&b, &a), image_copy(&c, &a);
    rng_t r1 = rng_make(11, 5), r2 = rng_make(11, 5);
    image_color_jitter(&b, &r1, 0.8f, 0.8f, 0.8f, 0.2f);
    image_color_jitter(&c, &r2, 0.8f, 0.8f, 0.8f, 0.2f);
    cr_assert_eq(memcmp(b.data, c.data, sizeof(float) * 768), 0);
    cr_assert_neq(memcmp(a.data, b.data, sizeof(float) * 768), 0);
    image_free(&a), image_free(&b), image_free(&c);
}

Test(datasets_transforms, rotate_full_turn_and_quarter) {
    image a = {0}, b = {0}, c = {0};
    pattern_image(&a, 1, 12, 12);
    image_rotate(&a, &b, 360.0f, 1);
    cr_assert_eq(memcmp(a.data, b.data, sizeof(float) * 144), 0);
    image_rotate(&a, &b, 90.0f, 1);
    /* counter-clockwise quarter turn: top row of the result is the right column of the source */
    for (int x = 0; x < 12; x++) cr_assert_float_eq(IMG_AT(&b, 0, 0, x), IMG_AT(&a, 0, x, 11), 0, "x=%d", x);
    image_rotate(&b, &c, -90.0f, 0);
    for (int i = 0; i < 144; i++) cr_assert_float_eq(c.data[i], a.data[i], 1e-5);
    image_free(&a), image_free(&b), image_free(&c);
}

Test(datasets_transforms, blur_keeps_constant_and_smooths) {
    image a = {0}, s = {0};
    image_ensure(&a, 3, 20, 20);
    for (int i = 0; i < 1200; i++) a.data[i] = 0.6f;
    image_gaussian_blur(&a, 2.5f, &s);
    for (int i = 0; i < 1200; i++) cr_assert_float_eq(a.data[i], 0.6f, 1e-5);
    pattern_image(&a, 1, 30, 30);
    double v0 = 0, v1 = 0, m0 = 0, m1 = 0;
    for (int i = 0; i < 900; i++) m0 += a.data[i];
    m0 /= 900;
    for (int i = 0; i < 900; i++) v0 += (a.data[i] - m0) * (a.data[i] - m0);
    image_gaussian_blur(&a, 1.5f, &s);
    for (int i = 0; i < 900; i++) m1 += a.data[i];
    m1 /= 900;
    for (int i = 0; i < 900; i++) v1 += (a.data[i] - m1) * (a.data[i] - m1);
    cr_assert_lt(v1, v0 * 0.3, "blur should cut the variance of noise");
    cr_assert_float_eq(m1, m0, 0.02);
    image_free(&a), image_free(&s);
}

/* PIL's box-pass Gaussian: the impulse response has variance radius^2 and sums to 1. */
Test(datasets_transforms, pil_blur_impulse_variance) {
    float radii[3] = {1.0f, 2.7f, 5.0f};
    for (int k = 0; k < 3; k++) {
        image a = {0}, s = {0};
        image_ensure(&a, 1, 1, 121);
        memset(a.data, 0, sizeof(float) * 121);
        a.data[60] = 1;
        image_pil_gaussian_blur(&a, radii[k], &s);
        double sum = 0, var = 0;
        for (int x = 0; x < 121; x++) sum += a.data[x], var += a.data[x] * (x - 60.0) * (x - 60.0);
        cr_assert_float_eq(sum, 1.0, 1e-5);
        cr_assert_float_eq(var, radii[k] * radii[k], 0.02 * radii[k] * radii[k], "radius %f: variance %f", radii[k], var);
        image_free(&a), image_free(&s);
    }
}

Test(datasets_transforms, normalize_imagenet) {
    image a = {0};
    image_ensure(&a, 3, 1, 2);
    float v[6] = {0.485f, 1, 0.456f, 0, 0.406f, 0.5f};
    memcpy(a.data, v, sizeof v);
    image_normalize(&a, IMAGENET_MEAN, IMAGENET_STD);
    cr_assert_float_eq(a.data[0], 0, 1e-6);
    cr_assert_float_eq(a.data[1], (1 - 0.485f) / 0.229f, 1e-5);
    cr_assert_float_eq(a.data[3], -0.456f / 0.224f, 1e-5);
    image_free(&a);
}

/* Hue shift against Python's colorsys (an independent RGB<->HSV implementation): generated by
 *   h, s, v = colorsys.rgb_to_hsv(r, g, b); colorsys.hsv_to_rgb((h + 0.23) % 1, s, v)
 * on pattern_image(3, 5, 7). */
static const float HUE_REF[105] = {0.448157f, 0.250980f, 0.505882f, 0.015686f, 0.289725f, 0.145098f, 0.383686f, 0.968627f, 0.375137f, 0.214902f, 0.140157f, 0.960784f, 0.776471f, 0.192157f, 0.552941f, 0.309804f, 0.315922f, 0.639216f, 0.807843f, 0.536314f, 0.545176f, 0.466667f, 0.027451f, 0.149020f, 0.596078f, 0.454902f, 0.192157f, 0.462745f, 0.525490f, 0.184314f, 0.615686f, 0.522980f, 0.426039f, 0.945098f, 0.456863f, 0.000000f, 0.788235f, 0.759686f, 0.374353f, 0.011765f, 0.352471f, 0.098039f, 0.910196f, 0.129412f, 0.823529f, 0.050980f, 0.467686f, 0.368627f, 0.945098f, 0.278431f, 0.811765f, 0.262745f, 0.180392f, 0.615686f, 0.839216f, 0.039216f, 0.854902f, 0.505412f, 0.267059f, 0.688392f, 0.972549f, 0.626902f, 0.835294f, 0.240235f, 0.631373f, 0.731843f, 0.905882f, 0.745098f, 0.517333f, 0.270588f, 0.807843f, 0.459059f, 0.921569f, 0.733333f, 0.898039f, 0.827451f, 0.560784f, 0.792157f, 0.745098f, 0.078431f, 0.729412f, 0.462745f, 0.758745f, 0.399843f, 0.515294f, 0.504471f, 0.505882f, 0.633490f, 0.707373f, 0.454902f, 0.741176f, 0.802431f, 0.513725f, 0.756863f, 0.858824f, 0.632000f, 0.988235f, 0.612157f, 0.027451f, 0.385569f, 0.815686f, 0.011765f, 0.070588f, 0.419608f, 0.760784f};
Test(datasets_transforms, hue_shift_matches_colorsys) {
    image a = {0};
    pattern_image(&a, 3, 5, 7);
    image_adjust_hue(&a, 0.23f);
    for (int i = 0; i < 105; i++) cr_assert_float_eq(a.data[i], HUE_REF[i], 2e-5, "element %d: %f vs %f", i, a.data[i], HUE_REF[i]);
    image_free(&a);
}

/* Published sRGB (D65) -> CIELAB values (e.g. Bruce Lindbloom's calculator, skimage.color). */
Test(datasets_transforms, lab_known_values) {
    struct { float rgb[3], lab[3]; } k[] = {
        {{1, 1, 1}, {100.0f, 0.0f, 0.0f}},
        {{0, 0, 0}, {0.0f, 0.0f, 0.0f}},
        {{1, 0, 0}, {53.24f, 80.09f, 67.20f}},
        {{0, 1, 0}, {87.73f, -86.18f, 83.18f}},
        {{0, 0, 1}, {32.30f, 79.19f, -107.86f}},
        {{0.5f, 0.5f, 0.5f}, {53.39f, 0.0f, 0.0f}},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        float lab[3];
        rgb_to_lab(k[i].rgb, lab);
        for (int c = 0; c < 3; c++) cr_assert_float_eq(lab[c], k[i].lab[c], 0.06, "case %zu ch %d: %f", i, c, lab[c]);
    }
}

/* Real image: Lab of the reddest Kvasir pixels must have large a*, and L, a, b stay in range. */
Test(datasets_transforms, lab_on_real_kvasir_image) {
    REQUIRE_SHARED_DATA(data);
    char *p = path_join(data, "kvasir_seg/images/cju0qkwl35piu0993l0dewei2.jpg");
    image im = {0}, lab = {0};
    cr_assert_eq(image_load(p, 3, &im), ER_OK, "%s", er_msg());
    image_rgb_to_lab(&im, &lab);
    size_t hw = (size_t)im.h * im.w;
    float amax = -1e9f;
    for (size_t i = 0; i < hw; i++) {
        cr_assert(lab.data[i] >= -1e-3f && lab.data[i] <= 100.01f);
        cr_assert(fabsf(lab.data[hw + i]) < 130 && fabsf(lab.data[2 * hw + i]) < 130);
        if (lab.data[hw + i] > amax) amax = lab.data[hw + i];
        /* spot-check against the scalar function */
        if (i % 9973 == 0) {
            float rgb[3] = {im.data[i], im.data[hw + i], im.data[2 * hw + i]}, l[3];
            rgb_to_lab(rgb, l);
            cr_assert_float_eq(l[1], lab.data[hw + i], 1e-5);
        }
    }
    cr_assert_gt(amax, 30, "an endoscopy image has strongly red pixels (a* max %f)", amax);
    free(p);
    image_free(&im), image_free(&lab);
}
