/* test_cuda_parity_cast.c — cast (fp32 <-> bf16, both directions, with and without accumulate) and
 * copy_strided_bf16 on the GPU against the CPU table, bit for bit (the same integer rounding on
 * both: kernels/cpu/cast.c, kernels/cuda/cast.cu), on random bit patterns (NaNs, infinities,
 * subnormals and ties included). */
#include "nn/autograd.h"
#include "nn/ops.h"
#include "nn/tensor.h"
#include "tests/cuda/parity_util.h"

static void *dev_bytes(const void *h, size_t bytes) {
    void *d = GPU->alloc(bytes ? bytes : 4);
    if (bytes) GPU->upload(d, h, bytes);
    return d;
}

static int is_nan(const unsigned char *e, int esize) {
    uint32_t u = 0;
    memcpy(&u, e, esize);
    return esize == 2 ? (u & 0x7F80u) == 0x7F80u && (u & 0x7Fu) : (u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu);
}

/* Bit for bit, element by element (esize bytes). With `sum`, the result is an fp32 addition, and a NaN
 * it makes has the hardware's payload (x86 keeps an operand's, a GPU writes its canonical one), so
 * there any NaN matches any NaN; everything else, NaN payloads of plain conversions included, must
 * be the same bits. */
static void expect_bits(const char *what, const void *ref, const void *d, size_t n, int esize, int sum) {
    gpu_ok(what);
    unsigned char *h = malloc(n * esize + 1);
    GPU->download(h, d, n * esize);
    const unsigned char *r = ref;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *a = h + i * esize, *b = r + i * esize;
        if (sum && is_nan(a, esize) && is_nan(b, esize)) continue;
        uint32_t ua = 0, ub = 0;
        memcpy(&ua, a, esize), memcpy(&ub, b, esize);
        cr_assert_eq(ua, ub, "%s: element %zu differs (0x%0*x vs CPU 0x%0*x)", what, i, 2 * esize, ua, 2 * esize, ub);
    }
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
        if (i % 3 == 0) xf[i] = (xf[i] & 0xFFFF0000u) | 0x8000u; /* exact ties, half of them to an even bf16 */
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
        expect_bits(acc ? "cast fp32 -> bf16 (+=)" : "cast fp32 -> bf16", cb, dy, n, 2, acc);
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
        expect_bits(acc ? "cast bf16 -> fp32 (+=)" : "cast bf16 -> fp32", cf, dy, n, 4, acc);
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
        expect_bits(acc ? "copy_strided_bf16 (+=)" : "copy_strided_bf16", yc, dy, n, 2, acc);
        GPU->free(dx);
        GPU->free(dy);
        free(yc);
    }
    free(x); free(y);
}

/* The head split / merge of attention: [B, H, T, D] packed seen as [B, T, H, D], copied into a packed
 * [B, T, H, D], with and without accumulate. D = 16 takes the 8-elements-at-a-time kernel; D = 12
 * (not a multiple of 8) and a source one element off 16-byte alignment take the element kernel. */
Test(cuda, copy_strided_bf16_head_merge_bits) {
    require_gpu();
    const int64_t B = 3, T = 5, H = 4, Ds[3] = {16, 12, 16};
    for (int c = 0; c < 3; c++) {
        const int64_t D = Ds[c], n = B * T * H * D, off = c == 2;
        const int64_t shape[4] = {B, T, H, D}, xs[4] = {H * T * D, D, T * D, 1};
        int64_t ys[4];
        contig(4, shape, ys);
        uint16_t *x = malloc(2 * (n + 1)), *y = malloc(2 * n);
        rng_t r = rng_make(60 + c, 0);
        for (int64_t i = 0; i < n + 1; i++) x[i] = (uint16_t)(rng_u32(&r) & 0xBFFF);
        for (int64_t i = 0; i < n; i++) y[i] = (uint16_t)(rng_u32(&r) & 0xBFFF);
        for (int acc = 0; acc <= 1; acc++) {
            uint16_t *yc = malloc(2 * n);
            memcpy(yc, y, 2 * n);
            uint16_t *dx = dev_bytes(x, 2 * (n + 1)), *dy = dev_bytes(y, 2 * n);
            CPU->copy_strided_bf16(4, shape, x + off, xs, yc, ys, acc);
            GPU->copy_strided_bf16(4, shape, dx + off, xs, dy, ys, acc);
            expect_bits(acc ? "copy_strided_bf16 head merge (+=)" : "copy_strided_bf16 head merge", yc, dy, n, 2, acc);
            GPU->free(dx);
            GPU->free(dy);
            free(yc);
        }
        free(x); free(y);
    }
}

/* cast_strided: a permuted view converted into a packed one and back (both directions, with and
 * without accumulate), GPU against CPU bit for bit, on random bit patterns (NaNs and ties included). */
PARITY_COVERS(cast_strided);
Test(cuda, cast_strided_bits) {
    require_gpu();
    int64_t vshape[4] = {3, 7, 5, 33}, vs[4] = {33, 3 * 33, 3 * 7 * 33, 1}, ps[4], n = 3 * 7 * 5 * 33;
    contig(4, vshape, ps);
    uint32_t *xf = malloc(4 * n), *yf = malloc(4 * n);
    uint16_t *xb = malloc(2 * n), *yb = malloc(2 * n);
    rng_t r = rng_make(7, 0);
    for (int64_t i = 0; i < n; i++) {
        xf[i] = rng_u32(&r);
        if (i % 3 == 0) xf[i] = (xf[i] & 0xFFFF0000u) | 0x8000u;
        yf[i] = rng_u32(&r) & 0xBFFFFFFFu;
        xb[i] = (uint16_t)rng_u32(&r);
        yb[i] = (uint16_t)(rng_u32(&r) & 0xBFFF);
    }
    for (int acc = 0; acc <= 1; acc++) {
        uint32_t *cf = malloc(4 * n); /* bf16 view -> packed fp32 (attention's widening) */
        memcpy(cf, yf, 4 * n);
        void *dx = dev_bytes(xb, 2 * n), *dy = dev_bytes(yf, 4 * n);
        CPU->cast_strided(4, vshape, ER_BF16, xb, vs, ER_F32, cf, ps, acc);
        GPU->cast_strided(4, vshape, ER_BF16, dx, vs, ER_F32, dy, ps, acc);
        expect_bits(acc ? "cast_strided bf16 -> fp32 (+=)" : "cast_strided bf16 -> fp32", cf, dy, n, 4, acc);
        GPU->free(dx), GPU->free(dy), free(cf);
        uint16_t *cb = malloc(2 * n); /* packed fp32 -> bf16 view */
        memcpy(cb, yb, 2 * n);
        dx = dev_bytes(xf, 4 * n), dy = dev_bytes(yb, 2 * n);
        CPU->cast_strided(4, vshape, ER_F32, xf, ps, ER_BF16, cb, vs, acc);
        GPU->cast_strided(4, vshape, ER_F32, dx, ps, ER_BF16, dy, vs, acc);
        expect_bits(acc ? "cast_strided fp32 -> bf16 (+=)" : "cast_strided fp32 -> bf16", cb, dy, n, 2, acc);
        GPU->free(dx), GPU->free(dy), free(cb);
    }
    free(xf), free(yf), free(xb), free(yb);
}

/* The tensor layer on the device: a bf16 tensor made by op_cast, moved by the shape ops, filled,
 * read back strided, moved between devices, and cast's backward, against the same on the CPU. */
/* x [4, 5, 6] on dev -> bf16 -> permute/slice/concat -> [4, 4, 11]; backward with a fixed bf16 seed.
 * out receives the chain's bits, its transposed (strided) read-back and x's gradient. */
static void device_chain(int dev, const float *host, uint16_t *bits, uint16_t *tbits, float *grad) {
    tensor *x = tensor_new_on(dev, 3, SHAPE(4, 5, 6));
    tensor_copy_from_host(x, host);
    tensor_set_requires_grad(x, 1);
    tensor *b = op_cast(x, DT_BF16);
    tensor *p = op_slice(op_permute(b, (int[]){2, 0, 1}), 0, 1, 5); /* [4, 4, 5] strided */
    tensor *parts[2] = {p, op_slice(op_permute(b, (int[]){1, 0, 2}), 0, 0, 4)};
    tensor *y = op_concat(2, parts, 2); /* [4, 4, 5 + 6] */
    cr_assert_not_null(y, "%s", er_msg());
    cr_assert_eq(y->dtype, DT_BF16);
    tensor_to_host_raw(y, bits);
    tensor_to_host_raw(op_transpose(y, 0, 2), tbits); /* through the device's strided copy */
    int64_t m = tensor_numel(y);
    float *seed = malloc(sizeof(float) * m);
    for (int64_t i = 0; i < m; i++) seed[i] = 1.0f + (float)(i % 5) * 0.25f;
    tensor *s = tensor_empty_dt(dev, DT_BF16, y->ndim, y->shape);
    tensor_copy_from_host(s, seed);
    cr_assert_eq(backward_with(y, s), ER_OK, "%s", er_msg());
    cr_assert_not_null(x->grad);
    tensor_to_host(x->grad, grad);
    free(seed);
    tensor_free(x);
    nn_step_end();
}

Test(cuda, bf16_tensors_on_the_device) {
    require_gpu();
    const int64_t n = 4 * 5 * 6, m = 4 * 4 * 11;
    float *host = rnd(n, -3, 3, 77), *gc = malloc(sizeof(float) * n), *gg = malloc(sizeof(float) * n);
    uint16_t *bc = malloc(2 * m), *bg = malloc(2 * m), *tc = malloc(2 * m), *tg = malloc(2 * m);
    device_chain(DEV_CPU, host, bc, tc, gc);
    device_chain(GPU_DEV, host, bg, tg, gg);
    gpu_ok("bf16 chain");
    cr_assert_eq(memcmp(bc, bg, 2 * m), 0, "the bf16 chain differs on the device");
    cr_assert_eq(memcmp(tc, tg, 2 * m), 0, "strided read-back differs on the device");
    cr_assert_eq(memcmp(gc, gg, sizeof(float) * n), 0, "cast/shape backward differs on the device");
    /* a long-lived bf16 tensor: fill, a strided write, moved to the CPU and back, bits kept */
    float col[3] = {0.1f, -7.0f, 3.0e-39f};
    tensor *t = tensor_new_dt(GPU_DEV, DT_BF16, 2, SHAPE(3, 7));
    tensor_fill(t, -1.5f);
    cr_assert_eq(tensor_item(t), -1.5f);
    tensor_copy_from_host(op_slice(t, 1, 2, 3), col); /* one strided column */
    cr_assert_eq(tensor_to_device(t, DEV_CPU), ER_OK, "%s", er_msg());
    uint16_t h1[21], h2[21];
    tensor_to_host_raw(t, h1);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 7; j++)
            cr_assert_eq(h1[i * 7 + j], j == 2 ? er_f32_to_bf16(col[i]) : 0xBFC0, "(%d, %d) 0x%04x", i, j, h1[i * 7 + j]);
    cr_assert_eq(tensor_to_device(t, GPU_DEV), ER_OK, "%s", er_msg());
    tensor_to_host_raw(t, h2);
    gpu_ok("bf16 long-lived");
    cr_assert_eq(memcmp(h1, h2, sizeof h1), 0);
    tensor_free(t);
    nn_step_end();
    free(host); free(gc); free(gg); free(bc); free(bg); free(tc); free(tg);
}
