/* test_cuda_parity_cast.c — cast (fp32 <-> bf16, both directions, with and without accumulate) and
 * copy_strided_bf16 on the GPU against the CPU table, bit for bit (the same integer rounding on
 * both: kernels/cpu/cast.c, kernels/cuda/cast.cu), on random bit patterns (NaNs, infinities,
 * subnormals and ties included). */
#include "tests/cuda/parity_util.h"

static void *dev_bytes(const void *h, size_t bytes) {
    void *d = GPU->alloc(bytes ? bytes : 4);
    if (bytes) GPU->upload(d, h, bytes);
    return d;
}

static void expect_bits(const char *what, const void *ref, const void *d, size_t bytes) {
    gpu_ok(what);
    unsigned char *h = malloc(bytes ? bytes : 1);
    GPU->download(h, d, bytes);
    for (size_t i = 0; i < bytes; i++)
        cr_assert_eq(h[i], ((const unsigned char *)ref)[i], "%s: byte %zu differs (0x%02x vs CPU 0x%02x)", what, i, h[i],
                     ((const unsigned char *)ref)[i]);
    free(h);
}

PARITY_COVERS(cast);
Test(cuda, cast_both_directions_bits) {
    require_gpu();
    const int64_t n = 70001;
    uint32_t *xf = malloc(4 * n), *yf = malloc(4 * n);
    uint16_t *xb = malloc(2 * n), *yb = malloc(2 * n);
    rng_t r = rng_make(5, 0);
    for (int64_t i = 0; i < n; i++) {
        xf[i] = rng_u32(&r);
        if (i % 3 == 0) xf[i] = (xf[i] & 0x8001FFFFu) | 0x3F800000u | ((i & 1) << 15); /* ties near 1 */
        if (i % 7 == 0) xf[i] &= 0x800FFFFFu;                                            /* subnormals */
        yf[i] = rng_u32(&r) & 0xBFFFFFFFu; /* finite accumulators */
        xb[i] = (uint16_t)rng_u32(&r);
        yb[i] = (uint16_t)(rng_u32(&r) & 0xBFFF);
    }
    for (int acc = 0; acc <= 1; acc++) {
        /* fp32 -> bf16 */
        uint16_t *cb = malloc(2 * n);
        memcpy(cb, yb, 2 * n);
        void *dx = dev_bytes(xf, 4 * n), *dy = dev_bytes(yb, 2 * n);
        CPU->cast(n, ER_F32, xf, ER_BF16, cb, acc);
        GPU->cast(n, ER_F32, dx, ER_BF16, dy, acc);
        expect_bits(acc ? "cast fp32 -> bf16 (+=)" : "cast fp32 -> bf16", cb, dy, 2 * n);
        GPU->free(dx);
        GPU->free(dy);
        free(cb);
        /* bf16 -> fp32 */
        uint32_t *cf = malloc(4 * n);
        memcpy(cf, yf, 4 * n);
        dx = dev_bytes(xb, 2 * n);
        dy = dev_bytes(yf, 4 * n);
        CPU->cast(n, ER_BF16, xb, ER_F32, cf, acc);
        GPU->cast(n, ER_BF16, dx, ER_F32, dy, acc);
        expect_bits(acc ? "cast bf16 -> fp32 (+=)" : "cast bf16 -> fp32", cf, dy, 4 * n);
        GPU->free(dx);
        GPU->free(dy);
        free(cf);
    }
    free(xf); free(yf); free(xb); free(yb);
}

PARITY_COVERS(copy_strided_bf16);
Test(cuda, copy_strided_bf16_bits) {
    require_gpu();
    int64_t vshape[3] = {33, 7, 5}, vs[3] = {1, 33, 7 * 33}, ys[3], n = 5 * 7 * 33;
    contig(3, vshape, ys);
    uint16_t *x = malloc(2 * n), *y = malloc(2 * n);
    rng_t r = rng_make(6, 0);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (uint16_t)(rng_u32(&r) & 0xBFFF);
        y[i] = (uint16_t)(rng_u32(&r) & 0xBFFF);
    }
    for (int acc = 0; acc <= 1; acc++) {
        uint16_t *yc = malloc(2 * n);
        memcpy(yc, y, 2 * n);
        void *dx = dev_bytes(x, 2 * n), *dy = dev_bytes(y, 2 * n);
        CPU->copy_strided_bf16(3, vshape, x, vs, yc, ys, acc);
        GPU->copy_strided_bf16(3, vshape, dx, vs, dy, ys, acc);
        expect_bits(acc ? "copy_strided_bf16 (+=)" : "copy_strided_bf16", yc, dy, 2 * n);
        GPU->free(dx);
        GPU->free(dy);
        free(yc);
    }
    free(x); free(y);
}
