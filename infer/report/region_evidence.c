/* region_evidence.c — see region_evidence.h. */
#include "infer/report/region_evidence.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/view_list.h"
#include "kernels/gemm.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/models/resnet.h"
#include "nn/models/resnet_model.h"
#include "nn/models/scene_model.h"
#include "nn/models/vit_model.h"
#include "nn/ops.h"

enum { REGION_MAX_VIEWS = 16 }; /* views of a case read (the page shows as many) */

static vit *model_vit(const model *m) {
    vit *v = vit_model_vit(m);
    return v ? v : scene_model_vit(m);
}

int region_supported(const model *m) { return m && (model_vit(m) || m->arch == &resnet_arch); }

void region_feats_free(region_feats *f) {
    free(f->f);
    memset(f, 0, sizeof *f);
}

/* [B, positions, D] on the model's device, unit-length per position */
static tensor *spatial(model *m, const float *x, int B, int *gh, int *gw) {
    vit *v = model_vit(m);
    if (v) {
        tensor *t = vit_forward(v, &NN_EVAL, x, B, NULL, 0);
        int skip = 1 + v->cfg.registers;
        *gh = *gw = m->img / v->cfg.patch;
        return op_l2_normalize(op_slice(t, 1, skip, skip + (int64_t)*gh * *gw), -1, 1e-12f);
    }
    resnet *r = m->impl;
    tensor *in = tensor_upload(m->device, 4, SHAPE(B, 3, m->img, m->img), x);
    tensor *f = resnet_feature_map(r, &NN_EVAL, in); /* [B, F, h, w] */
    if (!f) return NULL;
    *gh = (int)f->shape[2];
    *gw = (int)f->shape[3];
    tensor *p = op_permute(op_reshape(f, 3, SHAPE(B, f->shape[1], (int64_t)*gh * *gw)), (const int[]){0, 2, 1});
    return op_l2_normalize(op_contiguous(p), -1, 1e-12f);
}

int region_feats_of(model *m, const float *x, int V, region_feats *out) {
    memset(out, 0, sizeof *out);
    if (!region_supported(m)) return er_fail(ER_INPUT, "region evidence: model %s has no spatial features", m->arch->name);
    if (V < 1) return er_fail(ER_INPUT, "region evidence: no image");
    int rc = ER_OK, gh = 0, gw = 0;
    NO_GRAD {
        tensor *t = spatial(m, x, V, &gh, &gw);
        if (!t) rc = ER_RUNTIME;
        else {
            out->V = V; out->gh = gh; out->gw = gw; out->D = (int)t->shape[2];
            out->f = xmalloc((size_t)V * gh * gw * out->D * sizeof(float));
            tensor_to_host(t, out->f);
        }
    }
    nn_step_end();
    return rc;
}

void region_pair_free(region_pair *p) {
    free(p->q); free(p->c); free(p->cmatch);
    memset(p, 0, sizeof *p);
}

/* Best cosine of each of A's P positions in image B (P x P products in S): best[i] = max_j A_i . B_j */
static void best_match(const float *A, const float *B, int P, int D, float *S, float *best) {
    sgemm(SGEMM_FP32, 0, 1, P, P, D, 1.f, A, D, B, D, 0.f, S, P);
    for (int i = 0; i < P; i++) {
        float mx = -FLT_MAX;
        for (int j = 0; j < P; j++) if (S[(size_t)i * P + j] > mx) mx = S[(size_t)i * P + j];
        best[i] = mx;
    }
}

/* out[i] = mean over the bank's views of A_i's best match there */
static void bank_match(const float *A, const region_feats *ref, int P, int D, float *S, float *tmp, float *out) {
    memset(out, 0, (size_t)P * sizeof(float));
    for (int r = 0; r < ref->V; r++) {
        best_match(A, ref->f + (size_t)r * P * D, P, D, S, tmp);
        for (int i = 0; i < P; i++) out[i] += tmp[i] / ref->V;
    }
}

/* The query's bank matches (QV x P), which every pair of one card shares. */
static float *query_bank(const region_feats *q, const region_feats *ref) {
    int P = q->gh * q->gw, D = q->D;
    float *S = xmalloc((size_t)P * P * sizeof(float)), *tmp = xmalloc((size_t)P * sizeof(float));
    float *qbank = xmalloc((size_t)q->V * P * sizeof(float));
    for (int a = 0; a < q->V; a++) bank_match(q->f + (size_t)a * P * D, ref, P, D, S, tmp, qbank + (size_t)a * P);
    free(S); free(tmp);
    return qbank;
}

static int pair_of(const region_feats *q, const region_feats *c, const region_feats *ref, const float *qbank_given, region_pair *out);

int region_pair_of(const region_feats *q, const region_feats *c, const region_feats *ref, region_pair *out) {
    return pair_of(q, c, ref, NULL, out);
}

/* qbank_given: query_bank(q, ref), or NULL to compute it here */
static int pair_of(const region_feats *q, const region_feats *c, const region_feats *ref, const float *qbank_given, region_pair *out) {
    memset(out, 0, sizeof *out);
    if (q->gh != c->gh || q->gw != c->gw || q->D != c->D || !ref || ref->V < 1 || ref->gh != q->gh || ref->gw != q->gw || ref->D != q->D)
        return er_fail(ER_INPUT, "region evidence: feature grids differ (%dx%dx%d vs %dx%dx%d)", q->gh, q->gw, q->D, c->gh, c->gw, c->D);
    int P = q->gh * q->gw, D = q->D, QV = q->V, CV = c->V;
    float *S = xmalloc((size_t)P * P * sizeof(float)), *tmp = xmalloc((size_t)P * sizeof(float));
    float *own = qbank_given ? NULL : query_bank(q, ref), *cbank = xmalloc((size_t)CV * P * sizeof(float));
    const float *qbank = qbank_given ? qbank_given : own;
    for (int b = 0; b < CV; b++) bank_match(c->f + (size_t)b * P * D, ref, P, D, S, tmp, cbank + (size_t)b * P);
    float *mq = xmalloc((size_t)QV * CV * P * sizeof(float)), *mc = xmalloc((size_t)QV * CV * P * sizeof(float));
    double *match = xmalloc((size_t)QV * CV * sizeof(double));
    for (int a = 0; a < QV; a++)
        for (int b = 0; b < CV; b++) {
            size_t ab = (size_t)a * CV + b;
            const float *A = q->f + (size_t)a * P * D, *B = c->f + (size_t)b * P * D;
            best_match(A, B, P, D, S, mq + ab * P);
            best_match(B, A, P, D, S, mc + ab * P);
            double m = 0;
            for (int i = 0; i < P; i++) {
                m += mq[ab * P + i];
                mq[ab * P + i] -= qbank[(size_t)a * P + i];
                mc[ab * P + i] -= cbank[(size_t)b * P + i];
            }
            match[ab] = m / P;
        }
    out->gh = q->gh; out->gw = q->gw; out->qviews = QV; out->cviews = CV;
    out->q = xmalloc((size_t)QV * P * sizeof(float));
    out->c = xmalloc((size_t)CV * P * sizeof(float));
    out->cmatch = xmalloc((size_t)CV * sizeof(float));
    for (int a = 0; a < QV; a++) { /* each query view against the case view it matches best */
        int bb = 0;
        for (int b = 1; b < CV; b++) if (match[(size_t)a * CV + b] > match[(size_t)a * CV + bb]) bb = b;
        memcpy(out->q + (size_t)a * P, mq + ((size_t)a * CV + bb) * P, (size_t)P * sizeof(float));
    }
    for (int b = 0; b < CV; b++) { /* each case view against the query view it matches best */
        int ba = 0;
        for (int a = 1; a < QV; a++) if (match[(size_t)a * CV + b] > match[(size_t)ba * CV + b]) ba = a;
        memcpy(out->c + (size_t)b * P, mc + ((size_t)ba * CV + b) * P, (size_t)P * sizeof(float));
        out->cmatch[b] = (float)match[(size_t)ba * CV + b];
        if (out->cmatch[b] > out->cmatch[out->best]) out->best = b;
    }
    free(S); free(tmp); free(own); free(cbank); free(mq); free(mc); free(match);
    return ER_OK;
}

/* The model inputs of the first `most` views of a view list, *V of them; NULL (0 views) when one
 * cannot be read. */
static float *read_views(model *m, const char *paths, int most, int *V) {
    int all, n;
    char **views = view_list_split(paths, &all);
    n = all < most ? all : most;
    size_t per = (size_t)3 * m->img * m->img;
    float *x = xmalloc((size_t)(n ? n : 1) * per * sizeof(float));
    model_input in = model_input_of(m);
    image im = {0}, tmp = {0};
    aug_workspace ws = {0};
    int got = 0;
    for (int v = 0; v < n; v++) {
        if (image_load(views[v], 3, &im) || aug_eval_input(&im, m->img, in.crop, in.mean, in.std, &ws, &tmp)) {
            got = 0; /* a case whose views cannot all be read shows no evidence */
            break;
        }
        memcpy(x + (size_t)got++ * per, tmp.data, per * sizeof(float));
    }
    image_free(&im); image_free(&tmp); aug_workspace_free(&ws);
    view_list_free(views, all);
    *V = got;
    if (!got) { free(x); return NULL; }
    return x;
}

void region_query_free(region_query *e) {
    for (int j = 0; e->nb && j < e->nnb; j++) region_pair_free(&e->nb[j]);
    free(e->nb);
    free(e->query);
    memset(e, 0, sizeof *e);
}

int region_query_of(const region_engine *e, const report_data *r, int i, const float *x, int qv, region_query *out) {
    memset(out, 0, sizeof *out);
    model *m = e->m;
    double t0 = now_seconds();
    const report_query *w = &r->q[i];
    float *own = NULL;
    if (!x) {
        if (!w->image || !(own = read_views(m, w->image, REGION_MAX_VIEWS, &qv)))
            return er_fail(ER_INPUT, "region evidence: the query's images cannot be read");
        x = own;
    }
    region_feats qf;
    int rc = region_feats_of(m, x, qv, &qf);
    free(own);
    if (rc) return rc;
    int P = qf.gh * qf.gw, used = 0;
    out->nnb = w->nnb; out->qviews = qv; out->gh = qf.gh; out->gw = qf.gw;
    out->crop = model_input_of(m).crop;
    out->nb = xcalloc((size_t)(w->nnb ? w->nnb : 1), sizeof(region_pair));
    out->query = xcalloc((size_t)qv * P, sizeof(float));
    float *qbank = e->ref.gh == qf.gh && e->ref.gw == qf.gw && e->ref.D == qf.D ? query_bank(&qf, &e->ref) : NULL;
    for (int j = 0; j < w->nnb && j < REGION_MAX_CASES && !rc; j++) {
        int cv = 0;
        float *cx = w->nb[j].image ? read_views(m, w->nb[j].image, REGION_MAX_VIEWS, &cv) : NULL;
        region_feats cf;
        if (!cx) continue;
        rc = region_feats_of(m, cx, cv, &cf);
        free(cx);
        if (!rc) rc = qbank ? pair_of(&qf, &cf, &e->ref, qbank, &out->nb[j]) : region_pair_of(&qf, &cf, &e->ref, &out->nb[j]);
        region_feats_free(&cf);
        if (rc) break;
        for (size_t p = 0; p < (size_t)qv * P; p++) out->query[p] += out->nb[j].q[p];
        used++;
    }
    region_feats_free(&qf);
    free(qbank);
    if (rc) { region_query_free(out); return rc; }
    if (!used) { free(out->query); out->query = NULL; }
    else for (size_t p = 0; p < (size_t)qv * P; p++) out->query[p] /= used;
    out->ms = 1e3 * (now_seconds() - t0);
    return ER_OK;
}

void region_engine_free(region_engine *e) {
    region_feats_free(&e->ref);
    e->m = NULL;
}

int region_engine_init(region_engine *e, model *m, char *const *paths, int64_t n) {
    memset(e, 0, sizeof *e);
    if (!region_supported(m)) return er_fail(ER_INPUT, "region evidence: model %s has no spatial features", m->arch->name);
    size_t per = (size_t)3 * m->img * m->img;
    float *x = xmalloc(REGION_REFS * per * sizeof(float));
    int got = 0;
    /* evenly spread over the cases; a case that cannot be read gives its place to the next one */
    int64_t want = n < REGION_REFS ? n : REGION_REFS;
    for (int64_t k = 0; k < want; k++) {
        for (int64_t i = n * k / want, end = n * (k + 1) / want; i < end; i++) {
            if (!paths[i]) continue;
            int v = 0;
            float *one = read_views(m, paths[i], 1, &v);
            if (!one) continue;
            memcpy(x + (size_t)got++ * per, one, per * sizeof(float));
            free(one);
            break;
        }
    }
    int rc = got ? region_feats_of(m, x, got, &e->ref) : er_fail(ER_INPUT, "region evidence: no case image can be read for the reference bank");
    free(x);
    if (!rc) e->m = m;
    return rc;
}
