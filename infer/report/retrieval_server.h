/* retrieval_server.h — `endoret serve`: a local web page to browse kNN diagnoses. The report data
 * (report.h) is computed once at start; pages are rendered by report_html.h. HTTP is
 * libmicrohttpd (internal polling thread), bound to 127.0.0.1 by default.
 *   GET /                   summary, parameters, and the list of queries
 *   GET /query/<row>        the explanation of one query (same card as the static report)
 *   GET /image/query/<row>  the query's image file, as named by the query manifest
 *   GET /image/case/<id>    a case's first image file, as stored in the case database
 * Only files registered in the database / manifest are ever opened: a URL names a row or a case
 * id, never a path (no traversal). Malformed numbers -> 400, unknown routes / rows / ids -> 404,
 * methods other than GET/HEAD -> 405. */
#ifndef ENDORET_RETRIEVAL_SERVER_H
#define ENDORET_RETRIEVAL_SERVER_H

#include "infer/report/report.h"

typedef struct {
    const char *index;    /* case database */
    const char *query;    /* query embedding file, NULL = the database's cases (leave-one-out) */
    const char *manifest; /* query manifest, NULL = the one named in the query file */
    const char *bind;     /* IPv4 address, NULL = "127.0.0.1" */
    int port;             /* 0 = an ephemeral port */
    report_cfg rep;       /* k, vote, tau, float search, limit */
} retrieval_server_cfg;

typedef struct retrieval_server retrieval_server;

/* Opens the database, computes every query's neighbours and vote, then listens. *port_out = the
 * bound port. ER_OK / ER_INPUT / ER_RUNTIME (e.g. port in use). */
int retrieval_server_start(const retrieval_server_cfg *cfg, retrieval_server **out, int *port_out);
/* The report the server shows (read-only). */
const report_data *retrieval_server_report(const retrieval_server *s);
void retrieval_server_stop(retrieval_server *s);

#endif
