/* access_log.h — one line per answered request of `serve` (issue 32: "a request log line per
 * request"): when, which client, the method and path, the status and how long the server took.
 *
 *   serve: 2026-11-26T20:41:07Z 127.0.0.1 GET /query/3 200 12.4 ms
 *
 * The path is the decoded URL MHD hands the handler, without the query string; bytes a terminal or
 * a log reader would take as control (a decoded %0A) are written as '?', and it is cut at
 * ACCESS_LOG_MAX_PATH bytes, so a request cannot forge or flood log lines. Writes are one fputs of
 * a whole line: stdio's lock keeps lines from the server's threads whole. */
#ifndef ENDORET_ACCESS_LOG_H
#define ENDORET_ACCESS_LOG_H

#include <stdio.h>

#define ACCESS_LOG_MAX_PATH 200

/* The line for one request (no trailing newline), into buf[n]. */
void access_log_format(char *buf, size_t n, const char *when, const char *addr, const char *method, const char *path,
                       unsigned status, double ms);
/* Formats with the current UTC time and writes the line and a newline to f (NULL: nothing). */
void access_log_write(FILE *f, const char *addr, const char *method, const char *path, unsigned status, double ms);

#endif
