/* png_io.c — PNG decode/encode through libpng. libpng reports errors by longjmp'ing out of its
 * error callback; we catch that with setjmp, record one message naming the file, and return
 * ER_INPUT. Warnings (e.g. a bad CRC on an ancillary chunk) are ignored like libpng does. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/image.h"
#include "nn/base/base.h"

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    char msg[200];
} png_src;

static void png_err(png_structp p, png_const_charp msg) {
    png_src *s = png_get_error_ptr(p);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(p, 1);
}
static void png_warn(png_structp p, png_const_charp msg) { (void)p, (void)msg; }

static void png_read_mem(png_structp p, png_bytep out, png_size_t n) {
    png_src *s = png_get_io_ptr(p);
    if (n > s->len - s->pos) png_error(p, "file truncated (unexpected end of data)");
    memcpy(out, s->buf + s->pos, n);
    s->pos += n;
}


int image_decode_png(const uint8_t *buf, size_t len, const char *name, int channels, image *out) {
    if (len < 8 || png_sig_cmp(buf, 0, 8)) return er_fail(ER_INPUT, "%s: not a PNG file", name);
    png_src src = {buf, len, 8, ""};
    png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_err, png_warn);
    png_infop info = p ? png_create_info_struct(p) : NULL;
    if (!info) {
        png_destroy_read_struct(&p, NULL, NULL);
        return er_fail(ER_RUNTIME, "%s: libpng init failed", name);
    }
    /* volatile: modified after setjmp and read after a longjmp */
    uint8_t *volatile rows = NULL;
    png_bytep *volatile rowp = NULL;
    if (setjmp(png_jmpbuf(p))) {
        free(rows);
        free(rowp);
        png_destroy_read_struct(&p, &info, NULL);
        return er_fail(ER_INPUT, "%s: corrupt PNG: %s", name, src.msg[0] ? src.msg : "decode error");
    }
    png_set_read_fn(p, &src, png_read_mem);
    png_set_sig_bytes(p, 8);
    png_read_info(p, info);
    png_uint_32 w = png_get_image_width(p, info), h = png_get_image_height(p, info);
    if (w == 0 || h == 0 || w > IMAGE_MAX_SIDE || h > IMAGE_MAX_SIDE || (uint64_t)w * h > IMAGE_MAX_PIXELS)
        png_error(p, "image size out of range");
    int ct = png_get_color_type(p, info), depth = png_get_bit_depth(p, info);
    /* Normalise every layout to 8/16-bit gray, gray+alpha, RGB or RGBA. */
    if (ct == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(p);
    if (ct == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(p);
    if (png_get_valid(p, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(p);
    if (depth == 16) png_set_swap(p); /* host-order uint16 on little-endian */
    png_set_interlace_handling(p);
    png_read_update_info(p, info);
    int nch = png_get_channels(p, info), bits = png_get_bit_depth(p, info);
    size_t stride = png_get_rowbytes(p, info);
    rows = malloc(stride * h);
    rowp = malloc(sizeof(png_bytep) * h);
    if (!rows || !rowp) png_error(p, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) rowp[y] = rows + y * stride;
    png_read_image(p, rowp);
    png_read_end(p, NULL);

    int colour = nch >= 3;
    int oc = channels ? channels : (colour ? 3 : 1);
    image_ensure(out, oc, (int)h, (int)w);
    size_t hw = (size_t)w * h;
    float scale = bits == 16 ? 1.0f / 65535.0f : 1.0f / 255.0f;
    for (size_t i = 0; i < hw; i++) {
        float v[3];
        int nc = colour ? 3 : 1;
        for (int k = 0; k < nc; k++)
            v[k] = bits == 16 ? ((const uint16_t *)rows)[i * nch + k] * scale : rows[i * nch + k] * scale;
        if (!colour) v[1] = v[2] = v[0];
        if (oc == 1)
            out->data[i] = colour ? 0.299f * v[0] + 0.587f * v[1] + 0.114f * v[2] : v[0];
        else
            for (int k = 0; k < 3; k++) out->data[k * hw + i] = v[k];
    }
    free(rows);
    free(rowp);
    png_destroy_read_struct(&p, &info, NULL);
    return ER_OK;
}

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} png_dst;

static void png_write_mem(png_structp p, png_bytep data, png_size_t n) {
    png_dst *d = png_get_io_ptr(p);
    if (d->len + n > d->cap) {
        d->cap = (d->len + n) * 2;
        d->buf = xrealloc(d->buf, d->cap);
    }
    memcpy(d->buf + d->len, data, n);
    d->len += n;
}
static void png_flush_mem(png_structp p) { (void)p; }

/* Write `len` bytes to path via a temp file + rename (no fsync). */
static int write_file_renamed(const char *path, const void *data, size_t len) {
    int rc0 = check_output_path(path); /* a directory or a FIFO: exit 2 naming it, not 'write failed' */
    if (rc0) return rc0;
    size_t n = strlen(path) + 32;
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = er_fail(ER_RUNTIME, "%s: cannot create", tmp);
        free(tmp);
        return rc;
    }
    int ok = fwrite(data, 1, len, f) == len;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        unlink(tmp);
        free(tmp);
        return er_fail(ER_RUNTIME, "%s: write failed", path);
    }
    free(tmp);
    return ER_OK;
}

int png_save_u8(const char *path, const uint8_t *hwc, int c, int h, int w) {
    if (c != 1 && c != 3) return er_fail(ER_INPUT, "%s: PNG save supports 1 or 3 channels, got %d", path, c);
    png_src err = {0};
    png_dst dst = {0};
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, png_err, png_warn);
    png_infop info = p ? png_create_info_struct(p) : NULL;
    if (!info) {
        png_destroy_write_struct(&p, NULL);
        return er_fail(ER_RUNTIME, "%s: libpng init failed", path);
    }
    if (setjmp(png_jmpbuf(p))) {
        png_destroy_write_struct(&p, &info);
        free(dst.buf);
        return er_fail(ER_RUNTIME, "%s: PNG encode failed: %s", path, err.msg);
    }
    png_set_write_fn(p, &dst, png_write_mem, png_flush_mem);
    png_set_IHDR(p, info, w, h, 8, c == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(p, 3);
    png_write_info(p, info);
    for (int y = 0; y < h; y++) png_write_row(p, (png_bytep)(hwc + (size_t)y * w * c));
    png_write_end(p, info);
    png_destroy_write_struct(&p, &info);
    int rc = write_file_renamed(path, dst.buf, dst.len);
    free(dst.buf);
    return rc;
}

static inline uint8_t to_u8(float v) {
    v = v < 0 ? 0 : v > 1 ? 1 : v;
    return (uint8_t)(v * 255.0f + 0.5f);
}

int image_save_png(const char *path, const image *im) {
    size_t hw = (size_t)im->h * im->w;
    uint8_t *px = xmalloc(hw * im->c);
    for (size_t i = 0; i < hw; i++)
        for (int k = 0; k < im->c; k++) px[i * im->c + k] = to_u8(im->data[k * hw + i]);
    int rc = png_save_u8(path, px, im->c, im->h, im->w);
    free(px);
    return rc;
}
