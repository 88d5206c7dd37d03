/* args.c — see args.h. */
#include "nn/base/base.h"
#include "nn/base/args.h"
#include "nn/base/suggest.h"
#include "nn/base/value_range.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* "how the value is shown" once: the declared default text, else the slot's value */
static void default_text(const arg_spec *s, char *def, size_t size) {
    def[0] = 0;
    if (s->required) { snprintf(def, size, " (required)"); return; }
    if (s->def) { if (s->def[0]) snprintf(def, size, " (default: %s)", s->def); return; }
    switch (s->type) {
    case ARG_STR: if (*(const char **)s->dst) snprintf(def, size, " (default: %s)", *(const char **)s->dst); break;
    case ARG_INT:
    case ARG_THREADS: snprintf(def, size, " (default: %d)", *(int *)s->dst); break;
    case ARG_DOUBLE: snprintf(def, size, " (default: %g)", *(double *)s->dst); break;
    case ARG_FLOAT: snprintf(def, size, " (default: %g)", (double)*(float *)s->dst); break;
    case ARG_FLAG: break;
    }
}

void args_print_usage(FILE *f, const arg_spec *specs, int nspecs, const char *usage) {
    fprintf(f, "usage: %s\n", usage);
    if (nspecs) fprintf(f, "options:\n");
    for (int i = 0; i < nspecs; i++) {
        const arg_spec *s = &specs[i];
        char def[160], range[160] = "";
        default_text(s, def, sizeof def);
        if (s->range && s->type == ARG_STR) snprintf(range, sizeof range, ": %s", s->range);
        else if (s->range) snprintf(range, sizeof range, ", in %s", s->range);
        fprintf(f, "  --%-14s %s%s%s\n", s->name, s->help ? s->help : "", range, def);
    }
    fprintf(f, "  --%-14s %s\n", "help", "show this help");
}

/* The value against the declared range or allowed set: the one message of every option. */
static int check_range(const arg_spec *s, const char *v) {
    if (!s->range) return ER_OK;
    if (s->type == ARG_STR) {
        if (range_in_choices(s->range, v)) return ER_OK;
        char list[256];
        range_choices_text(s->range, list, sizeof list);
        suggest near; /* the choices are "a|b|c": offer each */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", s->range);
        suggest_init(&near, v);
        for (char *save = NULL, *c = strtok_r(buf, "|", &save); c; c = strtok_r(NULL, "|", &save)) suggest_offer(&near, c);
        const char *m = suggest_best(&near);
        return er_fail(ER_INPUT, "--%s: expected one of %s, got '%s'%s%s%s", s->name, list, v,
                       m ? " (did you mean '" : "", m ? m : "", m ? "'?)" : "");
    }
    double x = s->type == ARG_DOUBLE ? *(double *)s->dst : s->type == ARG_FLOAT ? (double)*(float *)s->dst
                                                                                 : (double)*(int *)s->dst;
    int in = range_contains(s->range, x);
    if (in < 0) return er_fail(ER_INPUT, "--%s: malformed range '%s' (a bug)", s->name, s->range);
    if (in) return ER_OK;
    return er_fail(ER_INPUT, "--%s: expected %s in %s, got '%s'", s->name,
                   s->type == ARG_DOUBLE || s->type == ARG_FLOAT ? "a number" : "an integer", s->range, v);
}

static int set_value(const arg_spec *s, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (s->type) {
    case ARG_STR: *(const char **)s->dst = v; return check_range(s, v);
    case ARG_INT: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < -2147483647L || x > 2147483647L)
            return er_fail(ER_INPUT, "--%s: expected an integer, got '%s'", s->name, v);
        *(int *)s->dst = (int)x;
        return check_range(s, v);
    }
    case ARG_THREADS: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < 0 || x > ARGS_MAX_THREADS)
            return er_fail(ER_INPUT, "--%s: expected a thread count in 0..%d (0 = the OpenMP default), got '%s'",
                           s->name, ARGS_MAX_THREADS, v);
        *(int *)s->dst = (int)x;
        return check_range(s, v);
    }
    case ARG_DOUBLE:
    case ARG_FLOAT: {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x))
            return er_fail(ER_INPUT, "--%s: expected a finite number, got '%s'", s->name, v);
        if (s->type == ARG_DOUBLE) *(double *)s->dst = x;
        else *(float *)s->dst = (float)x;
        return check_range(s, v);
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

static int unknown_option(const char *name, size_t nlen, const arg_spec *specs, int nspecs) {
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)(nlen < sizeof word ? nlen : sizeof word - 1), name);
    suggest near;
    suggest_init(&near, word);
    for (int k = 0; k < nspecs; k++) suggest_offer(&near, specs[k].name);
    const char *m = suggest_best(&near);
    return er_fail(ER_INPUT, "unknown option '--%.*s' (%s%s%ssee --help)", (int)nlen, name, m ? "did you mean --" : "",
                   m ? m : "", m ? "? " : "");
}

int args_parse(int argc, char **argv, const arg_spec *specs, int nspecs, const char *usage,
               char ***pos, int *npos) {
    char **p = pos ? xcalloc((size_t)argc + 1, sizeof *p) : NULL;
    char *given = xcalloc((size_t)nspecs + 1, 1);
    int np = 0, only_pos = 0, rc = ER_OK;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] != '-' ) {
            if (!only_pos && a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
                rc = er_fail(ER_INPUT, "unknown option '%s' (options are --name value; see --help)", a);
                break;
            }
            if (!p) { rc = er_fail(ER_INPUT, "unexpected argument '%s' (see --help)", a); break; }
            p[np++] = argv[i];
            continue;
        }
        if (!a[2]) { only_pos = 1; continue; }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        if (nlen == 4 && !strncmp(name, "help", 4)) {
            args_print_usage(stdout, specs, nspecs, usage);
            rc = ARGS_HELP;
            break;
        }
        int k = -1;
        for (int j = 0; j < nspecs; j++)
            if (strlen(specs[j].name) == nlen && !strncmp(specs[j].name, name, nlen)) k = j;
        if (k < 0) { rc = unknown_option(name, nlen, specs, nspecs); break; }
        const arg_spec *s = &specs[k];
        const char *v;
        if (eq) v = eq + 1;
        else if (s->type == ARG_FLAG) v = "1";
        else if (i + 1 < argc) v = argv[++i];
        else { rc = er_fail(ER_INPUT, "option '--%s' needs a value", s->name); break; }
        rc = set_value(s, v);
        given[k] = 1;
    }
    for (int k = 0; k < nspecs && !rc; k++)
        if (specs[k].required && !given[k]) rc = er_fail(ER_INPUT, "--%s is required (see --help)", specs[k].name);
    free(given);
    if (rc) { free(p); return rc; }
    if (pos) { *pos = p; *npos = np; }
    return ER_OK;
}

void args_print_subs(FILE *f, const arg_sub *subs, int nsubs) {
    for (int i = 0; i < nsubs; i++)
        fprintf(f, "  %-10s %s%s\n", subs[i].name, subs[i].help ? subs[i].help : "", subs[i].fn ? "" : " (not in this build)");
}

int args_dispatch(int argc, char **argv, const char *usage, const arg_sub *subs, int nsubs) {
    char names[256] = "";
    for (int i = 0; i < nsubs; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", subs[i].name);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: %s\n", usage);
        args_print_subs(stdout, subs, nsubs);
        return argc < 2 ? er_fail(ER_INPUT, "missing sub-command (%s)", names) : ER_OK;
    }
    suggest near;
    suggest_init(&near, argv[1]);
    for (int i = 0; i < nsubs; i++) {
        if (!strcmp(subs[i].name, argv[1])) {
            if (!subs[i].fn) return er_fail(ER_INPUT, "'%s' is not part of this build", argv[1]);
            return subs[i].fn(argc - 1, argv + 1);
        }
        suggest_offer(&near, subs[i].name);
    }
    const char *m = suggest_best(&near);
    return er_fail(ER_INPUT, "unknown sub-command '%s' (%s%s%sone of %s)", argv[1], m ? "did you mean '" : "",
                   m ? m : "", m ? "'? " : "", names);
}

int args_range(const char *name, long long v, long long lo, long long hi) {
    if (v >= lo && v <= hi) return ER_OK;
    return er_fail(ER_INPUT, "--%s: expected %lld..%lld, got %lld", name, lo, hi, v);
}

/* One rule for every list of numbers a user gives (--bits, --k, --id, --select-weight...): items are
 * an optional '-' and a decimal number (integers: digits only; numbers: digits or '.' first, finite),
 * separated by single commas; no spaces, no '+', no empty item. *out is int64_t[] or double[]. */
static int number_list(const char *s, const char *what, int integers, void **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!s || !*s) return er_fail(ER_INPUT, "%s: empty list", what);
    int cnt = 1;
    for (const char *c = s; *c; c++) cnt += *c == ',';
    int64_t *iv = integers ? xmalloc(sizeof *iv * (size_t)cnt) : NULL;
    double *dv = integers ? NULL : xmalloc(sizeof *dv * (size_t)cnt);
    const char *c = s;
    for (int i = 0; i < cnt; i++) {
        const char *d = c + (*c == '-');
        int starts = (*d >= '0' && *d <= '9') || (!integers && *d == '.'), ok = starts;
        char *end = (char *)c;
        errno = 0;
        if (starts && integers) iv[i] = strtoll(c, &end, 10), ok = !errno;
        else if (starts) dv[i] = strtod(c, &end), ok = end != c && isfinite(dv[i]);
        if (!ok || (*end && *end != ',') || (i < cnt - 1) != (*end == ',')) {
            free(iv), free(dv);
            return er_fail(ER_INPUT, "%s: expected %s separated by commas (no spaces), got '%s'", what, integers ? "integers" : "numbers", s);
        }
        c = end + (*end == ',');
    }
    *out = integers ? (void *)iv : (void *)dv;
    *n = cnt;
    return ER_OK;
}

int args_int64_list(const char *s, const char *what, int64_t **out, int *n) { return number_list(s, what, 1, (void **)out, n); }
int args_double_list(const char *s, const char *what, double **out, int *n) { return number_list(s, what, 0, (void **)out, n); }

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
