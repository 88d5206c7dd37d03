/* bow_cv.c — see bow_cv.h. */
#include "infer/perceived/bow_cv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/perceived/bow_model.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

int bow_cv_run(float *const *desc, const int *ndesc, const int64_t *patient, int n, const likert_gt *gt,
               const dsift_cfg *sift, const bow_cv_cfg *cfg, bow_cv_result *res) {
    memset(res, 0, sizeof *res);
    if (cfg->q < 2) return er_fail(ER_INPUT, "bow cv: --q must be >= 2");
    if (cfg->m < 1) return er_fail(ER_INPUT, "bow cv: --m must be >= 1");
    const int np = gt->npairs;
    int *ia = xmalloc((np ? np : 1) * sizeof(int)), *ib = xmalloc((np ? np : 1) * sizeof(int));
    for (int k = 0; k < np; k++) {
        if (gt->pairs[k].a < 0 || gt->pairs[k].a >= n || gt->pairs[k].b < 0 || gt->pairs[k].b >= n) {
            free(ia); free(ib);
            return er_fail(ER_INPUT, "ground truth: couple (%lld,%lld) names an item outside 0..%d (ids are manifest rows)",
                           (long long)gt->pairs[k].a, (long long)gt->pairs[k].b, n - 1);
        }
        ia[k] = (int)gt->pairs[k].a;
        ib[k] = (int)gt->pairs[k].b;
    }
    /* dense patient ids */
    int64_t maxp = -1;
    for (int i = 0; i < n; i++) if (patient[i] > maxp) maxp = patient[i];
    int npat = (int)maxp + 1;
    int *perm = xmalloc((npat ? npat : 1) * sizeof(int)), *fold_of_pat = xmalloc((npat ? npat : 1) * sizeof(int));
    int *fold = xmalloc(n * sizeof(int)), *tr_sim = xmalloc((np ? np : 1) * sizeof(int));
    int *tr_a = xmalloc((np ? np : 1) * sizeof(int)), *tr_b = xmalloc((np ? np : 1) * sizeof(int));
    double *sb = xmalloc((np ? np : 1) * sizeof(double)), *sa = xmalloc((np ? np : 1) * sizeof(double)), *y = xmalloc((np ? np : 1) * sizeof(double));
    float *h = NULL;
    double *w = NULL;
    int *tr_idx = xmalloc(n * sizeof(int));
    float **trd = xmalloc(n * sizeof(float *));
    int *trn = xmalloc(n * sizeof(int));
    int rc = ER_OK;
    for (int rep = 0; rep < cfg->m && !rc; rep++) {
        rng_t r = rng_make(cfg->seed, rng_stream(RNG_SHUFFLE, 0xc7, (uint32_t)rep));
        for (int p = 0; p < npat; p++) perm[p] = p;
        rng_shuffle(&r, perm, npat);
        for (int t = 0; t < npat; t++) fold_of_pat[perm[t]] = t % cfg->q;
        for (int i = 0; i < n; i++) fold[i] = fold_of_pat[patient[i]];
        int ntest = 0;
        for (int f = 0; f < cfg->q && !rc; f++) {
            int ntr = 0;
            for (int i = 0; i < n; i++) if (fold[i] != f) { trd[ntr] = desc[i]; trn[ntr] = ndesc[i]; tr_idx[ntr++] = i; }
            bow_vocab v;
            rc = bow_vocab_train(trd, trn, ntr, cfg->k, cfg->max_desc, cfg->iters, cfg->seed + 1000003ull * rep + f, sift, &v);
            if (rc) break;
            const int K = v.k;
            if (!h) { h = xmalloc((size_t)n * K * sizeof(float)); w = xmalloc(K * sizeof(double)); }
            for (int i = 0; i < n; i++) bow_signature(&v, desc[i], ndesc[i], h + (size_t)i * K);
            bow_vocab_free(&v);
            int nt = 0, ns = 0, nd = 0;
            for (int k = 0; k < np; k++) {
                if (fold[ia[k]] == f || fold[ib[k]] == f || gt->pairs[k].score == 0) continue;
                tr_a[nt] = ia[k]; tr_b[nt] = ib[k]; tr_sim[nt] = gt->pairs[k].score > 0;
                ns += tr_sim[nt]; nd += !tr_sim[nt]; nt++;
            }
            for (int k = 0; k < K; k++) w[k] = 1.0;
            if (ns > 0 && nd > 0) {
                chi2_pairs cp = {K, h, nt, tr_a, tr_b, tr_sim};
                chi2_cfg mc = cfg->metric;
                mc.b = chi2_margin(&cp);
                double e0, e1;
                int it = chi2_learn(&cp, &mc, w, &e0, &e1);
                if (cfg->verbose)
                    fprintf(stderr, "bow cv: repetition %d fold %d: %d training couples (%d S / %d D), b = %.4f, cost %.4f -> %.4f in %d iterations\n",
                            rep + 1, f + 1, nt, ns, nd, mc.b, e0, e1, it);
            }
            for (int k = 0; k < np; k++) {
                if (fold[ia[k]] != f || fold[ib[k]] != f) continue;
                const float *ha = h + (size_t)ia[k] * K, *hb = h + (size_t)ib[k] * K;
                sb[ntest] = -chi2_wdist(ha, hb, NULL, K);
                sa[ntest] = -chi2_wdist(ha, hb, w, K);
                y[ntest] = gt->pairs[k].score;
                ntest++;
            }
        }
        if (rc) break;
        if (ntest < 4) { if (cfg->verbose) fprintf(stderr, "bow cv: repetition %d: only %d test couples, skipped\n", rep + 1, ntest); continue; }
        corr_summary b, a;
        corr_summary_compute(sb, y, ntest, &b);
        corr_summary_compute(sa, y, ntest, &a);
        double tb = corr_kendall_tau_b(sb, sa, ntest);
        if (!isfinite(b.kendall) || !isfinite(a.kendall) || !isfinite(tb)) continue;
#define ACC(dst, src) dst.pearson += src.pearson; dst.spearman += src.spearman; dst.kendall += src.kendall; \
        dst.se_pearson += src.se_pearson; dst.se_spearman += src.se_spearman; dst.se_kendall += src.se_kendall
        ACC(res->before, b);
        ACC(res->after, a);
#undef ACC
        res->tau_between += tb;
        res->n_test += ntest;
        res->reps_used++;
        if (cfg->verbose)
            fprintf(stderr, "bow cv: repetition %d: %d test couples, tau before %.4f after %.4f\n", rep + 1, ntest, b.kendall, a.kendall);
    }
    if (!rc && res->reps_used == 0) rc = er_fail(ER_INPUT, "bow cv: no repetition had enough test couples (folds too small for this ground truth)");
    if (!rc) {
        double R = res->reps_used;
        corr_summary *cs[2] = {&res->before, &res->after};
        for (int t = 0; t < 2; t++) {
            cs[t]->pearson /= R; cs[t]->spearman /= R; cs[t]->kendall /= R;
            cs[t]->se_pearson /= R; cs[t]->se_spearman /= R; cs[t]->se_kendall /= R;
            cs[t]->n = (int)lround(res->n_test / R);
        }
        res->tau_between /= R;
        res->n_test /= R;
        res->steiger = steiger_z1star(res->after.kendall, res->before.kendall, res->tau_between, res->after.n);
    }
    free(ia); free(ib); free(perm); free(fold_of_pat); free(fold); free(tr_sim); free(tr_a); free(tr_b);
    free(sb); free(sa); free(y); free(h); free(w); free(tr_idx); free(trd); free(trn);
    return rc;
}
