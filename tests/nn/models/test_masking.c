/* MAE masking: exact keep counts, lesion patches kept first, background masked first, random
 * fallback without a mask, restore = inverse permutation, determinism; MAE patchify target order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/models/mae.h"
#include "tests/test_util.h"

Test(endofinder_masking, len_keep_matches_mae) {
    cr_assert_eq(mae_len_keep(196, 0.5), 98);
    cr_assert_eq(mae_len_keep(196, 0.75), 49);
    cr_assert_eq(mae_len_keep(16, 0.0), 16);
    cr_assert_eq(mae_len_keep(10, 0.33), 6); /* int(6.7) */
}

static void check_perm(const int32_t *sh, const int32_t *re, const float *mask, int L, int K) {
    int *seen = calloc(L, sizeof(int));
    int removed = 0;
    for (int j = 0; j < L; j++) {
        cr_assert(sh[j] >= 0 && sh[j] < L);
        cr_assert(!seen[sh[j]], "duplicate index");
        seen[sh[j]] = 1;
        cr_assert_eq(re[sh[j]], j, "ids_restore is the inverse of ids_shuffle");
        cr_assert_eq(mask[sh[j]], j < K ? 0.0f : 1.0f);
    }
    for (int l = 0; l < L; l++) removed += mask[l] == 1.0f;
    cr_assert_eq(removed, L - K, "exactly L-K removed");
    free(seen);
}

Test(endofinder_masking, random_exact_count_and_restore) {
    enum { B = 5, L = 49 };
    int K = mae_len_keep(L, 0.75);
    int32_t sh[B * L], re[B * L];
    float mask[B * L];
    mae_masking(B, L, K, NULL, NULL, 11, 3, sh, re, mask);
    for (int b = 0; b < B; b++) check_perm(sh + b * L, re + b * L, mask + b * L, L, K);
    /* per-sample noise: samples differ; same seed/step => identical; other step => different */
    cr_assert(memcmp(sh, sh + L, sizeof(int32_t) * L) != 0);
    int32_t sh2[B * L], re2[B * L];
    float mask2[B * L];
    mae_masking(B, L, K, NULL, NULL, 11, 3, sh2, re2, mask2);
    cr_assert(memcmp(sh, sh2, sizeof sh) == 0);
    mae_masking(B, L, K, NULL, NULL, 11, 4, sh2, re2, mask2);
    cr_assert(memcmp(sh, sh2, sizeof sh) != 0);
}

Test(endofinder_masking, guided_keeps_lesion_first) {
    /* 8x8 image, patch 2 -> 16 patches; lesion covers patches 5 (full), 6 (1 px), 9 (full), 10 (2 px) */
    enum { H = 8, P = 2, L = 16, B = 3 };
    float masks[B * H * H];
    memset(masks, 0, sizeof masks);
    float *m0 = masks;
    for (int y = 2; y < 6; y++)
        for (int x = 2; x < 4; x++) m0[y * H + x] = 1; /* patches (1,1) = 5 and (2,1) = 9 */
    m0[2 * H + 4] = 1;                                  /* patch (1,2) = 6: one pixel */
    m0[4 * H + 4] = 1; m0[5 * H + 5] = 1;               /* patch (2,2) = 10: two pixels */
    /* sample 1: lesion larger than the keep budget: patches 0..11 (rows 0..5) all full */
    for (int y = 0; y < 6; y++)
        for (int x = 0; x < H; x++) masks[H * H + y * H + x] = 255;
    /* sample 2: no mask */
    float scores[B * L];
    mae_patch_scores(masks, B, H, H, P, scores);
    cr_assert_float_eq(scores[5], 4.0f, 0);
    cr_assert_float_eq(scores[6], 1.0f, 0);
    cr_assert_float_eq(scores[10], 2.0f, 0);
    cr_assert_float_eq(scores[0], 0.0f, 0);
    uint8_t has[B] = {1, 1, 0};
    int K = mae_len_keep(L, 0.5);
    int32_t sh[B * L], re[B * L];
    float mask[B * L];
    mae_masking(B, L, K, scores, has, 5, 0, sh, re, mask);
    for (int b = 0; b < B; b++) check_perm(sh + b * L, re + b * L, mask + b * L, L, K);
    /* sample 0: kept in order of lesion mass: 5, 9 (4 px each, index order), 10 (2 px), 6 (1 px) */
    cr_assert_eq(sh[0], 5); cr_assert_eq(sh[1], 9); cr_assert_eq(sh[2], 10); cr_assert_eq(sh[3], 6);
    for (int l = 0; l < L; l++)
        if (scores[l] > 0) cr_assert_eq(mask[l], 0.0f, "lesion patch %d kept", l);
    /* sample 1: 12 lesion patches > K = 8: only lesion patches kept, all background masked */
    for (int l = 12; l < L; l++) cr_assert_eq(mask[L + l], 1.0f, "background patch %d masked first", l);
    for (int j = 0; j < K; j++) cr_assert(sh[L + j] < 12);
    /* sample 2 (no mask) is the plain random masking of the same (seed, step, sample) */
    int32_t rsh[B * L], rre[B * L];
    float rmask[B * L];
    mae_masking(B, L, K, NULL, NULL, 5, 0, rsh, rre, rmask);
    cr_assert(memcmp(sh + 2 * L, rsh + 2 * L, sizeof(int32_t) * L) == 0);
}

Test(endofinder_masking, background_fill_is_random) {
    /* one lesion patch; over several steps the other kept patches vary */
    enum { L = 16 };
    float scores[L] = {0};
    scores[7] = 3;
    int K = 4;
    int32_t sh[L], re[L], first[L];
    float mask[L];
    mae_masking(1, L, K, scores, NULL, 9, 0, first, re, mask);
    cr_assert_eq(first[0], 7);
    int differs = 0;
    for (int step = 1; step < 6; step++) {
        mae_masking(1, L, K, scores, NULL, 9, step, sh, re, mask);
        cr_assert_eq(sh[0], 7);
        differs |= memcmp(sh, first, sizeof(int32_t) * K) != 0;
    }
    cr_assert(differs);
}

Test(endofinder_masking, target_patch_order_and_norm_pix) {
    /* 1 image, C=2, 4x4, patch 2: target element (dy, dx, c) of patch (gy, gx) */
    float img[2 * 16];
    for (int i = 0; i < 32; i++) img[i] = (float)i;
    float t[4 * 8];
    mae_target(img, 1, 2, 4, 4, 2, 0, t);
    /* patch 1 = (gy 0, gx 1); dy 1, dx 0, c 1 -> img[c=1][y=1][x=2] = 16 + 4 + 2 = 22 */
    cr_assert_float_eq(t[1 * 8 + (1 * 2 + 0) * 2 + 1], 22.0f, 0);
    float tn[4 * 8];
    mae_target(img, 1, 2, 4, 4, 2, 1, tn);
    double mean = 0, var = 0;
    for (int j = 0; j < 8; j++) mean += t[8 + j];
    mean /= 8;
    for (int j = 0; j < 8; j++) var += (t[8 + j] - mean) * (t[8 + j] - mean);
    var /= 7;
    for (int j = 0; j < 8; j++) cr_assert_float_eq(tn[8 + j], (t[8 + j] - mean) / sqrt(var + 1e-6), 1e-5);
}
