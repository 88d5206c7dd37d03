/* Philox4x32-10 against the Random123 known-answer vectors, plus the generator's contracts. */
#include "tests/test_util.h"
#include "nn/base/rng.h"

Test(rng, philox_known_answers) {
    const uint32_t cases[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int c = 0; c < 3; c++) {
        uint32_t out[4];
        philox4x32_10(cases[c], cases[c] + 4, out);
        for (int i = 0; i < 4; i++) cr_expect_eq(out[i], cases[c][6 + i], "case %d word %d: %08x", c, i, out[i]);
    }
}

Test(rng, sequential_equals_counter_access) {
    rng_t r = rng_make(1234, rng_stream(RNG_DROPOUT, 7, 3));
    for (uint64_t i = 0; i < 37; i++)
        cr_assert_eq(rng_u32(&r), rng_at(1234, rng_stream(RNG_DROPOUT, 7, 3), i));
}

Test(rng, streams_differ_and_uniform_moments) {
    rng_t a = rng_make(1, rng_stream(RNG_INIT, 0, 0)), b = rng_make(1, rng_stream(RNG_INIT, 0, 1));
    int same = 0;
    for (int i = 0; i < 64; i++) same += rng_u32(&a) == rng_u32(&b);
    cr_expect_lt(same, 2);
    rng_t r = rng_make(42, 0);
    double s = 0, s2 = 0, n = 200000, ns = 0, ns2 = 0;
    for (int i = 0; i < n; i++) {
        float u = rng_uniform(&r);
        cr_assert(u >= 0.0f && u < 1.0f);
        s += u; s2 += (double)u * u;
        float z = rng_normal(&r);
        ns += z; ns2 += (double)z * z;
    }
    cr_expect_float_eq(s / n, 0.5, 0.005);
    cr_expect_float_eq(s2 / n - (s / n) * (s / n), 1.0 / 12, 0.002);
    cr_expect_float_eq(ns / n, 0.0, 0.01);
    cr_expect_float_eq(ns2 / n, 1.0, 0.02);
}

Test(rng, below_is_in_range_and_shuffle_is_permutation) {
    rng_t r = rng_make(9, 9);
    int hist[7] = {0};
    for (int i = 0; i < 70000; i++) {
        uint32_t x = rng_below(&r, 7);
        cr_assert_lt(x, 7u);
        hist[x]++;
    }
    for (int i = 0; i < 7; i++) cr_expect(hist[i] > 9500 && hist[i] < 10500, "bucket %d: %d", i, hist[i]);
    int v[100], seen[100] = {0};
    for (int i = 0; i < 100; i++) v[i] = i;
    rng_shuffle(&r, v, 100);
    for (int i = 0; i < 100; i++) seen[v[i]]++;
    for (int i = 0; i < 100; i++) cr_assert_eq(seen[i], 1);
}
