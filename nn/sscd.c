/* sscd.c — SSCD InfoNCE + entropy loss (double precision, host) as an autograd op, and its head. */
#include "nn/sscd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/base.h"
#include "nn/init.h"
#include "nn/ops.h"
#include "nn/rng.h"

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

/* Backward: grad_e += dL * saved gradient (stored in the node's saved[0], host layout). */
static void sscd_backward(tape_node *n) {
    tensor *e = n->in[0];
    tensor *ge = grad_buf(e);
    if (!ge) return;
    float gout;
    tensor_to_host(n->out->grad, &gout);
    int64_t cnt = tensor_numel(e);
    const double *g = n->ctx;
    float *host = xmalloc(cnt * sizeof(float));
    tensor_to_host(ge, host);
    for (int64_t i = 0; i < cnt; i++) host[i] += (float)(gout * g[i]);
    tensor_copy_from_host(ge, host);
    free(host);
}

tensor *sscd_loss(tensor *e, const uint8_t *match, double tau, double entropy_weight, int per_anchor_mean,
                  sscd_stats *st) {
    if (!e) return NULL;
    if (e->ndim != 2) {
        er_fail(ER_INPUT, "sscd_loss: embeddings must be [N, d]");
        return NULL;
    }
    int N = (int)e->shape[0], d = (int)e->shape[1];
    float *host = xmalloc((size_t)N * d * sizeof(float));
    tensor_to_host(e, host);
    int need_grad = grad_enabled() && (e->flags & T_REQUIRES_GRAD);
    double *g = need_grad ? arena_alloc_host(arena_default(DEV_CPU), (size_t)N * d * sizeof(double)) : NULL;
    double v = sscd_loss_host(host, N, d, match, tau, entropy_weight, per_anchor_mean, g, st);
    free(host);
    float vf = (float)v;
    tensor *out = tensor_empty(e->device, 0, NULL);
    tensor_copy_from_host(out, &vf);
    tensor *ins[1] = {e};
    tape_node *n = need_grad ? tape_record("sscd_loss", sscd_backward, out, 1, ins) : NULL;
    if (n) n->ctx = g;
    return out;
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

void sscd_head_init(sscd_head *h, int in, int out, uint64_t seed, param_list *pl) {
    memset(h, 0, sizeof *h);
    h->in = in;
    h->out = out;
    if (out <= 0) return;
    h->w = tensor_param("head.weight", 2, SHAPE(out, in));
    params_add(pl, h->w);
    rng_t r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)pl->n, 2));
    init_xavier_uniform(h->w->data, tensor_numel(h->w), in, out, 1.0f, &r);
    h->b = tensor_param("head.bias", 1, SHAPE(out));
    params_add(pl, h->b);
}

tensor *sscd_descriptor(const sscd_head *h, tensor *cls) {
    if (h && h->out > 0) cls = op_linear(cls, h->w, h->b);
    return op_l2_normalize(cls, -1, 1e-12f);
}
