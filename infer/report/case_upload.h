/* case_upload.h — the body of a POST that submits a new case to `endoret serve`, read as it
 * arrives (libmicrohttpd calls the handler once per chunk):
 *   multipart/form-data : 1..max_views image files (any field name), each at most
 *                         CASE_MAX_IMAGE_BYTES, all together at most CASE_MAX_BODY_BYTES;
 *   application/json    : {"paths": ["a.png", ...]} naming images on the server, at most
 *                         CASE_MAX_JSON_BYTES (the server checks each path against its image folders).
 * A body over a limit is drained without storing more, and case_upload_error says which limit (413). */
#ifndef ENDORET_CASE_UPLOAD_H
#define ENDORET_CASE_UPLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <microhttpd.h>

#define CASE_MAX_IMAGE_BYTES ((size_t)20 << 20)
#define CASE_MAX_BODY_BYTES ((size_t)64 << 20)
#define CASE_MAX_JSON_BYTES ((size_t)1 << 20)

typedef struct {
    uint8_t *data;
    size_t len;
    char *name;      /* the uploaded file's name, or the JSON path */
} case_file;

typedef struct case_upload case_upload;

/* A reader for connection c's body: NULL (with *status 415 and *msg) when the content type is
 * neither multipart/form-data nor application/json. */
case_upload *case_upload_new(struct MHD_Connection *c, int max_views, unsigned *status, const char **msg);
/* Feeds one chunk. */
void case_upload_feed(case_upload *u, const char *data, size_t size);
/* After the last chunk: 0 when the body was read, else the HTTP status (400, 413) and *msg. */
unsigned case_upload_finish(case_upload *u, char *msg, size_t n);
/* Multipart: the files, in order. JSON: names = the paths, data NULL. */
int case_upload_count(const case_upload *u);
const case_file *case_upload_file(const case_upload *u, int i);
int case_upload_is_json(const case_upload *u);
void case_upload_free(case_upload *u);

#endif
