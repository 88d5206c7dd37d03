/* value_range.h — the one syntax of "what a value may be", shared by config keys (config.h) and
 * command-line options (args.h), so both accept and refuse the same way:
 *   numbers   interval notation "[1, 65536]", "(0, 1)", "[0, inf)", "[-1, inf)" (inf = unbounded)
 *   strings   an allowed set "adamw|sgd" (a choice "cuda:N" also matches cuda:0, cuda:12, ...),
 *             or "path" / "text" for free-form values */
#ifndef ENDORET_BASE_VALUE_RANGE_H
#define ENDORET_BASE_VALUE_RANGE_H

/* 0 and the bounds (open flags) when r is a well-formed interval with lo <= hi, else -1. */
int range_parse_interval(const char *r, double *lo, double *hi, int *lo_open, int *hi_open);
/* 1 when v lies in the interval r (NaN never does), 0 when not, -1 when r is malformed. */
int range_contains(const char *r, double v);
/* 1 when v is one of the choices "a|b|c" (or r is "path" / "text"), else 0. */
int range_in_choices(const char *r, const char *v);
/* The choices "a|b|c" written "a/b/c" into buf (for messages). */
void range_choices_text(const char *r, char *buf, int size);

#endif
