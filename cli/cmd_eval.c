/* cmd_eval.c — `endoret eval reid | retrieval | classify | multiview` (`eval compare` is in cmd_eval_compare.c, `eval perceived` lives with
 * the perceived-similarity code). */
#include "datasets/manifest.h"
#include "cli/cli_util.h"
#include "infer/retrieval/hash.h"
#include "infer/retrieval/index.h"
#include "infer/eval/knn_cv.h"
#include "infer/eval/probe_cv.h"
#include "infer/retrieval/knn.h"
#include "infer/eval/metrics.h"
#include "infer/eval/multiview.h"
#include "infer/eval/bootstrap.h"
#include "infer/eval/reid_views.h"
#include "infer/retrieval/distance.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GT.csv: header `query_id,reference_id` (extra columns ignored), one pair per line */
static int load_gt(const char *path, reid_gt **gt, int64_t *n) {
    char *data;
    size_t len;
    *gt = NULL;
    *n = 0;
    if (!path) return er_fail(ER_INPUT, "--gt is required (CSV with header query_id,reference_id)");
    int rc = read_file(path, &data, &len);
    if (rc) return rc;
    char *save = NULL;
    int line = 0, qcol = -1, rcol = -1;
    int64_t cap = 0;
    for (char *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        size_t L = strlen(l);
        if (L && l[L - 1] == '\r') l[--L] = 0;
        if (!L) continue;
        char *f[16];
        int nf = 0;
        for (char *p = l; nf < 16;) {
            f[nf++] = p;
            char *c = strchr(p, ',');
            if (!c) break;
            *c = 0;
            p = c + 1;
        }
        if (qcol < 0) {
            for (int i = 0; i < nf; i++) {
                if (!strcmp(f[i], "query_id")) qcol = i;
                if (!strcmp(f[i], "reference_id")) rcol = i;
            }
            if (qcol < 0 || rcol < 0) { free(data); return er_fail(ER_INPUT, "%s: line 1: header must have query_id and reference_id columns", path); }
            continue;
        }
        if (nf <= qcol || nf <= rcol) { free(data); free(*gt); *gt = NULL; return er_fail(ER_INPUT, "%s: line %d: missing columns", path, line); }
        char *e1, *e2;
        errno = 0;
        long long q = strtoll(f[qcol], &e1, 10), r = strtoll(f[rcol], &e2, 10);
        if (e1 == f[qcol] || *e1 || e2 == f[rcol] || *e2 || errno) {
            free(data); free(*gt); *gt = NULL;
            return er_fail(ER_INPUT, "%s: line %d: query_id and reference_id must be integer ids", path, line);
        }
        if (*n == cap) { cap = cap ? 2 * cap : 256; *gt = xrealloc(*gt, (size_t)cap * sizeof **gt); }
        (*gt)[*n].q = q;
        (*gt)[*n].r = r;
        (*n)++;
    }
    free(data);
    if (qcol < 0) return er_fail(ER_INPUT, "%s: empty file (expected header query_id,reference_id)", path);
    if (!*n) return er_fail(ER_INPUT, "%s: no ground-truth pairs", path);
    return ER_OK;
}

/* top-k neighbours of the queries among the references by the files' distance, or Hamming on codes
 * hashed with a hasher fitted on the references (bits > 0). score: ISC convention, higher = closer. */
static int neighbours(const emb_set *q, const emb_set *r, int k, int bits, const char *hash_s, emb_distance dist,
                      int64_t *ids, double *score, int *cnt) {
    if (bits <= 0) return dist_topk(dist, r->x, r->ids, r->n, q->x, q->n, q->dim, k, ids, score, cnt);
    if (dist != DIST_COSINE) return er_fail(ER_INPUT, "--bits: hashing assumes cosine, the embedding files' distance is %s", emb_distance_name(dist));
    hash_kind hk = bits == r->dim ? HASH_SIGN : HASH_PCA;
    int rc;
    if (hash_s && (rc = hash_kind_parse(hash_s, &hk))) return rc;
    return dist_topk_hashed(hk, bits, 0, r->x, r->ids, r->n, q->x, q->n, q->dim, k, ids, score, cnt);
}

/* same size and the same distance (a file without one is cosine) */
static int check_pair(const emb_set *q, const emb_set *r, emb_distance *dist) {
    if (q->dim != r->dim) return er_fail(ER_INPUT, "--query has %d-d embeddings, --ref has %d-d ones", q->dim, r->dim);
    emb_distance dr;
    int rc = emb_distance_of(q, "--query", dist);
    if (!rc) rc = emb_distance_of(r, "--ref", &dr);
    if (!rc && dr != *dist)
        rc = er_fail(ER_INPUT, "--query is ranked by %s, --ref by %s: one distance is needed", emb_distance_name(*dist), emb_distance_name(dr));
    return rc;
}

/* the metric line's 95 % interval: text line or JSON fields (uAP_lo, uAP_hi, ...) */
static void print_interval(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, int B, int json) {
    if (B <= 0) return;
    reid_interval ci;
    reid_bootstrap(p, np, gt, ngt, B, BOOTSTRAP_SEED, &ci);
    if (json) {
        json_put_field(stdout, "uAP_lo", ci.lo.uap);
        json_put_field(stdout, "uAP_hi", ci.hi.uap);
        json_put_field(stdout, "acc1_lo", ci.lo.acc1);
        json_put_field(stdout, "acc1_hi", ci.hi.acc1);
        json_put_field(stdout, "recall_p90_lo", ci.lo.recall_p90);
        json_put_field(stdout, "recall_p90_hi", ci.hi.recall_p90);
        printf(", \"bootstrap\": %d", B);
    } else
        printf("  95%% interval (bootstrap over queries, %d replicates): uAP [%.4f, %.4f]   Acc@1 [%.4f, %.4f]   Recall@P90 [%.4f, %.4f]\n",
               B, ci.lo.uap, ci.hi.uap, ci.lo.acc1, ci.hi.acc1, ci.lo.recall_p90, ci.hi.recall_p90);
}

/* `eval reid --emb E --ref-view V[,V] [--query-view V[,V]]`: one embedding file, references = the
 * reference views of each scene, queries = the query views (default every other view; copy
 * detection: `data copies` writes originals as view 0, copies as 1..N). reid_views.h fuses lists. */
static int eval_reid_views(const char *ep, const char *ref_s, const char *query_s, int k, int bits, const char *hash_s, int B, int json) {
    emb_set e;
    int rc = emb_load_arg(ep, "--emb", &e);
    if (rc) return rc;
    int64_t *rv = NULL, *qv = NULL;
    reid_views_cfg c = {.k = k, .bits = bits, .hash = bits == e.dim ? HASH_SIGN : HASH_PCA};
    if ((rc = emb_view_list(&e, ref_s, "--ref-view", &rv, &c.nrviews)) || (rc = emb_view_list(&e, query_s, "--query-view", &qv, &c.nqviews))) goto out;
    if (hash_s && (rc = hash_kind_parse(hash_s, &c.hash))) goto out;
    c.rviews = rv;
    c.qviews = qv;
    reid_view_result res;
    if ((rc = reid_eval_views(&e, &c, &res))) goto out;
    const char *by = bits ? "Hamming" : emb_distance_name(res.dist);
    if (json) {
        printf("{\"uAP\": "); json_put_num(stdout, res.r.uap);
        json_put_field(stdout, "acc1", res.r.acc1);
        json_put_field(stdout, "recall_p90", res.r.recall_p90);
        printf(", \"queries\": %d, \"references\": %d, \"k\": %d", res.nqueries, res.nrefs, res.k);
        if (qv || c.nrviews > 1 || strcmp(by, "cosine")) printf(", \"scenes\": %d, \"distance\": \"%s\"", res.nscenes, by);
        print_interval(res.pred, res.npred, res.gt, res.ngt, B, 1);
        printf("}\n");
    } else {
        if (!qv && c.nrviews == 1)
            printf("re-identification against reference view %s: %d queries (the other views), %d references, top-%d by %s\n",
                   ref_s, res.nqueries, res.nrefs, res.k, by);
        else
            printf("re-identification, query view%s %s against reference view%s %s%s: %d queries in %d scenes, %d references, top-%d by %s\n",
                   c.nqviews > 1 ? "s" : "", qv ? query_s : "(every other)", c.nrviews > 1 ? "s" : "", ref_s,
                   c.nqviews > 1 || c.nrviews > 1 ? " (fused: mean of normalised views)" : "", res.nqueries, res.nscenes, res.nrefs, res.k, by);
        printf("  uAP %.4f   Acc@1 %.4f   Recall@P90 %.4f\n", res.r.uap, res.r.acc1, res.r.recall_p90);
        print_interval(res.pred, res.npred, res.gt, res.ngt, B, 0);
    }
    reid_view_result_free(&res);
out:
    free(rv);
    free(qv);
    emb_free(&e);
    return rc;
}

static int eval_reid(int argc, char **argv) {
    const char *qp = NULL, *rp = NULL, *gtp = NULL, *hash_s = NULL, *ep = NULL, *ref_s = NULL, *query_s = NULL;
    int k = REID_DEFAULT_K, bits = 0, json = 0, B = BOOTSTRAP_DEFAULT_N;
    arg_spec specs[] = {
        {"emb", ARG_STR, &ep, "one embedding file with scene/view ids (with --ref-view, instead of --query/--ref/--gt)"},
        {"ref-view", ARG_STR, &ref_s, "with --emb: reference view(s), e.g. 2 or 2,3 (several: fused per scene)"},
        {"query-view", ARG_STR, &query_s, "with --emb: query view(s) (default every view that is not a reference)"},
        {"query", ARG_STR, &qp, "query embeddings"},
        {"ref", ARG_STR, &rp, "reference embeddings"},
        {"gt", ARG_STR, &gtp, "ground truth CSV (query_id,reference_id)"},
        OPT_K(&k),
        {"bits", ARG_INT, &bits, "hash to this many bits and rank by Hamming (0 = the file's distance)", "[0, inf)"},
        OPT_HASH(&hash_s, .def = "sign when --bits = embedding size, else pca"),
        OPT_BOOTSTRAP(&B),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret eval reid --query Q --ref R --gt GT.csv [--json] | --emb E --ref-view V[,V] [--query-view V[,V]] [--json]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (ep || ref_s || query_s) {
        if (!ep || !ref_s) return er_fail(ER_INPUT, "eval reid: --emb and --ref-view go together (--query-view optional)");
        if (qp || rp || gtp) return er_fail(ER_INPUT, "eval reid: use either --emb/--ref-view or --query/--ref/--gt");
        return eval_reid_views(ep, ref_s, query_s, k, bits, hash_s, B, json);
    }
    reid_gt *gt;
    int64_t ngt;
    if ((rc = load_gt(gtp, &gt, &ngt))) return rc;
    emb_set q, r;
    emb_distance dist;
    if ((rc = emb_load_arg(qp, "--query", &q))) { free(gt); return rc; }
    if ((rc = emb_load_arg(rp, "--ref", &r))) { free(gt); emb_free(&q); return rc; }
    if ((rc = check_pair(&q, &r, &dist))) goto out;
    int kk = k < r.n ? k : r.n;
    int64_t *ids = xmalloc((size_t)q.n * kk * 8);
    double *score = xmalloc((size_t)q.n * kk * 8);
    int *cnt = xmalloc((size_t)q.n * sizeof(int));
    rc = neighbours(&q, &r, kk, bits, hash_s, dist, ids, score, cnt);
    if (!rc) {
        reid_pred *p = xmalloc((size_t)q.n * kk * sizeof *p);
        int64_t np = 0;
        for (int i = 0; i < q.n; i++)
            for (int j = 0; j < cnt[i]; j++) p[np++] = (reid_pred){q.ids[i], ids[(size_t)i * kk + j], score[(size_t)i * kk + j]};
        reid_result res;
        rc = reid_metrics(p, np, gt, ngt, &res);
        if (!rc) {
            if (json) {
                printf("{\"uAP\": "); json_put_num(stdout, res.uap);
                json_put_field(stdout, "acc1", res.acc1);
                json_put_field(stdout, "recall_p90", res.recall_p90);
                printf(", \"k\": %d", kk);
                print_interval(p, np, gt, ngt, B, 1);
                printf("}\n");
            } else {
                printf("re-identification: %d queries, %d references, %lld ground-truth pairs, top-%d by %s\n", q.n, r.n,
                       (long long)ngt, kk, bits ? "Hamming" : dist == DIST_CHI2 ? "chi2 of L1-normalised histograms" : "L2 of L2-normalised descriptors");
                printf("  uAP %.4f   Acc@1 %.4f   Recall@P90 %.4f\n", res.uap, res.acc1, res.recall_p90);
                print_interval(p, np, gt, ngt, B, 0);
            }
        }
        free(p);
    }
    free(ids); free(score); free(cnt);
out:
    free(gt);
    emb_free(&q);
    emb_free(&r);
    return rc;
}

/* label of item i as a name (so query and reference files may number labels differently) */
static const char *label_name(const emb_set *e, int i) {
    if (!e->labels || e->labels[i] < 0) return NULL;
    if (e->labels[i] < e->nlabel_names) return e->label_names[e->labels[i]];
    return NULL;
}

static int same_label(const emb_set *q, int i, const emb_set *r, int j) {
    if (!q->labels || !r->labels || q->labels[i] < 0 || r->labels[j] < 0) return 0;
    const char *a = label_name(q, i), *b = label_name(r, j);
    if (a && b) return !strcmp(a, b);
    return q->labels[i] == r->labels[j];
}

/* Full ranking of every query of q against r by label relevance: per_q[i'] = AP of the i'-th query
 * that has a relevant item, per_q[(1 + a) * q->n + i'] = its hit at kl[a]; *used = their count.
 * Queries with no relevant item are skipped, as the paper's code does (which queries those are
 * depends only on the labels). */
static int retrieval_per_query(const emb_set *q, const emb_set *r, int bits, const char *hash_s, emb_distance dist, const int *kl,
                               int nk, double *per_q, int *used) {
    int n = r->n;
    int64_t *ids = xmalloc((size_t)q->n * n * 8);
    double *score = xmalloc((size_t)q->n * n * 8);
    int *cnt = xmalloc((size_t)q->n * sizeof(int));
    *used = 0;
    int rc = neighbours(q, r, n, bits, hash_s, dist, ids, score, cnt);
    if (!rc) {
        /* map ids back to rows of r */
        int64_t *rowof = NULL, minid = INT64_MAX, maxid = INT64_MIN;
        for (int j = 0; j < n; j++) { if (r->ids[j] < minid) minid = r->ids[j]; if (r->ids[j] > maxid) maxid = r->ids[j]; }
        int dense = maxid - minid < 4LL * n + 1024;
        if (dense) { rowof = xmalloc((size_t)(maxid - minid + 1) * 8); for (int j = 0; j < n; j++) rowof[r->ids[j] - minid] = j; }
        uint8_t *rel = xmalloc((size_t)n);
        for (int i = 0; i < q->n; i++) {
            int64_t nrel = 0;
            for (int j = 0; j < n; j++) nrel += same_label(q, i, r, j);
            if (!nrel) continue; /* no relevant item: skipped, as the paper's code does */
            for (int j = 0; j < cnt[i]; j++) {
                int64_t id = ids[(size_t)i * n + j], row = -1;
                if (dense) row = rowof[id - minid];
                else for (int t = 0; t < n; t++) if (r->ids[t] == id) { row = t; break; }
                rel[j] = same_label(q, i, r, (int)row);
            }
            per_q[*used] = ap_ranked(rel, cnt[i], nrel, 0);
            for (int a = 0; a < nk; a++) per_q[(size_t)(1 + a) * q->n + *used] = hit_at_k(rel, cnt[i], kl[a]);
            (*used)++;
        }
        free(rel); free(rowof);
    }
    free(ids); free(score); free(cnt);
    return rc;
}

static int eval_retrieval(int argc, char **argv) {
    const char *qp = NULL, *rp = NULL, *bqp = NULL, *brp = NULL, *ks = "1,5", *hash_s = NULL;
    int bits = 0, json = 0, B = BOOTSTRAP_DEFAULT_N;
    arg_spec specs[] = {
        {"query", ARG_STR, &qp, "query embeddings with labels"},
        {"ref", ARG_STR, &rp, "gallery embeddings with labels"},
        {"base-query", ARG_STR, &bqp, "a baseline's embeddings of the same query rows (with --base-ref: paired mAP difference)"},
        {"base-ref", ARG_STR, &brp, "the baseline's embeddings of the same gallery rows"},
        OPT_KS(&ks),
        {"bits", ARG_INT, &bits, "hash to this many bits and rank by Hamming (0 = float cosine)", "[0, inf)"},
        OPT_HASH(&hash_s, .def = "sign when --bits = embedding size, else pca"),
        OPT_BOOTSTRAP(&B),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret eval retrieval --query Q --ref R [--base-query BQ --base-ref BR] [--k 1,5] [--bootstrap N] [--json]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (!bqp != !brp) return er_fail(ER_INPUT, "--base-query and --base-ref go together (a paired comparison needs both)");
    int paired = bqp != NULL;
    int *kl, nk;
    if ((rc = args_int_list(ks, "--k", &kl, &nk))) return rc;
    emb_set q = {0}, r = {0}, bq = {0}, br = {0};
    emb_distance dist, bdist;
    double *per_q = NULL, *bper_q = NULL;
    if ((rc = emb_load_arg(qp, "--query", &q))) { free(kl); return rc; }
    if ((rc = emb_load_arg(rp, "--ref", &r))) { free(kl); emb_free(&q); return rc; }
    if (paired && (rc = emb_load_arg(bqp, "--base-query", &bq))) goto out;
    if (paired && (rc = emb_load_arg(brp, "--base-ref", &br))) goto out;
    if ((rc = check_pair(&q, &r, &dist))) goto out;
    if (!q.labels || !r.labels) { rc = er_fail(ER_INPUT, "eval retrieval needs labels in both --query and --ref"); goto out; }
    if (paired && ((rc = check_pair(&bq, &br, &bdist)) || (rc = emb_same_rows(&q, &bq, qp, bqp)) || (rc = emb_same_rows(&r, &br, rp, brp))))
        goto out;
    int n = r.n;
    if ((double)q.n * n > 2e8) { /* full rankings are kept in memory */
        rc = er_fail(ER_INPUT, "eval retrieval: %d queries x %d gallery items is too large for full rankings (limit 2e8 pairs)", q.n, n);
        goto out;
    }
    int used = 0, bused = 0;
    per_q = xmalloc(sizeof *per_q * (size_t)(1 + nk) * q.n); /* column 0 AP, then hits at each k */
    if ((rc = retrieval_per_query(&q, &r, bits, hash_s, dist, kl, nk, per_q, &used))) goto out;
    if (!used) { rc = er_fail(ER_INPUT, "eval retrieval: no query has a relevant reference"); goto out; }
    double map = 0, bmap = 0, dlo = NAN, dhi = NAN, *hits = xcalloc((size_t)nk, sizeof *hits);
    int better = 0, worse = 0;
    for (int i = 0; i < used; i++) map += per_q[i];
    for (int a = 0; a < nk; a++)
        for (int i = 0; i < used; i++) hits[a] += per_q[(size_t)(1 + a) * q.n + i];
    if (paired) { /* per query: this AP minus the baseline's on the same query, resampled together */
        bper_q = xmalloc(sizeof *bper_q * (size_t)(1 + nk) * q.n);
        if ((rc = retrieval_per_query(&bq, &br, bits, hash_s, bdist, kl, nk, bper_q, &bused))) { free(hits); goto out; }
        if (bused != used) { /* the same labels give the same queries; a guard, not an expected path */
            rc = er_fail(ER_INPUT, "eval retrieval: %d queries have a relevant item here, %d in the baseline", used, bused);
            free(hits);
            goto out;
        }
        for (int i = 0; i < used; i++) {
            bmap += bper_q[i];
            better += per_q[i] > bper_q[i], worse += per_q[i] < bper_q[i];
            bper_q[i] = per_q[i] - bper_q[i];
        }
        bmap /= used;
        if (B) bootstrap_mean_interval(bper_q, used, B, BOOTSTRAP_SEED, &dlo, &dhi);
    }
    map /= used;
    if (json) {
        printf("{\"queries\": %d, \"mAP\": %.6f", used, map);
        for (int a = 0; a < nk; a++) printf(", \"recall@%d\": %.6f", kl[a], hits[a] / used);
        for (int a = 0; B && a <= nk; a++) {
            double lo, hi;
            bootstrap_mean_interval(per_q + (size_t)a * q.n, used, B, BOOTSTRAP_SEED, &lo, &hi);
            if (a) printf(", \"recall@%d_lo\": %.6f, \"recall@%d_hi\": %.6f", kl[a - 1], lo, kl[a - 1], hi);
            else printf(", \"mAP_lo\": %.6f, \"mAP_hi\": %.6f", lo, hi);
        }
        if (paired) {
            printf(", \"base_mAP\": %.6f, \"delta\": %.6f", bmap, map - bmap);
            if (B) printf(", \"delta_lo\": %.6f, \"delta_hi\": %.6f", dlo, dhi);
            printf(", \"better\": %d, \"worse\": %d", better, worse);
        }
        if (B) printf(", \"bootstrap\": %d", B);
        printf("}\n");
    } else {
        printf("retrieval: %d queries with a relevant item, gallery %d, ranked by %s\n", used, n, bits ? "Hamming" : emb_distance_name(dist));
        printf("  mAP %.4f", map);
        for (int a = 0; a < nk; a++) printf("   Recall@%d %.4f", kl[a], hits[a] / used);
        printf("\n");
        if (B) printf("  95%% interval (bootstrap over queries, %d replicates):", B);
        for (int a = 0; B && a <= nk; a++) {
            double lo, hi;
            bootstrap_mean_interval(per_q + (size_t)a * q.n, used, B, BOOTSTRAP_SEED, &lo, &hi);
            if (a) printf("   Recall@%d [%.4f, %.4f]", kl[a - 1], lo, hi);
            else printf(" mAP [%.4f, %.4f]", lo, hi);
        }
        if (B) printf("\n");
        if (paired) {
            printf("  baseline mAP %.4f, difference %+.4f", bmap, map - bmap);
            if (B) printf("   95%% paired interval (bootstrap over queries) [%+.4f, %+.4f]", dlo, dhi);
            printf("   (AP higher here on %d queries, lower on %d)\n", better, worse);
        }
    }
    free(hits);
out:
    free(kl); free(per_q); free(bper_q);
    emb_free(&q);
    emb_free(&r);
    if (paired) { emb_free(&bq); emb_free(&br); }
    return rc;
}


static int cmp_by_id(const void *a, const void *b, void *ids) {
    int64_t x = ((const int64_t *)ids)[*(const int *)a], y = ((const int64_t *)ids)[*(const int *)b];
    return (x > y) - (x < y);
}

/* Group ids renumbered 0..G-1 in increasing order (-1 stays -1; ids 0..G-1 keep their numbers):
 * the file's scene ids are any 64-bit integers, and the fold code indexes an array by them.
 * Returns G. */
static int dense_groups(const int64_t *g, int n, int *out) {
    int *rank = xmalloc(sizeof *rank * (size_t)(n > 0 ? n : 1)), G = 0;
    for (int i = 0; i < n; i++) rank[i] = i;
    /* row numbers sorted by id; each run of equal ids gets one number */
    qsort_r(rank, (size_t)n, sizeof *rank, cmp_by_id, (void *)g);
    for (int a = 0; a < n; a++) {
        int i = rank[a];
        if (g[i] < 0) { out[i] = -1; continue; }
        if (a == 0 || g[rank[a - 1]] != g[i]) G++;
        out[i] = G - 1;
    }
    free(rank);
    return G;
}

static int eval_classify(int argc, char **argv) {
    const char *ep = NULL, *vote = "majority", *group = "none", *mpath = NULL, *kind_s = "scan", *hash_s = "pca",
               *classifier = "knn";
    int k = 0, folds = 5, bits = 0, json = 0, seed = 0, B = BOOTSTRAP_DEFAULT_N;
    double tau = 0.1, l2 = 1e-3;
    arg_spec specs[] = {
        OPT_EMB(&ep, "labelled embeddings", .required = 1),
        {"classifier", ARG_STR, &classifier, "knn (the vote over the nearest cases) or probe (a linear probe: softmax "
                                             "regression, the supervised baseline)", "knn|probe"},
        {"l2", ARG_DOUBLE, &l2, "linear probe: L2 weight", "[0, inf)"},
        {"folds", ARG_INT, &folds, "cross-validation folds (5 as the paper)", "[2, inf)"},
        OPT_K_BY_VOTE(&k),
        OPT_VOTE(&vote),
        OPT_TAU(&tau),
        {"group", ARG_STR, &group, "folds: stratified (none) or grouped by scene or patient", "none|scene|patient"},
        OPT_MANIFEST(&mpath, "manifest with the patient column (for --group patient)"),
        {"bits", ARG_INT, &bits, "hash to this many bits, neighbours by Hamming (0 = float cosine)", "[0, inf)"},
        OPT_HASH(&hash_s, .def = "pca when bits < embedding size, sign when equal"),
        OPT_INDEX_KIND(&kind_s),
        OPT_SEED(&seed),
        OPT_BOOTSTRAP(&B),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, "endoret eval classify --emb E [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    int probe = !strcmp(classifier, "probe");
    knn_cv_cfg cfg = {0};
    cfg.weighted = !strcmp(vote, "weighted");
    cfg.k = k ? k : knn_default_k(cfg.weighted);
    cfg.tau = tau;
    cfg.bits = bits;
    cfg.folds = folds;
    cfg.seed = (uint64_t)seed;
    if ((rc = index_kind_parse(kind_s, &cfg.kind))) return rc;
    if ((rc = hash_kind_parse(hash_s, &cfg.hash))) return rc;
    emb_set e;
    if ((rc = emb_load_arg(ep, "--emb", &e))) return rc;
    if ((rc = emb_require_cosine(&e, "--emb"))) { emb_free(&e); return rc; } /* knn_cv's neighbours are cosine ones */
    int n = e.n, C = e.nlabel_names;
    int *label = xmalloc((size_t)n * sizeof(int)), *grp = NULL;
    manifest m = {0};
    int have_m = 0;
    for (int i = 0; i < n; i++) label[i] = e.labels ? (int)e.labels[i] : -1;
    if (!e.labels) { rc = er_fail(ER_INPUT, "--emb: %s has no labels", ep); goto out; }
    for (int i = 0; i < n; i++) if (label[i] >= C) C = label[i] + 1;
    if (C < 2) { rc = er_fail(ER_INPUT, "--emb: classification needs at least 2 labels"); goto out; }
    if (!strcmp(group, "scene")) {
        if (!e.scene) { rc = er_fail(ER_INPUT, "--group scene: the embedding file has no scene ids"); goto out; }
        grp = xmalloc((size_t)n * sizeof(int));
        if (!dense_groups(e.scene, n, grp)) {
            rc = er_fail(ER_INPUT, "--group scene: %s has no scene id on any row (-1 everywhere): nothing to group by", ep);
            goto out;
        }
        cfg.grouped = 1;
    } else if (!strcmp(group, "patient")) {
        if (!mpath) { rc = er_fail(ER_INPUT, "--group patient needs --manifest (its patient column)"); goto out; }
        if ((rc = manifest_load(mpath, &m))) goto out;
        have_m = 1;
        if (m.n != n) { rc = er_fail(ER_INPUT, "--manifest: %d rows, embedding file %d", m.n, n); goto out; }
        char **names; int ng;
        manifest_field_ids(&m, MF_PATIENT, &grp, &names, &ng);
        manifest_free_labels(NULL, names, ng);
        if (ng == 0) { /* each row would be its own group: not what --group patient asks */
            rc = er_fail(ER_INPUT, "--group patient: %s has no 'patient' column (or it is empty on every row)", mpath);
            goto out;
        }
        cfg.grouped = 1;
    }
    int *pred = xmalloc((size_t)n * sizeof(int)), *fold = xmalloc((size_t)n * sizeof(int));
    double *score = xmalloc((size_t)n * C * sizeof(double)), *pos = xmalloc((size_t)n * sizeof(double));
    rc = probe ? probe_cv(e.x, n, e.dim, label, cfg.grouped ? grp : NULL, C, folds, cfg.seed, l2, pred, score, fold)
               : knn_cv(e.x, n, e.dim, label, grp, C, &cfg, pred, score, fold);
    if (!rc) {
        int64_t *conf = xmalloc((size_t)C * C * 8);
        confusion_matrix(label, pred, n, C, conf);
        double acc = accuracy_from_confusion(conf, C), f1 = f1_from_confusion(conf, C, C == 2 ? 1 : -1), auc = NAN;
        double acc_lo, acc_hi; /* over the labelled items, as the accuracy */
        {
            double *right = xmalloc(sizeof *right * (size_t)n);
            int m = 0;
            for (int i = 0; i < n; i++) if (label[i] >= 0) right[m++] = pred[i] == label[i];
            bootstrap_mean_interval(right, m, B, BOOTSTRAP_SEED, &acc_lo, &acc_hi);
            free(right);
        }
        if (C == 2) { for (int i = 0; i < n; i++) pos[i] = score[(size_t)i * C + 1]; auc = roc_auc(pos, label, n); }
        else { /* macro one-vs-rest AUC */
            int *t = xmalloc((size_t)n * sizeof(int));
            double s = 0; int used = 0;
            for (int c = 0; c < C; c++) {
                for (int i = 0; i < n; i++) { pos[i] = score[(size_t)i * C + c]; t[i] = label[i] < 0 ? -1 : label[i] == c; }
                double a = roc_auc(pos, t, n);
                if (a == a) { s += a; used++; }
            }
            auc = used ? s / used : NAN;
            free(t);
        }
        /* per-fold accuracy spread */
        double *facc = xcalloc((size_t)folds, sizeof *facc);
        int *fn = xcalloc((size_t)folds, sizeof *fn);
        for (int i = 0; i < n; i++) if (label[i] >= 0) { fn[fold[i]]++; facc[fold[i]] += pred[i] == label[i]; }
        double mean = 0, sd = 0; int nf = 0;
        for (int f = 0; f < folds; f++) if (fn[f]) { facc[f] /= fn[f]; mean += facc[f]; nf++; }
        mean /= nf ? nf : 1;
        for (int f = 0; f < folds; f++) if (fn[f]) sd += (facc[f] - mean) * (facc[f] - mean);
        sd = nf > 1 ? sqrt(sd / (nf - 1)) : 0;
        if (json) {
            printf("{\"classifier\": \"%s\", \"n\": %d, \"folds\": %d, \"k\": %d, \"vote\": \"%s\", \"bits\": %d, \"accuracy\": ",
                   classifier, n, folds, cfg.k, vote, bits);
            json_put_num(stdout, acc); json_put_field(stdout, "auc", auc);
            json_put_field(stdout, "f1", f1); json_put_field(stdout, "fold_accuracy_sd", sd);
            if (B) { json_put_field(stdout, "accuracy_lo", acc_lo); json_put_field(stdout, "accuracy_hi", acc_hi); }
            printf(", \"confusion\": [");
            for (int a = 0; a < C; a++) {
                printf("%s[", a ? ", " : "");
                for (int b = 0; b < C; b++) printf("%s%lld", b ? ", " : "", (long long)conf[a * C + b]);
                printf("]");
            }
            printf("]}\n");
        } else {
            if (probe)
                printf("linear probe (softmax regression, L2 %g, standardised features), %d-fold %s CV, %d items\n", l2, folds,
                       cfg.grouped ? "grouped" : "stratified", n);
            else
                printf("kNN classification, %d-fold %s CV, %d items, %s vote k = %d, %s\n", folds,
                       cfg.grouped ? "grouped" : "stratified", n, vote, cfg.k, bits ? "Hamming" : "float cosine");
            printf("  accuracy %.4f (fold sd %.4f)   AUC %.4f   F1 %.4f%s\n", acc, sd, auc, f1, C == 2 ? "" : " (macro)");
            if (B) printf("  95%% interval of the accuracy (bootstrap over items, %d replicates): [%.4f, %.4f]\n", B, acc_lo, acc_hi);
            printf("  confusion (rows = truth, columns = prediction):\n  %12s", "");
            for (int b = 0; b < C; b++) printf(" %10.10s", b < e.nlabel_names ? e.label_names[b] : "?");
            printf("\n");
            for (int a = 0; a < C; a++) {
                printf("  %12.12s", a < e.nlabel_names ? e.label_names[a] : "?");
                for (int b = 0; b < C; b++) printf(" %10lld", (long long)conf[a * C + b]);
                printf("\n");
            }
        }
        free(conf); free(facc); free(fn);
    }
    free(pred); free(fold); free(score); free(pos);
out:
    free(label);
    free(grp);
    if (have_m) manifest_free(&m);
    emb_free(&e);
    return rc;
}

static int eval_multiview(int argc, char **argv) {
    const char *ep = NULL;
    int k = REID_DEFAULT_K, bits = 0, json = 0, B = BOOTSTRAP_DEFAULT_N;
    arg_spec specs[] = {
        OPT_EMB(&ep, "embeddings of every view, with scene and view ids (views 0..3 = Q1,Q2,R1,R2)", .required = 1),
        OPT_K(&k),
        {"bits", ARG_INT, &bits, "hash the averaged descriptors (0 = the file's distance)", "[0, inf)"},
        OPT_BOOTSTRAP(&B),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, "endoret eval multiview --emb E [--k 10] [--bootstrap N] [--json]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    emb_set e;
    if ((rc = emb_load_arg(ep, "--emb", &e))) return rc;
    mv_row rows[9];
    reid_view_result keep[9];
    memset(keep, 0, sizeof keep);
    rc = multiview_eval_keep(&e, k, bits, 0, rows, keep);
    emb_free(&e);
    if (rc) return rc;
    if (!json) {
        printf("multi-view re-identification (EndoFinder table 3 layout), descriptor averaging, top-%d, %s\n", k,
               bits ? "Hamming" : emb_distance_name(keep[0].dist));
        printf("| Q1 | Q2 | R1 | R2 | scenes |  uAP  | Acc@1 | R@P90 |%s\n|----|----|----|----|-------:|------:|------:|------:|%s\n",
               B ? " uAP 95% interval | Acc@1 95% interval |" : "", B ? "----------------:|------------------:|" : "");
    }
    for (int o = 0; o < 9; o++) {
        const mv_row *r = &rows[o];
        if (json) {
            printf("{\"query_views\": \"%s%s\", \"ref_views\": \"%s%s\", \"scenes\": %d, \"k\": %d, \"uAP\": ", r->qmask & 1 ? "Q1" : "",
                   r->qmask & 2 ? "Q2" : "", r->rmask & 1 ? "R1" : "", r->rmask & 2 ? "R2" : "", r->nscenes, keep[o].k);
            json_put_num(stdout, r->r.uap); json_put_field(stdout, "acc1", r->r.acc1);
            json_put_field(stdout, "recall_p90", r->r.recall_p90);
            print_interval(keep[o].pred, keep[o].npred, keep[o].gt, keep[o].ngt, B, 1);
            printf("}\n");
        } else {
            printf("| %s | %s | %s | %s | %6d | %.3f | %.3f | %.3f |", r->qmask & 1 ? "✓ " : "  ", r->qmask & 2 ? "✓ " : "  ",
                   r->rmask & 1 ? "✓ " : "  ", r->rmask & 2 ? "✓ " : "  ", r->nscenes, r->r.uap, r->r.acc1, r->r.recall_p90);
            if (B) {
                reid_interval ci;
                reid_bootstrap(keep[o].pred, keep[o].npred, keep[o].gt, keep[o].ngt, B, BOOTSTRAP_SEED, &ci);
                printf("   [%.3f, %.3f] |     [%.3f, %.3f] |", ci.lo.uap, ci.hi.uap, ci.lo.acc1, ci.hi.acc1);
            }
            printf("\n");
        }
        reid_view_result_free(&keep[o]);
    }
    return ER_OK;
}

int cmd_eval_compare(int argc, char **argv);
int cmd_eval_split(int argc, char **argv);
int cmd_eval_align(int argc, char **argv);
int cmd_eval_sequence(int argc, char **argv);

int cmd_eval_perceived(int argc, char **argv);

int cmd_eval(int argc, char **argv) {
    static const arg_sub subs[] = {
        {"reid", eval_reid, "uAP, Acc@1, Recall@P90 (ISC2021 definitions) from query/reference files + GT pairs, or "
                            "inside one file between query and reference views (--emb --ref-view --query-view)"},
        {"retrieval", eval_retrieval, "Recall@k and mAP with label relevance (dual-backbone paper)"},
        {"classify", eval_classify, "k-fold CV of the kNN classifier: accuracy, ROC AUC, F1, confusion matrix"},
        {"split", cmd_eval_split, "train / test classification: weighted kNN or linear probe, few-label shares (PGCon tables)"},
        {"align", cmd_eval_align, "alignment and uniformity of the descriptors (Wang & Isola; PGCon fig. 4)"},
        {"multiview", eval_multiview, "EndoFinder table 3: every combination of query views Q1,Q2 and reference views R1,R2"},
        {"sequence", cmd_eval_sequence, "frames grouped by polyp: every frame a query, near-duplicates ignored; mAP, Acc@1, "
                                        "R@P90, 2-vs-2 views"},
        {"compare", cmd_eval_compare, "paired test of two or more embedding files on the same queries (bootstrap uAP, McNemar Acc@1)"},
        {"perceived", cmd_eval_perceived, "correlate a distance with perceived-similarity scores"},
    };
    return args_dispatch(argc, argv, "endoret eval <evaluation> [options]   (endoret eval <evaluation> --help)", subs,
                         sizeof subs / sizeof *subs);
}
