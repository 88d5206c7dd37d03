/* cmd_eval_perceived.c — `endoret eval perceived`: correlate one or more descriptors' distances
 * with the perceived-similarity ground truth (spec §3.4-3.6, paper table 1 and figures 2-3).
 *
 *   endoret eval perceived --gt pairs.csv --emb A.safetensors[,B.safetensors...] [--distance cosine|hamming|chi2[,...]]
 *                          [--names a,b] [--out DIR] [--bins 20] [--kmax 20] [--group auto|scene|none] [--json]
 *
 * Correlations are between the similarity (-distance) and the mean pair score. With two or more
 * descriptors, every ordered pair of methods is compared with Steiger's z1* (and Meng-Rosenthal-
 * Rubin) on Kendall tau-b and on Pearson r. --out writes histograms.csv, hist_<name>.svg,
 * recall.csv / recall.svg (paper's sparse recall at k) and recall_scored.csv / .svg (spec §3.4). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/retrieval/embeddings.h"
#include "infer/perceived/perceived_eval.h"
#include "infer/perceived/perceived_likert.h"
#include "infer/perceived/perceived_stats.h"
#include "nn/base/svg_plot.h"
#include "infer/perceived/perceived_table.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"

/* Split "a,b,c" into a NULL-terminated array of copies. */
static char **split_commas(const char *s, int *n) {
    int cnt = 1;
    for (const char *p = s; *p; p++) cnt += *p == ',';
    char **v = xcalloc(cnt + 1, sizeof *v);
    const char *p = s;
    for (int i = 0; i < cnt; i++) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        v[i] = xmalloc(l + 1);
        memcpy(v[i], p, l);
        v[i][l] = 0;
        p = e ? e + 1 : p + l;
    }
    *n = cnt;
    return v;
}
static void free_strs(char **v) {
    for (int i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}
static void jnum(FILE *f, const char *key, double v) {
    if (isfinite(v)) fprintf(f, "\"%s\":%.9g", key, v);
    else fprintf(f, "\"%s\":null", key);
}
/* Base name of a path without folder and extension, for default method names. */
static char *stem(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    char *s = xstrdup(b), *d = strrchr(s, '.');
    if (d && d != s) *d = 0;
    return s;
}
static void sanitize(char *s) {
    for (; *s; s++) if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_')) *s = '_';
}

typedef struct {
    char *name;
    emb_set e;
    pdist_set p;
    int *ia, *ib;
    double *sim;   /* npairs: -distance */
    double *dist;
    corr_summary cs;
    double lo, hi, *hist; /* 4 * bins */
    double bd[6];         /* Bhattacharyya between levels (0,1)(0,2)(0,3)(1,2)(1,3)(2,3) */
    double *recall;       /* 3 * kmax */
    int npos[3];
    double scored[20], scored_auc; /* spec §3.4 curve at x = 0.05 .. 1 */
    int scored_nq;
} method;

/* The figures: fractions and recalls, so the y axis starts at 0; points marked. */
static int plot(const char *path, const char *title, const char *xlabel, const char *ylabel, const svg_series *s, int ns) {
    svg_opts o = {.title = title, .xlabel = xlabel, .ylabel = ylabel, .width = 640, .height = 420, .include_zero = 1};
    return svg_line_plot(path, &o, s, ns);
}

static const int BD_PAIRS[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
static const char *LEVEL_NAMES[4] = {"-2", "-1", "+1", "+2"};

static int write_outputs(const char *out, method *m, int nm, int bins, int kmax) {
    int rc = make_dirs(out);
    if (rc) return rc;
    char *path = path_join(out, "histograms.csv");
    atomic_file af;
    if ((rc = atomic_open(&af, path))) { free(path); return rc; }
    fprintf(af.f, "method,bin_lo,bin_hi,n_m2,n_m1,n_p1,n_p2\n");
    for (int i = 0; i < nm; i++)
        for (int b = 0; b < bins; b++) {
            double w = (m[i].hi - m[i].lo) / bins;
            fprintf(af.f, "%s,%.9g,%.9g,%g,%g,%g,%g\n", m[i].name, m[i].lo + b * w, m[i].lo + (b + 1) * w, m[i].hist[b],
                    m[i].hist[bins + b], m[i].hist[2 * bins + b], m[i].hist[3 * bins + b]);
        }
    rc = atomic_commit(&af);
    free(path);
    if (rc) return rc;
    double *x = xmalloc((bins + kmax + 20) * sizeof(double)), *y = xmalloc(4 * bins * sizeof(double));
    for (int i = 0; i < nm && !rc; i++) {
        svg_series s[4];
        char label[4][64];
        for (int L = 0; L < 4; L++) {
            double tot = 0;
            for (int b = 0; b < bins; b++) tot += m[i].hist[L * bins + b];
            for (int b = 0; b < bins; b++) y[L * bins + b] = tot > 0 ? m[i].hist[L * bins + b] / tot : NAN;
            snprintf(label[L], sizeof label[L], "H(%s) n=%g", LEVEL_NAMES[L], tot);
            s[L] = (svg_series){label[L], bins, x, y + L * bins, 1};
        }
        for (int b = 0; b < bins; b++) x[b] = m[i].lo + b * (m[i].hi - m[i].lo) / bins;
        char fname[300], title[300];
        char *nm_s = xstrdup(m[i].name);
        sanitize(nm_s);
        snprintf(fname, sizeof fname, "hist_%s.svg", nm_s);
        free(nm_s);
        snprintf(title, sizeof title, "%s: distance histograms per Likert level", m[i].name);
        path = path_join(out, fname);
        rc = plot(path, title, pdist_name(m[i].p.kind), "fraction of judgements", s, 4);
        free(path);
    }
    if (!rc) {
        path = path_join(out, "recall.csv");
        if (!(rc = atomic_open(&af, path))) {
            fprintf(af.f, "method,k,recall_p2,recall_p1,recall_similar\n");
            for (int i = 0; i < nm; i++)
                for (int k = 0; k < kmax; k++)
                    fprintf(af.f, "%s,%d,%.9g,%.9g,%.9g\n", m[i].name, k + 1, m[i].recall[k], m[i].recall[kmax + k], m[i].recall[2 * kmax + k]);
            rc = atomic_commit(&af);
        }
        free(path);
    }
    if (!rc) {
        svg_series *s = xmalloc(2 * nm * sizeof *s);
        char (*label)[80] = xmalloc(2 * nm * sizeof *label);
        for (int k = 0; k < kmax; k++) x[k] = k + 1;
        for (int i = 0; i < nm; i++)
            for (int d = 0; d < 2; d++) {
                snprintf(label[2 * i + d], 80, "%.40s L=%s", m[i].name, d == 0 ? "+2" : "+1");
                s[2 * i + d] = (svg_series){label[2 * i + d], kmax, x, m[i].recall + d * kmax, 0};
            }
        path = path_join(out, "recall.svg");
        rc = plot(path, "sparse recall in L-scored domains", "k nearest neighbours", "sparse recall", s, 2 * nm);
        free(path);
        free(s);
        free(label);
    }
    if (!rc) {
        path = path_join(out, "recall_scored.csv");
        if (!(rc = atomic_open(&af, path))) {
            fprintf(af.f, "method,position,recall\n");
            for (int i = 0; i < nm; i++)
                for (int t = 0; t < 20; t++) fprintf(af.f, "%s,%.2f,%.9g\n", m[i].name, (t + 1) / 20.0, m[i].scored[t]);
            rc = atomic_commit(&af);
        }
        free(path);
    }
    if (!rc) {
        svg_series *s = xmalloc(nm * sizeof *s);
        for (int t = 0; t < 20; t++) x[t] = (t + 1) / 20.0;
        for (int i = 0; i < nm; i++) s[i] = (svg_series){m[i].name, 20, x, m[i].scored, 0};
        path = path_join(out, "recall_scored.svg");
        rc = plot(path, "sparse recall among the scored candidates of each query", "normalised position t/|C_q|", "mean recall", s, nm);
        free(path);
        free(s);
    }
    free(x);
    free(y);
    return rc;
}

int cmd_eval_perceived(int argc, char **argv) {
    const char *gt_path = NULL, *emb_arg = NULL, *dist_arg = NULL, *names_arg = NULL, *out = NULL, *group_arg = "auto";
    int json = 0, bins = 20, kmax = 20;
    double alpha = 0.05;
    arg_spec specs[] = {
        {"gt", ARG_STR, &gt_path, "Likert pair file (a,b,score,observer)", .required = 1},
        OPT_EMB(&emb_arg, "embedding file(s), comma-separated (ids = the pair ids)", .required = 1),
        {"distance", ARG_STR, &dist_arg, "cosine|hamming|chi2, one or one per file"},
        {"names", ARG_STR, &names_arg, "method names, comma-separated"},
        OPT_OUT(&out, "folder for histograms.csv, hist_*.svg, recall.csv, recall.svg"),
        {"bins", ARG_INT, &bins, "histogram bins", "[2, 1000]"},
        {"kmax", ARG_INT, &kmax, "largest k of the sparse recall curves", "[1, 100000]"},
        {"group", ARG_STR, &group_arg, "items of the same scene are not recall candidates (auto = scene if present)",
         "auto|scene|none"},
        {"alpha", ARG_DOUBLE, &alpha, "significance level of the table's Steiger row", "(0, 1)"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret eval perceived --gt pairs.csv --emb E.safetensors[,E2...] [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;

    likert_gt gt;
    if ((rc = likert_load(gt_path, &gt))) return rc;
    if (gt.npairs < 3) { likert_free(&gt); return er_fail(ER_INPUT, "%s: %d scored pairs; at least 3 are needed", gt_path, gt.npairs); }
    int nm, nd = 0, nn = 0;
    char **files = split_commas(emb_arg, &nm), **dists = dist_arg ? split_commas(dist_arg, &nd) : NULL,
         **names = names_arg ? split_commas(names_arg, &nn) : NULL;
    method *m = xcalloc(nm, sizeof *m);
    double *score = xmalloc(gt.npairs * sizeof(double));
    for (int k = 0; k < gt.npairs; k++) score[k] = gt.pairs[k].score;
    if (dist_arg && nd != 1 && nd != nm) rc = er_fail(ER_INPUT, "--distance: %d values for %d embedding files", nd, nm);
    if (!rc && names_arg && nn != nm) rc = er_fail(ER_INPUT, "--names: %d names for %d embedding files", nn, nm);
    for (int i = 0; i < nm && !rc; i++) {
        m[i].name = names ? xstrdup(names[i]) : stem(files[i]);
        if ((rc = emb_load(files[i], &m[i].e))) break;
        const char *dn = dists ? dists[nd == 1 ? 0 : i] : m[i].e.distance ? m[i].e.distance : "cosine";
        pdist_kind kind;
        if ((rc = pdist_parse(dn, &kind))) break;
        if ((rc = pdist_prepare(&m[i].p, m[i].e.x, m[i].e.n, m[i].e.dim, kind))) {
            rc = er_fail(rc, "%s: %s", files[i], er_msg());
            break;
        }
        if ((rc = likert_index_pairs(&gt, m[i].e.ids, m[i].e.n, files[i], &m[i].ia, &m[i].ib))) break;
        m[i].dist = xmalloc(gt.npairs * sizeof(double));
        m[i].sim = xmalloc(gt.npairs * sizeof(double));
        for (int k = 0; k < gt.npairs; k++) {
            m[i].dist[k] = pdist_ij(&m[i].p, m[i].ia[k], m[i].ib[k]);
            m[i].sim[k] = -m[i].dist[k];
        }
        corr_summary_compute(m[i].sim, score, gt.npairs, &m[i].cs);
        m[i].hist = xmalloc(4 * bins * sizeof(double));
        likert_level_hist(&gt, m[i].dist, bins, &m[i].lo, &m[i].hi, m[i].hist);
        for (int q = 0; q < 6; q++) m[i].bd[q] = bhattacharyya(m[i].hist + BD_PAIRS[q][0] * bins, m[i].hist + BD_PAIRS[q][1] * bins, bins);
        const int64_t *group = NULL;
        if (!strcmp(group_arg, "scene") && !m[i].e.scene) { rc = er_fail(ER_INPUT, "--group scene: %s has no \"scene\" tensor", files[i]); break; }
        if (strcmp(group_arg, "none")) group = m[i].e.scene;
        m[i].recall = xmalloc(3 * kmax * sizeof(double));
        sparse_recall(&gt, m[i].ia, m[i].ib, &m[i].p, group, kmax, m[i].recall, m[i].npos);
        m[i].scored_auc = sparse_recall_scored(&gt, m[i].ia, m[i].ib, &m[i].p, group, 20, m[i].scored, &m[i].scored_nq);
    }
    corr_ztest *st = NULL, *st_p = NULL, *mrr_t = NULL, *mrr_p = NULL;
    double *taub = NULL, *rb = NULL;
    if (!rc) {
        taub = xmalloc(nm * nm * sizeof(double));
        rb = xmalloc(nm * nm * sizeof(double));
        for (int i = 0; i < nm; i++)
            for (int j = 0; j < nm; j++) {
                taub[i * nm + j] = i == j ? 1 : corr_kendall_tau_b(m[i].sim, m[j].sim, gt.npairs);
                rb[i * nm + j] = i == j ? 1 : corr_pearson(m[i].sim, m[j].sim, gt.npairs);
            }
        corr_summary *cs = xmalloc(nm * sizeof *cs);
        for (int i = 0; i < nm; i++) cs[i] = m[i].cs;
        st = xmalloc(nm * nm * sizeof *st);
        st_p = xmalloc(nm * nm * sizeof *st);
        mrr_t = xmalloc(nm * nm * sizeof *st);
        mrr_p = xmalloc(nm * nm * sizeof *st);
        perceived_compare(cs, taub, nm, st);
        for (int i = 0; i < nm; i++)
            for (int j = 0; j < nm; j++) {
                if (i == j) continue;
                st_p[i * nm + j] = steiger_z1star(cs[i].pearson, cs[j].pearson, rb[i * nm + j], gt.npairs);
                mrr_t[i * nm + j] = mrr_z(cs[i].kendall, cs[j].kendall, taub[i * nm + j], gt.npairs);
                mrr_p[i * nm + j] = mrr_z(cs[i].pearson, cs[j].pearson, rb[i * nm + j], gt.npairs);
            }
        if (out) rc = write_outputs(out, m, nm, bins, kmax);
        if (!rc && json) {
            printf("{\"n_pairs\":%d,\"n_judgements\":%d,\"n_similar\":%d,", gt.npairs, gt.nrec, m[0].npos[2]);
            printf("\"distance\":\"%s\",", pdist_name(m[0].p.kind));
            jnum(stdout, "pearson", cs[0].pearson); putchar(',');
            jnum(stdout, "spearman", cs[0].spearman); putchar(',');
            jnum(stdout, "kendall_tau_b", cs[0].kendall); putchar(',');
            jnum(stdout, "se_pearson", cs[0].se_pearson); putchar(',');
            jnum(stdout, "se_spearman", cs[0].se_spearman); putchar(',');
            jnum(stdout, "se_kendall_tau_b", cs[0].se_kendall);
            printf(",\"methods\":[");
            for (int i = 0; i < nm; i++) {
                printf("%s{\"name\":\"", i ? "," : "");
                for (const char *c = m[i].name; *c; c++) if (*c != '"' && *c != '\\' && (unsigned char)*c >= 32) putchar(*c);
                printf("\",\"distance\":\"%s\",", pdist_name(m[i].p.kind));
                jnum(stdout, "pearson", cs[i].pearson); putchar(',');
                jnum(stdout, "spearman", cs[i].spearman); putchar(',');
                jnum(stdout, "kendall_tau_b", cs[i].kendall); putchar(',');
                jnum(stdout, "se_pearson", cs[i].se_pearson); putchar(',');
                jnum(stdout, "se_spearman", cs[i].se_spearman); putchar(',');
                jnum(stdout, "se_kendall_tau_b", cs[i].se_kendall);
                printf(",\"bhattacharyya\":{");
                for (int q = 0; q < 6; q++) {
                    char key[16];
                    snprintf(key, sizeof key, "%s:%s", LEVEL_NAMES[BD_PAIRS[q][0]], LEVEL_NAMES[BD_PAIRS[q][1]]);
                    if (q) putchar(',');
                    jnum(stdout, key, m[i].bd[q]);
                }
                printf("},");
                jnum(stdout, "sparse_recall_scored_auc", m[i].scored_auc);
                printf(",\"sparse_recall_scored_queries\":%d,\"sparse_recall_similar\":[", m[i].scored_nq);
                for (int k = 0; k < kmax; k++) printf("%s%.6g", k ? "," : "", isfinite(m[i].recall[2 * kmax + k]) ? m[i].recall[2 * kmax + k] : -1);
                printf("]}");
            }
            printf("],\"comparisons\":[");
            int first = 1;
            for (int i = 0; i < nm; i++)
                for (int j = 0; j < nm; j++) {
                    if (i == j) continue;
                    printf("%s{\"a\":%d,\"b\":%d,", first ? "" : ",", i, j);
                    first = 0;
                    jnum(stdout, "tau_ab", taub[i * nm + j]); putchar(',');
                    jnum(stdout, "steiger_z_tau", st[i * nm + j].z); putchar(',');
                    jnum(stdout, "steiger_p_greater_tau", st[i * nm + j].p_greater); putchar(',');
                    jnum(stdout, "steiger_p_two_tau", st[i * nm + j].p_two); putchar(',');
                    jnum(stdout, "mrr_z_tau", mrr_t[i * nm + j].z); putchar(',');
                    jnum(stdout, "mrr_p_two_tau", mrr_t[i * nm + j].p_two); putchar(',');
                    jnum(stdout, "steiger_z_pearson", st_p[i * nm + j].z); putchar(',');
                    jnum(stdout, "steiger_p_two_pearson", st_p[i * nm + j].p_two); putchar(',');
                    jnum(stdout, "mrr_z_pearson", mrr_p[i * nm + j].z); putchar(',');
                    jnum(stdout, "mrr_p_two_pearson", mrr_p[i * nm + j].p_two);
                    putchar('}');
                }
            printf("]}\n");
        } else if (!rc) {
            int ndis = 0;
            for (int k = 0; k < gt.npairs; k++) ndis += gt.pairs[k].score < 0;
            printf("perceived similarity: %d scored pairs (%d judgements, %d similar / %d dissimilar), ground truth %s\n\n",
                   gt.npairs, gt.nrec, m[0].npos[2], ndis, gt_path);
            const char **nmv = xmalloc(nm * sizeof *nmv);
            for (int i = 0; i < nm; i++) nmv[i] = m[i].name;
            perceived_table_print(stdout, nmv, cs, st, nm, alpha);
            free(nmv);
            printf("\nBhattacharyya distances between the per-level distance histograms (%d bins):\n%-16s", bins, "levels");
            for (int i = 0; i < nm; i++) printf("%16.15s", m[i].name);
            putchar('\n');
            for (int q = 0; q < 6; q++) {
                char key[16];
                snprintf(key, sizeof key, "H%s vs H%s", LEVEL_NAMES[BD_PAIRS[q][0]], LEVEL_NAMES[BD_PAIRS[q][1]]);
                printf("%-16s", key);
                for (int i = 0; i < nm; i++) printf("%16.4f", m[i].bd[q]);
                putchar('\n');
            }
            printf("\nsparse recall (couples with a +2 / +1 judgement / mean > 0 found among the k nearest):\n%-6s", "k");
            for (int i = 0; i < nm; i++) printf("%24.23s", m[i].name);
            putchar('\n');
            for (int k = 1; k <= kmax; k = k < 5 ? k + 1 : k * 2) {
                printf("%-6d", k);
                for (int i = 0; i < nm; i++) {
                    char c[64];
                    snprintf(c, sizeof c, "%.2f / %.2f / %.2f", m[i].recall[k - 1], m[i].recall[kmax + k - 1], m[i].recall[2 * kmax + k - 1]);
                    printf("%24s", c);
                }
                putchar('\n');
            }
            printf("\nsparse recall among each query's scored candidates (spec 3.4), area under the curve:\n");
            for (int i = 0; i < nm; i++) printf("  %-24s %.4f over %d queries\n", m[i].name, m[i].scored_auc, m[i].scored_nq);
            if (nm >= 2) {
                printf("\npairwise tests (z > 0: first method better correlated):\n");
                for (int i = 0; i < nm; i++)
                    for (int j = i + 1; j < nm; j++)
                        printf("  M%d vs M%d: Kendall tau: Steiger z=%.3f p=%.2e, MRR z=%.3f p=%.2e | Pearson: Steiger z=%.3f p=%.2e, MRR z=%.3f p=%.2e (two-sided)\n",
                               i + 1, j + 1, st[i * nm + j].z, st[i * nm + j].p_two, mrr_t[i * nm + j].z, mrr_t[i * nm + j].p_two,
                               st_p[i * nm + j].z, st_p[i * nm + j].p_two, mrr_p[i * nm + j].z, mrr_p[i * nm + j].p_two);
            }
            if (out) printf("\nwrote %s/{histograms.csv,hist_*.svg,recall.csv,recall.svg,recall_scored.csv,recall_scored.svg}\n", out);
        }
        free(cs);
    }
    for (int i = 0; i < nm; i++) {
        free(m[i].name); emb_free(&m[i].e); pdist_free(&m[i].p); free(m[i].ia); free(m[i].ib);
        free(m[i].sim); free(m[i].dist); free(m[i].hist); free(m[i].recall);
    }
    free(m); free(score); free(taub); free(rb); free(st); free(st_p); free(mrr_t); free(mrr_p);
    free_strs(files); free_strs(dists); free_strs(names);
    likert_free(&gt);
    return rc;
}
