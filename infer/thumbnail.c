/* thumbnail.c — see thumbnail.h. libjpeg's error exit longjmps back here (never exit()). */
#include "infer/thumbnail.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "nn/base.h"

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} thumb_jerr;

static void thumb_jerr_exit(j_common_ptr ci) {
    thumb_jerr *e = (thumb_jerr *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jb, 1);
}
static void thumb_jerr_output(j_common_ptr ci) { (void)ci; }

int jpeg_encode_mem(const image *im, int quality, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (im->c != 1 && im->c != 3) return er_fail(ER_INPUT, "jpeg encode: %d channels (1 or 3 expected)", im->c);
    if (im->w < 1 || im->h < 1) return er_fail(ER_INPUT, "jpeg encode: empty image");
    quality = quality < 1 ? 1 : quality > 100 ? 100 : quality;
    struct jpeg_compress_struct ci;
    thumb_jerr e;
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = thumb_jerr_exit;
    e.pub.output_message = thumb_jerr_output;
    unsigned char *m = NULL; /* written by libjpeg through &m */
    unsigned long mlen = 0;
    uint8_t *volatile row = NULL;
    if (setjmp(e.jb)) {
        free(row);
        jpeg_destroy_compress(&ci);
        free(m);
        return er_fail(ER_RUNTIME, "jpeg encode failed: %s", e.msg);
    }
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &m, &mlen);
    ci.image_width = im->w;
    ci.image_height = im->h;
    ci.input_components = im->c;
    ci.in_color_space = im->c == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    jpeg_start_compress(&ci, TRUE);
    size_t hw = (size_t)im->w * im->h;
    row = xmalloc((size_t)im->w * im->c);
    for (int y = 0; y < im->h; y++) {
        for (int x = 0; x < im->w; x++)
            for (int k = 0; k < im->c; k++) {
                float v = im->data[k * hw + (size_t)y * im->w + x];
                v = v < 0 ? 0 : v > 1 ? 1 : v;
                row[x * im->c + k] = (uint8_t)(v * 255.0f + 0.5f);
            }
        JSAMPROW rp = row;
        jpeg_write_scanlines(&ci, &rp, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    *out = m;
    *len = mlen;
    return ER_OK;
}

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

int thumbnail_data_uri(const char *path, int side, int quality, char **uri) {
    *uri = NULL;
    image im = {0}, small = {0};
    int rc = image_load(path, 3, &im);
    if (rc) return rc;
    const image *src = &im;
    if (side > 0 && (im.w > side || im.h > side)) {
        int w = im.w >= im.h ? side : (int)((double)im.w * side / im.h + 0.5);
        int h = im.h > im.w ? side : (int)((double)im.h * side / im.w + 0.5);
        image_resize(&im, &small, h < 1 ? 1 : h, w < 1 ? 1 : w, RESIZE_BILINEAR);
        src = &small;
    }
    uint8_t *jpg;
    size_t len;
    rc = jpeg_encode_mem(src, quality, &jpg, &len);
    image_free(&im);
    image_free(&small);
    if (rc) return rc;
    char *b64 = base64_encode(jpg, len);
    free(jpg);
    static const char prefix[] = "data:image/jpeg;base64,";
    size_t n = strlen(b64);
    *uri = xmalloc(sizeof prefix + n);
    memcpy(*uri, prefix, sizeof prefix - 1);
    memcpy(*uri + sizeof prefix - 1, b64, n + 1);
    free(b64);
    return ER_OK;
}

const char *image_mime_type(const uint8_t *d, size_t len) {
    if (len >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) return "image/png";
    if (len >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return "image/jpeg";
    return NULL;
}
