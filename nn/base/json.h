/* json.h — a small, bounds-checked JSON reader (DOM) for the few JSON documents endoret reads:
 * safetensors headers, metadata, config echoes. Not a streaming parser; documents are small.
 * Strings are decoded (\uXXXX to UTF-8, surrogate pairs included). Numbers are kept as double and,
 * when integral and exact, as int64. Depth is limited (64) so hostile input cannot blow the stack. */
#ifndef ENDORET_JSON_H
#define ENDORET_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value {
    json_type type;
    int boolean;
    double number;
    int is_int;      /* number is an exact integer that fits int64 */
    int64_t integer;
    char *string;    /* JSON_STRING */
    int n;           /* array / object element count */
    struct json_value *items; /* array elements or object values */
    char **keys;     /* object keys */
} json_value;

/* Parse `len` bytes. On error returns ER_INPUT with a message "<what>: JSON error at byte N: ..." */
int json_parse(const char *text, size_t len, const char *what, json_value *out);
void json_free(json_value *v);
const json_value *json_get(const json_value *obj, const char *key); /* NULL if absent / not object */
/* Append `s` to buf as a JSON string literal (with quotes and escapes). Returns new length. */
size_t json_escape(char **buf, size_t *cap, size_t len, const char *s);

#endif
