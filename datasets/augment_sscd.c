/* augment_sscd.c — SSCD/EndoFinder augmentation pipelines (see augment.h for the exact lists). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "nn/base/base.h"

void aug_workspace_free(aug_workspace *ws) {
    image_free(&ws->a), image_free(&ws->b), image_free(&ws->c), image_free(&ws->m1), image_free(&ws->m2);
}

static float uni(rng_t *r, float a, float b) { return a + (b - a) * rng_uniform(r); }

/* Alpha-blend colour `col` with opacity `op` into pixel (y, x) of an RGB image; with `mirror` the
 * pixel is (y, W-1-x), so drawing on an unflipped image equals drawing on the flipped one. */
static inline void blend_px(image *im, int y, int x, const float col[3], float op, int mirror) {
    if (x < 0 || y < 0 || x >= im->w || y >= im->h) return;
    if (mirror) x = im->w - 1 - x;
    for (int k = 0; k < 3; k++) {
        float *p = &IMG_AT(im, k, y, x);
        *p = (1 - op) * *p + op * col[k];
    }
}

/* Text stand-in: 1..10 random 5x7 bitmap glyphs (a glyph = 7 rows of 5 random bits with at least
 * two pixels per row set), height U(.1,.3)·min(W,H), opacity U(.1,1), colour U{0..255}^3, top-left
 * at (fx W, fy H). */
static void overlay_text(rng_t *r, image *im, int mirror) {
    float px = uni(r, 0.1f, 0.3f) * (im->w < im->h ? im->w : im->h) / 7.0f;
    float op = uni(r, 0.1f, 1.0f), col[3];
    for (int k = 0; k < 3; k++) col[k] = rng_below(r, 256) / 255.0f;
    int len = 1 + (int)rng_below(r, 10);
    float ox = rng_uniform(r) * im->w, oy = rng_uniform(r) * im->h;
    for (int g = 0; g < len; g++) {
        uint8_t rows[7];
        for (int y = 0; y < 7; y++) {
            uint32_t b = rng_u32(r) & 31u;
            if (__builtin_popcount(b) < 2) b |= 1u << (rng_below(r, 5)), b |= 1u << (rng_below(r, 5));
            rows[y] = (uint8_t)b;
        }
        for (int y = 0; y < 7; y++)
            for (int x = 0; x < 5; x++) {
                if (!(rows[y] >> x & 1)) continue;
                int x0 = (int)(ox + (g * 6 + x) * px), y0 = (int)(oy + y * px);
                int x1 = (int)(ox + (g * 6 + x + 1) * px), y1 = (int)(oy + (y + 1) * px);
                for (int yy = y0; yy < (y1 > y0 ? y1 : y0 + 1); yy++)
                    for (int xx = x0; xx < (x1 > x0 ? x1 : x0 + 1); xx++) blend_px(im, yy, xx, col, op, mirror);
            }
    }
}

/* Emoji stand-in: a face-like disc (yellowish face, two dark eyes, a mouth arc), side
 * U(.1,.5)·min(W,H), opacity U(.7,1), top-left at (fx W, fy H). */
static void overlay_emoji(rng_t *r, image *im, int mirror) {
    float side = uni(r, 0.1f, 0.5f) * (im->w < im->h ? im->w : im->h);
    float op = uni(r, 0.7f, 1.0f);
    float ox = rng_uniform(r) * im->w, oy = rng_uniform(r) * im->h;
    float face[3] = {uni(r, 0.85f, 1.0f), uni(r, 0.6f, 0.9f), uni(r, 0.0f, 0.3f)};
    float dark[3] = {0.2f, 0.1f, 0.05f};
    float R = side / 2, cx = ox + R, cy = oy + R;
    for (int y = (int)oy; y <= (int)(oy + side); y++)
        for (int x = (int)ox; x <= (int)(ox + side); x++) {
            float dx = (x + 0.5f - cx) / R, dy = (y + 0.5f - cy) / R;
            float d2 = dx * dx + dy * dy;
            if (d2 > 1) continue;
            int eye = ((dx + 0.35f) * (dx + 0.35f) + (dy + 0.3f) * (dy + 0.3f) < 0.02f) ||
                      ((dx - 0.35f) * (dx - 0.35f) + (dy + 0.3f) * (dy + 0.3f) < 0.02f);
            float md = sqrtf(dx * dx + (dy - 0.05f) * (dy - 0.05f));
            int mouth = dy > 0.2f && fabsf(md - 0.5f) < 0.07f;
            blend_px(im, y, x, eye || mouth ? dark : face, op, mirror);
        }
}

/* The horizontal flip (step 1) is deferred to the 224 output: flip-then-X equals X'-then-flip,
 * where X' rotates by the opposite angle, draws overlays mirrored and mirrors the crop box. This
 * avoids copying and flipping the full-resolution source; the source is copied only when a
 * rotation or overlay has to modify it. */
int aug_sscd_advanced(rng_t *r, const image *src, const image *mask, int size, aug_workspace *ws,
                      image *out, image *mask_out) {
    if (src->c != 3) return er_fail(ER_INPUT, "SSCD augmentation needs an RGB image (got %d channels)", src->c);
    if (mask && (mask->h != src->h || mask->w != src->w))
        return er_fail(ER_INPUT, "SSCD augmentation: mask %dx%d differs from image %dx%d", mask->w, mask->h, src->w,
                       src->h);
    const image *m = mask && mask_out ? mask : NULL;
    const image *cur = src, *curm = m; /* current image/mask (copy-on-write into ws->a / ws->m1) */
    int flip = rng_uniform(r) < 0.5f;
    float sgn = flip ? -1.0f : 1.0f;
    if (rng_uniform(r) < 0.05f) {
        float deg = sgn * 90.0f * (1 + rng_below(r, 3));
        image_rotate(cur, &ws->a, deg, 0);
        cur = &ws->a;
        if (m) image_rotate(curm, &ws->m1, deg, 1), curm = &ws->m1;
    }
    int text = rng_uniform(r) < 0.1f;
    if (text) {
        if (cur != &ws->a) image_copy(&ws->a, cur), cur = &ws->a;
        overlay_text(r, &ws->a, flip);
    }
    if (rng_uniform(r) < 0.2f) {
        if (cur != &ws->a) image_copy(&ws->a, cur), cur = &ws->a;
        overlay_emoji(r, &ws->a, flip);
    }
    if (rng_uniform(r) < 0.05f) {
        float deg = sgn * (float)rng_below(r, 360);
        image_rotate(cur, &ws->b, deg, 0);
        image_copy(&ws->a, &ws->b), cur = &ws->a;
        if (m) {
            image_rotate(curm, &ws->m2, deg, 1);
            image_copy(&ws->m1, &ws->m2), curm = &ws->m1;
        }
    }
    static const float scale[2] = {0.08f, 1.0f}, ratio[2] = {3.0f / 4, 4.0f / 3};
    int top, left, ch, cw;
    rrc_params(r, cur->h, cur->w, scale, ratio, &top, &left, &ch, &cw);
    if (flip) left = cur->w - left - cw; /* the box seen in the flipped image */
    image_resize_crop(cur, top, left, ch, cw, out, size, size, RESIZE_BILINEAR);
    if (flip) image_hflip(out);
    if (m) {
        image_resize_crop(curm, top, left, ch, cw, mask_out, size, size, RESIZE_NEAREST);
        if (flip) image_hflip(mask_out);
    }
    if (rng_uniform(r) < 0.8f) image_color_jitter(out, r, 0.8f, 0.8f, 0.8f, 0.2f);
    if (rng_uniform(r) < 0.2f) image_grayscale(out);
    if (rng_uniform(r) < 0.5f) image_pil_gaussian_blur(out, uni(r, 1.0f, 5.0f), &ws->c);
    if (rng_uniform(r) < 0.2f) {
        int rc = image_jpeg_roundtrip(out, (int)rng_below(r, 101));
        if (rc) return rc;
    }
    image_normalize(out, IMAGENET_MEAN, IMAGENET_STD);
    return ER_OK;
}

int aug_scene_train(rng_t *r, const image *src, int size, aug_workspace *ws, image *out) {
    if (src->c != 3) return er_fail(ER_INPUT, "scene augmentation needs an RGB image (got %d channels)", src->c);
    int short_side = size * 256 / 224;
    int h = src->h, w = src->w, nh, nw;
    if (h <= w) nh = short_side, nw = (int)((long)short_side * w / h);
    else nw = short_side, nh = (int)((long)short_side * h / w);
    image_resize(src, &ws->a, nh, nw, RESIZE_BILINEAR);
    int top = (int)rng_below(r, (uint32_t)(nh - size + 1)), left = (int)rng_below(r, (uint32_t)(nw - size + 1));
    image_crop(&ws->a, &ws->b, top, left, size, size);
    if (rng_uniform(r) < 0.5f) image_hflip(&ws->b);
    image_rotate(&ws->b, out, uni(r, -15, 15), 1);
    if (rng_uniform(r) < 0.8f) image_color_jitter(out, r, 0.8f, 0.8f, 0.8f, 0.2f);
    if (rng_uniform(r) < 0.2f) image_grayscale(out);
    if (rng_uniform(r) < 0.5f) image_gaussian_blur_kernel(out, uni(r, 0.1f, 2.0f), 3, &ws->c);
    if (rng_uniform(r) < 0.2f) {
        int rc = image_jpeg_roundtrip(out, (int)rng_below(r, 101));
        if (rc) return rc;
    }
    image_normalize(out, IMAGENET_MEAN, IMAGENET_STD);
    return ER_OK;
}

int aug_mae(rng_t *r, const image *src, const image *mask, int size, aug_workspace *ws, image *out,
            image *mask_out) {
    static const float scale[2] = {0.2f, 1.0f}, ratio[2] = {3.0f / 4, 4.0f / 3};
    int top, left, ch, cw;
    rrc_params(r, src->h, src->w, scale, ratio, &top, &left, &ch, &cw);
    image_crop(src, &ws->a, top, left, ch, cw);
    image_resize(&ws->a, out, size, size, RESIZE_BICUBIC);
    for (size_t i = 0, n = (size_t)out->c * size * size; i < n; i++) /* bicubic overshoot */
        out->data[i] = out->data[i] < 0 ? 0 : out->data[i] > 1 ? 1 : out->data[i];
    int flip = rng_uniform(r) < 0.5f;
    if (flip) image_hflip(out);
    if (mask && mask_out) {
        image_crop(mask, &ws->m1, top, left, ch, cw);
        image_resize(&ws->m1, mask_out, size, size, RESIZE_NEAREST);
        if (flip) image_hflip(mask_out);
    }
    image_normalize(out, IMAGENET_MEAN, IMAGENET_STD);
    return ER_OK;
}

int aug_eval(const image *src, int size, aug_workspace *ws, image *out) {
    return aug_eval_input(src, size, 1.0f, IMAGENET_MEAN, IMAGENET_STD, ws, out);
}

int aug_eval_input(const image *src, int size, float crop, const float mean[3], const float std[3], aug_workspace *ws,
                   image *out) {
    if (!(crop > 0 && crop <= 1)) return er_fail(ER_INPUT, "input crop %g: need (0, 1]", crop);
    const image *from = src;
    if (crop < 1) {
        int S = src->h < src->w ? src->h : src->w, side = (int)lroundf(crop * S);
        if (side < 1) side = 1;
        image_center_crop(src, &ws->a, side, side);
        from = &ws->a;
    }
    image_resize(from, out, size, size, RESIZE_BILINEAR);
    image_normalize(out, mean, std);
    return ER_OK;
}

void mask_patch_fraction(const image *mask, int patch, float *out) {
    int gh = mask->h / patch, gw = mask->w / patch;
    for (int gy = 0; gy < gh; gy++)
        for (int gx = 0; gx < gw; gx++) {
            int cnt = 0;
            for (int y = gy * patch; y < (gy + 1) * patch; y++)
                for (int x = gx * patch; x < (gx + 1) * patch; x++) cnt += mask->data[(size_t)y * mask->w + x] > 0.5f;
            out[gy * gw + gx] = (float)cnt / (patch * patch);
        }
}
