/* test_image_io.c — PNG/JPEG decoding, encoding, corrupt files, real Kvasir-SEG files. */
#include <math.h>
#include <png.h>
#include <zlib.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

static char *tmp_path(const char *dir, const char *name) { return path_join(dir, name); }

Test(datasets_image, png_roundtrip_rgb_and_gray) {
    const char *dir = test_tmpdir();
    image a = {0}, b = {0};
    image_ensure(&a, 3, 5, 7);
    for (int i = 0; i < 3 * 5 * 7; i++) a.data[i] = (float)((i * 37) % 256) / 255.0f;
    char *p = tmp_path(dir, "rgb.png");
    cr_assert_eq(image_save_png(p, &a), ER_OK);
    cr_assert_eq(image_load(p, 0, &b), ER_OK);
    cr_assert_eq(b.c, 3);
    cr_assert_eq(b.h, 5);
    cr_assert_eq(b.w, 7);
    for (int i = 0; i < 3 * 5 * 7; i++) cr_assert_float_eq(a.data[i], b.data[i], 1e-6);
    /* forced gray = PIL convert('L') luma */
    cr_assert_eq(image_load(p, 1, &b), ER_OK);
    cr_assert_eq(b.c, 1);
    size_t hw = 35;
    cr_assert_float_eq(b.data[3], 0.299f * a.data[3] + 0.587f * a.data[hw + 3] + 0.114f * a.data[2 * hw + 3], 1e-5);
    free(p);
    image_ensure(&a, 1, 4, 3);
    for (int i = 0; i < 12; i++) a.data[i] = i / 11.0f;
    p = tmp_path(dir, "gray.png");
    cr_assert_eq(image_save_png(p, &a), ER_OK);
    cr_assert_eq(image_load(p, 0, &b), ER_OK);
    cr_assert_eq(b.c, 1);
    for (int i = 0; i < 12; i++) cr_assert_float_eq(b.data[i], (int)(a.data[i] * 255 + 0.5f) / 255.0f, 1e-6);
    cr_assert_eq(image_load(p, 3, &b), ER_OK); /* gray forced to RGB: 3 equal planes */
    cr_assert_eq(b.c, 3);
    cr_assert_float_eq(b.data[5], b.data[12 + 5], 0);
    free(p);
    image_free(&a), image_free(&b);
}

/* Write a PNG with libpng directly in a layout endoret never writes (16-bit, palette, RGBA). */
static void write_png_raw(const char *path, int w, int h, int color_type, int depth, const uint8_t *rows_data,
                          size_t stride, png_color *pal, int npal) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(p);
    png_init_io(p, f);
    png_set_IHDR(p, info, w, h, depth, color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (pal) png_set_PLTE(p, info, pal, npal);
    png_write_info(p, info);
    for (int y = 0; y < h; y++) png_write_row(p, (png_bytep)(rows_data + y * stride));
    png_write_end(p, info);
    png_destroy_write_struct(&p, &info);
    fclose(f);
}

Test(datasets_image, png_16bit_palette_rgba) {
    const char *dir = test_tmpdir();
    image im = {0};
    /* 16-bit gray, big-endian samples in the file */
    uint8_t g16[2 * 3 * 2];
    uint16_t vals[6] = {0, 1, 256, 4095, 40000, 65535};
    for (int i = 0; i < 6; i++) g16[2 * i] = vals[i] >> 8, g16[2 * i + 1] = vals[i] & 255;
    char *p = tmp_path(dir, "g16.png");
    write_png_raw(p, 3, 2, PNG_COLOR_TYPE_GRAY, 16, g16, 6, NULL, 0);
    cr_assert_eq(image_load(p, 0, &im), ER_OK);
    cr_assert_eq(im.c, 1);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(im.data[i], vals[i] / 65535.0f, 1e-7);
    free(p);
    /* palette */
    png_color pal[3] = {{255, 0, 0}, {0, 255, 0}, {10, 20, 30}};
    uint8_t idx[4] = {0, 1, 2, 1};
    p = tmp_path(dir, "pal.png");
    write_png_raw(p, 2, 2, PNG_COLOR_TYPE_PALETTE, 8, idx, 2, pal, 3);
    cr_assert_eq(image_load(p, 0, &im), ER_OK);
    cr_assert_eq(im.c, 3);
    cr_assert_float_eq(im.data[0], 1.0f, 1e-7);     /* R of pixel 0 */
    cr_assert_float_eq(im.data[4 + 1], 1.0f, 1e-7); /* G of pixel 1 */
    cr_assert_float_eq(im.data[8 + 2], 30 / 255.0f, 1e-7);
    free(p);
    /* RGBA: alpha dropped */
    uint8_t rgba[2 * 4] = {10, 20, 30, 0, 40, 50, 60, 255};
    p = tmp_path(dir, "rgba.png");
    write_png_raw(p, 2, 1, PNG_COLOR_TYPE_RGBA, 8, rgba, 8, NULL, 0);
    cr_assert_eq(image_load(p, 0, &im), ER_OK);
    cr_assert_eq(im.c, 3);
    cr_assert_float_eq(im.data[1], 40 / 255.0f, 1e-7);
    cr_assert_float_eq(im.data[2 * 2 + 0], 30 / 255.0f, 1e-7);
    free(p);
    image_free(&im);
}

Test(datasets_image, unknown_and_empty_files_rejected) {
    const char *dir = test_tmpdir();
    char *p = tmp_path(dir, "notes.png");
    write_file_atomic(p, "hello, not an image", 19);
    image im = {0};
    cr_assert_eq(image_load(p, 0, &im), ER_INPUT);
    cr_assert(strstr(er_msg(), "notes.png") && strstr(er_msg(), "not a PNG or JPEG"), "%s", er_msg());
    write_file_atomic(p, "", 0);
    cr_assert_eq(image_load(p, 0, &im), ER_INPUT);
    char *missing = tmp_path(dir, "missing.jpg");
    cr_assert_eq(image_load(missing, 0, &im), ER_INPUT);
    cr_assert(strstr(er_msg(), "missing.jpg"), "%s", er_msg());
    free(p), free(missing);
    image_free(&im);
}

Test(datasets_image, jpeg_roundtrip_close_and_quality_ordered) {
    image a = {0}, b = {0};
    image_ensure(&a, 3, 32, 48);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 48; x++) IMG_AT(&a, c, y, x) = 0.2f + 0.6f * (x + y * c) / (48.0f + 32 * 2);
    double err[2];
    int q[2] = {95, 5};
    for (int k = 0; k < 2; k++) {
        image_copy(&b, &a);
        cr_assert_eq(image_jpeg_roundtrip(&b, q[k]), ER_OK);
        cr_assert_eq(b.c, 3);
        cr_assert_eq(b.w, 48);
        double e = 0;
        for (int i = 0; i < 3 * 32 * 48; i++) e += fabs(a.data[i] - b.data[i]);
        err[k] = e / (3 * 32 * 48);
    }
    cr_assert_lt(err[0], 0.01, "q95 mean abs error %f", err[0]);
    cr_assert_lt(err[0], err[1], "quality 95 should be closer than quality 5");
    image_free(&a), image_free(&b);
}

/* ---- real Kvasir-SEG files ---- */

typedef struct {
    char file[128], mask[128];
    int w, h;
    double fg;
} kv_row;

static int read_labels(const char *data, kv_row *rows, int max) {
    char *p = path_join(data, "kvasir_seg/labels.csv");
    FILE *f = fopen(p, "r");
    free(p);
    cr_assert(f, "labels.csv missing");
    char line[1024];
    int n = 0;
    cr_assert(fgets(line, sizeof line, f));
    while (n < max && fgets(line, sizeof line, f)) {
        char src[32], med[32], lab[32];
        int mw, mh;
        int k = sscanf(line, "%127[^,],%127[^,],%31[^,],%31[^,],%d,%d,%d,%d,%lf,%31s", rows[n].file, rows[n].mask, lab,
                       src, &rows[n].w, &rows[n].h, &mw, &mh, &rows[n].fg, med);
        cr_assert_eq(k, 10, "labels.csv line %d", n + 2);
        n++;
    }
    fclose(f);
    return n;
}

/* Found by `make fuzz` (fuzz_jpeg): a JPEG cut inside its scan data failed after the pixels were
 * allocated, and a caller decoding into a fresh image (thumbnail, bow) leaked them. A failed decode
 * into an empty image leaves it empty. */
Test(datasets_image, jpeg_failing_mid_scan_leaves_a_fresh_image_empty) {
    image src = {0};
    image_ensure(&src, 3, 16, 16);
    for (int i = 0; i < 3 * 16 * 16; i++) src.data[i] = (float)(i % 97) / 97.0f;
    uint8_t *jpg;
    size_t len;
    cr_assert_eq(image_encode_jpeg(&src, 50, &jpg, &len), ER_OK, "%s", er_msg());
    int failed = 0;
    for (size_t cut = 2; cut <= 24; cut++) {
        image im = {0};
        int rc = image_decode_jpeg(jpg, len - cut, "cut.jpg", 3, &im);
        if (rc == ER_OK) { image_free(&im); continue; }
        failed++;
        cr_expect_null(im.data, "cut %zu: a failed decode left %d x %d pixels allocated", cut, im.w, im.h);
    }
    cr_expect_gt(failed, 0);
    free(jpg);
    image_free(&src);
}

Test(datasets_image, kvasir_jpeg_and_mask_decode) {
    REQUIRE_SHARED_DATA(data);
    kv_row rows[12];
    int n = read_labels(data, rows, 12);
    char *base = path_join(data, "kvasir_seg");
    image im = {0}, m = {0};
    for (int i = 0; i < n; i++) {
        char *ip = path_join(base, rows[i].file), *mp = path_join(base, rows[i].mask);
        cr_assert_eq(image_load(ip, 0, &im), ER_OK, "%s", er_msg());
        cr_assert_eq(im.c, 3);
        cr_assert_eq(im.w, rows[i].w, "%s width", ip);
        cr_assert_eq(im.h, rows[i].h, "%s height", ip);
        int pw, ph;
        cr_assert_eq(image_probe(ip, &pw, &ph), ER_OK);
        cr_assert(pw == rows[i].w && ph == rows[i].h);
        cr_assert_eq(image_load(mp, 1, &m), ER_OK, "%s", er_msg());
        cr_assert(m.w == im.w && m.h == im.h);
        size_t fg = 0, hw = (size_t)m.w * m.h;
        for (size_t k = 0; k < hw; k++) {
            cr_assert(m.data[k] == 0.0f || m.data[k] == 1.0f, "mask values are 0/255");
            fg += m.data[k] > 0.5f;
        }
        cr_assert_float_eq((double)fg / hw, rows[i].fg, 6e-4, "%s fg fraction", mp);
        free(ip), free(mp);
    }
    free(base);
    image_free(&im), image_free(&m);
}

/* Truncated copies of a real JPEG and a real PNG mask (written to a tmp dir, never committed). */
Test(datasets_image, kvasir_truncated_files_rejected) {
    REQUIRE_SHARED_DATA(data);
    kv_row rows[1];
    read_labels(data, rows, 1);
    const char *dir = test_tmpdir();
    const char *srcs[2] = {rows[0].file, rows[0].mask};
    image im = {0};
    for (int s = 0; s < 2; s++) {
        char *base = path_join(data, "kvasir_seg"), *sp = path_join(base, srcs[s]);
        char *buf;
        size_t len;
        cr_assert_eq(read_file(sp, &buf, &len), ER_OK);
        size_t cuts[] = {1, 4, 9, 30, 200, len / 3, len / 2, len - 64, len - 3};
        for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
            char name[64];
            snprintf(name, sizeof name, "cut_%d_%zu%s", s, cuts[k], s ? ".png" : ".jpg");
            char *p = path_join(dir, name);
            cr_assert_eq(write_file_atomic(p, buf, cuts[k]), ER_OK);
            int rc = image_load(p, 0, &im);
            cr_assert_eq(rc, ER_INPUT, "%s (cut at %zu of %zu) was accepted", name, cuts[k], len);
            cr_assert(strstr(er_msg(), name), "message should name the file: %s", er_msg());
            free(p);
        }
        /* garbage in the middle of the entropy-coded data of the JPEG: error or a clean decode, no crash */
        if (s == 0) {
            for (size_t i = len / 2; i < len / 2 + 400 && i < len; i++) buf[i] = (char)0xFF;
            char *p = path_join(dir, "garbled.jpg");
            write_file_atomic(p, buf, len);
            int rc = image_load(p, 0, &im);
            cr_assert(rc == ER_INPUT || rc == ER_OK);
            free(p);
        }
        free(buf), free(sp), free(base);
    }
    image_free(&im);
}

/* A header that claims more than IMAGE_MAX_PIXELS is refused before the pixels are allocated: a
 * 2x2 PNG whose IHDR (CRC recomputed) says 9000 x 9000 = 81 Mpixel. */
Test(datasets_image, header_claiming_a_huge_image_is_refused) {
    const char *d = test_tmpdir();
    char *p = path_join(d, "small.png");
    image im = {0};
    image_ensure(&im, 3, 2, 2);
    memset(im.data, 0, 12 * sizeof(float));
    cr_assert_eq(image_save_png(p, &im), ER_OK, "%s", er_msg());
    char *buf;
    size_t len;
    cr_assert_eq(read_file(p, &buf, &len), ER_OK);
    cr_assert_gt(len, 33);
    uint8_t *b = (uint8_t *)buf;
    cr_assert(!memcmp(b + 12, "IHDR", 4));
    const uint8_t side[4] = {0, 0, 0x23, 0x28}; /* 9000, big-endian */
    memcpy(b + 16, side, 4);
    memcpy(b + 20, side, 4);
    uint32_t crc = (uint32_t)crc32(0, b + 12, 17);
    b[29] = crc >> 24, b[30] = crc >> 16, b[31] = crc >> 8, b[32] = crc;
    image out = {0};
    cr_assert_eq(image_decode_png(b, len, "huge.png", 3, &out), ER_INPUT);
    cr_expect(strstr(er_msg(), "huge.png") && strstr(er_msg(), "out of range"), "%s", er_msg());
    cr_expect_null(out.data, "nothing allocated");
    free(buf);
    free(p);
    image_free(&im);
    image_free(&out);
}
