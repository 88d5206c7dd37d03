/* report_html.h — HTML rendering of a report_data (report.h): the page head with its CSS, the
 * parameters, the summary (vote accuracy, per-class counts, confusion matrix), one explanation
 * card per query ("8 of 10 similar past cases were malignant"), and the query list of the server.
 * Every text taken from the data (labels, paths, ids given as text) is HTML-escaped.
 *
 * Images are either embedded (JPEG thumbnails as data: URIs, the static report: works offline,
 * no side files) or linked to the server's routes /image/query/<row> and /image/case/<id>. */
#ifndef ENDORET_REPORT_HTML_H
#define ENDORET_REPORT_HTML_H

#include <stddef.h>

#include "infer/report/report.h"

/* A growing text buffer. */
typedef struct {
    char *s;
    size_t len, cap;
} html_buf;

void hb_puts(html_buf *b, const char *s);
void hb_printf(html_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s with & < > " ' replaced by entities (NULL writes nothing). */
void hb_esc(html_buf *b, const char *s);
void hb_free(html_buf *b);
/* The last component of a path, escaped: pages name files, never where they lie on the server. */
void hb_esc_name(html_buf *b, const char *path);
/* Text with every word that holds a '/' cut to its last component, escaped (an encoder description
 * that names its weight file). */
void hb_esc_nopath(html_buf *b, const char *s);

/* Beside every suggestion, in every page. */
#define REPORT_NOTICE "Research use only &mdash; not a medical device; the suggestion is the vote of the retrieved past " \
                      "cases, not a diagnosis."

typedef struct thumb_cache thumb_cache;
struct region_query;  /* region_evidence.h */
struct region_engine; /* region_evidence.h */ /* path -> data: URI, so a case shown twice is encoded once */

typedef struct {
    int embed;            /* 1: data: URI thumbnails; 0: links to the server's /image routes */
    int thumb;            /* thumbnail side in pixels (embed) */
    thumb_cache *cache;   /* embed: created by report_html_page / the caller */
    /* an online case: its views' thumbnails (data: URIs made from the decoded uploads) and names,
     * shown instead of the query's image paths, which are then never opened */
    char *const *query_uri, *const *query_name;
    int query_views;
    int link;             /* 1: images link to the server's full-size /image routes (always when !embed) */
    /* region evidence of this query (region_evidence.h), drawn over the thumbnails with a legend
     * saying what it means; NULL: none. ev_note: why there is none (shown in its place), or NULL. */
    const struct region_query *ev;
    const char *ev_note;
} report_html_opts;

thumb_cache *thumb_cache_new(void);
void thumb_cache_free(thumb_cache *c);

/* "<!doctype html>...<body>" with the stylesheet, and the closing tags. */
void report_html_head(html_buf *b, const char *title);
void report_html_tail(html_buf *b);
void report_html_params(html_buf *b, const report_data *r);
void report_html_summary(html_buf *b, const report_data *r);
/* The vote sentence of query i, e.g. "8 of 10 similar past cases were malignant" (plain text,
 * not escaped: the caller escapes). */
void report_vote_text(const report_data *r, int i, char *out, size_t n);
/* The vote's validated accuracy (r->valid) as one sentence, e.g. "Accuracy of this vote on the case
 * base: 72.0 % (95 % interval 60.0&ndash;83.3 %), leave-one-out over 24 labelled past cases, k = 6". */
void report_html_validity(html_buf *b, const report_data *r);
/* One query's explanation: its image, its recorded diagnosis (ground truth, when known) apart from
 * the system's suggestion (the vote; "no majority" on a tie), the vote's validated accuracy and the
 * research notice, a legend, the k neighbours in rank order with their similarity. An online case
 * (o->query_uri) is titled "Uploaded case"; a query of the report "Query <row + 1> of <nq>". */
void report_html_query(html_buf *b, const report_data *r, int i, const report_html_opts *o);
/* Table of all queries, each linking to href_prefix<row> (server) or #q<row> (report). */
void report_html_query_list(html_buf *b, const report_data *r, const char *href_prefix);
/* The whole static report (summary, parameters, every query card), images embedded. Images that
 * cannot be read are shown as a labelled empty box (the report is still written). ev: the encoder
 * and reference bank whose region evidence is drawn over the thumbnails (NULL: none); *ev_ms (may
 * be NULL) receives the time that took, all queries together. */
void report_html_page(html_buf *b, const report_data *r, int thumb, const struct region_engine *ev, double *ev_ms);

#endif
