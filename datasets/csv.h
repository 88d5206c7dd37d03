/* csv.h — an RFC 4180 CSV record reader over a text in memory (quoted fields with "" escapes,
 * quoted newlines, CRLF, a UTF-8 BOM), shared by the manifest and the importers' map files.
 *
 *   csv_reader r;  csv_open(&r, text, len, path);
 *   while ((nf = csv_next(&r)) > 0) { ... r.fields[0..nf-1], r.line ... }   nf < 0: error set
 *   csv_close(&r);
 * Errors (unterminated quote, stray quote, text after a closing quote) name the path, the line
 * and the column. */
#ifndef ENDORET_CSV_H
#define ENDORET_CSV_H

#include <stddef.h>

typedef struct {
    const char *s;
    size_t len, pos;
    int line;      /* line number where the current record starts (1-based) */
    int next_line;
    const char *path;
    char *buf;
    size_t cap;
    char **fields; /* the current record's fields, NUL-terminated, valid until the next call */
    int fcap;
} csv_reader;

/* Start reading `text` (len bytes; not copied, must outlive the reader); a UTF-8 BOM is skipped.
 * path: for messages. */
void csv_open(csv_reader *r, const char *text, size_t len, const char *path);
/* The next record: its number of fields, 0 at the end of the text, -1 on a quoting error (message
 * set). A blank line is a record of one empty field. */
int csv_next(csv_reader *r);
void csv_close(csv_reader *r);

#endif
