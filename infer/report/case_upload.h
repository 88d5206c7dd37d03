/* case_upload.h — the body of a POST that submits a new case to `endoret serve`, read as it
 * arrives (libmicrohttpd calls the handler once per chunk):
 *   multipart/form-data : 1..max_views image files (any field name), each at most
 *                         CASE_MAX_IMAGE_BYTES, all together at most CASE_MAX_BODY_BYTES;
 *   application/json    : {"paths": ["a.png", ...]} naming images on the server, at most
 *                         CASE_MAX_JSON_BYTES (the server checks each path against its image folders).
 * Filing a case (POST /case/file.json) adds its diagnosis: a "diagnosis" form field, or
 * {"paths": [...], "diagnosis": "benign"}.
 * A body over a limit is drained without storing more, and case_upload_error says which limit (413). */
#ifndef ENDORET_CASE_UPLOAD_H
#define ENDORET_CASE_UPLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <microhttpd.h>

#define CASE_MAX_IMAGE_BYTES ((size_t)20 << 20)
#define CASE_MAX_BODY_BYTES ((size_t)64 << 20)
#define CASE_MAX_JSON_BYTES ((size_t)1 << 20)
/* The request bodies a server holds at once, all connections together (128 connections x 64 MB
 * would be 8 GB); a body that would go past it is drained and told 503 + Retry-After. */
#define CASE_UPLOAD_BUDGET ((int64_t)256 << 20)
/* The longest "diagnosis" a request to file a case may give (a label name of the database). */
#define CASE_MAX_LABEL 255

typedef struct {
    _Atomic int64_t used; /* bytes held by the requests now open */
    int64_t cap;
} case_upload_budget;

typedef struct {
    uint8_t *data;
    size_t len;
    char *name;      /* the uploaded file's name, or the JSON path */
} case_file;

typedef struct case_upload case_upload;

/* A reader for connection c's body, charging its bytes to budget until case_upload_free: NULL
 * (with *status 415 and *msg) when the content type is neither multipart/form-data nor
 * application/json. */
case_upload *case_upload_new(struct MHD_Connection *c, int max_views, case_upload_budget *budget, unsigned *status,
                             const char **msg);
/* Feeds one chunk. */
void case_upload_feed(case_upload *u, const char *data, size_t size);
/* After the last chunk: 0 when the body was read, else the HTTP status (400, 413, 503 when the
 * server's upload budget was full) and *msg. */
unsigned case_upload_finish(case_upload *u, char *msg, size_t n);
/* A JSON body as it came (POST /case/delete.json), after the last chunk: 0 with *body (owned by u),
 * or the status of case_upload_finish for a body over a limit. */
unsigned case_upload_raw(case_upload *u, const char **body, size_t *len, char *msg, size_t n);
/* Multipart: the files, in order. JSON: names = the paths, data NULL. */
int case_upload_count(const case_upload *u);
const case_file *case_upload_file(const case_upload *u, int i);
int case_upload_is_json(const case_upload *u);
/* The "diagnosis" given with the case (a multipart form field of that name, or the JSON body's
 * "diagnosis" string): "" when none, NULL when it was not a string or longer than CASE_MAX_LABEL. */
const char *case_upload_diagnosis(const case_upload *u);
void case_upload_free(case_upload *u);

#endif
