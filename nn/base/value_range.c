/* value_range.c — see value_range.h. */
#include "nn/base/value_range.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_bound(const char *s, const char *e, double *v) {
    char buf[64];
    while (s < e && isspace((unsigned char)*s)) s++;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    if (e - s <= 0 || e - s >= (long)sizeof buf) return -1;
    memcpy(buf, s, e - s);
    buf[e - s] = 0;
    if (!strcmp(buf, "inf")) { *v = INFINITY; return 0; }
    if (!strcmp(buf, "-inf")) { *v = -INFINITY; return 0; }
    char *end;
    *v = strtod(buf, &end);
    return *end ? -1 : 0;
}

int range_parse_interval(const char *r, double *lo, double *hi, int *lo_open, int *hi_open) {
    size_t n = strlen(r);
    if (n < 5 || (r[0] != '[' && r[0] != '(') || (r[n - 1] != ']' && r[n - 1] != ')')) return -1;
    const char *comma = strchr(r, ',');
    if (!comma) return -1;
    *lo_open = r[0] == '(';
    *hi_open = r[n - 1] == ')';
    if (parse_bound(r + 1, comma, lo) || parse_bound(comma + 1, r + n - 1, hi)) return -1;
    return *lo <= *hi ? 0 : -1;
}

int range_contains(const char *r, double v) {
    double lo, hi;
    int lo_open, hi_open;
    if (range_parse_interval(r, &lo, &hi, &lo_open, &hi_open)) return -1;
    int inside = lo_open ? v > lo : v >= lo; /* false for NaN */
    return inside && (hi_open ? v < hi : v <= hi);
}

int range_in_choices(const char *choices, const char *v) {
    if (!strcmp(choices, "path") || !strcmp(choices, "text")) return 1;
    size_t len = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && !strncmp(p, v, n)) return 1;
        if (n >= 2 && p[n - 2] == ':' && p[n - 1] == 'N' && len > n - 1 && !strncmp(p, v, n - 1) &&
            strspn(v + n - 1, "0123456789") == len - (n - 1))
            return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

void range_choices_text(const char *r, char *buf, int size) {
    snprintf(buf, size, "%s", r);
    for (char *c = buf; *c; c++)
        if (*c == '|') *c = '/';
}
