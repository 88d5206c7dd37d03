/* sequence_protocol.c — see sequence_protocol.h. */
#include "infer/eval/sequence_protocol.h"
#include "datasets/importers.h"
#include "infer/eval/bootstrap.h"
#include "infer/eval/metrics.h"
#include "infer/eval/paired.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const int64_t *scene, *view; } key_ctx;
static int cmp_key(const void *a, const void *b, void *c) {
    const key_ctx *k = c;
    int i = *(const int *)a, j = *(const int *)b;
    if (k->scene[i] != k->scene[j]) return k->scene[i] < k->scene[j] ? -1 : 1;
    if (k->view[i] != k->view[j]) return k->view[i] < k->view[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* a ranked item: higher score first, negatives before positives on equal scores */
typedef struct { double s; int j; uint8_t pos; } ranked;
static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return (x->j > y->j) - (x->j < y->j);
}

static double chi2_dist(const float *x, const float *y, int D) {
    double s = 0;
    for (int k = 0; k < D; k++) {
        double a = x[k], b = y[k], t = a + b;
        if (t > 0) s += (a - b) * (a - b) / t;
    }
    return s;
}

/* Recall@P90 of pairs in rank order, pair t weighted by w[seq of its query] */
static double recall_p90_weighted(const seq_result *r, const double *w) {
    double tot = 0, tp = 0, fp = 0, best = 0;
    for (int64_t t = 0; t < r->npairs; t++)
        if (r->pair_pos[t]) tot += w[r->seq[r->pair_q[t]]];
    if (!(tot > 0)) return 0;
    for (int64_t t = 0; t < r->npairs; t++) {
        double wt = w[r->seq[r->pair_q[t]]];
        if (wt == 0) continue;
        if (r->pair_pos[t]) tp += wt;
        else fp += wt;
        if (tp >= 0.9 * (tp + fp) && tp / tot > best) best = tp / tot;
    }
    return best;
}

int seq_eval(const float *E, int n, int D, emb_distance dist, const int64_t *scene, const int64_t *view,
             const seq_gap *g, seq_result *out) {
    return seq_eval_folded(&E, 1, NULL, n, D, dist, scene, view, g, out);
}

int seq_eval_folded(const float *const *E, int nE, const int *which, int n, int D, emb_distance dist, const int64_t *scene,
                    const int64_t *view, const seq_gap *g, seq_result *out) {
    memset(out, 0, sizeof *out);
    if (nE < 1) return er_fail(ER_INPUT, "sequence protocol: no descriptor set");
    for (int i = 0; which && i < n; i++)
        if (which[i] < 0 || which[i] >= nE)
            return er_fail(ER_INPUT, "sequence protocol: row %d is scored by set %d of %d", i, which[i], nE);
    if (g->gap_frames < 0) return er_fail(ER_INPUT, "sequence protocol: gap %d frames: must be >= 0", g->gap_frames);
    if (!(g->gap_frac >= 0 && g->gap_frac <= 1)) return er_fail(ER_INPUT, "sequence protocol: gap fraction %g: must be in [0, 1]", g->gap_frac);
    if (n < 2 || D < 1) return er_fail(ER_INPUT, "sequence protocol: %d frames of %d values: nothing to rank", n, D);
    if ((int64_t)n * (n - 1) > SEQ_MAX_PAIRS)
        return er_fail(ER_INPUT, "sequence protocol: %d frames make %lld pairs, more than the %lld kept", n,
                       (long long)n * (n - 1), (long long)SEQ_MAX_PAIRS);
    for (int i = 0; i < n; i++)
        if (scene[i] < 0 || view[i] < 0)
            return er_fail(ER_INPUT, "sequence protocol: row %d has no %s (every frame needs its sequence and position)", i,
                           scene[i] < 0 ? "scene" : "view");
    /* dense sequence ids and lengths; a (scene, view) twice is two frames at one position */
    int *ord = xmalloc(sizeof *ord * (size_t)n);
    for (int i = 0; i < n; i++) ord[i] = i;
    key_ctx kc = {scene, view};
    qsort_r(ord, (size_t)n, sizeof *ord, cmp_key, &kc);
    out->seq = xmalloc(sizeof *out->seq * (size_t)n);
    for (int a = 0; a < n; a++) {
        int i = ord[a];
        if (a && scene[ord[a - 1]] == scene[i] && view[ord[a - 1]] == view[i]) {
            int first = ord[a - 1];
            free(ord);
            seq_result_free(out);
            return er_fail(ER_INPUT, "sequence protocol: rows %d and %d are both scene %lld view %lld (one frame per position)",
                           first, i, (long long)scene[i], (long long)view[i]);
        }
        if (!a || scene[ord[a - 1]] != scene[i]) out->nseq++;
        out->seq[i] = out->nseq - 1;
    }
    free(ord);
    int *len = xcalloc((size_t)out->nseq, sizeof *len);
    for (int i = 0; i < n; i++) len[out->seq[i]]++;
    out->nframes = n;
    out->pos = xmalloc(sizeof *out->pos * (size_t)n);
    memcpy(out->pos, view, sizeof *out->pos * (size_t)n);
    out->ap = xmalloc(sizeof *out->ap * (size_t)n);
    out->top1 = xcalloc((size_t)n, 1);
    /* rows in the distance's unit, each set of descriptors */
    float *X = xmalloc(sizeof *X * (size_t)n * D * nE);
    for (int f = 0; f < nE; f++) {
        memcpy(X + (size_t)f * n * D, E[f], sizeof *X * (size_t)n * D);
        for (int i = 0; i < n; i++) dist_normalise(dist, X + ((size_t)f * n + i) * D, D);
    }
    ranked *all = xmalloc(sizeof *all * (size_t)n * (n - 1)); /* each query's gallery, in its slot */
    int *cnt = xcalloc((size_t)n, sizeof *cnt);
#pragma omp parallel for schedule(dynamic, 8)
    for (int i = 0; i < n; i++) {
        ranked *row = all + (size_t)i * (n - 1);
        uint8_t *rel = xmalloc((size_t)n);
        int m = 0, npos = 0;
        double cut = g->gap_frac * len[out->seq[i]];
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            int same = out->seq[j] == out->seq[i];
            if (same) {
                int64_t d = llabs(view[i] - view[j]);
                if (d < g->gap_frames || (double)d < cut) continue; /* a near-duplicate: neither side */
            }
            const float *Xi = X + (size_t)(which ? which[i] : 0) * n * D; /* the query's set scores its whole gallery */
            const float *x = Xi + (size_t)i * D, *y = Xi + (size_t)j * D;
            double s;
            if (dist == DIST_CHI2) s = -chi2_dist(x, y, D);
            else {
                s = 0;
                for (int k = 0; k < D; k++) s += (double)x[k] * y[k];
            }
            row[m++] = (ranked){s, j, (uint8_t)same};
            npos += same;
        }
        qsort(row, (size_t)m, sizeof *row, cmp_ranked);
        for (int t = 0; t < m; t++) rel[t] = row[t].pos;
        out->ap[i] = npos ? ap_ranked(rel, m, npos, 0) : NAN;
        out->top1[i] = npos && m && row[0].pos;
        cnt[i] = npos ? m : 0; /* a skipped query's pairs are not pooled */
        free(rel);
    }
    free(X);
    free(len);
    double sap = 0, sacc = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(out->ap[i])) { out->nskipped++; continue; }
        out->nqueries++;
        sap += out->ap[i];
        sacc += out->top1[i];
        out->npairs += cnt[i];
    }
    uint8_t *has = xcalloc((size_t)out->nseq, 1);
    for (int i = 0; i < n; i++) if (!isnan(out->ap[i])) has[out->seq[i]] = 1;
    for (int s = 0; s < out->nseq; s++) out->nqseq += has[s];
    free(has);
    if (!out->nqueries) {
        free(all), free(cnt);
        seq_result_free(out);
        return er_fail(ER_INPUT, "sequence protocol: no frame has a positive (another frame of its sequence beyond the gap: "
                       "%d frames, gap %d frames / %g of a sequence)", n, g->gap_frames, g->gap_frac);
    }
    out->map = sap / out->nqueries;
    out->acc1 = sacc / out->nqueries;
    /* the pooled pairs moved to the front of the same array (a row never moves right), one sort */
    ranked *pool = all;
    int64_t p = 0;
    for (int i = 0; i < n; i++)
        for (int t = 0; t < cnt[i]; t++) {
            pool[p] = all[(size_t)i * (n - 1) + t];
            pool[p++].j = i; /* the query now: a pair is (query, positive?) from here on */
        }
    free(cnt);
    qsort(pool, (size_t)out->npairs, sizeof *pool, cmp_ranked);
    out->pair_q = xmalloc(sizeof *out->pair_q * (size_t)(out->npairs ? out->npairs : 1));
    out->pair_pos = xmalloc((size_t)(out->npairs ? out->npairs : 1));
    for (int64_t t = 0; t < out->npairs; t++) out->pair_q[t] = pool[t].j, out->pair_pos[t] = pool[t].pos;
    free(pool);
    double *w = xmalloc(sizeof *w * (size_t)out->nseq);
    for (int s = 0; s < out->nseq; s++) w[s] = 1;
    out->recall_p90 = recall_p90_weighted(out, w);
    free(w);
    return ER_OK;
}

int seq_eval_emb(const emb_set *e, const seq_gap *g, seq_result *out) {
    memset(out, 0, sizeof *out);
    if (!e->scene || !e->view)
        return er_fail(ER_INPUT, "sequence protocol: the embedding file has no %s ids (embed a manifest with scene = "
                       "sequence and view = frame position: data import --layout sequences --views 0)", e->scene ? "view" : "scene");
    if (e->nview_names)
        return er_fail(ER_INPUT, "sequence protocol: the file's views are names, not frame positions (data import "
                       "--layout sequences --views 0 numbers them)");
    emb_distance d;
    int rc = emb_distance_of(e, "sequence protocol", &d);
    return rc ? rc : seq_eval(e->x, e->n, e->dim, d, e->scene, e->view, g, out);
}

int seq_keep_queries(seq_result *r, const uint8_t *keep) {
    int nq = 0, ns = 0;
    double sap = 0, sacc = 0;
    for (int i = 0; i < r->nframes; i++) {
        if (!keep[i]) { r->ap[i] = NAN, r->top1[i] = 0; continue; }
        if (isnan(r->ap[i])) { ns++; continue; }
        nq++, sap += r->ap[i], sacc += r->top1[i];
    }
    if (!nq) return er_fail(ER_INPUT, "sequence protocol: none of the kept frames is a query with a positive");
    r->nqueries = nq, r->nskipped = ns, r->map = sap / nq, r->acc1 = sacc / nq;
    uint8_t *has = xcalloc((size_t)r->nseq, 1);
    for (int i = 0; i < r->nframes; i++) if (!isnan(r->ap[i])) has[r->seq[i]] = 1;
    r->nqseq = 0;
    for (int s = 0; s < r->nseq; s++) r->nqseq += has[s];
    free(has);
    int64_t p = 0; /* the pooled pairs of the kept queries, in the same order */
    for (int64_t t = 0; t < r->npairs; t++)
        if (keep[r->pair_q[t]]) r->pair_q[p] = r->pair_q[t], r->pair_pos[p++] = r->pair_pos[t];
    r->npairs = p;
    double *w = xmalloc(sizeof *w * (size_t)r->nseq);
    for (int s = 0; s < r->nseq; s++) w[s] = 1;
    r->recall_p90 = recall_p90_weighted(r, w);
    free(w);
    return ER_OK;
}

void seq_result_free(seq_result *r) {
    free(r->seq), free(r->pos), free(r->ap), free(r->top1), free(r->pair_q), free(r->pair_pos);
    memset(r, 0, sizeof *r);
}

/* the query-bearing sequences in increasing id (what a replicate draws) and per sequence the sums */
typedef struct { int m; int *ids; double *sap, *sacc, *nq; } seq_sums;
static void sums_of(const seq_result *r, seq_sums *s) {
    s->sap = xcalloc((size_t)r->nseq, sizeof *s->sap);
    s->sacc = xcalloc((size_t)r->nseq, sizeof *s->sacc);
    s->nq = xcalloc((size_t)r->nseq, sizeof *s->nq);
    for (int i = 0; i < r->nframes; i++)
        if (!isnan(r->ap[i])) s->sap[r->seq[i]] += r->ap[i], s->sacc[r->seq[i]] += r->top1[i], s->nq[r->seq[i]]++;
    s->ids = xmalloc(sizeof *s->ids * (size_t)r->nseq);
    s->m = 0;
    for (int q = 0; q < r->nseq; q++) if (s->nq[q] > 0) s->ids[s->m++] = q;
}
static void sums_free(seq_sums *s) { free(s->ids), free(s->sap), free(s->sacc), free(s->nq); }

/* one replicate: w[seq] = copies drawn; mAP, Acc@1, Recall@P90 of it */
static void replicate(const seq_result *r, const seq_sums *s, const double *w, double *map, double *acc, double *rp90) {
    double a = 0, c = 0, q = 0;
    for (int k = 0; k < s->m; k++) {
        int id = s->ids[k];
        a += w[id] * s->sap[id], c += w[id] * s->sacc[id], q += w[id] * s->nq[id];
    }
    *map = a / q, *acc = c / q; /* q > 0: every drawn sequence holds a query */
    if (rp90) *rp90 = recall_p90_weighted(r, w);
}

/* B draws of s->m sequences into w (B x nseq) */
static double *draw_weights(const seq_result *r, const seq_sums *s, int B, uint64_t seed) {
    double *w = xcalloc((size_t)B * r->nseq, sizeof *w);
    rng_t g = rng_make(seed, 0x5e9b007);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < s->m; t++) w[(size_t)b * r->nseq + s->ids[rng_below(&g, (uint32_t)s->m)]]++;
    return w;
}

void seq_bootstrap(const seq_result *r, int B, uint64_t seed, seq_interval *out) {
    out->map_lo = out->map_hi = out->acc1_lo = out->acc1_hi = out->rp90_lo = out->rp90_hi = NAN;
    out->replicates = 0;
    if (B < 1 || !r->nqueries) return;
    seq_sums s;
    sums_of(r, &s);
    double *w = draw_weights(r, &s, B, seed), *v = xmalloc(sizeof *v * 3 * (size_t)B);
#pragma omp parallel for schedule(dynamic, 4)
    for (int b = 0; b < B; b++) replicate(r, &s, w + (size_t)b * r->nseq, &v[b], &v[B + b], &v[2 * B + b]);
    out->map_lo = percentile_linear(v, B, 2.5), out->map_hi = percentile_linear(v, B, 97.5);
    out->acc1_lo = percentile_linear(v + B, B, 2.5), out->acc1_hi = percentile_linear(v + B, B, 97.5);
    out->rp90_lo = percentile_linear(v + 2 * B, B, 2.5), out->rp90_hi = percentile_linear(v + 2 * B, B, 97.5);
    out->replicates = B;
    free(v), free(w);
    sums_free(&s);
}

int seq_paired_test(const seq_result *a, const seq_result *b, int B, uint64_t seed, seq_paired *out) {
    memset(out, 0, sizeof *out);
    if (B < 1) return er_fail(ER_INPUT, "paired bootstrap: %d replicates (>= 1 needed)", B);
    if (a->nframes != b->nframes || a->nseq != b->nseq || memcmp(a->seq, b->seq, sizeof *a->seq * (size_t)a->nframes) ||
        memcmp(a->pos, b->pos, sizeof *a->pos * (size_t)a->nframes))
        return er_fail(ER_INPUT, "paired comparison: the two files are not the same frames (same rows, scenes and views "
                       "in the same order: embed the same manifest)");
    for (int i = 0; i < a->nframes; i++)
        if (isnan(a->ap[i]) != isnan(b->ap[i]))
            return er_fail(ER_INPUT, "paired comparison: frame %d is a query in one file only (the same gap on both)", i);
    seq_sums sa, sb;
    sums_of(a, &sa);
    sums_of(b, &sb);
    double *w = draw_weights(a, &sa, B, seed), *d = xmalloc(sizeof *d * 2 * (size_t)B);
#pragma omp parallel for schedule(dynamic, 4)
    for (int t = 0; t < B; t++) {
        double ma, ca, mb, cb;
        replicate(a, &sa, w + (size_t)t * a->nseq, &ma, &ca, NULL);
        replicate(b, &sb, w + (size_t)t * a->nseq, &mb, &cb, NULL);
        d[t] = ma - mb, d[B + t] = ca - cb;
    }
    out->nqueries = a->nqueries, out->nqseq = a->nqseq, out->replicates = B;
    out->map_a = a->map, out->map_b = b->map, out->acc1_a = a->acc1, out->acc1_b = b->acc1;
    out->map_p = paired_bootstrap_p(d, B), out->acc1_p = paired_bootstrap_p(d + B, B);
    out->map_d_lo = percentile_linear(d, B, 2.5), out->map_d_hi = percentile_linear(d, B, 97.5);
    out->acc1_d_lo = percentile_linear(d + B, B, 2.5), out->acc1_d_hi = percentile_linear(d + B, B, 97.5);
    free(d), free(w);
    sums_free(&sa), sums_free(&sb);
    return ER_OK;
}

int seq_pick_four(const emb_set *e, emb_set *out, int *nshort) {
    memset(out, 0, sizeof *out);
    *nshort = 0;
    if (!e->scene || !e->view) return er_fail(ER_INPUT, "2-vs-2 protocol: the embedding file has no scene / view ids");
    int n = e->n, *ord = xmalloc(sizeof *ord * (size_t)(n ? n : 1)), *keep = xmalloc(sizeof *keep * (size_t)(n ? n : 1)), nk = 0;
    for (int i = 0; i < n; i++) ord[i] = i;
    key_ctx kc = {e->scene, e->view};
    qsort_r(ord, (size_t)n, sizeof *ord, cmp_key, &kc);
    int64_t *vw = xmalloc(sizeof *vw * (size_t)(n ? n : 1));
    for (int a = 0; a < n;) { /* one sequence: ord[a .. b) in position order */
        int b = a;
        while (b < n && e->scene[ord[b]] == e->scene[ord[a]]) b++;
        int idx[4];
        if (e->scene[ord[a]] >= 0 && seq_pick_views(b - a, 4, 1, idx))
            for (int k = 0; k < 4; k++) vw[nk] = k, keep[nk++] = ord[a + idx[k]];
        else if (e->scene[ord[a]] >= 0) (*nshort)++;
        a = b;
    }
    free(ord);
    if (!nk) {
        free(keep), free(vw);
        return er_fail(ER_INPUT, "2-vs-2 protocol: no sequence has 4 frames (%d too short)", *nshort);
    }
    emb_alloc(out, nk, e->dim);
    out->scene = xmalloc(sizeof *out->scene * (size_t)nk);
    out->view = vw;
    for (int t = 0; t < nk; t++) {
        memcpy(out->x + (size_t)t * e->dim, e->x + (size_t)keep[t] * e->dim, sizeof *out->x * (size_t)e->dim);
        out->ids[t] = e->ids[keep[t]];
        out->scene[t] = e->scene[keep[t]];
    }
    if (e->distance) out->distance = xstrdup(e->distance);
    free(keep);
    return ER_OK;
}
