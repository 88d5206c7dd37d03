/* suggest.c — see suggest.h. */
#include "nn/base/suggest.h"

#include <string.h>

#define SUGGEST_MAX 64

int suggest_distance(const char *a, const char *b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n >= SUGGEST_MAX || m >= SUGGEST_MAX) return SUGGEST_MAX;
    int d[SUGGEST_MAX][SUGGEST_MAX];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[n][m];
}

void suggest_init(suggest *s, const char *word) {
    s->word = word;
    s->best = NULL;
    s->dist = SUGGEST_MAX;
}

void suggest_offer(suggest *s, const char *candidate) {
    if (!candidate || !s->word) return;
    int d = suggest_distance(s->word, candidate);
    if (d < s->dist) {
        s->dist = d;
        s->best = candidate;
    }
}

const char *suggest_best(const suggest *s) {
    if (!s->best || !s->word) return NULL;
    size_t len = strlen(s->word);
    int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    return s->dist > 0 && s->dist <= limit ? s->best : NULL;
}
