/* test_cast.c — the CPU `cast` (fp32 <-> bf16) and `copy_strided_bf16` against a rounding computed
 * here independently of kernels/dtype.h: the value divided by its bf16 ulp, rounded by the FPU's
 * rint (round half to even), scaled back in double. Both kernel paths are checked: one element per
 * call (the scalar loop) and whole arrays (the AVX-512 loop where the CPU has it). */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The bf16 bits nearest to f, ties to even, from arithmetic on values (not on bit patterns). */
static uint16_t ref_bf16(float f) {
    if (isnan(f)) return 0; /* callers check NaN separately */
    if (isinf(f) || f == 0) return (uint16_t)(bits_of(f) >> 16);
    double a = fabs((double)f);
    int e;
    frexp(a, &e);                                  /* a = m 2^e, 0.5 <= m < 1 */
    int ulp_exp = e - 1 - 7;                       /* 8 significant bits */
    if (ulp_exp < -133) ulp_exp = -133;            /* subnormal bf16: a fixed ulp of 2^-133 */
    double q = rint(ldexp(a, -ulp_exp));           /* exact quotient (24 bits), rounded half-even */
    double r = ldexp(q, ulp_exp);
    float rf = r >= ldexp(1.0, 128) ? INFINITY : (float)r; /* past the top: inf */
    if (f < 0) rf = -rf;
    return (uint16_t)(bits_of(rf) >> 16);
}

static uint16_t cast1(float f) { /* one element: the scalar loop */
    uint16_t h;
    cpu_cast(1, ER_F32, &f, ER_BF16, &h, 0);
    return h;
}

static void check_value(float f, uint16_t got, const char *path) {
    if (isnan(f)) {
        float back = float_of((uint32_t)got << 16);
        cr_assert(isnan(back) && (got >> 15) == (bits_of(f) >> 31), "%s: NaN 0x%08x -> 0x%04x is not a NaN of the same sign",
                  path, bits_of(f), got);
        return;
    }
    cr_assert_eq(got, ref_bf16(f), "%s: 0x%08x (%a) -> 0x%04x, expected 0x%04x", path, bits_of(f), f, got, ref_bf16(f));
}

/* special inputs: ties, subnormals, the overflow edge, infinities, NaNs (a signalling one whose top
 * half alone would read as inf) */
static const uint32_t SPECIAL[] = {
    0x3F808000u, /* 1 + 2^-8: a tie, rounds down to the even 1.0 */
    0x3F818000u, /* 1 + 3 2^-8: a tie, rounds up to even */
    0x3F808001u, 0x3F807FFFu, 0xBF808000u, 0xBF818000u,
    0x00000001u, 0x00008000u, 0x00018000u, 0x00007FFFu, 0x00008001u, 0x007FFFFFu, 0x007F8000u,
    0x00800000u, 0x80008000u, 0x80018000u, 0x807FFFFFu,
    0x7F7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x7F7E8000u, 0xFF7FFFFFu,
    0x7F800000u, 0xFF800000u, 0x00000000u, 0x80000000u,
    0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7F80FFFFu,
};
#define NSPECIAL ((int)(sizeof SPECIAL / sizeof *SPECIAL))

Test(kernels_cast, rounds_to_nearest_even_like_an_independent_computation) {
    const int64_t n = 1 << 20;
    float *x = xmalloc(sizeof(float) * (size_t)n);
    uint16_t *y = xmalloc(sizeof(uint16_t) * (size_t)n);
    rng_t r = rng_make(7, 0);
    for (int64_t i = 0; i < n; i++) x[i] = float_of(rng_u32(&r)); /* every exponent, NaNs too */
    for (int i = 0; i < NSPECIAL; i++) x[i * 37] = float_of(SPECIAL[i]); /* inside the vector loop */
    for (int i = 0; i < 13; i++) x[n - 1 - i] = float_of(SPECIAL[i]);     /* and in its tail */
    cr_assert_eq(fegetround(), FE_TONEAREST);
    cpu_cast(n, ER_F32, x, ER_BF16, y, 0);
    for (int64_t i = 0; i < n; i++) check_value(x[i], y[i], "array");
    for (int64_t i = 0; i < n; i += 61) check_value(x[i], cast1(x[i]), "scalar");
    for (int i = 0; i < NSPECIAL; i++) check_value(float_of(SPECIAL[i]), cast1(float_of(SPECIAL[i])), "special");
    /* the rules spelt out on a few */
    cr_assert_eq(cast1(float_of(0x3F808000u)), 0x3F80);
    cr_assert_eq(cast1(float_of(0x3F818000u)), 0x3F82);
    cr_assert_eq(cast1(float_of(0x00008000u)), 0x0000); /* half the smallest subnormal: tie to even 0 */
    cr_assert_eq(cast1(float_of(0x00018000u)), 0x0002);
    cr_assert_eq(cast1(float_of(0x7F7FFFFFu)), 0x7F80); /* FLT_MAX is past bf16's top: inf */
    cr_assert_eq(cast1(float_of(0x7F800001u)) & 0x7FC0, 0x7FC0); /* signalling NaN: a quiet NaN, not inf */
    free(x);
    free(y);
}

Test(kernels_cast, every_bf16_round_trips_exactly) {
    const int64_t n = 65536;
    uint16_t *h = xmalloc(sizeof(uint16_t) * n), *back = xmalloc(sizeof(uint16_t) * n);
    float *f = xmalloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)i;
    cpu_cast(n, ER_BF16, h, ER_F32, f, 0);
    cpu_cast(n, ER_F32, f, ER_BF16, back, 0);
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(bits_of(f[i]), (uint32_t)i << 16, "widen 0x%04llx", (long long)i);
        int nan = (i & 0x7F80) == 0x7F80 && (i & 0x7F);
        if (nan) cr_assert_eq(back[i], (uint16_t)(i | 0x40), "NaN 0x%04llx comes back quiet", (long long)i);
        else cr_assert_eq(back[i], h[i], "0x%04llx -> %a -> 0x%04x", (long long)i, f[i], back[i]);
    }
    free(h);
    free(back);
    free(f);
}

Test(kernels_cast, accumulate_rounds_once_in_every_direction) {
    const int64_t n = 1000;
    float *x = xmalloc(sizeof(float) * n), *yf = xmalloc(sizeof(float) * n);
    uint16_t *xb = xmalloc(2 * n), *yb = xmalloc(2 * n);
    rng_t r = rng_make(9, 0);
    for (int64_t i = 0; i < n; i++) {
        x[i] = rng_normal(&r);
        yf[i] = rng_normal(&r);
        xb[i] = ref_bf16(rng_normal(&r));
        yb[i] = ref_bf16(rng_normal(&r));
    }
    float *yf0 = xmalloc(sizeof(float) * n);
    uint16_t *yb0 = xmalloc(2 * n);
    memcpy(yf0, yf, sizeof(float) * n);
    memcpy(yb0, yb, 2 * n);
    cpu_cast(n, ER_F32, x, ER_BF16, yb, 1);   /* bf16 += fp32 */
    cpu_cast(n, ER_BF16, xb, ER_F32, yf, 1);  /* fp32 += bf16 */
    for (int64_t i = 0; i < n; i++) {
        float sb = float_of((uint32_t)yb0[i] << 16) + x[i];
        cr_assert_eq(yb[i], ref_bf16(sb), "bf16 += fp32 at %lld", (long long)i);
        cr_assert_eq(bits_of(yf[i]), bits_of(yf0[i] + float_of((uint32_t)xb[i] << 16)), "fp32 += bf16 at %lld", (long long)i);
    }
    free(x); free(yf); free(xb); free(yb); free(yf0); free(yb0);
}

Test(kernels_cast, copy_strided_bf16_moves_bits_and_accumulates_in_fp32) {
    /* x [5, 7, 33] read permuted as (33, 7, 5) into a packed y */
    int64_t sh[3] = {33, 7, 5}, xs[3] = {1, 33, 7 * 33}, ys[3] = {35, 5, 1}, n = 5 * 7 * 33;
    uint16_t *x = xmalloc(2 * n), *y = xmalloc(2 * n), *y0 = xmalloc(2 * n);
    rng_t r = rng_make(3, 0);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (uint16_t)rng_u32(&r);
        if ((x[i] & 0x7F80) == 0x7F80) x[i] &= 0xBFFF; /* no inf/NaN in the sums */
        y0[i] = ref_bf16(rng_normal(&r));
    }
    for (int acc = 0; acc <= 1; acc++) {
        memcpy(y, y0, 2 * n);
        cpu_copy_strided_bf16(3, sh, x, xs, y, ys, acc);
        for (int64_t a = 0; a < 33; a++)
            for (int64_t b = 0; b < 7; b++)
                for (int64_t c = 0; c < 5; c++) {
                    uint16_t xv = x[a + 33 * b + 231 * c], yv = y0[a * 35 + b * 5 + c], got = y[a * 35 + b * 5 + c];
                    uint16_t want = acc ? ref_bf16(float_of((uint32_t)yv << 16) + float_of((uint32_t)xv << 16)) : xv;
                    cr_assert_eq(got, want, "acc %d at (%lld, %lld, %lld)", acc, (long long)a, (long long)b, (long long)c);
                }
    }
    free(x); free(y); free(y0);
}

/* cast_strided is copy_strided_bf16 + cast (or cast + copy into the view) in one pass: the same bits,
 * both directions, with and without accumulate, on a permuted 4-D view (a unit inner stride on one
 * side only, and on both after a transpose that keeps the last dim). */
Test(kernels_cast, cast_strided_equals_pack_then_cast) {
    const int64_t shape[4] = {3, 4, 5, 19}, n = 3 * 4 * 5 * 19;
    const int64_t packed[4] = {4 * 5 * 19, 5 * 19, 19, 1};
    const int64_t views[2][4] = {{19, 3 * 19, 3 * 4 * 19, 1} /* [5, 4, 3, 19] permuted */,
                                 {1, 3, 3 * 4, 3 * 4 * 5} /* fully transposed: inner stride 60 */};
    uint16_t *xb = xmalloc(2 * n), *tmp = xmalloc(2 * n), *yb = xmalloc(2 * n), *want16 = xmalloc(2 * n), *got16 = xmalloc(2 * n);
    float *xf = xmalloc(4 * n), *yf = xmalloc(4 * n), *want = xmalloc(4 * n), *got = xmalloc(4 * n), *tf = xmalloc(4 * n);
    rng_t r = rng_make(9, 0);
    for (int64_t i = 0; i < n; i++) {
        xb[i] = (uint16_t)(rng_u32(&r) & 0xBFFF);
        xf[i] = float_of(rng_u32(&r) & 0xBFFFFFFFu);
        yf[i] = 2 * rng_uniform(&r) - 1;
        yb[i] = er_f32_to_bf16(2 * rng_uniform(&r) - 1);
    }
    for (int v = 0; v < 2; v++)
        for (int acc = 0; acc <= 1; acc++) {
            /* bf16 view -> packed fp32 */
            cpu_copy_strided_bf16(4, shape, xb, views[v], tmp, packed, 0);
            memcpy(want, yf, 4 * n), memcpy(got, yf, 4 * n);
            cpu_cast(n, ER_BF16, tmp, ER_F32, want, acc);
            cpu_cast_strided(4, shape, ER_BF16, xb, views[v], ER_F32, got, packed, acc);
            cr_assert_eq(memcmp(want, got, 4 * n), 0, "view %d acc %d: bf16 view -> fp32 differs", v, acc);
            /* packed fp32 -> bf16 view: cast to a packed bf16, then copy (or add) into the view */
            memcpy(want16, yb, 2 * n), memcpy(got16, yb, 2 * n);
            if (!acc) {
                cpu_cast(n, ER_F32, xf, ER_BF16, tmp, 0);
                cpu_copy_strided_bf16(4, shape, tmp, packed, want16, views[v], 0);
            } else { /* one rounding of old + new: widen the view, add, round back */
                cpu_cast_strided(4, shape, ER_BF16, yb, views[v], ER_F32, tf, packed, 0);
                for (int64_t i = 0; i < n; i++) tf[i] += xf[i];
                cpu_cast(n, ER_F32, tf, ER_BF16, tmp, 0);
                cpu_copy_strided_bf16(4, shape, tmp, packed, want16, views[v], 0);
            }
            cpu_cast_strided(4, shape, ER_F32, xf, packed, ER_BF16, got16, views[v], acc);
            cr_assert_eq(memcmp(want16, got16, 2 * n), 0, "view %d acc %d: fp32 -> bf16 view differs", v, acc);
        }
    free(xb), free(tmp), free(yb), free(want16), free(got16), free(xf), free(yf), free(want), free(got), free(tf);
}
