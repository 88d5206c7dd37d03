/* cli_util.h — small helpers shared by the retrieval commands (infer/cmd_*.c). */
#ifndef ENDORET_INFER_CLI_UTIL_H
#define ENDORET_INFER_CLI_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "infer/retrieval/embeddings.h"

/* Print s as a JSON string literal (quotes included). */
void json_put_str(FILE *f, const char *s);
/* Parse "3,5,9" into int64 ids. */
int parse_id_list(const char *s, const char *what, int64_t **ids, int *n);
/* Median of v (n >= 1; v is reordered). */
double median_of(double *v, int n);

/* JSON number, or null when not finite (NaN is not JSON). */
void json_put_num(FILE *f, double v);
/* `, "key": <json_put_num>`: one more member of an object being printed. */
void json_put_field(FILE *f, const char *key, double v);

/* A baseline's file must describe the same rows with the same labels (by name), so that per-row
 * results pair up: ER_INPUT with a message naming both files else. */
int emb_same_rows(const emb_set *a, const emb_set *b, const char *pa, const char *pb);

#endif
