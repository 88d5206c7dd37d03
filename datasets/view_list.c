/* view_list.c — see view_list.h. */
#include "datasets/view_list.h"

#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

char *view_list_join(char *const *paths, int n) {
    size_t len = 1;
    for (int i = 0; i < n; i++) len += 2 * strlen(paths[i]) + 1; /* every byte escaped at worst */
    char *out = xmalloc(len), *o = out;
    for (int i = 0; i < n; i++) {
        if (i) *o++ = ';';
        for (const char *p = paths[i]; *p; p++) {
            if (*p == ';' || *p == '\\') *o++ = '\\';
            *o++ = *p;
        }
    }
    *o = 0;
    return out;
}

char **view_list_split(const char *list, int *n) {
    *n = 0;
    if (!list || !*list) return NULL;
    size_t len = strlen(list);
    int cap = 1;
    for (const char *p = list; *p; p++) {
        if (*p == '\\' && p[1]) p++;
        else if (*p == ';') cap++;
    }
    char **v = xmalloc((size_t)cap * sizeof(char *));
    char *buf = xmalloc(len + 1), *o = buf; /* one view at a time, unescaped */
    for (const char *p = list;; p++) {
        if (*p == '\\' && p[1]) { *o++ = *++p; continue; }
        if (*p && *p != ';') { *o++ = *p; continue; }
        *o = 0;
        if (o != buf) v[(*n)++] = xstrdup(buf); /* an empty piece ("a;;b", a trailing ';') is no view */
        o = buf;
        if (!*p) break;
    }
    free(buf);
    return v;
}

void view_list_free(char **views, int n) {
    for (int i = 0; i < n; i++) free(views[i]);
    free(views);
}
