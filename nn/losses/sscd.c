/* sscd.c — SSCD InfoNCE + entropy loss (nn/ops on any device; a double-precision host reference), and
 * its head. */
#include "nn/losses/sscd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/ops.h"
#include "nn/base/rng.h"

double sscd_loss_host(const float *e, int N, int d, const uint8_t *match, double tau,
                      double entropy_weight, int per_anchor_mean, double *grad, sscd_stats *st) {
    double *S = xmalloc((size_t)N * N * sizeof(double));
    double *G = xcalloc((size_t)N * N, sizeof(double)); /* dloss/dS */
    for (int i = 0; i < N; i++)
        for (int j = i; j < N; j++) {
            double s = 0;
            for (int k = 0; k < d; k++) s += (double)e[(size_t)i * d + k] * e[(size_t)j * d + k];
            S[(size_t)i * N + j] = S[(size_t)j * N + i] = s;
        }
    double infonce = 0, ent = 0, pos_sum = 0, neg_sum = 0, nn_sum = 0;
    long npos = 0, nneg = 0;
    int anchors = 0, ent_rows = 0;
    for (int i = 0; i < N; i++) {
        int np = 0;
        for (int j = 0; j < N; j++) if (j != i && match[(size_t)i * N + j]) np++;
        if (np > 0) anchors++;
    }
    for (int i = 0; i < N; i++) {
        const double *Si = S + (size_t)i * N;
        const uint8_t *Mi = match + (size_t)i * N;
        double Z = 0;
        int np = 0, best = -1;
        for (int k = 0; k < N; k++) {
            if (Mi[k]) { if (k != i) { np++; pos_sum += Si[k]; npos++; } continue; }
            Z += exp(Si[k] / tau);
            neg_sum += Si[k]; nneg++;
            if (best < 0 || Si[k] > Si[best]) best = k;
        }
        if (np > 0) {
            double w = per_anchor_mean ? 1.0 / ((double)np * anchors) : 1.0 / N;
            for (int j = 0; j < N; j++) {
                if (j == i || !Mi[j]) continue;
                double lij = exp(Si[j] / tau), den = lij + Z + 1e-6;
                infonce += w * (-(Si[j] / tau) + log(den));
                /* d/dS_ij of -S_ij/tau + log(den) */
                G[(size_t)i * N + j] += w * (-1.0 / tau + lij / (tau * den));
                for (int k = 0; k < N; k++)
                    if (!Mi[k]) G[(size_t)i * N + k] += w * exp(Si[k] / tau) / (tau * den);
            }
        }
        if (best >= 0) {
            double s = Si[best], q = 2 - 2 * s;
            nn_sum += s;
            ent_rows++;
            if (q > 1e-6) {
                ent += -0.5 * log(q);
                /* d(-0.5 log(2 - 2s))/ds = 1 / (2 - 2s), scaled below by weight / N */
                G[(size_t)i * N + best] += entropy_weight / (double)N * (1.0 / q);
            } else {
                ent += -0.5 * log(1e-6);
            }
        }
    }
    ent /= N; /* torch .mean() over the N rows (every row has a negative in practice) */
    double total = infonce + entropy_weight * ent;
    if (grad) {
        /* S = E E^T  =>  dE = (G + G^T) E */
        memset(grad, 0, (size_t)N * d * sizeof(double));
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                double g = G[(size_t)i * N + j] + G[(size_t)j * N + i];
                if (g == 0) continue;
                for (int k = 0; k < d; k++) grad[(size_t)i * d + k] += g * e[(size_t)j * d + k];
            }
    }
    if (st) {
        st->infonce = infonce; st->entropy = ent; st->total = total;
        st->pos_sim = npos ? pos_sum / npos : 0;
        st->neg_sim = nneg ? neg_sum / nneg : 0;
        st->nn_sim = ent_rows ? nn_sum / ent_rows : 0;
    }
    free(S);
    free(G);
    return total;
}

/* Host statistics of the similarity matrix (logging only: N x N floats downloaded once). */
static void sim_stats(const float *S, int N, const uint8_t *match, sscd_stats *st) {
    double pos = 0, neg = 0, nn = 0;
    long np = 0, nneg = 0, rows = 0;
    for (int i = 0; i < N; i++) {
        int best = -1;
        for (int k = 0; k < N; k++) {
            float v = S[(size_t)i * N + k];
            if (match[(size_t)i * N + k]) { if (k != i) { pos += v; np++; } continue; }
            neg += v; nneg++;
            if (best < 0 || v > S[(size_t)i * N + best]) best = k;
        }
        if (best >= 0) { nn += S[(size_t)i * N + best]; rows++; }
    }
    st->pos_sim = np ? pos / np : 0;
    st->neg_sim = nneg ? neg / nneg : 0;
    st->nn_sim = rows ? nn / rows : 0;
}

/* The loss from nn/ops on e's device (autograd gives the gradient). Host work is only the N x N
 * masks built from `match` (one upload each). In log space, with Ls = S / tau:
 *   LZ_i = logsumexp({Ls_ik : k in Neg(i)} + {log 1e-6})      (a log_softmax over N + 1 columns)
 *   -log p_ij = logsumexp(Ls_ij, LZ_i) - Ls_ij = -log_softmax([Ls_ij, LZ_i])[0]
 * so no exp overflows or underflows to log(0) for any tau (the host reference works in double). */
static tensor *sscd_graph(tensor *e, const uint8_t *match, double tau, double entropy_weight, int per_anchor_mean,
                          tensor **infonce_out, tensor **entropy_out, tensor **S_out) {
    if (!e) return NULL;
    if (e->ndim != 2) {
        er_fail(ER_INPUT, "sscd_loss: embeddings must be [N, d]");
        return NULL;
    }
    if (!(tau > 0)) {
        er_fail(ER_INPUT, "sscd_loss: tau must be > 0 (got %g)", tau);
        return NULL;
    }
    int N = (int)e->shape[0], dev = e->device;
    /* masks: offneg (-1e30 on non-negatives: drops them from the logsumexp), posw (weight of each
     * positive pair), bigneg (-8 on non-negatives so the row max over negatives ignores them; unit
     * embeddings have S in [-1, 1]), roww (1/N on rows with a negative) */
    float *offneg = xmalloc((size_t)N * N * sizeof(float)), *posw = xcalloc((size_t)N * N, sizeof(float));
    float *bigneg = xmalloc((size_t)N * N * sizeof(float)), *roww = xmalloc((size_t)N * sizeof(float));
    int anchors = 0;
    for (int i = 0; i < N; i++) {
        int np = 0;
        for (int j = 0; j < N; j++) if (j != i && match[(size_t)i * N + j]) np++;
        if (np > 0) anchors++;
    }
    for (int i = 0; i < N; i++) {
        int np = 0, nneg = 0;
        for (int j = 0; j < N; j++) {
            int m = match[(size_t)i * N + j] != 0;
            offneg[(size_t)i * N + j] = m ? -1e30f : 0.0f;
            bigneg[(size_t)i * N + j] = m ? -8.0f : 0.0f;
            nneg += !m;
            if (m && j != i) np++;
        }
        float w = np > 0 ? (float)(per_anchor_mean ? 1.0 / ((double)np * anchors) : 1.0 / N) : 0.0f;
        for (int j = 0; j < N; j++)
            if (j != i && match[(size_t)i * N + j]) posw[(size_t)i * N + j] = w;
        roww[i] = nneg > 0 ? (float)(1.0 / N) : 0.0f;
    }
    tensor *toff = tensor_upload(dev, 2, SHAPE(N, N), offneg), *tpos = tensor_upload(dev, 2, SHAPE(N, N), posw);
    tensor *tbig = tensor_upload(dev, 2, SHAPE(N, N), bigneg), *trow = tensor_upload(dev, 1, SHAPE(N), roww);
    tensor *leps = tensor_empty(dev, 2, SHAPE(N, 1));
    if (leps) tensor_fill(leps, (float)log(1e-6));
    free(offneg); free(posw); free(bigneg); free(roww);

    tensor *S = op_matmul(e, e, 0, 1);                                   /* [N,N] */
    tensor *Ls = op_mul_scalar(S, (float)(1.0 / tau));
    tensor *negs[2] = {op_add(Ls, toff), leps};
    tensor *row = op_concat(2, negs, 1);                                 /* [N,N+1] */
    tensor *LZ = op_sub(op_slice(row, 1, N, N + 1), op_slice(op_log_softmax(row, -1), 1, N, N + 1)); /* [N,1] */
    tensor *pair[2] = {op_unsqueeze(Ls, 2), op_unsqueeze(op_expand(LZ, 2, SHAPE(N, N)), 2)};
    tensor *lp = op_log_softmax(op_concat(2, pair, 2), -1);             /* [N,N,2] */
    tensor *nll = op_neg(op_reshape(op_slice(lp, 2, 0, 1), 2, SHAPE(N, N))); /* -log p_ij */
    tensor *infonce = op_sum_all(op_mul(nll, tpos));
    /* KoLeo: -0.5 log max(2 - 2 max_{k in Neg(i)} S_ik, 1e-6), mean over the N rows */
    tensor *nn = op_max(op_add(S, tbig), -1, 0);                         /* [N] */
    tensor *q = op_clamp(op_affine(nn, -2.0f, 2.0f), 1e-6f, 1e30f);
    tensor *entropy = op_sum_all(op_mul(op_mul_scalar(op_log(q), -0.5f), trow));
    *infonce_out = infonce;
    *entropy_out = entropy;
    *S_out = S;
    return op_add(infonce, op_mul_scalar(entropy, (float)entropy_weight));
}

tensor *sscd_loss(tensor *e, const uint8_t *match, double tau, double entropy_weight, int per_anchor_mean,
                  sscd_stats *st) {
    tensor *infonce, *entropy, *S;
    tensor *loss = sscd_graph(e, match, tau, entropy_weight, per_anchor_mean, &infonce, &entropy, &S);
    if (loss && st) {
        const int N = (int)e->shape[0];
        st->infonce = tensor_item(infonce);
        st->entropy = tensor_item(entropy);
        st->total = tensor_item(loss);
        float *hs = xmalloc((size_t)N * N * sizeof(float));
        tensor_to_host(S, hs);
        sim_stats(hs, N, match, st);
        free(hs);
    }
    return loss;
}

tensor *sscd_loss_terms(tensor *e, const uint8_t *match, double tau, double entropy_weight, int per_anchor_mean,
                        sscd_terms *terms) {
    tensor *infonce, *entropy, *S;
    tensor *loss = sscd_graph(e, match, tau, entropy_weight, per_anchor_mean, &infonce, &entropy, &S);
    if (!loss) return NULL;
    const int N = (int)e->shape[0];
    float *w = xcalloc((size_t)N * N, sizeof *w);
    long np = 0;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++) np += k != i && match[(size_t)i * N + k];
    for (int i = 0; i < N && np; i++)
        for (int k = 0; k < N; k++)
            if (k != i && match[(size_t)i * N + k]) w[(size_t)i * N + k] = (float)(1.0 / np);
    tensor *tw = tensor_upload(e->device, 2, SHAPE(N, N), w);
    free(w);
    terms->infonce = infonce;
    terms->entropy = entropy;
    NO_GRAD { terms->pos_sim = op_sum_all(op_mul(S, tw)); } /* logging only: not on the tape */
    return terms->pos_sim ? loss : NULL;
}

void sscd_match_from_ids(const int *ids, int N, uint8_t *match) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) match[(size_t)i * N + j] = ids[i] == ids[j];
}

void sscd_match_from_mix(const int *a, const int *b, const float *lam, int N, uint8_t *match) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            /* Y_i . Y_j > 0 iff the two samples share a source with nonzero weight */
            int ia[2] = {a[i], b[i]}, ja[2] = {a[j], b[j]};
            float iw[2] = {lam[i], 1 - lam[i]}, jw[2] = {lam[j], 1 - lam[j]};
            double dot = 0;
            for (int x = 0; x < 2; x++)
                for (int y = 0; y < 2; y++)
                    if (ia[x] == ja[y]) dot += (double)iw[x] * jw[y];
            match[(size_t)i * N + j] = dot > 0;
        }
}
