/* thumbnail.c — see thumbnail.h. JPEG encoding is datasets/jpeg_io.c's image_encode_jpeg. */
#include "infer/report/thumbnail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

char *base64_encode(const uint8_t *d, size_t len) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = xmalloc((len + 2) / 3 * 4 + 1), *p = s;
    size_t i = 0;
    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        *p++ = A[v >> 18]; *p++ = A[(v >> 12) & 63]; *p++ = A[(v >> 6) & 63]; *p++ = A[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < len ? (uint32_t)d[i + 1] << 8 : 0);
        *p++ = A[v >> 18];
        *p++ = A[(v >> 12) & 63];
        *p++ = i + 1 < len ? A[(v >> 6) & 63] : '=';
        *p++ = '=';
    }
    *p = 0;
    return s;
}

char *data_uri(const char *mime, const uint8_t *d, size_t len) {
    char *b64 = base64_encode(d, len);
    size_t m = strlen(mime), n = strlen(b64);
    char *uri = xmalloc(m + n + 14);
    memcpy(uri, "data:", 5);
    memcpy(uri + 5, mime, m);
    memcpy(uri + 5 + m, ";base64,", 8);
    memcpy(uri + 13 + m, b64, n + 1);
    free(b64);
    return uri;
}

int thumbnail_data_uri_image(const image *im, int side, int quality, char **uri) {
    *uri = NULL;
    image small = {0};
    const image *src = im;
    if (side > 0 && (im->w > side || im->h > side)) {
        int w = im->w >= im->h ? side : (int)((double)im->w * side / im->h + 0.5);
        int h = im->h > im->w ? side : (int)((double)im->h * side / im->w + 0.5);
        image_resize(im, &small, h < 1 ? 1 : h, w < 1 ? 1 : w, RESIZE_BILINEAR);
        src = &small;
    }
    uint8_t *jpg;
    size_t len;
    int rc = image_encode_jpeg(src, quality, &jpg, &len);
    image_free(&small);
    if (rc) return rc;
    *uri = data_uri("image/jpeg", jpg, len);
    free(jpg);
    return ER_OK;
}

int thumbnail_data_uri(const char *path, int side, int quality, char **uri) {
    *uri = NULL;
    image im = {0};
    int rc = image_load(path, 3, &im);
    if (rc) return rc;
    rc = thumbnail_data_uri_image(&im, side, quality, uri);
    image_free(&im);
    return rc;
}

const char *image_mime_type(const uint8_t *d, size_t len) {
    if (len >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) return "image/png";
    if (len >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return "image/jpeg";
    return NULL;
}
