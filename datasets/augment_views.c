/* augment_views.c — the "views" preset: what changes between two looks at the same lesion
 * (datasets/augment.h). Geometry first (crop, flips, a small rotation, carried to the mask), then
 * photometry on the output only, each step with its own probability and strength. */
#include <math.h>

#include "datasets/augment.h"
#include "nn/base/base.h"

aug_view_params aug_view_defaults(void) {
    aug_view_params p = {0};
    p.crop_min = 0.2f, p.rotate = 20, p.vflip = 0.5f;
    p.jitter = 0.4f, p.jitter_prob = 0.8f, p.grey_prob = 0.1f;
    p.blur_prob = 0.3f, p.blur_max = 1.5f, p.jpeg_prob = 0.2f;
    return p;
}

static float uni(rng_t *r, float a, float b) { return a + (b - a) * rng_uniform(r); }

int aug_views(rng_t *r, const image *src, const image *mask, int size, const aug_view_params *p, aug_workspace *ws,
              image *out, image *mask_out) {
    if (src->c != 3) return er_fail(ER_INPUT, "views augmentation needs an RGB image (got %d channels)", src->c);
    if (mask && (mask->h != src->h || mask->w != src->w))
        return er_fail(ER_INPUT, "views augmentation: mask %dx%d differs from image %dx%d", mask->w, mask->h, src->w,
                       src->h);
    const image *m = mask && mask_out ? mask : NULL;
    const float scale[2] = {p->crop_min, 1.0f}, ratio[2] = {3.0f / 4, 4.0f / 3};
    int top, left, ch, cw;
    rrc_params(r, src->h, src->w, scale, ratio, &top, &left, &ch, &cw);
    int hflip = rng_uniform(r) < 0.5f, vflip = rng_uniform(r) < p->vflip;
    float deg = p->rotate > 0 ? uni(r, -p->rotate, p->rotate) : 0;
    /* rotate the crop (corners filled black, as a turned scope image) into ws->a, then into `out`
     * in place: `out` may be a view into a batch buffer, so its storage is never replaced */
    image_resize_crop(src, top, left, ch, cw, deg != 0 ? &ws->a : out, size, size, RESIZE_BILINEAR);
    if (deg != 0) image_rotate(&ws->a, out, deg, 0);
    if (hflip) image_hflip(out);
    if (vflip) image_vflip(out);
    if (m) {
        image_resize_crop(m, top, left, ch, cw, deg != 0 ? &ws->m1 : mask_out, size, size, RESIZE_NEAREST);
        if (deg != 0) image_rotate(&ws->m1, mask_out, deg, 1);
        if (hflip) image_hflip(mask_out);
        if (vflip) image_vflip(mask_out);
    }
    if (p->jitter > 0 && rng_uniform(r) < p->jitter_prob)
        image_color_jitter(out, r, p->jitter, p->jitter, p->jitter, p->jitter / 4);
    if (rng_uniform(r) < p->grey_prob) image_grayscale(out);
    if (rng_uniform(r) < p->blur_prob) image_gaussian_blur(out, uni(r, 0.1f, p->blur_max), &ws->c);
    if (rng_uniform(r) < p->jpeg_prob) {
        int rc = image_jpeg_roundtrip(out, 30 + (int)rng_below(r, 66)); /* quality U{30..95} */
        if (rc) return rc;
    }
    image_normalize(out, IMAGENET_MEAN, IMAGENET_STD);
    return ER_OK;
}
