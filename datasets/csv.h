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

/* One header rule for every CSV endoret reads (manifests, the importers' map files): the record
 * just read (nf fields) names columns of `known` (nknown names; id_of[k] is the column id of name k,
 * several names may share one (an alias); NULL = k). A name matches a known one ignoring case and
 * nothing else: spaces are part of a CSV field (RFC 4180), so "path, label" names a column
 * " label" and is refused, not trimmed (its values would keep their spaces too). An unknown,
 * empty or repeated column is ER_INPUT naming the file, line 1, the column number and the name.
 * field_of[id] (nids entries) receives the field index of each column id, or -1. */
int csv_header(const csv_reader *r, int nf, const char *const *known, const int *id_of, int nknown, int nids,
               int *field_of);

#endif
