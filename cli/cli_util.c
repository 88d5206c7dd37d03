/* cli_util.c — helpers shared by the retrieval commands. */
#include "cli/cli_util.h"
#include "nn/base/base.h"
#include "nn/base/args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void json_put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int parse_id_list(const char *s, const char *what, int64_t **ids, int *n) {
    return args_int64_list(s, what, ids, n); /* the one rule of integer lists */
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void json_put_num(FILE *f, double v) {
    if (v == v && v < 1e308 && v > -1e308) fprintf(f, "%.6g", v);
    else fputs("null", f);
}

void json_put_field(FILE *f, const char *key, double v) {
    fprintf(f, ", \"%s\": ", key);
    json_put_num(f, v);
}

int emb_same_rows(const emb_set *a, const emb_set *b, const char *pa, const char *pb) {
    if (a->n != b->n) return er_fail(ER_INPUT, "%s has %d rows, %s %d: a paired comparison needs the same rows", pb, b->n, pa, a->n);
    for (int i = 0; i < a->n; i++) {
        const char *x = a->labels && a->labels[i] >= 0 && a->labels[i] < a->nlabel_names ? a->label_names[a->labels[i]] : "";
        const char *y = b->labels && b->labels[i] >= 0 && b->labels[i] < b->nlabel_names ? b->label_names[b->labels[i]] : "";
        if (strcmp(x, y)) return er_fail(ER_INPUT, "%s row %d is labelled '%s', %s row %d '%s': not the same rows", pb, i, y, pa, i, x);
        int64_t u = a->labels ? a->labels[i] : -1, v = b->labels ? b->labels[i] : -1;
        if (!*x && u != v) /* unnamed labels: the numbers must agree */
            return er_fail(ER_INPUT, "%s row %d has label %lld, %s row %d %lld: not the same rows", pb, i, (long long)v, pa, i, (long long)u);
    }
    return ER_OK;
}
