/* PGCon / WINCon loss (nn/losses/pgcon_loss.h): the InfoNCE value and gradients against a torch
 * float64 reference written from the released code (make_pgcon_refs.py), a hand-computed case, the
 * negative sampler (never i, no repeats, uniform, deterministic) and the memory update. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/losses/pgcon_loss.h"
#include "nn/ops.h"
#include "tests/nn/losses/pgcon_refs.h"
#include "tests/test_util.h"

static double relerr(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-3); }

/* the differentiable loss (fp32, autograd) from raw vectors: normalised by op_l2_normalize */
static double device_loss(int with_extra, float *ga, float *gp, float *ge) {
    tensor *a = tensor_from_host_new(2, SHAPE(PG_B, PG_D), PG_A), *p = tensor_from_host_new(2, SHAPE(PG_B, PG_D), PG_P);
    tensor *e = tensor_from_host_new(2, SHAPE(PG_E, PG_D), PG_EXTRA);
    a->flags |= T_REQUIRES_GRAD; p->flags |= T_REQUIRES_GRAD; e->flags |= T_REQUIRES_GRAD;
    float *nn = malloc(sizeof(float) * PG_B * PG_K * PG_D);
    for (int r = 0; r < PG_B * PG_K; r++) { /* the bank holds unit rows */
        double s = 0;
        for (int d = 0; d < PG_D; d++) s += (double)PG_NEGS[r * PG_D + d] * PG_NEGS[r * PG_D + d];
        for (int d = 0; d < PG_D; d++) nn[r * PG_D + d] = (float)(PG_NEGS[r * PG_D + d] / sqrt(s));
    }
    tensor *negs = tensor_upload(DEV_CPU, 3, SHAPE(PG_B, PG_K, PG_D), nn);
    tensor *pos;
    tensor *l = pgcon_infonce(op_l2_normalize(a, -1, 1e-12f), op_l2_normalize(p, -1, 1e-12f), negs,
                              with_extra ? op_l2_normalize(e, -1, 1e-12f) : NULL, (float)PG_TAU, &pos);
    cr_assert(l, "%s", er_msg());
    /* the logged positive similarity: the mean cosine of a_i and p_i, computed here in double */
    double cs = 0;
    for (int i = 0; i < PG_B; i++) {
        double na = 0, np = 0, dot = 0;
        for (int d = 0; d < PG_D; d++) {
            na += (double)PG_A[i * PG_D + d] * PG_A[i * PG_D + d];
            np += (double)PG_P[i * PG_D + d] * PG_P[i * PG_D + d];
            dot += (double)PG_A[i * PG_D + d] * PG_P[i * PG_D + d];
        }
        cs += dot / sqrt(na * np);
    }
    cr_assert(pos && tensor_numel(pos) == 1 && fabs(tensor_item(pos) - cs / PG_B) < 1e-5, "pos_sim %g, want %g",
              pos ? tensor_item(pos) : NAN, cs / PG_B);
    double v = tensor_item(l);
    cr_assert_eq(backward(l), 0, "%s", er_msg());
    tensor_to_host(a->grad, ga);
    tensor_to_host(p->grad, gp);
    if (with_extra) tensor_to_host(e->grad, ge);
    else cr_assert(!e->grad || tensor_item(e->grad) == 0);
    nn_step_end();
    tensor_free(a); tensor_free(p); tensor_free(e);
    free(nn);
    return v;
}

static void check(const char *name, int with_extra, double ref, const double *ra, const double *rp, const double *re) {
    float ga[PG_B * PG_D], gp[PG_B * PG_D], ge[PG_E * PG_D];
    double ha[PG_B * PG_D], hp[PG_B * PG_D], he[PG_E * PG_D];
    double v = device_loss(with_extra, ga, gp, ge);
    double h = pgcon_infonce_host(PG_A, PG_P, PG_NEGS, PG_K, with_extra ? PG_EXTRA : NULL, with_extra ? PG_E : 0, PG_B,
                                  PG_D, PG_TAU, ha, hp, with_extra ? he : NULL);
    cr_log_info("%s: torch %.9f, ops %.9f, host reference %.12f", name, ref, v, h);
    cr_assert(relerr(h, ref) < 1e-12, "%s host reference %.15g vs torch %.15g", name, h, ref);
    cr_assert(relerr(v, ref) < 1e-5, "%s loss %.9g vs torch %.9g", name, v, ref);
    double gscale = 0;
    for (int i = 0; i < PG_B * PG_D; i++) gscale = fmax(gscale, fmax(fabs(ra[i]), fabs(rp[i])));
    for (int i = 0; i < PG_B * PG_D; i++) {
        cr_assert(fabs(ha[i] - ra[i]) < 1e-10 * gscale && fabs(hp[i] - rp[i]) < 1e-10 * gscale, "%s host grad %d", name, i);
        cr_assert(fabs(ga[i] - ra[i]) < 2e-4 * gscale, "%s d/da[%d] %g vs %g", name, i, ga[i], ra[i]);
        cr_assert(fabs(gp[i] - rp[i]) < 2e-4 * gscale, "%s d/dp[%d] %g vs %g", name, i, gp[i], rp[i]);
    }
    for (int i = 0; re && i < PG_E * PG_D; i++) {
        cr_assert(fabs(he[i] - re[i]) < 1e-10 * gscale, "%s host grad extra %d", name, i);
        cr_assert(fabs(ge[i] - re[i]) < 2e-4 * gscale, "%s d/dextra[%d] %g vs %g", name, i, ge[i], re[i]);
    }
}

Test(pgcon_loss, infonce_matches_torch) { check("PGCon", 0, PGCON_LOSS, PGCON_GA, PGCON_GP, NULL); }

/* WINCon: the extra negatives (the batch's WIN views) get a gradient, and raise the loss */
Test(pgcon_loss, wincon_extra_negatives_get_gradient) {
    check("WINCon", 1, WINCON_LOSS, WINCON_GA, WINCON_GP, WINCON_GE);
    double g = 0;
    for (int i = 0; i < PG_E * PG_D; i++) g += fabs(WINCON_GE[i]);
    cr_assert(g > 1e-3 && WINCON_LOSS > PGCON_LOSS);
}

/* by hand: a = p = (1, 0), one negative (0, 1), tau 1 -> -log(e / (e + 1)) */
Test(pgcon_loss, hand_computed) {
    const float a[2] = {1, 0}, n[2] = {0, 1};
    double v = pgcon_infonce_host(a, a, n, 1, NULL, 0, 1, 2, 1.0, NULL, NULL, NULL);
    cr_assert(fabs(v - log1p(exp(-1.0))) < 1e-15, "%.17g", v);
}

Test(pgcon_loss, negatives_exclude_i_without_repeats_and_are_uniform) {
    enum { N = 50, K = 20, DRAWS = 4000 };
    uint8_t seen[N] = {0};
    int32_t out[K], again[K];
    int count[N] = {0};
    for (int d = 0; d < DRAWS; d++) {
        int i = d % N;
        rng_t r = rng_make(5, (uint64_t)d), r2 = rng_make(5, (uint64_t)d);
        pgcon_sample_negatives(&r, N, i, K, seen, out);
        pgcon_sample_negatives(&r2, N, i, K, seen, again);
        cr_assert(memcmp(out, again, sizeof out) == 0, "not a function of the stream");
        uint8_t hit[N] = {0};
        for (int j = 0; j < K; j++) {
            cr_assert(out[j] >= 0 && out[j] < N && out[j] != i, "draw %d: index %d (i = %d)", d, out[j], i);
            cr_assert(!hit[out[j]], "draw %d repeats %d", d, out[j]);
            hit[out[j]] = 1;
            count[out[j]]++;
        }
        for (int j = 0; j < N; j++) cr_assert(!seen[j], "scratch not cleared");
    }
    /* each index is eligible in DRAWS (N-1)/N draws and taken with probability K/(N-1) */
    double expect = (double)DRAWS * K / N, chi2 = 0;
    for (int j = 0; j < N; j++) chi2 += (count[j] - expect) * (count[j] - expect) / expect;
    cr_log_info("negatives: chi2 %.1f over %d indices", chi2, N);
    cr_assert(chi2 < 100, "chi2 %.1f: not uniform", chi2); /* 49 dof: p < 1e-4 above ~90 */
    /* k = N - 1: every other index exactly once */
    int32_t all[N - 1];
    rng_t r = rng_make(1, 2);
    pgcon_sample_negatives(&r, N, 7, N - 1, seen, all);
    int sum = 0;
    for (int j = 0; j < N - 1; j++) sum += all[j];
    cr_assert_eq(sum, N * (N - 1) / 2 - 7);
}

Test(pgcon_loss, memory_update) {
    float M[3 * 2] = {1, 0, 0, 1, 0.6f, 0.8f};
    const float z[2 * 2] = {0, 3, 4, 0}; /* rows 0 and 2, not normalised */
    const int idx[2] = {0, 2};
    pgcon_memory_update(M, 2, idx, z, 2, 0.5f);
    /* row 0: normalize(0.5 (1, 0) + 0.5 (0, 1)) = (1, 1) / sqrt 2; row 2: normalize((0.8, 0.4)) */
    cr_assert(fabsf(M[0] - (float)M_SQRT1_2) < 1e-7 && fabsf(M[1] - (float)M_SQRT1_2) < 1e-7);
    cr_assert(M[2] == 0 && M[3] == 1, "row 1 untouched");
    cr_assert(fabsf(M[4] - 0.8f / sqrtf(0.8f)) < 1e-6 && fabsf(M[5] - 0.4f / sqrtf(0.8f)) < 1e-6, "%g %g", M[4], M[5]);
    /* a row met twice takes both updates, in order */
    float A[2] = {1, 0};
    const float zz[4] = {0, 1, 0, 1};
    const int twice[2] = {0, 0};
    pgcon_memory_update(A, 2, twice, zz, 2, 0.5f);
    double x = 1 / sqrt(2.0), y = x; /* first update */
    double x2 = 0.5 * x, y2 = 0.5 * y + 0.5, n = sqrt(x2 * x2 + y2 * y2);
    cr_assert(fabs(A[0] - x2 / n) < 1e-6 && fabs(A[1] - y2 / n) < 1e-6);
    float rows[4];
    const int32_t pick[2] = {2, 1};
    pgcon_memory_rows(M, 2, pick, 2, rows);
    cr_assert(rows[0] == M[4] && rows[1] == M[5] && rows[2] == 0 && rows[3] == 1);
}
