/* config.c — `key = value` config files with sections, includes and --set overrides. */
#include "nn/base/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/base/suggest.h"
#include "nn/base/value_range.h"

#define CFG_MAX_INCLUDE_DEPTH 8

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

void cfg_set_str(char **slot, const char *value) {
    free(*slot);
    *slot = value ? xstrdup(value) : NULL;
}

static const char *type_name(cfg_type t) {
    switch (t) {
    case CFG_INT: return "an integer";
    case CFG_DOUBLE: return "a number";
    case CFG_STR: return "a string";
    case CFG_BOOL: return "true or false";
    }
    return "?";
}

/* The value now in s->dst against s->range; ER_INPUT with "where: key = value ..." on failure. */
static int check_value(const char *where, const cfg_spec *s) {
    if (!s->range || s->type == CFG_BOOL) return ER_OK;
    if (s->type == CFG_STR) {
        const char *v = *(char **)s->dst ? *(char **)s->dst : "";
        if (range_in_choices(s->range, v)) return ER_OK;
        char list[512];
        range_choices_text(s->range, list, sizeof list);
        return er_fail(ER_INPUT, "%s: key '%s' must be one of %s, got '%s'", where, s->key, list, v);
    }
    double v = s->type == CFG_INT ? (double)*(int *)s->dst : *(double *)s->dst;
    int inside = range_contains(s->range, v);
    if (inside < 0)
        return er_fail(ER_INPUT, "%s: key '%s' has a malformed range '%s' (a bug)", where, s->key, s->range);
    if (!inside) {
        if (s->type == CFG_INT)
            return er_fail(ER_INPUT, "%s: key '%s' = %d is outside %s", where, s->key, *(int *)s->dst, s->range);
        return er_fail(ER_INPUT, "%s: key '%s' = %g is outside %s", where, s->key, v, s->range);
    }
    return ER_OK;
}

int cfg_check(const cfg_spec *specs, int n, const char *origin) {
    for (int i = 0; i < n; i++) {
        int rc = check_value(origin, &specs[i]);
        if (rc) return rc;
    }
    return ER_OK;
}

int cfg_check_ranges_declared(const cfg_spec *specs, int n) {
    for (int i = 0; i < n; i++) {
        const cfg_spec *s = &specs[i];
        if (s->type == CFG_BOOL) continue;
        if (!s->range || !s->range[0]) return er_fail(ER_INPUT, "key '%s' declares no range", s->key);
        double lo, hi;
        int a, b;
        if (s->type != CFG_STR && range_parse_interval(s->range, &lo, &hi, &a, &b))
            return er_fail(ER_INPUT, "key '%s': malformed range '%s'", s->key, s->range);
        if (s->type == CFG_STR && s->range[0] == '[')
            return er_fail(ER_INPUT, "key '%s' is a string but declares an interval", s->key);
    }
    return ER_OK;
}

static const cfg_spec *find_spec(const char *key, const cfg_spec *specs, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(specs[i].key, key) == 0) return &specs[i];
    return NULL;
}

/* Store `val` into the slot of `key`; `where` prefixes error messages ("file:line"). known_only:
 * a key outside the table is skipped (it belongs to another reader of the same file). */
static int assign(const char *where, const char *key, const char *val, const cfg_spec *specs, int n, int known_only) {
    const cfg_spec *s = find_spec(key, specs, n);
    if (!s && known_only) return ER_OK;
    if (!s) {
        suggest near;
        suggest_init(&near, key);
        for (int i = 0; i < n; i++) suggest_offer(&near, specs[i].key);
        const char *m = suggest_best(&near);
        return er_fail(ER_INPUT, "%s: unknown key '%s'%s%s%s", where, key, m ? " (did you mean '" : "", m ? m : "",
                       m ? "'?)" : "");
    }
    char *end = NULL;
    errno = 0;
    switch (s->type) {
    case CFG_INT: {
        long long v = strtoll(val, &end, 10);
        if (!*val || *end || errno || v < -2147483647LL || v > 2147483647LL)
            return er_fail(ER_INPUT, "%s: key '%s' must be %s, got '%s'", where, key, type_name(s->type), val);
        *(int *)s->dst = (int)v;
        break;
    }
    case CFG_DOUBLE: {
        double v = strtod(val, &end);
        if (!*val || *end || errno || !isfinite(v))
            return er_fail(ER_INPUT, "%s: key '%s' must be %s, got '%s'", where, key, type_name(s->type), val);
        *(double *)s->dst = v;
        break;
    }
    case CFG_BOOL: {
        int v;
        if (!strcmp(val, "true") || !strcmp(val, "1") || !strcmp(val, "yes") || !strcmp(val, "on")) v = 1;
        else if (!strcmp(val, "false") || !strcmp(val, "0") || !strcmp(val, "no") || !strcmp(val, "off")) v = 0;
        else return er_fail(ER_INPUT, "%s: key '%s' must be %s, got '%s'", where, key, type_name(s->type), val);
        *(int *)s->dst = v;
        break;
    }
    case CFG_STR: {
        size_t len = strlen(val);
        /* optional double quotes around a string value */
        if (len >= 2 && val[0] == '"' && val[len - 1] == '"') {
            char *tmp = xstrdup(val + 1);
            tmp[len - 2] = 0;
            cfg_set_str((char **)s->dst, tmp);
            free(tmp);
        } else {
            cfg_set_str((char **)s->dst, val);
        }
        break;
    }
    }
    return check_value(where, s);
}

static int load_rec(const char *path, const cfg_spec *specs, int n, int depth, int known_only) {
    if (depth > CFG_MAX_INCLUDE_DEPTH)
        return er_fail(ER_INPUT, "%s: includes nested deeper than %d (a cycle?)", path, CFG_MAX_INCLUDE_DEPTH);
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, &text, &len);
    if (rc) return rc;
    if (strlen(text) != len) {
        free(text);
        return er_fail(ER_INPUT, "%s: not a text file (NUL byte)", path);
    }
    char section[128] = "";
    int lineno = 0;
    char *p = text;
    rc = ER_OK;
    while (p && rc == ER_OK) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        char *line = p;
        p = nl ? nl + 1 : NULL;
        lineno++;
        char where[1200];
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        /* strip comments: '#' at line start or after whitespace (so "a#b" strings survive) */
        for (char *c = line; *c; c++)
            if (*c == '#' && (c == line || isspace((unsigned char)c[-1]))) { *c = 0; break; }
        char *t = trim(line);
        if (!*t) continue;
        if (*t == '[') {
            char *close = strchr(t, ']');
            if (!close || trim(close + 1)[0]) { rc = er_fail(ER_INPUT, "%s: malformed section header '%s'", where, t); break; }
            *close = 0;
            char *name = trim(t + 1);
            if (!*name || strlen(name) >= sizeof section) { rc = er_fail(ER_INPUT, "%s: bad section name", where); break; }
            for (char *c = name; *c; c++)
                if (!isalnum((unsigned char)*c) && *c != '_' && *c != '.') {
                    rc = er_fail(ER_INPUT, "%s: bad character '%c' in section name", where, *c);
                    break;
                }
            if (rc) break;
            snprintf(section, sizeof section, "%s", name);
            continue;
        }
        char *eq = strchr(t, '=');
        if (!eq) { rc = er_fail(ER_INPUT, "%s: expected 'key = value', got '%s'", where, t); break; }
        *eq = 0;
        char *key = trim(t), *val = trim(eq + 1);
        if (!*key) { rc = er_fail(ER_INPUT, "%s: missing key before '='", where); break; }
        for (char *c = key; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '_' && *c != '.') {
                rc = er_fail(ER_INPUT, "%s: bad character '%c' in key '%s'", where, *c, key);
                break;
            }
        if (rc) break;
        if (!strcmp(key, "include") && !section[0]) {
            char *dir = path_dirname(path);
            char *inc = path_join(dir, val);
            free(dir);
            rc = load_rec(inc, specs, n, depth + 1, known_only);
            if (rc) {
                char msg[1500];
                snprintf(msg, sizeof msg, "%s", er_msg());
                rc = er_fail(rc, "%s: include '%s': %s", where, val, msg);
            }
            free(inc);
            continue;
        }
        char full[300];
        if (section[0]) snprintf(full, sizeof full, "%s.%s", section, key);
        else snprintf(full, sizeof full, "%s", key);
        rc = assign(where, full, val, specs, n, known_only);
    }
    free(text);
    return rc;
}

int cfg_load(const char *path, const cfg_spec *specs, int n) { return load_rec(path, specs, n, 0, 0); }
int cfg_load_known(const char *path, const cfg_spec *specs, int n) { return load_rec(path, specs, n, 0, 1); }

static int set_rec(const char *kv, const char *origin, const cfg_spec *specs, int n, int known_only) {
    char where[600];
    snprintf(where, sizeof where, "%s %.500s", origin ? origin : "--set", kv);
    const char *eq = strchr(kv, '=');
    if (!eq) return er_fail(ER_INPUT, "%s: expected key=value", where);
    char *key = xstrdup(kv);
    key[eq - kv] = 0;
    char *k = trim(key);
    char *v = trim(key + (eq - kv) + 1);
    int rc = *k ? assign(where, k, v, specs, n, known_only) : er_fail(ER_INPUT, "%s: missing key", where);
    free(key);
    return rc;
}

int cfg_set(const char *kv, const char *origin, const cfg_spec *specs, int n) { return set_rec(kv, origin, specs, n, 0); }
int cfg_set_known(const char *kv, const char *origin, const cfg_spec *specs, int n) { return set_rec(kv, origin, specs, n, 1); }

void cfg_free_strings(const cfg_spec *specs, int n) {
    for (int i = 0; i < n; i++)
        if (specs[i].type == CFG_STR) {
            free(*(char **)specs[i].dst);
            *(char **)specs[i].dst = NULL;
        }
}

static void write_value(FILE *f, const cfg_spec *s) {
    switch (s->type) {
    case CFG_INT: fprintf(f, "%d", *(int *)s->dst); break;
    case CFG_DOUBLE: fprintf(f, "%.17g", *(double *)s->dst); break;
    case CFG_BOOL: fprintf(f, "%s", *(int *)s->dst ? "true" : "false"); break;
    case CFG_STR: fprintf(f, "%s", *(char **)s->dst ? *(char **)s->dst : ""); break;
    }
}

void cfg_write(FILE *f, const cfg_spec *specs, int n) {
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s = ", specs[i].key);
        write_value(f, &specs[i]);
        fputc('\n', f);
    }
}

char *cfg_to_string(const cfg_spec *specs, int n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return xstrdup("");
    cfg_write(f, specs, n);
    fclose(f);
    return buf;
}

/* The shortest %g form that reads back as v (0.05, not 0.050000000000000003): for people; files keep
 * write_value's 17 digits. */
static void print_double_short(FILE *f, double v) {
    char b[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, v);
        if (strtod(b, NULL) == v) break;
    }
    fputs(b, f);
}

void cfg_print_keys(FILE *f, const cfg_spec *specs, int n) {
    fprintf(f, "config keys (file `key = value` with [section]s, or --set section.key=value):\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "  %-26s ", specs[i].key);
        if (specs[i].type == CFG_DOUBLE) print_double_short(f, *(double *)specs[i].dst);
        else write_value(f, &specs[i]);
        fprintf(f, "  (%s", type_name(specs[i].type));
        if (specs[i].range && specs[i].type != CFG_BOOL) fprintf(f, " %s", specs[i].range);
        fprintf(f, ") %s\n", specs[i].help);
    }
}
