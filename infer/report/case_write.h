/* case_write.h — a case base that grows (EndoFinder's online part, issue #32 item 3): the pieces of
 * `endoret serve`'s write routes that do not need the server's state.
 *   POST /case/file.json    the views (multipart, or {"paths": [...]}) and their confirmed
 *                           "diagnosis" (one of the database's label names) -> a new case
 *   POST /case/delete.json  {"id": N} -> the case is removed
 * A write needs the token the server was started with (`--write-token FILE` or
 * `--write-token-env VAR`) as `Authorization: Bearer <token>`, compared in constant time; without a
 * token the server is read-only and the write routes answer 403. Every write, and every refused
 * one, is one line on stderr (time, client address, action, case id, label); the token never is. */
#ifndef ENDORET_CASE_WRITE_H
#define ENDORET_CASE_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <microhttpd.h>

#include "infer/retrieval/casedb.h"

/* A token is 16..4096 printable ASCII characters without spaces (a trailing newline of the file is
 * not part of it). */
enum { WRITE_TOKEN_MIN = 16, WRITE_TOKEN_MAX = 4096 };

/* The write token from a file (a regular file that only its owner may read or write: a file that
 * its group or others may read is refused) or from an environment variable. Exactly one of file /
 * env, or neither (*out = NULL: read-only). ER_INPUT naming the file or variable, never the token. */
int write_token_load(const char *file, const char *env, char **out);
/* 1 when the request carries `Authorization: Bearer <token>` (constant-time comparison). */
int write_token_ok(struct MHD_Connection *c, const char *token);
/* The client's address as text ("127.0.0.1"), or "?" (buf: at least 64 bytes). */
void write_client_addr(struct MHD_Connection *c, char *buf, size_t n);
/* One line on stderr: "serve: write <UTC time> <addr> <action> case <id> label <label>: <outcome>"
 * (id < 0 and label NULL are left out). */
void write_log(const char *addr, const char *action, int64_t id, const char *label, const char *outcome);
/* The database's number of label name `name`; -1 (and msg saying which names it has) when unknown
 * or when the database has no label names. */
int64_t write_label(const casedb *db, const char *name, char *msg, size_t n);
/* {"id": N} -> *id; 0, or 400 with msg. */
unsigned write_parse_delete(const char *body, size_t len, int64_t *id, char *msg, size_t n);
/* The metadata stored with a filed case: {"filed_at": "<UTC time>", "filed_from": "<addr>", "views": V}. */
char *write_metadata(const char *addr, int V);

#endif
