/* paths.c — lexical path normalisation, relative paths between folders, clean joins (paths.h). */
#include "nn/base/paths.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/base/base.h"

/* Normalise p; *via_link (may be NULL) is set when a segment that a ".." cancels is a symbolic
 * link, i.e. when the lexical answer may differ from the kernel's. */
static char *normalize(const char *p, int *via_link) {
    if (via_link) *via_link = 0;
    size_t n = strlen(p);
    int abs = p[0] == '/';
    char *out = xmalloc(n + 3);
    size_t o = 0;   /* out[0..o) holds the kept segments, '/'-separated (after the leading '/') */
    size_t lead = 0; /* bytes of leading "../" segments (relative paths), never cancelled */
    if (abs) out[o++] = '/';
    size_t base = o;
    for (size_t i = 0; i < n;) {
        while (i < n && p[i] == '/') i++;
        size_t j = i;
        while (j < n && p[j] != '/') j++;
        size_t len = j - i;
        if (len == 0 || (len == 1 && p[i] == '.')) { i = j; continue; }
        if (len == 2 && p[i] == '.' && p[i + 1] == '.') {
            if (o > base + lead) { /* cancel the last kept segment, unless it is a link */
                size_t k = o;
                while (k > base + lead && out[k - 1] != '/') k--;
                if (via_link) {
                    out[o] = 0;
                    struct stat st;
                    if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode)) *via_link = 1;
                }
                o = k > base + lead ? k - 1 : k;
                if (o < base) o = base;
            } else if (!abs) { /* a leading ".." of a relative path stays */
                if (o > base) out[o++] = '/';
                memcpy(out + o, "..", 2);
                o += 2;
                lead = o - base;
            }
            i = j;
            continue;
        }
        if (o > base) out[o++] = '/';
        memcpy(out + o, p + i, len);
        o += len;
        i = j;
    }
    if (o == 0) out[o++] = '.';
    out[o] = 0;
    return out;
}

char *path_normalize(const char *p) { return normalize(p, NULL); }

static char *absolute(const char *p) {
    if (p[0] == '/') return xstrdup(p);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return xstrdup(p);
    return path_join(cwd, p);
}

static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Relative path from absolute normalised folder a to absolute normalised path b. */
static char *relative_lexical(const char *a, const char *b) {
    size_t la = strlen(a), common = 0; /* length of the shared folder prefix */
    if (la == 1) common = 1;           /* a = "/" */
    else
        for (size_t i = 0;; i++) {
            int end_a = i == la || a[i] == '/', end_b = b[i] == 0 || b[i] == '/';
            if (end_a && end_b) common = i;
            if (i == la || !b[i] || a[i] != b[i]) break;
        }
    size_t ups = 0;
    if (common < la)
        for (size_t i = common; i < la; i++) ups += a[i] == '/';
    const char *rest = b + common;
    while (*rest == '/') rest++;
    char *out = xmalloc(3 * ups + strlen(rest) + 2);
    out[0] = 0;
    for (size_t u = 0; u < ups; u++) strcat(out, "../");
    strcat(out, rest);
    size_t lo = strlen(out);
    if (lo && out[lo - 1] == '/') out[lo - 1] = 0;
    if (!out[0]) strcpy(out, ".");
    return out;
}

char *path_relative(const char *from_dir, const char *target) {
    char *fa = absolute(from_dir), *ta = absolute(target);
    char *f = normalize(fa, NULL), *t = normalize(ta, NULL);
    char *rel = relative_lexical(f, t);
    char *check = path_join(from_dir, rel);
    if (!same_file(check, target)) { /* a link on the way: the real paths' relation */
        char a[PATH_MAX], b[PATH_MAX];
        free(rel);
        rel = realpath(from_dir, a) && realpath(target, b) ? relative_lexical(a, b) : xstrdup(ta);
    }
    free(check); free(fa); free(ta); free(f); free(t);
    return rel;
}

char *path_join_clean(const char *dir, const char *rel) {
    char *joined = path_join(dir, rel);
    int via_link;
    char *norm = normalize(joined, &via_link);
    if (via_link || (access(joined, F_OK) == 0 && !same_file(norm, joined))) {
        free(norm);
        return joined;
    }
    free(joined);
    return norm;
}
