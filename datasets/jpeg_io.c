/* jpeg_io.c — JPEG decode/encode through libjpeg(-turbo). libjpeg's default error handler calls
 * exit(); ours longjmps back and records one message naming the file. Corrupt-data *warnings*
 * (libjpeg substitutes grey for a truncated scan and carries on) are treated as errors too:
 * a silently half-grey training image is worse than a clear rejection. */
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "datasets/image.h"
#include "nn/base/base.h"

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jerr_t;

static void jerr_exit(j_common_ptr ci) {
    jerr_t *e = (jerr_t *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jb, 1);
}
static void jerr_emit(j_common_ptr ci, int level) {
    if (level < 0) jerr_exit(ci); /* warning = corrupt data: fail */
}
static void jerr_output(j_common_ptr ci) { (void)ci; }


/* min_side > 0: the largest 1/d (d <= 8) keeping both sides >= min_side; else denom (1, 2, 4, 8).
 * max_pixels > 0: the output (after scaling) must have at most that many pixels. */
static int decode(const uint8_t *buf, size_t len, const char *name, int channels, int min_side, int denom,
                  int64_t max_pixels, image *out) {
    if (len < 3 || buf[0] != 0xFF || buf[1] != 0xD8 || buf[2] != 0xFF)
        return er_fail(ER_INPUT, "%s: not a JPEG file", name);
    struct jpeg_decompress_struct ci;
    jerr_t e;
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = jerr_exit;
    e.pub.emit_message = jerr_emit;
    e.pub.output_message = jerr_output;
    e.msg[0] = 0;
    uint8_t *volatile row = NULL;
    const int had_pixels = out->data != NULL; /* a fresh image must not keep pixels of a failed decode */
    if (setjmp(e.jb)) {
        free(row);
        if (!had_pixels) image_free(out);
        jpeg_destroy_decompress(&ci);
        return er_fail(ER_INPUT, "%s: corrupt JPEG: %s", name, e.msg[0] ? e.msg : "decode error");
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, (unsigned char *)buf, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    if (ci.image_width == 0 || ci.image_height == 0 || ci.image_width > IMAGE_MAX_SIDE ||
        ci.image_height > IMAGE_MAX_SIDE || (uint64_t)ci.image_width * ci.image_height > IMAGE_MAX_PIXELS) {
        snprintf(e.msg, sizeof e.msg, "image size %ux%u out of range", ci.image_width, ci.image_height);
        longjmp(e.jb, 1);
    }
    if (ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK) {
        snprintf(e.msg, sizeof e.msg, "CMYK JPEGs are not supported");
        longjmp(e.jb, 1);
    }
    int gray_src = ci.num_components == 1;
    int oc = channels ? channels : (gray_src ? 1 : 3);
    ci.out_color_space = (oc == 1 || gray_src) ? JCS_GRAYSCALE : JCS_RGB;
    if (min_side > 0) {
        unsigned mn = ci.image_width < ci.image_height ? ci.image_width : ci.image_height;
        int d = 1;
        while (d < 8 && mn / (unsigned)(d * 2) >= (unsigned)min_side) d *= 2;
        ci.scale_num = 1, ci.scale_denom = d;
    } else if (denom > 1) {
        ci.scale_num = 1, ci.scale_denom = denom;
    }
    jpeg_calc_output_dimensions(&ci);
    if (max_pixels > 0 && (int64_t)ci.output_width * ci.output_height > max_pixels) {
        snprintf(e.msg, sizeof e.msg, "%ux%u pixels, over the %lld-pixel limit", ci.output_width, ci.output_height,
                 (long long)max_pixels);
        longjmp(e.jb, 1);
    }
    jpeg_start_decompress(&ci);
    int w = ci.output_width, h = ci.output_height, nc = ci.output_components;
    row = malloc((size_t)w * nc);
    if (!row) {
        snprintf(e.msg, sizeof e.msg, "out of memory");
        longjmp(e.jb, 1);
    }
    image_ensure(out, oc, h, w);
    size_t hw = (size_t)w * h;
    const float s = 1.0f / 255.0f;
    while (ci.output_scanline < ci.output_height) {
        int y = ci.output_scanline;
        JSAMPROW rp = row;
        jpeg_read_scanlines(&ci, &rp, 1);
        float *restrict o = out->data + (size_t)y * w;
        const uint8_t *restrict px = row; /* non-volatile copy: lets the loop vectorise */
        if (nc == 1) {
            for (int x = 0; x < w; x++) o[x] = px[x] * s;
            if (oc == 3) {
                memcpy(o + hw, o, w * sizeof(float));
                memcpy(o + 2 * hw, o, w * sizeof(float));
            }
        } else {
            float *restrict o1 = o + hw, *restrict o2 = o + 2 * hw;
            for (int x = 0; x < w; x++) {
                o[x] = px[3 * x] * s;
                o1[x] = px[3 * x + 1] * s;
                o2[x] = px[3 * x + 2] * s;
            }
        }
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    free(row);
    return ER_OK;
}

int image_decode_jpeg(const uint8_t *buf, size_t len, const char *name, int channels, image *out) {
    return decode(buf, len, name, channels, 0, 0, 0, out);
}
int image_decode_jpeg_at(const uint8_t *buf, size_t len, const char *name, int channels, int denom, int64_t max_pixels,
                         image *out) {
    if (denom != 1 && denom != 2 && denom != 4 && denom != 8) return er_fail(ER_INPUT, "%s: JPEG scale 1/%d (1, 2, 4 or 8)", name, denom);
    return decode(buf, len, name, channels, 0, denom, max_pixels, out);
}
int image_decode_jpeg_scaled(const uint8_t *buf, size_t len, const char *name, int channels,
                             int min_side, image *out) {
    return decode(buf, len, name, channels, min_side, 0, 0, out);
}

int image_encode_jpeg(const image *im, int quality, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (im->c != 1 && im->c != 3) return er_fail(ER_INPUT, "jpeg encode: %d channels (1 or 3 expected)", im->c);
    if (im->w < 1 || im->h < 1) return er_fail(ER_INPUT, "jpeg encode: empty image");
    quality = quality < 1 ? 1 : quality > 100 ? 100 : quality;
    struct jpeg_compress_struct ci;
    jerr_t e;
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = jerr_exit;
    e.pub.output_message = jerr_output;
    unsigned char *m = NULL; /* written by libjpeg through &m (memory, not a register) */
    unsigned long memlen = 0;
    uint8_t *volatile row = NULL;
    if (setjmp(e.jb)) {
        free(row);
        jpeg_destroy_compress(&ci);
        free(m);
        return er_fail(ER_RUNTIME, "jpeg encode failed: %s", e.msg);
    }
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &m, &memlen);
    ci.image_width = im->w, ci.image_height = im->h;
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
    *len = memlen;
    return ER_OK;
}

int image_jpeg_roundtrip(image *im, int quality) {
    if (im->c != 1 && im->c != 3) return er_fail(ER_INPUT, "jpeg re-encode: %d channels", im->c);
    uint8_t *mem;
    size_t memlen;
    int rc = image_encode_jpeg(im, quality, &mem, &memlen);
    if (rc) return rc;
    rc = decode(mem, memlen, "jpeg re-encode", im->c, 0, 0, 0, im);
    free(mem);
    return rc;
}
