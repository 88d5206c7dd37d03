/* perceived_likert.c — loader of the Likert pair file; see perceived_likert.h. */
#include "infer/perceived/perceived_likert.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

const int LIKERT_SCORES[4] = {-2, -1, 1, 2};

int likert_level(int score) {
    switch (score) {
    case -2: return 0;
    case -1: return 1;
    case 1: return 2;
    case 2: return 3;
    default: return -1;
    }
}

static int parse_i64(const char *s, int64_t *v) {
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno) return 0;
    *v = x;
    return 1;
}

static int cmp_pair(const void *pa, const void *pb) {
    const likert_pair *a = pa, *b = pb;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    return 0;
}

static int find_pair(const likert_pair *p, int n, int64_t a, int64_t b) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (p[mid].a == a && p[mid].b == b) return mid;
        if (p[mid].a < a || (p[mid].a == a && p[mid].b < b)) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

/* Trim spaces at both ends in place. */
static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = 0;
    return s;
}

int likert_parse(const char *text, const char *name, likert_gt *gt) {
    memset(gt, 0, sizeof *gt);
    int cap = 64;
    gt->rec = xmalloc(cap * sizeof *gt->rec);
    char *buf = xstrdup(text);
    char *save = NULL;
    int lineno = 0;
    int rc = ER_OK;
    char *line = buf;
    while (line && rc == ER_OK) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        char *l = trim(line);
        line = nl ? nl + 1 : NULL;
        if (!*l || *l == '#') continue;
        if (lineno == 1 && strncmp(l, "a,", 2) == 0) continue; /* header */
        char *f[5];
        int nf = 0;
        char *p = l;
        f[nf++] = p;
        while ((p = strchr(p, ',')) != NULL) {
            *p++ = 0;
            if (nf == 5) break;
            f[nf++] = p;
        }
        if (nf != 4) {
            rc = er_fail(ER_INPUT, "%s: line %d: expected 4 fields a,b,score,observer, got %s", name, lineno,
                         nf < 4 ? "fewer" : "more");
            break;
        }
        for (int i = 0; i < 4; i++) f[i] = trim(f[i]);
        likert_record r = {0};
        int64_t sc;
        if (!parse_i64(f[0], &r.a)) { rc = er_fail(ER_INPUT, "%s: line %d: field a: '%s' is not an integer id", name, lineno, f[0]); break; }
        if (!parse_i64(f[1], &r.b)) { rc = er_fail(ER_INPUT, "%s: line %d: field b: '%s' is not an integer id", name, lineno, f[1]); break; }
        if (r.a == r.b) { rc = er_fail(ER_INPUT, "%s: line %d: a pair of an item with itself (%lld)", name, lineno, (long long)r.a); break; }
        const char *s = f[2][0] == '+' ? f[2] + 1 : f[2];
        if (!parse_i64(s, &sc) || likert_level((int)sc) < 0 || (f[2][0] == '+' && !isdigit((unsigned char)s[0]))) {
            rc = er_fail(ER_INPUT, "%s: line %d: field score: '%s' is not one of -2,-1,+1,+2", name, lineno, f[2]);
            break;
        }
        r.score = (int)sc;
        r.line = lineno;
        r.observer = xstrdup(f[3]);
        if (gt->nrec == cap) { cap *= 2; gt->rec = xrealloc(gt->rec, cap * sizeof *gt->rec); }
        gt->rec[gt->nrec++] = r;
    }
    (void)save;
    free(buf);
    if (rc) { likert_free(gt); return rc; }
    gt->name = xstrdup(name);
    /* unique unordered pairs, then mean scores */
    gt->pairs = xmalloc((gt->nrec ? gt->nrec : 1) * sizeof *gt->pairs);
    for (int i = 0; i < gt->nrec; i++) {
        likert_record *r = &gt->rec[i];
        gt->pairs[i] = (likert_pair){r->a < r->b ? r->a : r->b, r->a < r->b ? r->b : r->a, 0, 0};
    }
    qsort(gt->pairs, gt->nrec, sizeof *gt->pairs, cmp_pair);
    int np = 0;
    for (int i = 0; i < gt->nrec; i++)
        if (np == 0 || cmp_pair(&gt->pairs[np - 1], &gt->pairs[i])) gt->pairs[np++] = gt->pairs[i];
    gt->npairs = np;
    for (int i = 0; i < gt->nrec; i++) {
        likert_record *r = &gt->rec[i];
        int k = find_pair(gt->pairs, np, r->a < r->b ? r->a : r->b, r->a < r->b ? r->b : r->a);
        r->pair = k;
        gt->pairs[k].score += r->score;
        gt->pairs[k].nscores++;
    }
    for (int k = 0; k < np; k++) gt->pairs[k].score /= gt->pairs[k].nscores;
    return ER_OK;
}

int likert_load(const char *path, likert_gt *gt) {
    char *text;
    size_t len;
    int rc = read_file(path, &text, &len);
    if (rc) { memset(gt, 0, sizeof *gt); return rc; }
    if (strlen(text) != len) { free(text); memset(gt, 0, sizeof *gt); return er_fail(ER_INPUT, "%s: contains a NUL byte (not a CSV text file)", path); }
    rc = likert_parse(text, path, gt);
    free(text);
    return rc;
}

void likert_free(likert_gt *gt) {
    for (int i = 0; i < gt->nrec; i++) free(gt->rec[i].observer);
    free(gt->rec);
    free(gt->pairs);
    free(gt->name);
    memset(gt, 0, sizeof *gt);
}

typedef struct { int64_t id; int row; } id_row;
static int cmp_id_row(const void *pa, const void *pb) {
    const id_row *a = pa, *b = pb;
    return a->id < b->id ? -1 : a->id > b->id;
}
static int lookup(const id_row *t, int n, int64_t id) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (t[mid].id == id) return t[mid].row;
        if (t[mid].id < id) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

int likert_index_pairs(const likert_gt *gt, const int64_t *ids, int n, const char *ids_name, int **ia, int **ib) {
    id_row *t = xmalloc((n ? n : 1) * sizeof *t);
    for (int i = 0; i < n; i++) t[i] = (id_row){ids[i], i};
    qsort(t, n, sizeof *t, cmp_id_row);
    for (int i = 1; i < n; i++)
        if (t[i].id == t[i - 1].id) {
            int64_t d = t[i].id;
            free(t);
            return er_fail(ER_INPUT, "%s: id %lld appears twice", ids_name, (long long)d);
        }
    *ia = xmalloc((gt->npairs ? gt->npairs : 1) * sizeof(int));
    *ib = xmalloc((gt->npairs ? gt->npairs : 1) * sizeof(int));
    for (int k = 0; k < gt->npairs; k++) {
        int a = lookup(t, n, gt->pairs[k].a), b = lookup(t, n, gt->pairs[k].b);
        if (a < 0 || b < 0) {
            int64_t miss = a < 0 ? gt->pairs[k].a : gt->pairs[k].b;
            int line = 0; /* the first line scoring this pair */
            for (int r = 0; r < gt->nrec && !line; r++) if (gt->rec[r].pair == k) line = gt->rec[r].line;
            free(t); free(*ia); free(*ib); *ia = *ib = NULL;
            return er_fail(ER_INPUT, "%s: line %d: scored pair (%lld,%lld) names id %lld, which is not in %s",
                           gt->name ? gt->name : "ground truth", line, (long long)gt->pairs[k].a, (long long)gt->pairs[k].b,
                           (long long)miss, ids_name);
        }
        (*ia)[k] = a;
        (*ib)[k] = b;
    }
    free(t);
    return ER_OK;
}
