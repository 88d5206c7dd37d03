/* retrieval_server.h — `endoret serve`: a local web page to browse kNN diagnoses. The report data
 * (report.h) is computed once at start; pages are rendered by report_html.h. HTTP is libmicrohttpd
 * (a pool of HTTP_POOL_THREADS threads, the deadlines of http_guard.h), bound to 127.0.0.1 by default.
 *   GET /                   summary, parameters, and the list of queries
 *   GET /query/<row>        the explanation of one query (same card as the static report)
 *   GET /image/query/<row>[/<view>]  the query's image file, as named by the query manifest
 *   GET /image/case/<id>[/<view>]    a case's first (view-th) image file, as stored in the database
 *   GET /mask/query/<row>[/<view>]   the lesion mask of that image drawn as a cyan outline (PNG,
 *   GET /mask/case/<id>[/<view>]     transparent elsewhere; 404 when none is recorded)
 *   GET /view/query/<row>[/<view>]   the full-size page a thumbnail opens: the image with the outline
 *   GET /view/case/<id>[/<view>]     over it when a mask is recorded (image_page.h)
 * With a model (--model), new cases are answered online (infer/report/case_query.h):
 *   GET  /new               a form to upload 1..max_views images of one case
 *   POST /case              multipart/form-data images -> the page of the case: its views, the k
 *                           nearest cases with all their views, diagnoses and distances, the vote
 *   POST /case.json         the same images, or application/json {"paths": [...]} naming images
 *                           under the --image-root folders -> the answer as JSON
 * With a model whose family has spatial features (ViT, scene model, ResNet), the query pages and the
 * page of a new case draw the region evidence (region_evidence.h) over the thumbnails: the model
 * runs on the page's thread for it, one forward at a time with the worker (a lock); a query page
 * that finds the model busy is answered at once without evidence, saying so.
 * With a write token (case_write.h; needs --model), the case base grows:
 *   POST /case/file.json    the views + "diagnosis" -> a new case (fresh id, one SQLite transaction,
 *                           searched by the next query); Authorization: Bearer <token>
 *   POST /case/delete.json  {"id": N} -> the case is removed; the same token
 * Bad uploads get a 4xx with one line saying why: not a PNG/JPEG image or an empty file (400), a
 * path outside the image folders or unreadable (403), too many images, too large or too many pixels
 * (413, case_views.h), another content type (415). The model runs one case at a time: one worker
 * takes the complete uploads from a queue of `queue` (full: 503 + Retry-After), while the pool keeps
 * answering pages. Images are decoded in memory, one view at a time; the page's thumbnails are made
 * from the decoded views, so nothing is written to disk and no client-given name is opened twice.
 * Only files registered in the database / manifest (or, for JSON cases, under --image-root) are ever
 * opened: a URL names a row or a case id, never a path (no traversal). Malformed numbers -> 400,
 * unknown routes / rows / ids -> 404, other methods -> 405. */
#ifndef ENDORET_RETRIEVAL_SERVER_H
#define ENDORET_RETRIEVAL_SERVER_H

#include "infer/report/report.h"

#include <stdio.h>

/* New cases waiting for the embedding worker (besides the one it embeds); a case that finds the
 * queue full gets 503 with Retry-After. */
enum { CASE_QUEUE = 8, CASE_RETRY_AFTER_S = 2 };

typedef struct {
    const char *index;    /* case database */
    const char *query;    /* query embedding file, NULL = the database's cases (leave-one-out) */
    const char *manifest; /* query manifest, NULL = the one named in the query file */
    const char *bind;     /* IPv4 address, NULL = "127.0.0.1" */
    int port;             /* 0 = an ephemeral port */
    report_cfg rep;       /* k, vote, tau, float search, limit */
    const char *model;    /* NULL: browse only; else the encoder that embeds new cases */
    const char *image_roots; /* comma-separated folders JSON cases may name (NULL: none) */
    int max_views;        /* images per new case (>= 1) */
    int64_t max_view_pixels; /* decoded pixels of one view (0: CASE_MAX_VIEW_PIXELS) */
    int64_t max_case_pixels; /* decoded pixels of a case's views together (0: CASE_MAX_CASE_PIXELS) */
    int queue;            /* new cases waiting for the embedding worker (0: CASE_QUEUE) */
    int64_t upload_budget; /* request bodies held at once, all clients (0: CASE_UPLOAD_BUDGET) */
    const char *write_token; /* NULL: read-only; else the token the write routes need (case_write.h) */
    void (*before_commit)(void *); /* tests: called inside each write's transaction (casedb.h); NULL */
    void *before_commit_ctx;
    FILE *access_log;     /* one line per answered request (access_log.h); NULL: none */
} retrieval_server_cfg;

typedef struct retrieval_server retrieval_server;

/* Opens the database, computes every query's neighbours and vote, then listens. *port_out = the
 * bound port. ER_OK / ER_INPUT / ER_RUNTIME (e.g. port in use). */
int retrieval_server_start(const retrieval_server_cfg *cfg, retrieval_server **out, int *port_out);
/* The report the server shows (read-only). */
const report_data *retrieval_server_report(const retrieval_server *s);
void retrieval_server_stop(retrieval_server *s);

#endif
