/* mask_overlay.c — see mask_overlay.h. */
#include "infer/report/mask_overlay.h"

#include <stdlib.h>
#include <string.h>

#include "infer/report/region_overlay.h"
#include "infer/report/thumbnail.h"
#include "nn/base/base.h"

/* One pass of the separable erosion: out[l, i] = min of in[l, i-r .. i+r] along lines of len
 * elements (element step es, line step ls); positions past either end count as lesion (1). */
static void erode_1d(const uint8_t *in, uint8_t *out, int lines, int len, size_t ls, size_t es, int r) {
    for (int l = 0; l < lines; l++)
        for (int i = 0; i < len; i++) {
            uint8_t v = 1;
            for (int d = -r; d <= r && v; d++)
                if (i + d >= 0 && i + d < len) v = in[l * ls + (size_t)(i + d) * es];
            out[l * ls + (size_t)i * es] = v;
        }
}

/* in[i] = 1 for lesion; out = in eroded by a (2r+1)^2 square: rows, then columns */
static void erode(const uint8_t *in, int w, int h, int r, uint8_t *out) {
    uint8_t *tmp = xmalloc((size_t)w * h);
    erode_1d(in, tmp, h, w, (size_t)w, 1, r);
    erode_1d(tmp, out, w, h, 1, (size_t)w, r);
    free(tmp);
}

void mask_outline_rgba(const image *mask, int w, int h, int line, uint8_t **rgba) {
    size_t n = (size_t)w * h;
    uint8_t *in = xmalloc(n), *core = xmalloc(n), *px = xcalloc(n, 4);
    for (int y = 0; y < h; y++) /* nearest, as PIL picks floor((i + 0.5) * in / out) */
        for (int x = 0; x < w; x++) {
            int sy = (int)((y + 0.5) * mask->h / h), sx = (int)((x + 0.5) * mask->w / w);
            in[(size_t)y * w + x] = mask->data[(size_t)sy * mask->w + sx] > 0.5f;
        }
    erode(in, w, h, line < 1 ? 1 : line, core);
    for (size_t i = 0; i < n; i++) {
        if (!in[i]) continue;
        uint8_t *p = px + 4 * i;
        p[0] = 0; p[1] = 214; p[2] = 255;
        p[3] = core[i] ? 56 : 255; /* tint inside, opaque outline */
    }
    free(in);
    free(core);
    *rgba = px;
}

int mask_overlay_encode(const image *m, int max_side, uint8_t **png, size_t *len) {
    int w = m->w, h = m->h, side = w > h ? w : h;
    if (max_side > 0 && side > max_side) {
        w = (int)((double)m->w * max_side / side + 0.5);
        h = (int)((double)m->h * max_side / side + 0.5);
        if (w < 1) w = 1;
        if (h < 1) h = 1;
    }
    int big = w > h ? w : h, line = (big + 80) / 160;
    uint8_t *px;
    mask_outline_rgba(m, w, h, line, &px);
    int rc = png_encode_rgba(px, w, h, png, len);
    free(px);
    return rc;
}

int mask_overlay_png(const char *path, int max_side, uint8_t **png, size_t *len) {
    image m = {0};
    int rc = image_load(path, 1, &m);
    if (rc) return rc;
    rc = mask_overlay_encode(&m, max_side, png, len);
    image_free(&m);
    return rc;
}

char *mask_overlay_uri(const char *path, int max_side) {
    uint8_t *png;
    size_t len;
    if (mask_overlay_png(path, max_side, &png, &len)) {
        er_clear(); /* a page without that outline, not an error of the page */
        return NULL;
    }
    char *uri = data_uri("image/png", png, len);
    free(png);
    return uri;
}
