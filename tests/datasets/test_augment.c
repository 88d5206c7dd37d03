/* test_augment.c — SSCD pipeline, MixUp/CutMix, Beta sampler, PGCon views, mask patch fractions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/synth.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

static void scene_image(image *img, image *mask, int size) {
    synth_scene s;
    synth_scene_make(3, 1, 1, &s);
    synth_render_view(&s, 0, size, img, mask);
}

Test(datasets_augment, sscd_shape_seeded_mask_binary) {
    image src = {0}, msk = {0}, o1 = {0}, o2 = {0}, m1 = {0}, m2 = {0};
    aug_workspace ws = {0};
    scene_image(&src, &msk, 96);
    for (int s = 0; s < 40; s++) {
        rng_t r1 = rng_make(1, rng_stream(RNG_AUGMENT, 0, s)), r2 = rng_make(1, rng_stream(RNG_AUGMENT, 0, s));
        cr_assert_eq(aug_sscd_advanced(&r1, &src, &msk, 64, &ws, &o1, &m1), ER_OK, "%s", er_msg());
        cr_assert_eq(aug_sscd_advanced(&r2, &src, &msk, 64, &ws, &o2, &m2), ER_OK);
        cr_assert(o1.c == 3 && o1.h == 64 && o1.w == 64 && m1.c == 1 && m1.h == 64);
        cr_assert_eq(memcmp(o1.data, o2.data, sizeof(float) * 3 * 64 * 64), 0, "same stream => same bytes");
        cr_assert_eq(memcmp(m1.data, m2.data, sizeof(float) * 64 * 64), 0);
        for (int i = 0; i < 3 * 64 * 64; i++) {
            cr_assert(isfinite(o1.data[i]));
            /* normalised [0,1] data lies in [-mean/std, (1-mean)/std] */
            cr_assert(o1.data[i] >= -2.2f && o1.data[i] <= 2.7f, "%f", o1.data[i]);
        }
        for (int i = 0; i < 64 * 64; i++) cr_assert(m1.data[i] == 0 || m1.data[i] == 1);
    }
    /* different streams give different crops */
    rng_t ra = rng_make(1, 100), rb = rng_make(1, 101);
    aug_sscd_advanced(&ra, &src, &msk, 64, &ws, &o1, &m1);
    aug_sscd_advanced(&rb, &src, &msk, 64, &ws, &o2, &m2);
    cr_assert_neq(memcmp(o1.data, o2.data, sizeof(float) * 3 * 64 * 64), 0);
    image_free(&src), image_free(&msk), image_free(&o1), image_free(&o2), image_free(&m1), image_free(&m2);
    aug_workspace_free(&ws);
}

/* The spec's order done eagerly (flip the full image first, then rotate, crop, resize); samples
 * that draw an overlay are skipped (-1). Must equal aug_sscd_advanced, which defers the flip. */
static int eager_sscd(rng_t *r, const image *src, int size, image *out) {
    image a = {0}, b = {0}, s = {0};
    image_copy(&a, src);
    if (rng_uniform(r) < 0.5f) image_hflip(&a);
    if (rng_uniform(r) < 0.05f) {
        image_rotate(&a, &b, 90.0f * (1 + rng_below(r, 3)), 0);
        image_copy(&a, &b);
    }
    int skip = rng_uniform(r) < 0.1f;
    skip |= !skip && rng_uniform(r) < 0.2f;
    if (!skip && rng_uniform(r) < 0.05f) {
        image_rotate(&a, &b, (float)rng_below(r, 360), 0);
        image_copy(&a, &b);
    }
    if (!skip) {
        const float scale[2] = {0.08f, 1.0f}, ratio[2] = {3.0f / 4, 4.0f / 3};
        int t, l, ch, cw;
        rrc_params(r, a.h, a.w, scale, ratio, &t, &l, &ch, &cw);
        image_crop(&a, &b, t, l, ch, cw);
        image_resize(&b, out, size, size, RESIZE_BILINEAR);
        if (rng_uniform(r) < 0.8f) image_color_jitter(out, r, 0.8f, 0.8f, 0.8f, 0.2f);
        if (rng_uniform(r) < 0.2f) image_grayscale(out);
        if (rng_uniform(r) < 0.5f) image_pil_gaussian_blur(out, 1.0f + 4.0f * rng_uniform(r), &s);
        if (rng_uniform(r) < 0.2f) image_jpeg_roundtrip(out, (int)rng_below(r, 101));
        image_normalize(out, IMAGENET_MEAN, IMAGENET_STD);
    }
    image_free(&a), image_free(&b), image_free(&s);
    return skip ? -1 : 0;
}

Test(datasets_augment, sscd_deferred_flip_equals_eager_order) {
    image src = {0}, msk = {0}, o1 = {0}, o2 = {0};
    aug_workspace ws = {0};
    synth_scene sc;
    synth_scene_make(3, 2, 0, &sc);
    synth_render_view(&sc, 1, 90, &src, &msk);
    image_crop(&src, &o1, 0, 0, 90, 77); /* non-square, so a wrong mirror would show */
    image_copy(&src, &o1);
    int compared = 0, flipped_rot = 0;
    for (int k = 0; k < 20000 && (compared < 40 || flipped_rot < 6); k++) {
        /* peek at the draws: flip, then a rotation that is not 180 degrees (sign matters) */
        rng_t p = rng_make(4, rng_stream(RNG_AUGMENT, 1, k));
        int flip = rng_uniform(&p) < 0.5f, rot = 0;
        if (rng_uniform(&p) < 0.05f) rot |= rng_below(&p, 3) != 1;
        int text = rng_uniform(&p) < 0.1f, emoji = !text && rng_uniform(&p) < 0.2f;
        if (!text && !emoji && rng_uniform(&p) < 0.05f) rot |= 1;
        int interesting = flip && rot && !text && !emoji;
        if (compared >= 40 && !interesting) continue;
        rng_t r1 = rng_make(4, rng_stream(RNG_AUGMENT, 1, k)), r2 = r1;
        if (eager_sscd(&r2, &src, 40, &o2)) continue;
        cr_assert_eq(aug_sscd_advanced(&r1, &src, NULL, 40, &ws, &o1, NULL), ER_OK);
        double mean = 0, mx = 0;
        for (int i = 0; i < 3 * 40 * 40; i++) {
            double d = fabs(o1.data[i] - o2.data[i]);
            mean += d, mx = d > mx ? d : mx;
        }
        mean /= 3 * 40 * 40;
        cr_assert_lt(mean, 2e-3, "sample %d: mean diff %g", k, mean);
        cr_assert_lt(mx, 0.1, "sample %d: max diff %g", k, mx);
        flipped_rot += interesting;
        compared++;
    }
    cr_assert_geq(flipped_rot, 6);
    image_free(&src), image_free(&msk), image_free(&o1), image_free(&o2);
    aug_workspace_free(&ws);
}

Test(datasets_augment, scene_mae_eval_shapes) {
    image src = {0}, msk = {0}, o = {0}, mo = {0};
    aug_workspace ws = {0};
    scene_image(&src, &msk, 80);
    rng_t r = rng_make(2, 2);
    cr_assert_eq(aug_scene_train(&r, &src, 56, &ws, &o), ER_OK);
    cr_assert(o.c == 3 && o.h == 56 && o.w == 56);
    cr_assert_eq(aug_mae(&r, &src, &msk, 48, &ws, &o, &mo), ER_OK);
    cr_assert(o.h == 48 && mo.h == 48 && mo.c == 1);
    cr_assert_eq(aug_eval(&src, 32, &ws, &o), ER_OK);
    cr_assert(o.h == 32 && o.w == 32);
    image gray = {0};
    image_ensure(&gray, 1, 10, 10);
    cr_assert_eq(aug_sscd_advanced(&r, &gray, NULL, 8, &ws, &o, NULL), ER_INPUT);
    image_free(&src), image_free(&msk), image_free(&o), image_free(&mo), image_free(&gray);
    aug_workspace_free(&ws);
}

Test(datasets_augment, beta_moments) {
    rng_t r = rng_make(5, 9);
    double s = 0, s2 = 0;
    int n = 20000;
    for (int i = 0; i < n; i++) {
        double x = rng_beta(&r, 2, 2);
        cr_assert(x > 0 && x < 1);
        s += x, s2 += x * x;
    }
    double m = s / n, v = s2 / n - m * m;
    cr_assert_float_eq(m, 0.5, 0.01);
    cr_assert_float_eq(v, 0.05, 0.004); /* Beta(2,2): ab / ((a+b)^2 (a+b+1)) = 4/80 */
}

Test(datasets_augment, mixup_cutmix_elements) {
    int M = 8, C = 1, H = 10, W = 10, n = M / 2;
    float *x = xmalloc(sizeof(float) * M * H * W), *x0 = xmalloc(sizeof(float) * M * H * W);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < H * W; k++) x[i * H * W + k] = (float)i;
    memcpy(x0, x, sizeof(float) * M * H * W);
    float lam[8];
    int partner[8];
    mixup_config always = {1.0f, 2.0f, 2.0f, 0.5f};
    int saw_cut = 0, saw_mix = 0;
    for (int trial = 0; trial < 30; trial++) {
        memcpy(x, x0, sizeof(float) * M * H * W);
        rng_t r = rng_make(1, trial);
        mixup_batch(&r, &always, x, M, C, H, W, lam, partner);
        for (int i = 0; i < M; i++) {
            cr_assert_eq(partner[i], M - 1 - i);
            cr_assert(lam[i] >= 0 && lam[i] <= 1);
            /* every pixel is either a blend (MixUp) or one of the two sources (CutMix); the image
             * mean equals lam * x_i + (1 - lam) * x_j in both cases */
            double mean = 0;
            int pure = 1;
            for (int k = 0; k < H * W; k++) {
                float v = x[i * H * W + k];
                mean += v;
                pure &= v == (float)i || v == (float)partner[i];
            }
            mean /= H * W;
            cr_assert_float_eq(mean, lam[i] * i + (1 - lam[i]) * partner[i], 1e-3, "elem %d", i);
            saw_cut += pure && lam[i] < 1, saw_mix += !pure;
        }
    }
    cr_assert(saw_cut > 0 && saw_mix > 0, "both CutMix and MixUp should occur (%d, %d)", saw_cut, saw_mix);
    /* match matrix: i and i+n share a target; a mixed element matches its partner's instance */
    uint8_t *match = xmalloc(M * M);
    mixup_match_matrix(lam, partner, M, n, match);
    for (int i = 0; i < M; i++) {
        cr_assert(match[i * M + i]);
        cr_assert(match[i * M + (i + n) % M]);
        for (int j = 0; j < M; j++) cr_assert_eq(match[i * M + j], match[j * M + i]);
        if (lam[i] < 1) cr_assert(match[i * M + partner[i]]);
    }
    free(x), free(x0), free(match);
}

Test(datasets_augment, mixup_low_probability_leaves_most_unchanged) {
    int M = 64, HW = 16;
    float *x = xcalloc(M * HW, sizeof(float)), lam[64];
    int partner[64], mixed = 0;
    for (int t = 0; t < 50; t++) {
        rng_t r = rng_make(3, t);
        mixup_batch(&r, &MIXUP_SSCD, x, M, 1, 4, 4, lam, partner);
        for (int i = 0; i < M; i++) mixed += lam[i] < 1;
    }
    double frac = mixed / (50.0 * M);
    cr_assert(frac > 0.025 && frac < 0.08, "mixed fraction %f should be near 0.05", frac);
    free(x);
}

Test(datasets_augment, pgcon_prior_at_reddest_pixel) {
    image src = {0};
    image_ensure(&src, 3, 400, 420);
    for (int i = 0; i < 3 * 400 * 420; i++) src.data[i] = 0.5f;
    /* a red blob near the top-left of the 316 side crop (crop origin: (42, 52)) */
    int ry = 42 + 60, rx = 52 + 70;
    for (int y = ry - 3; y <= ry + 3; y++)
        for (int x = rx - 3; x <= rx + 3; x++) {
            float d = (y == ry && x == rx) ? 1.0f : 0.85f;
            IMG_AT(&src, 0, y, x) = d, IMG_AT(&src, 1, y, x) = 0.1f, IMG_AT(&src, 2, y, x) = 0.1f;
        }
    pgcon_geometry g = pgcon_geometry_for(400, 420);
    cr_assert(g.side == 316 && g.half == 50 && g.jigsaw == 300);
    aug_workspace ws = {0};
    pgcon_views v = {0};
    rng_t r = rng_make(1, 1);
    cr_assert_eq(pgcon_make_views(&r, &src, &g, PGCON_ALL, &ws, &v), ER_OK, "%s", er_msg());
    cr_assert_eq(v.quadrant, 1);
    cr_assert(v.cx == 70 && v.cy == 60, "prior centre %d,%d", v.cx, v.cy);
    int shared1[9] = {1, 1, 0, 1, 1, 0, 0, 0, 0};
    for (int k = 0; k < 9; k++) cr_assert_eq(v.shared[k], shared1[k]);
    cr_assert(v.prior.c == 3 && v.prior.h == 120 && v.tiles.c == 27 && v.tiles.h == 90 && v.win.h == 224);
    int seen[9] = {0};
    for (int t = 0; t < 9; t++) seen[v.tile_perm[t]]++;
    for (int k = 0; k < 9; k++) cr_assert_eq(seen[k], 1);
    /* WIN view: the prior box is zeroed (raw 0 -> -mean/std after normalisation). The box spans
     * crop x 20..120, y 10..110; the jigsaw crop starts 8 px in; 300 -> 224 scale. */
    float wy = (60 - 8) * 224.0f / 300, wx = (70 - 8) * 224.0f / 300;
    cr_assert_float_eq(IMG_AT(&v.win, 0, (int)wy, (int)wx), -PGCON_MEAN[0] / PGCON_STD[0], 1e-4);
    /* far from the box the WIN view keeps the grey */
    cr_assert_float_eq(IMG_AT(&v.win, 0, 200, 200), (0.5f - PGCON_MEAN[0]) / PGCON_STD[0], 1e-3);
    /* fewer views (the bank fill: prior only; PGCon: no WIN view): the views made are the same bytes */
    pgcon_views part = {0};
    for (unsigned views = PGCON_PRIOR; views <= (PGCON_PRIOR | PGCON_TILES); views += PGCON_TILES) {
        rng_t r2 = rng_make(1, 1);
        cr_assert_eq(pgcon_make_views(&r2, &src, &g, views, &ws, &part), ER_OK, "%s", er_msg());
        cr_assert(!memcmp(part.prior.data, v.prior.data, sizeof(float) * 3 * 120 * 120), "views %u: prior differs", views);
        if (views & PGCON_TILES)
            cr_assert(!memcmp(part.tiles.data, v.tiles.data, sizeof(float) * 27 * 90 * 90), "tiles differ");
        else cr_assert_null(part.tiles.data, "tiles made though not asked for");
        cr_assert_null(part.win.data, "WIN view made though not asked for");
    }
    pgcon_views_free(&part);
    pgcon_views_free(&v);
    aug_workspace_free(&ws);
    image_free(&src);
}

Test(datasets_augment, pgcon_small_image_and_bad_geometry) {
    image src = {0}, m = {0};
    scene_image(&src, &m, 128);
    pgcon_geometry g = pgcon_geometry_for(128, 128);
    cr_assert(g.side == 128 && g.jigsaw <= 128 && g.half >= 2);
    aug_workspace ws = {0};
    pgcon_views v = {0};
    rng_t r = rng_make(1, 2);
    cr_assert_eq(pgcon_make_views(&r, &src, &g, PGCON_ALL, &ws, &v), ER_OK, "%s", er_msg());
    g.side = 400;
    cr_assert_eq(pgcon_make_views(&r, &src, &g, PGCON_ALL, &ws, &v), ER_INPUT);
    pgcon_views_free(&v);
    aug_workspace_free(&ws);
    image_free(&src), image_free(&m);
}

Test(datasets_augment, mask_patch_fraction_counts) {
    image m = {0};
    image_ensure(&m, 1, 32, 32);
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++) m.data[y * 32 + x] = (x < 24 && y < 8) ? 1.0f : 0.0f;
    float f[4];
    mask_patch_fraction(&m, 16, f);
    cr_assert_float_eq(f[0], 0.5f, 1e-6);  /* 16 x 8 of 256 */
    cr_assert_float_eq(f[1], 0.25f, 1e-6); /* 8 x 8 of 256 */
    cr_assert_float_eq(f[2], 0.0f, 1e-6);
    cr_assert_float_eq(f[3], 0.0f, 1e-6);
    image_free(&m);
}

/* PGCon on real Kvasir-SEG sizes: the reference geometry applies (S >= 500 -> 500/75/400, else
 * 316/50/280-300) and the prior centre is the a* argmax of the side crop unless clamped. */
Test(datasets_augment, pgcon_views_on_kvasir) {
    REQUIRE_SHARED_DATA(data);
    const char *names[3] = {"cju0qkwl35piu0993l0dewei2.jpg", "cju0qoxqj9q6s0835b43399p4.jpg",
                            "cju0qx73cjw570799j4n5cjze.jpg"};
    image src = {0}, crop = {0}, lab = {0};
    aug_workspace ws = {0};
    pgcon_views v = {0};
    for (int i = 0; i < 3; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "kvasir_seg/images/%s", names[i]);
        char *p = path_join(data, rel);
        cr_assert_eq(image_load(p, 3, &src), ER_OK, "%s", er_msg());
        pgcon_geometry g = pgcon_geometry_for(src.h, src.w);
        int S = src.h < src.w ? src.h : src.w;
        cr_assert_eq(g.side, S >= 500 ? 500 : 316);
        rng_t r = rng_make(1, i);
        cr_assert_eq(pgcon_make_views(&r, &src, &g, PGCON_ALL, &ws, &v), ER_OK, "%s", er_msg());
        image_center_crop(&src, &crop, g.side, g.side);
        int ys, xs;
        lab_a_argmax(&crop, &ys, &xs);
        int b = g.half;
        int ex = xs < b ? b : xs > g.side - b ? g.side - b : xs, ey = ys < b ? b : ys > g.side - b ? g.side - b : ys;
        cr_assert(v.cx == ex && v.cy == ey, "%s: centre %d,%d expected %d,%d", names[i], v.cx, v.cy, ex, ey);
        image_rgb_to_lab(&crop, &lab);
        size_t hw = (size_t)g.side * g.side;
        for (size_t k = 0; k < hw; k++) cr_assert_leq(lab.data[hw + k], lab.data[hw + (size_t)ys * g.side + xs]);
        free(p);
    }
    pgcon_views_free(&v);
    aug_workspace_free(&ws);
    image_free(&src), image_free(&crop), image_free(&lab);
}

Test(augment, pgcon_geometry_with_takes_the_given_sizes_else_the_reference) {
    pgcon_geometry ref = pgcon_geometry_for(600, 640), none = {0};
    pgcon_geometry g = pgcon_geometry_with(600, 640, &none);
    cr_expect_eq(memcmp(&g, &ref, sizeof g), 0, "nothing set: the reference geometry by size");
    pgcon_geometry set = {.side = 300, .jigsaw = 240, .win_out = 64};
    g = pgcon_geometry_with(600, 640, &set);
    cr_expect(g.side == 300 && g.jigsaw == 240 && g.win_out == 64, "set sizes win");
    cr_expect(g.half == ref.half && g.prior_out == ref.prior_out && g.tile_out == ref.tile_out, "the others stay");
}
