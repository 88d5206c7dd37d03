/* SSCD InfoNCE + entropy: value and gradient against an independent torch float64 computation
 * (tests/nn/losses/make_sscd_refs.py -> sscd_refs.h). */
#include <math.h>
#include <stdlib.h>

#include "nn/losses/sscd.h"
#include "tests/nn/losses/sscd_refs.h"
#include "tests/test_util.h"

static void check(const float *e, int N, int D, const unsigned char *match, double tau, double lam, int mixup,
                  double loss, double infonce, double entropy, const double *grad) {
    double *g = malloc(sizeof(double) * N * D);
    sscd_stats st;
    double v = sscd_loss_host(e, N, D, match, tau, lam, mixup, g, &st);
    cr_assert(fabs(v - loss) < 1e-9 * fmax(1, fabs(loss)), "loss %.12g vs torch %.12g", v, loss);
    cr_assert(fabs(st.infonce - infonce) < 1e-9 * fmax(1, fabs(infonce)), "infonce %.12g vs %.12g", st.infonce, infonce);
    cr_assert(fabs(st.entropy - entropy) < 1e-9, "entropy %.12g vs %.12g", st.entropy, entropy);
    for (int i = 0; i < N * D; i++)
        cr_assert(fabs(g[i] - grad[i]) < 1e-8 * fmax(1, fabs(grad[i])), "grad[%d] %.12g vs %.12g", i, g[i], grad[i]);
    free(g);
}

Test(endofinder_sscd, infonce_entropy_two_views) {
    check(REF_IDS_E, REF_IDS_N, REF_IDS_D, REF_IDS_MATCH, REF_IDS_TAU, REF_IDS_LAMBDA, REF_IDS_MIXUP, REF_IDS_LOSS,
          REF_IDS_INFONCE, REF_IDS_ENTROPY, REF_IDS_GRAD);
}

Test(endofinder_sscd, several_positives_per_anchor) {
    check(REF_MULTI_E, REF_MULTI_N, REF_MULTI_D, REF_MULTI_MATCH, REF_MULTI_TAU, REF_MULTI_LAMBDA, REF_MULTI_MIXUP,
          REF_MULTI_LOSS, REF_MULTI_INFONCE, REF_MULTI_ENTROPY, REF_MULTI_GRAD);
}

Test(endofinder_sscd, mixup_extra_positives) {
    unsigned char m[64];
    sscd_match_from_mix(REF_MIX_A, REF_MIX_B, REF_MIX_LAM, 8, m);
    for (int i = 0; i < 64; i++) cr_assert_eq(m[i], REF_MIX_MATCH[i], "match[%d]", i);
    check(REF_MIX_E, REF_MIX_N, REF_MIX_D, REF_MIX_MATCH, REF_MIX_TAU, REF_MIX_LAMBDA, REF_MIX_MIXUP, REF_MIX_LOSS,
          REF_MIX_INFONCE, REF_MIX_ENTROPY, REF_MIX_GRAD);
}

Test(endofinder_sscd, match_from_ids) {
    int ids[4] = {3, 1, 3, 2};
    unsigned char m[16];
    sscd_match_from_ids(ids, 4, m);
    cr_assert(m[0] && m[2] && m[8] && !m[1] && !m[3] && m[5] && m[15] && !m[14]);
}
