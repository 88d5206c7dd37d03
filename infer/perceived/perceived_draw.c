/* perceived_draw.c — see perceived_draw.h. */
#include "infer/perceived/perceived_draw.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/base/rng.h"

static int other_patient(const int64_t *group, int i, int j) {
    if (i == j) return 0;
    if (!group || group[i] < 0 || group[j] < 0) return 1;
    return group[i] != group[j];
}

typedef struct { int a, b; } ab;

int vss_draw(const pdist_set *p, const int64_t *group, int npairs, int per_process, int nbins, uint64_t seed,
             vss_draw_pair *out) {
    const int n = p->n;
    if (n < 2 || npairs <= 0 || per_process <= 0 || nbins < 1) return 0;
    rng_t r = rng_make(seed, rng_stream(RNG_SAMPLING, 0x755, 1));
    /* 1. density of the prior distance over cross-patient couples */
    const int64_t total = (int64_t)n * (n - 1) / 2, cap = 2000000;
    int64_t m = total < cap ? total : cap;
    double *d = xmalloc((size_t)m * sizeof(double));
    int64_t nd = 0;
    if (total <= cap) {
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                if (other_patient(group, i, j)) d[nd++] = pdist_ij(p, i, j);
    } else {
        for (int64_t t = 0; t < cap; t++) {
            int i = (int)rng_below(&r, n), j = (int)rng_below(&r, n);
            if (other_patient(group, i, j)) d[nd++] = pdist_ij(p, i, j);
        }
    }
    if (nd == 0) { free(d); return 0; }
    double lo = d[0], hi = d[0];
    for (int64_t t = 1; t < nd; t++) { if (d[t] < lo) lo = d[t]; if (d[t] > hi) hi = d[t]; }
    if (!(hi > lo)) hi = lo + 1;
    double *hist = xcalloc(nbins, sizeof(double));
    for (int64_t t = 0; t < nd; t++) {
        int b = (int)((d[t] - lo) / (hi - lo) * nbins);
        hist[b < 0 ? 0 : b >= nbins ? nbins - 1 : b] += 1;
    }
    free(d);
    /* 2. processes */
    double *wt = xmalloc(n * sizeof(double));
    ab *seen = xmalloc((size_t)npairs * sizeof *seen);
    int got = 0, proc = 0, fails = 0;
    while (got < npairs && fails < 50) {
        int v0 = (int)rng_below(&r, n);
        double tot = 0;
        for (int c = 0; c < n; c++) wt[c] = 1;
        for (int s = 0; s < got; s++) /* couples with v0 already drawn */
            if (seen[s].a == v0) wt[seen[s].b] = 0;
            else if (seen[s].b == v0) wt[seen[s].a] = 0;
        for (int c = 0; c < n; c++) {
            if (wt[c] == 0 || !other_patient(group, v0, c)) { wt[c] = 0; continue; }
            double dv = pdist_ij(p, v0, c);
            int b = (int)((dv - lo) / (hi - lo) * nbins);
            b = b < 0 ? 0 : b >= nbins ? nbins - 1 : b;
            wt[c] = 1.0 / (hist[b] > 0 ? hist[b] : 1.0);
            tot += wt[c];
        }
        if (tot <= 0) { fails++; continue; }
        int drawn = 0;
        for (int k = 0; k < per_process && got < npairs && tot > 0; k++) {
            double u = rng_uniform_double(&r) * tot, acc = 0;
            int pick = -1;
            for (int c = 0; c < n; c++) {
                if (wt[c] <= 0) continue;
                acc += wt[c];
                pick = c;
                if (acc > u) break;
            }
            tot -= wt[pick];
            wt[pick] = 0;
            out[got] = (vss_draw_pair){v0, pick, proc, pdist_ij(p, v0, pick)};
            seen[got] = (ab){v0 < pick ? v0 : pick, v0 < pick ? pick : v0};
            got++;
            drawn++;
        }
        if (drawn) { proc++; fails = 0; }
    }
    free(wt);
    free(seen);
    free(hist);
    return got;
}

/* ---- sheet ---- */
void vss_sheet_free(vss_sheet *s) {
    for (int i = 0; i < s->n; i++) { free(s->rows[i].image_a); free(s->rows[i].image_b); }
    free(s->rows);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

static int has_bad_char(const char *s) { return strchr(s, ',') || strchr(s, '\n') || strchr(s, '"'); }

int vss_sheet_save(const char *path, const vss_sheet *s) {
    for (int i = 0; i < s->n; i++)
        if (has_bad_char(s->rows[i].image_a) || has_bad_char(s->rows[i].image_b))
            return er_fail(ER_INPUT, "%s: image path of pair %d contains a comma, quote or newline", path, i);
    atomic_file af;
    int rc = atomic_open(&af, path);
    if (rc) return rc;
    fprintf(af.f, "pair,a,b,process,prior_distance,image_a,image_b\n");
    for (int i = 0; i < s->n; i++)
        fprintf(af.f, "%d,%lld,%lld,%d,%.9g,%s,%s\n", i, (long long)s->rows[i].a, (long long)s->rows[i].b, s->rows[i].process,
                s->rows[i].prior, s->rows[i].image_a, s->rows[i].image_b);
    return atomic_commit(&af);
}

int vss_sheet_load(const char *path, vss_sheet *s) {
    memset(s, 0, sizeof *s);
    char *text;
    size_t len;
    int rc = read_file(path, &text, &len);
    if (rc) return rc;
    int cap = 16, lineno = 0;
    s->rows = xmalloc(cap * sizeof *s->rows);
    s->dir = path_dirname(path);
    char *line = text;
    while (line && !rc) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        char *l = line;
        line = nl ? nl + 1 : NULL;
        size_t ll = strlen(l);
        if (ll && l[ll - 1] == '\r') l[--ll] = 0;
        if (!ll) continue;
        if (lineno == 1) {
            if (strcmp(l, "pair,a,b,process,prior_distance,image_a,image_b"))
                rc = er_fail(ER_INPUT, "%s: line 1: expected the header pair,a,b,process,prior_distance,image_a,image_b", path);
            continue;
        }
        char *f[7];
        int nf = 0;
        char *p = l;
        f[nf++] = p;
        while ((p = strchr(p, ',')) && nf < 8) { *p++ = 0; if (nf < 7) f[nf] = p; nf++; }
        if (nf != 7) { rc = er_fail(ER_INPUT, "%s: line %d: expected 7 fields, got %d", path, lineno, nf); break; }
        char *e1, *e2, *e3, *e4, *e5;
        errno = 0;
        long pair = strtol(f[0], &e1, 10);
        long long a = strtoll(f[1], &e2, 10), b = strtoll(f[2], &e3, 10);
        long proc = strtol(f[3], &e4, 10);
        double prior = strtod(f[4], &e5);
        if (*e1 || *e2 || *e3 || *e4 || *e5 || e1 == f[0] || e2 == f[1] || e3 == f[2] || errno) {
            rc = er_fail(ER_INPUT, "%s: line %d: pair, a, b, process and prior_distance must be numbers", path, lineno);
            break;
        }
        if (pair != s->n) { rc = er_fail(ER_INPUT, "%s: line %d: pair %ld out of sequence (expected %d)", path, lineno, pair, s->n); break; }
        if (a == b) { rc = er_fail(ER_INPUT, "%s: line %d: a pair of an item with itself", path, lineno); break; }
        if (s->n == cap) { cap *= 2; s->rows = xrealloc(s->rows, cap * sizeof *s->rows); }
        s->rows[s->n++] = (vss_sheet_row){a, b, (int)proc, prior, xstrdup(f[5]), xstrdup(f[6])};
    }
    if (!rc && lineno == 0) rc = er_fail(ER_INPUT, "%s: empty sheet", path);
    free(text);
    if (rc) vss_sheet_free(s);
    return rc;
}
