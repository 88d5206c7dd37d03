/* safetensors: round trip, conversions, a hand-built file, and hostile/truncated files rejected. */
#include "tests/test_util.h"
#include "checkpoints/safetensors.h"
#include "nn/base/base.h"

#include <math.h>
#include <string.h>

static char *tmpfile_in(const char *name) { return path_join(test_tmpdir(), name); }

Test(safetensors, round_trip_all_dtypes_and_metadata) {
    char *path = tmpfile_in("rt.safetensors");
    float a[6] = {1, -2.5f, 3.25f, 0, 1e-3f, -7};
    int64_t steps[1] = {123456789012345LL};
    uint16_t bf[3] = {st_f32_to_bf16(1.0f), st_f32_to_bf16(-0.5f), st_f32_to_bf16(3.0f)};
    int32_t i32[2] = {-5, 7};
    int64_t sa[2] = {2, 3}, s1[1] = {1}, s3[1] = {3}, s2[1] = {2}, s0[1] = {0};
    st_writer *w = st_writer_new();
    st_add(w, "blocks.0.attn.qkv.weight", ST_F32, 2, sa, a);
    st_add(w, "step", ST_I64, 1, s1, steps);
    st_add(w, "bf", ST_BF16, 1, s3, bf);
    st_add(w, "ints", ST_I32, 1, s2, i32);
    st_add(w, "empty", ST_F32, 1, s0, NULL);
    st_add_meta(w, "config", "model=vit_tiny\n\"quoted\" \\ tab\t");
    cr_assert_eq(st_write(w, path), ER_OK, "%s", er_msg());
    st_writer_free(w);

    st_file f;
    cr_assert_eq(st_open(path, &f), ER_OK, "%s", er_msg());
    cr_expect_eq(f.n, 5);
    const st_tensor *t = st_find(&f, "blocks.0.attn.qkv.weight");
    cr_assert_not_null(t);
    cr_expect_eq(t->ndim, 2);
    cr_expect_eq(t->shape[1], 3);
    float back[6];
    cr_assert_eq(st_read_f32(&f, "blocks.0.attn.qkv.weight", back, 6), ER_OK);
    cr_expect_arr_eq(back, a, sizeof a);
    int64_t s;
    cr_assert_eq(st_read_i64(&f, "step", &s, 1), ER_OK);
    cr_expect_eq(s, steps[0]);
    float b3[3];
    cr_assert_eq(st_read_f32(&f, "bf", b3, 3), ER_OK);
    cr_expect_float_eq(b3[1], -0.5f, 0);
    int64_t i2[2];
    cr_assert_eq(st_read_i64(&f, "ints", i2, 2), ER_OK);
    cr_expect_eq(i2[0], -5);
    cr_expect_str_eq(st_meta(&f, "config"), "model=vit_tiny\n\"quoted\" \\ tab\t");
    /* wrong element count and wrong type are errors naming the tensor */
    cr_expect_eq(st_read_f32(&f, "blocks.0.attn.qkv.weight", back, 5), ER_INPUT);
    cr_expect(strstr(er_msg(), "blocks.0.attn.qkv.weight") != NULL);
    cr_expect_eq(st_read_f32(&f, "step", back, 1), ER_INPUT);
    cr_expect_eq(st_read_f32(&f, "missing", back, 1), ER_INPUT);
    st_close(&f);
    free(path);
}

Test(safetensors, reads_a_hand_built_file_per_spec) {
    /* Built byte by byte as the Python library lays it out: F16 [2] = {1.0, -2.0}, BF16 [1] = {0.15625}. */
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[4,6]}}";
    size_t hl = strlen(hdr);
    unsigned char buf[512] = {0};
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    unsigned char data[6] = {0x00, 0x3C, 0x00, 0xC0, 0x20, 0x3E}; /* 1.0h, -2.0h, bf16 0x3E20 = 0.15625 */
    memcpy(buf + 8 + hl, data, 6);
    char *path = tmpfile_in("hand.safetensors");
    cr_assert_eq(write_file_atomic(path, buf, 8 + hl + 6), ER_OK);
    st_file f;
    cr_assert_eq(st_open(path, &f), ER_OK, "%s", er_msg());
    float a[2], b[1];
    cr_assert_eq(st_read_f32(&f, "a", a, 2), ER_OK);
    cr_expect_float_eq(a[0], 1.0f, 0);
    cr_expect_float_eq(a[1], -2.0f, 0);
    cr_assert_eq(st_read_f32(&f, "b", b, 1), ER_OK);
    cr_expect_float_eq(b[0], 0.15625f, 0);
    cr_expect_str_eq(st_meta(&f, "format"), "pt");
    st_close(&f);
    free(path);
}

Test(safetensors, half_conversions) {
    cr_expect_eq(st_f32_to_f16(1.0f), 0x3C00);
    cr_expect_eq(st_f32_to_f16(65504.0f), 0x7BFF);
    cr_expect_eq(st_f32_to_f16(1e6f), 0x7C00);          /* overflow -> inf */
    cr_expect_eq(st_f32_to_f16(5.9604645e-08f), 0x0001); /* smallest subnormal */
    cr_expect_float_eq(st_f16_to_f32(0x0001), 5.9604645e-08f, 1e-15);
    cr_expect_float_eq(st_f16_to_f32(0x3555), 0.33325195f, 1e-8);
    cr_expect_eq(st_f32_to_bf16(1.00390625f), 0x3F80); /* tie rounds to even */
    cr_expect_eq(st_f32_to_bf16(1.01171875f), 0x3F82);
    for (int h = 0; h < 0x7C00; h += 7) /* every finite half survives f16 -> f32 -> f16 */
        cr_expect_eq(st_f32_to_f16(st_f16_to_f32((uint16_t)h)), h);
}

Test(safetensors, truncated_and_garbled_files_are_rejected) {
    char *path = tmpfile_in("good.safetensors");
    float a[64];
    for (int i = 0; i < 64; i++) a[i] = (float)i;
    int64_t shape[2] = {8, 8};
    st_writer *w = st_writer_new();
    st_add(w, "w", ST_F32, 2, shape, a);
    cr_assert_eq(st_write(w, path), ER_OK);
    st_writer_free(w);
    char *data; size_t len;
    cr_assert_eq(read_file(path, &data, &len), ER_OK);
    char *bad = tmpfile_in("bad.safetensors");
    for (size_t cut = 0; cut < len; cut += (cut < 120 ? 1 : 37)) { /* every prefix of the header, some of the data */
        cr_assert_eq(write_file_atomic(bad, data, cut), ER_OK);
        st_file f;
        cr_expect_eq(st_open(bad, &f), ER_INPUT, "prefix of %zu bytes accepted", cut);
        cr_expect(strstr(er_msg(), bad) != NULL);
    }
    /* flip every header byte in turn: must never crash; either rejected or still a valid file */
    for (size_t i = 0; i < len - 256; i++) {
        char *copy = xmalloc(len);
        memcpy(copy, data, len);
        copy[i] ^= (char)0x5A;
        cr_assert_eq(write_file_atomic(bad, copy, len), ER_OK);
        st_file f;
        if (st_open(bad, &f) == ER_OK) {
            for (int t = 0; t < f.n; t++) cr_expect_leq(f.tensors[t].offset + f.tensors[t].nbytes, len);
            st_close(&f);
        }
        free(copy);
    }
    /* a huge header length */
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    cr_assert_eq(write_file_atomic(bad, huge, 16), ER_OK);
    st_file f;
    cr_expect_eq(st_open(bad, &f), ER_INPUT);
    cr_expect_eq(st_open("/nonexistent.safetensors", &f), ER_INPUT);
    free(data);
    free(bad);
    free(path);
}

static int open_with_header(const char *hdr, size_t datalen) {
    size_t hl = strlen(hdr);
    unsigned char *buf = xcalloc(8 + hl + datalen + 1, 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    char *path = tmpfile_in("h.safetensors");
    write_file_atomic(path, buf, 8 + hl + datalen);
    st_file f;
    int rc = st_open(path, &f);
    if (rc == ER_OK) st_close(&f);
    free(buf);
    free(path);
    return rc;
}

Test(safetensors, inconsistent_headers_are_rejected) {
    cr_expect_eq(open_with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), ER_OK);
    cr_expect_eq(open_with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8), ER_INPUT);
    cr_expect_eq(open_with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4), ER_INPUT);
    cr_expect_eq(open_with_header("{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), ER_INPUT);
    cr_expect_eq(open_with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8), ER_INPUT);
    cr_expect_eq(open_with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), ER_INPUT);
    cr_expect_eq(open_with_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}", 8), ER_INPUT);
    cr_expect_eq(open_with_header("[1,2]", 0), ER_INPUT);
    cr_expect_eq(open_with_header("{\"__metadata__\":{\"k\":5}}", 0), ER_INPUT);
    cr_expect_eq(open_with_header("{\"a\":", 0), ER_INPUT);
}
