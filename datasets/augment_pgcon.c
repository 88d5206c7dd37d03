/* augment_pgcon.c — PGCon/WINCon views: redness-prior view, 3x3 jigsaw view, WIN view
 * (spec pgcon_dual_vss.md 1.3, 1.4, 1.7; the released code's order of operations). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "nn/base/base.h"

const float PGCON_MEAN[3] = {0.56f, 0.35f, 0.20f};
const float PGCON_STD[3] = {0.30f, 0.24f, 0.17f};

/* Tiles overlapping the prior's quadrant (column-major tile index k = 3 col + row). */
static const int SHARED[5][9] = {
    {0, 0, 0, 0, 1, 0, 0, 0, 0}, /* q0 centre: {4} */
    {1, 1, 0, 1, 1, 0, 0, 0, 0}, /* q1 top-left: {0,1,3,4} */
    {0, 0, 0, 1, 1, 0, 1, 1, 0}, /* q2 top-right: {3,4,6,7} */
    {0, 1, 1, 0, 1, 1, 0, 0, 0}, /* q3 bottom-left: {1,2,4,5} */
    {0, 0, 0, 0, 1, 1, 0, 1, 1}, /* q4 bottom-right: {4,5,7,8} */
};

pgcon_geometry pgcon_geometry_for(int h, int w) {
    int S = h < w ? h : w;
    pgcon_geometry g = {316, 50, S < 360 ? 280 : 300, 120, 90, 224};
    if (S >= 500) g.side = 500, g.half = 75, g.jigsaw = 400;
    else if (S < 316) { /* smaller than the reference: keep the proportions of the 316 geometry */
        double f = S / 316.0;
        g.side = S, g.half = (int)lround(50 * f), g.jigsaw = (int)lround(280 * f);
        if (g.half < 2) g.half = 2;
    }
    return g;
}

pgcon_geometry pgcon_geometry_with(int h, int w, const pgcon_geometry *set) {
    pgcon_geometry g = pgcon_geometry_for(h, w);
    if (set->side > 0) g.side = set->side;
    if (set->half > 0) g.half = set->half;
    if (set->jigsaw > 0) g.jigsaw = set->jigsaw;
    if (set->prior_out > 0) g.prior_out = set->prior_out;
    if (set->tile_out > 0) g.tile_out = set->tile_out;
    if (set->win_out > 0) g.win_out = set->win_out;
    return g;
}

int aug_pgcon_linear(rng_t *r, const image *src, int size, float crop, const float mean[3], const float std[3],
                     aug_workspace *ws, image *out) {
    const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1}; /* jitter on [0, 1] pixels before the normalisation */
    int rc = aug_eval_input(src, size, crop, zero, one, ws, out);
    image_color_jitter(out, r, 0.4f, 0.6f, 0.0f, 0.0f);
    if (rng_uniform(r) < 0.5f) image_hflip(out);
    if (rng_uniform(r) < 0.5f) image_vflip(out);
    image_normalize(out, mean, std);
    return rc;
}

void lab_a_argmax(const image *rgb, int *py, int *px) {
    size_t hw = (size_t)rgb->h * rgb->w, best = 0;
    float bv = -1e30f;
    for (size_t i = 0; i < hw; i++) {
        float c[3] = {rgb->data[i], rgb->data[hw + i], rgb->data[2 * hw + i]}, lab[3];
        rgb_to_lab(c, lab);
        if (lab[1] > bv) bv = lab[1], best = i;
    }
    *py = (int)(best / rgb->w), *px = (int)(best % rgb->w);
}

/* torchvision RandomErasing(p=1 here, scale, ratio, value 0) on a normalised image. */
static void random_erase(rng_t *r, image *im, float s0, float s1, float r0, float r1) {
    double area = (double)im->h * im->w, lr0 = log(r0), lr1 = log(r1);
    for (int attempt = 0; attempt < 10; attempt++) {
        double ea = area * (s0 + (s1 - s0) * rng_uniform_double(r));
        double asp = exp(lr0 + (lr1 - lr0) * rng_uniform_double(r));
        int eh = (int)nearbyint(sqrt(ea * asp)), ew = (int)nearbyint(sqrt(ea / asp));
        if (!(eh < im->h && ew < im->w)) continue;
        int y0 = (int)rng_below(r, (uint32_t)(im->h - eh + 1)), x0 = (int)rng_below(r, (uint32_t)(im->w - ew + 1));
        for (int c = 0; c < im->c; c++)
            for (int y = y0; y < y0 + eh; y++) memset(&IMG_AT(im, c, y, x0), 0, sizeof(float) * ew);
        return;
    }
}

/* the jigsaw view of src into v->tiles (quadrant q of the prior view decides the clean tiles) */
static void make_tiles(rng_t *r, const image *src, const pgcon_geometry *g, int q, aug_workspace *ws, pgcon_views *v) {
    image_center_crop(src, &ws->b, g->jigsaw, g->jigsaw);
    int pw = g->jigsaw / 3, crop = pw < g->tile_out ? pw : g->tile_out, T = g->tile_out;
    image_ensure(&v->tiles, 27, T, T);
    int perm[9];
    for (int k = 0; k < 9; k++) perm[k] = k, v->shared[k] = SHARED[q][k];
    for (int k = 0; k < 9; k++) {
        int col = k / 3, row = k % 3;
        int top = row * pw + (int)rng_below(r, (uint32_t)(pw - crop + 1));
        int left = col * pw + (int)rng_below(r, (uint32_t)(pw - crop + 1));
        image_crop(&ws->b, &ws->c, top, left, crop, crop);
        image_resize(&ws->c, &ws->m1, T, T, RESIZE_BILINEAR);
        image *tile = &ws->m1;
        image_color_jitter(tile, r, 0.4f, 0.4f, 0.4f, 0.0f);
        if (!v->shared[k] && rng_uniform(r) < 0.1f) image_grayscale(tile);
        image_normalize(tile, PGCON_MEAN, PGCON_STD);
        if (!v->shared[k] && rng_uniform(r) < 0.5f) random_erase(r, tile, 0.02f, 0.3f, 0.3f, 2.0f);
        memcpy(v->tiles.data + (size_t)k * 3 * T * T, tile->data, sizeof(float) * 3 * T * T);
    }
    rng_shuffle(r, perm, 9);
    /* reorder tiles in place through ws->c */
    image_copy(&ws->c, &v->tiles);
    for (int t = 0; t < 9; t++) {
        memcpy(v->tiles.data + (size_t)t * 3 * T * T, ws->c.data + (size_t)perm[t] * 3 * T * T, sizeof(float) * 3 * T * T);
        v->tile_perm[t] = perm[t];
    }
}

int pgcon_make_views(rng_t *r, const image *src, const pgcon_geometry *g, unsigned views, aug_workspace *ws,
                     pgcon_views *v) {
    if (src->c != 3) return er_fail(ER_INPUT, "PGCon views need an RGB image (got %d channels)", src->c);
    int S = src->h < src->w ? src->h : src->w;
    if (g->side > S || g->jigsaw > S || 2 * g->half > g->side || g->jigsaw < 3)
        return er_fail(ER_INPUT, "PGCon geometry (side %d, box %d, jigsaw %d) does not fit a %dx%d image", g->side,
                       2 * g->half, g->jigsaw, src->w, src->h);
    /* prior view */
    image *C = &ws->a;
    image_center_crop(src, C, g->side, g->side);
    int ys, xs;
    lab_a_argmax(C, &ys, &xs);
    double c = g->side / 2.0, margin = g->side >= 316 ? 50 : 50.0 * g->side / 316;
    int q = xs < c ? (ys < c ? 1 : 3) : (ys < c ? 2 : 4);
    if (c - margin < xs && xs < c + margin && c - margin < ys && ys < c + margin) q = 0;
    int b = g->half;
    int xc = xs < b ? b : xs > g->side - b ? g->side - b : xs;
    int yc = ys < b ? b : ys > g->side - b ? g->side - b : ys;
    v->quadrant = q, v->cx = xc, v->cy = yc;
    image_crop(C, &ws->b, yc - b, xc - b, 2 * b, 2 * b);
    image_resize(&ws->b, &v->prior, g->prior_out, g->prior_out, RESIZE_BILINEAR);
    if (rng_uniform(r) < 0.5f) image_hflip(&v->prior);
    if (rng_uniform(r) < 0.5f) image_vflip(&v->prior);
    image_normalize(&v->prior, PGCON_MEAN, PGCON_STD);

    if (views & PGCON_TILES) make_tiles(r, src, g, q, ws, v);
    if (!(views & PGCON_WIN)) return ER_OK;

    /* WIN view: the side crop with the prior box zeroed, centre-cropped to the jigsaw size */
    for (int ch = 0; ch < 3; ch++)
        for (int y = yc - b; y < yc + b; y++) memset(&IMG_AT(C, ch, y, xc - b), 0, sizeof(float) * 2 * b);
    int J = g->jigsaw < g->side ? g->jigsaw : g->side;
    image_center_crop(C, &ws->b, J, J);
    image_resize(&ws->b, &v->win, g->win_out, g->win_out, RESIZE_BILINEAR);
    image_normalize(&v->win, PGCON_MEAN, PGCON_STD);
    return ER_OK;
}

void pgcon_views_free(pgcon_views *v) {
    image_free(&v->prior), image_free(&v->tiles), image_free(&v->win);
}
