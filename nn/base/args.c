/* args.c — see args.h. */
#include "nn/base/base.h"
#include "nn/base/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void args_print_usage(FILE *f, const arg_spec *specs, int nspecs, const char *usage) {
    fprintf(f, "usage: %s\n", usage);
    if (nspecs) fprintf(f, "options:\n");
    for (int i = 0; i < nspecs; i++) {
        const arg_spec *s = &specs[i];
        char def[96] = "";
        switch (s->type) {
        case ARG_STR: if (*(const char **)s->dst) snprintf(def, sizeof def, " (default: %s)", *(const char **)s->dst); break;
        case ARG_INT:
        case ARG_THREADS: snprintf(def, sizeof def, " (default: %d)", *(int *)s->dst); break;
        case ARG_DOUBLE: snprintf(def, sizeof def, " (default: %g)", *(double *)s->dst); break;
        case ARG_FLOAT: snprintf(def, sizeof def, " (default: %g)", (double)*(float *)s->dst); break;
        case ARG_FLAG: break;
        }
        fprintf(f, "  --%-14s %s%s\n", s->name, s->help ? s->help : "", def);
    }
    fprintf(f, "  --%-14s %s\n", "help", "show this help");
}

static int set_value(const arg_spec *s, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (s->type) {
    case ARG_STR: *(const char **)s->dst = v; return ER_OK;
    case ARG_INT: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < -2147483647L || x > 2147483647L)
            return er_fail(ER_INPUT, "--%s: expected an integer, got '%s'", s->name, v);
        *(int *)s->dst = (int)x;
        return ER_OK;
    }
    case ARG_THREADS: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < 0 || x > ARGS_MAX_THREADS)
            return er_fail(ER_INPUT, "--%s: expected a thread count in 0..%d (0 = the OpenMP default), got '%s'",
                           s->name, ARGS_MAX_THREADS, v);
        *(int *)s->dst = (int)x;
        return ER_OK;
    }
    case ARG_DOUBLE:
    case ARG_FLOAT: {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x))
            return er_fail(ER_INPUT, "--%s: expected a finite number, got '%s'", s->name, v);
        if (s->type == ARG_DOUBLE) *(double *)s->dst = x;
        else *(float *)s->dst = (float)x;
        return ER_OK;
    }
    case ARG_FLAG: {
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes")) *(int *)s->dst = 1;
        else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no")) *(int *)s->dst = 0;
        else return er_fail(ER_INPUT, "--%s: expected true/false, got '%s'", s->name, v);
        return ER_OK;
    }
    }
    return er_fail(ER_INPUT, "--%s: unknown option type", s->name);
}

int args_parse(int argc, char **argv, const arg_spec *specs, int nspecs, const char *usage,
               char ***pos, int *npos) {
    char **p = pos ? xcalloc((size_t)argc + 1, sizeof *p) : NULL;
    int np = 0, only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] != '-' ) {
            if (!only_pos && a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
                free(p);
                return er_fail(ER_INPUT, "unknown option '%s' (options are --name value; see --help)", a);
            }
            if (!p) return er_fail(ER_INPUT, "unexpected argument '%s' (see --help)", a);
            p[np++] = argv[i];
            continue;
        }
        if (!a[2]) { only_pos = 1; continue; }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        if (nlen == 4 && !strncmp(name, "help", 4)) {
            args_print_usage(stdout, specs, nspecs, usage);
            free(p);
            return ARGS_HELP;
        }
        const arg_spec *s = NULL;
        for (int k = 0; k < nspecs; k++)
            if (strlen(specs[k].name) == nlen && !strncmp(specs[k].name, name, nlen)) s = &specs[k];
        if (!s) {
            free(p);
            return er_fail(ER_INPUT, "unknown option '--%.*s' (see --help)", (int)nlen, name);
        }
        const char *v;
        if (eq) v = eq + 1;
        else if (s->type == ARG_FLAG) v = "1";
        else if (i + 1 < argc) v = argv[++i];
        else {
            free(p);
            return er_fail(ER_INPUT, "option '--%s' needs a value", s->name);
        }
        int rc = set_value(s, v);
        if (rc) { free(p); return rc; }
    }
    if (pos) { *pos = p; *npos = np; }
    return ER_OK;
}

int args_range(const char *name, long long v, long long lo, long long hi) {
    if (v >= lo && v <= hi) return ER_OK;
    return er_fail(ER_INPUT, "--%s: expected %lld..%lld, got %lld", name, lo, hi, v);
}

/* One rule for every list of integers a user gives (--bits, --k, --id...): items are an optional
 * '-' and decimal digits, separated by single commas; no spaces, no '+', no empty item. */
int args_int64_list(const char *s, const char *what, int64_t **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!s || !*s) return er_fail(ER_INPUT, "%s: empty list", what);
    int cnt = 1;
    for (const char *c = s; *c; c++) cnt += *c == ',';
    int64_t *v = xmalloc(sizeof *v * (size_t)cnt);
    const char *c = s;
    for (int i = 0; i < cnt; i++) {
        const char *d = c + (*c == '-');
        char *end;
        errno = 0;
        long long x = *d >= '0' && *d <= '9' ? strtoll(c, &end, 10) : 0;
        if (!(*d >= '0' && *d <= '9') || errno || (*end && *end != ',') || (i < cnt - 1) != (*end == ',')) {
            free(v);
            return er_fail(ER_INPUT, "%s: expected integers separated by commas (no spaces), got '%s'", what, s);
        }
        v[i] = x;
        c = end + (*end == ',');
    }
    *out = v;
    *n = cnt;
    return ER_OK;
}

int args_int_list(const char *s, const char *what, int **out, int *n) {
    int64_t *v;
    int cnt, rc = args_int64_list(s, what, &v, &cnt);
    if (rc) return rc;
    for (int i = 0; i < cnt; i++)
        if (v[i] < -2147483647LL || v[i] > 2147483647LL) {
            free(v);
            return er_fail(ER_INPUT, "%s: %lld is out of the integer range, in '%s'", what, (long long)v[i], s);
        }
    int *w = xmalloc(sizeof *w * (size_t)cnt);
    for (int i = 0; i < cnt; i++) w[i] = (int)v[i];
    free(v);
    *out = w;
    *n = cnt;
    return ER_OK;
}
