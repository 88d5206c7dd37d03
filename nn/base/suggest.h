/* suggest.h — "did you mean": the nearest known name to a misspelt one (an option, a config key, a
 * sub-command, an allowed value), by edit distance with adjacent transpositions counting one edit
 * ("trian" -> "train"). Offer every candidate, then ask for the best; NULL when none is close
 * enough to be a likely typo (at most 1 edit for names up to 4 characters, 2 up to 8, else 3).
 *
 *   suggest s; suggest_init(&s, "trian.lr");
 *   for (...) suggest_offer(&s, specs[i].key);
 *   const char *m = suggest_best(&s);     // "train.lr" */
#ifndef ENDORET_BASE_SUGGEST_H
#define ENDORET_BASE_SUGGEST_H

typedef struct {
    const char *word, *best;
    int dist;
} suggest;

void suggest_init(suggest *s, const char *word);
void suggest_offer(suggest *s, const char *candidate);
const char *suggest_best(const suggest *s);
/* Edit distance (optimal string alignment); words longer than 63 characters count as far apart. */
int suggest_distance(const char *a, const char *b);

#endif
