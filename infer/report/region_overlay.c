/* region_overlay.c — see region_overlay.h. */
#include "infer/report/region_overlay.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "infer/report/thumbnail.h"
#include "nn/base/base.h"

static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

/* length, type, data, CRC of type + data */
static size_t chunk(uint8_t *o, const char *type, const uint8_t *data, uint32_t n) {
    put32(o, n);
    memcpy(o + 4, type, 4);
    if (n) memcpy(o + 8, data, n);
    put32(o + 8 + n, (uint32_t)crc32(0, o + 4, 4 + n));
    return 12 + (size_t)n;
}

int png_encode_rgba(const uint8_t *rgba, int w, int h, uint8_t **out, size_t *len) {
    size_t raw_n = (size_t)h * (1 + 4 * (size_t)w);
    uint8_t *raw = xmalloc(raw_n);
    for (int y = 0; y < h; y++) { /* filter byte 0 (none) before each row */
        raw[(size_t)y * (1 + 4 * w)] = 0;
        memcpy(raw + (size_t)y * (1 + 4 * w) + 1, rgba + (size_t)y * 4 * w, 4 * (size_t)w);
    }
    uLongf zn = compressBound(raw_n);
    uint8_t *z = xmalloc(zn);
    if (compress2(z, &zn, raw, raw_n, 6) != Z_OK) {
        free(raw); free(z);
        return er_fail(ER_RUNTIME, "overlay PNG: zlib failed");
    }
    free(raw);
    uint8_t *o = xmalloc(8 + 25 + 12 + zn + 12), ihdr[13];
    memcpy(o, "\x89PNG\r\n\x1a\n", 8);
    put32(ihdr, (uint32_t)w);
    put32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8; ihdr[9] = 6; ihdr[10] = ihdr[11] = ihdr[12] = 0; /* 8-bit RGBA, deflate, no interlace */
    size_t n = 8;
    n += chunk(o + n, "IHDR", ihdr, 13);
    n += chunk(o + n, "IDAT", z, (uint32_t)zn);
    n += chunk(o + n, "IEND", NULL, 0);
    free(z);
    *out = o;
    *len = n;
    return ER_OK;
}

int region_peak(const float *map, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (map[i] > map[best]) best = i;
    return best;
}

char *region_overlay_uri(const float *map, int gh, int gw) {
    int n = gh * gw;
    if (!map || n < 1) return NULL;
    float lo = map[0], hi = map[0];
    for (int i = 1; i < n; i++) { if (map[i] < lo) lo = map[i]; if (map[i] > hi) hi = map[i]; }
    uint8_t *px = xcalloc((size_t)n, 4);
    for (int i = 0; i < n && hi > lo; i++) {
        float v = (map[i] - lo) / (hi - lo), t = (v - 0.5f) / 0.5f;
        if (t <= 0) continue;
        /* orange at the threshold to yellow at the peak, alpha up to 0.7: the upper half of the range only */
        px[4 * i] = 255;
        px[4 * i + 1] = (uint8_t)(90 + 150 * t);
        px[4 * i + 2] = (uint8_t)(20 + 40 * t);
        px[4 * i + 3] = (uint8_t)(40 + 140 * t);
    }
    uint8_t *png;
    size_t len;
    char *uri = NULL;
    if (!png_encode_rgba(px, gw, gh, &png, &len)) {
        uri = data_uri("image/png", png, len);
        free(png);
    }
    free(px);
    return uri;
}
