/* csv.c — RFC 4180 record reader (see csv.h), moved out of manifest.c unchanged. */
#include "datasets/csv.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nn/base/base.h"

void csv_open(csv_reader *r, const char *text, size_t len, const char *path) {
    memset(r, 0, sizeof *r);
    r->s = text;
    r->len = len;
    r->line = r->next_line = 1;
    r->path = path;
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB && (unsigned char)text[2] == 0xBF) r->pos = 3;
}

void csv_close(csv_reader *r) {
    free(r->buf);
    free(r->fields);
    r->buf = NULL;
    r->fields = NULL;
}

/* One record starting at r->pos; fields NUL-terminated in r->buf. */
int csv_next(csv_reader *r) {
    const char *path = r->path;
    if (r->pos >= r->len) return 0;
    r->line = r->next_line;
    size_t n = 0;
    int nf = 0;
    size_t field_start = 0;
    int in_quotes = 0, was_quoted = 0;
    if (r->cap < r->len + 1) r->buf = xrealloc(r->buf, r->cap = r->len + 1);
    int starts_cap = 16;
    size_t *starts = xmalloc(sizeof(size_t) * (size_t)starts_cap);
    for (;;) {
        int at_end = r->pos >= r->len;
        char c = at_end ? '\n' : r->s[r->pos];
        if (!at_end) r->pos++;
        if (in_quotes) {
            if (at_end) { free(starts); return er_fail(ER_INPUT, "%s: line %d: unterminated quoted field", path, r->line), -1; }
            if (c == '"') {
                if (r->pos < r->len && r->s[r->pos] == '"') { r->buf[n++] = '"'; r->pos++; }
                else in_quotes = 0;
            } else {
                if (c == '\n') r->next_line++;
                r->buf[n++] = c;
            }
            continue;
        }
        if (c == '"' ) {
            if (n != field_start || was_quoted) { free(starts); return er_fail(ER_INPUT, "%s: line %d, column %d: stray quote inside a field", path, r->line, nf + 1), -1; }
            in_quotes = was_quoted = 1;
            continue;
        }
        if (c == ',' || c == '\n') {
            if (nf == starts_cap) starts = xrealloc(starts, sizeof(size_t) * (size_t)(starts_cap *= 2));
            starts[nf++] = field_start;
            /* trim a trailing \r (CRLF files) on unquoted last fields */
            if (c == '\n' && !was_quoted && n > field_start && r->buf[n - 1] == '\r') n--;
            r->buf[n++] = 0;
            field_start = n;
            was_quoted = 0;
            if (c == '\n') { r->next_line++; break; }
            continue;
        }
        if (was_quoted && c != '\r') { free(starts); return er_fail(ER_INPUT, "%s: line %d, column %d: characters after a closing quote", path, r->line, nf + 1), -1; }
        if (!was_quoted) r->buf[n++] = c;
    }
    if (nf > r->fcap) r->fields = xrealloc(r->fields, sizeof(char *) * (size_t)(r->fcap = nf));
    for (int i = 0; i < nf; i++) r->fields[i] = r->buf + starts[i];
    free(starts);
    return nf;
}

int csv_header(const csv_reader *r, int nf, const char *const *known, const int *id_of, int nknown, int nids,
               int *field_of) {
    for (int c = 0; c < nids; c++) field_of[c] = -1;
    for (int i = 0; i < nf; i++) {
        const char *h = r->fields[i];
        int id = -1, name = -1;
        for (int k = 0; k < nknown && id < 0; k++)
            if (!strcasecmp(h, known[k])) id = id_of ? id_of[k] : k, name = k;
        if (!h[0]) return er_fail(ER_INPUT, "%s: line 1, column %d: empty column name", r->path, i + 1);
        if (id < 0) {
            char list[512] = "";
            for (int k = 0; k < nknown && strlen(list) < 400; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", known[k]);
            size_t n = strlen(h);
            int spaced = h[0] == ' ' || h[0] == '\t' || h[n - 1] == ' ' || h[n - 1] == '\t';
            return er_fail(ER_INPUT, "%s: line 1, column %d: unknown column '%s' (known: %s)%s", r->path, i + 1, h, list,
                           spaced ? "; spaces are part of a CSV field: separate the names by commas alone" : "");
        }
        if (field_of[id] >= 0)
            return er_fail(ER_INPUT, "%s: line 1, column %d: column '%s' appears twice (first as column %d)", r->path, i + 1,
                           known[name], field_of[id] + 1);
        field_of[id] = i;
    }
    return ER_OK;
}
