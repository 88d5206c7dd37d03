/* retrieval_server.c — see retrieval_server.h. The report data and the id -> image table are
 * read-only once the daemon runs, so request handlers share them without a lock. */
#include "infer/report/retrieval_server.h"
#include "infer/report/http_reply.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "infer/retrieval/casedb.h"
#include "infer/report/report_html.h"
#include "nn/base/base.h"

struct retrieval_server {
    struct MHD_Daemon *d;
    report_data rep;
    int64_t ncase;
    int64_t *case_id;   /* ascending */
    char **case_image;  /* first image path of each case, NULL if none */
};

/* ---- HTTP helpers ---- */
static enum MHD_Result reply_html(struct MHD_Connection *c, html_buf *b) {
    enum MHD_Result r = http_reply(c, MHD_HTTP_OK, "text/html; charset=utf-8", b->s, b->len);
    hb_free(b);
    return r;
}

/* A non-negative decimal number and nothing else (at most 18 digits): 1, or 0 when malformed. */
static int parse_index(const char *s, int64_t *v) {
    size_t n = strlen(s);
    if (n == 0 || n > 18 || strspn(s, "0123456789") != n) return 0;
    *v = strtoll(s, NULL, 10);
    return 1;
}

static enum MHD_Result page_index(retrieval_server *s, struct MHD_Connection *c) {
    html_buf b = {0};
    report_html_head(&b, "endoret: similar past cases");
    hb_printf(&b, "<header><h1>Similar past cases</h1><p>%d quer%s; choose one to see its %d nearest cases and their vote</p>"
                  "</header><main>\n", s->rep.nq, s->rep.nq == 1 ? "y" : "ies", s->rep.k);
    report_html_summary(&b, &s->rep);
    report_html_query_list(&b, &s->rep, "/query/");
    report_html_params(&b, &s->rep);
    hb_puts(&b, "</main>");
    report_html_tail(&b);
    return reply_html(c, &b);
}

static enum MHD_Result page_query(retrieval_server *s, struct MHD_Connection *c, const char *arg) {
    int64_t i;
    if (!parse_index(arg, &i)) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, "expected /query/<row number>\n");
    if (i >= s->rep.nq) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "no such query\n");
    html_buf b = {0};
    char title[64];
    snprintf(title, sizeof title, "endoret: query %lld", (long long)s->rep.q[i].id);
    report_html_head(&b, title);
    hb_printf(&b, "<header><h1>Query %lld</h1><p><a style=\"color:#fff\" href=\"/\">&larr; all queries</a>", (long long)s->rep.q[i].id);
    if (i > 0) hb_printf(&b, " &middot; <a style=\"color:#fff\" href=\"/query/%lld\">previous</a>", (long long)i - 1);
    if (i + 1 < s->rep.nq) hb_printf(&b, " &middot; <a style=\"color:#fff\" href=\"/query/%lld\">next</a>", (long long)i + 1);
    hb_puts(&b, "</p></header><main>\n");
    report_html_opts o = {0, 0, NULL};
    report_html_query(&b, &s->rep, (int)i, &o);
    hb_puts(&b, "</main>");
    report_html_tail(&b);
    return reply_html(c, &b);
}

/* "<id>" or "<id>/<view>" (a case's view-th image path; 0 = the first) */
static int parse_index_view(const char *s, int64_t *v, int64_t *view) {
    char buf[40];
    size_t n = strcspn(s, "/");
    if (n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    *view = 0;
    if (!parse_index(buf, v)) return 0;
    return !s[n] || parse_index(s + n + 1, view);
}

/* The view-th of a ';'-separated path list: served only when the list has it. */
static enum MHD_Result reply_view(struct MHD_Connection *c, const char *paths, int64_t view) {
    const char *p = paths;
    for (int64_t k = 0; p && *p && k < view; k++) {
        p = strchr(p, ';');
        if (p) p++;
    }
    if (!p || !*p) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "no such view\n");
    char one[4096];
    size_t n = strcspn(p, ";");
    if (n >= sizeof one) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "path too long\n");
    memcpy(one, p, n);
    one[n] = 0;
    return http_reply_image_file(c, one, NULL);
}

static enum MHD_Result route_image(retrieval_server *s, struct MHD_Connection *c, const char *rest) {
    int64_t v, view;
    if (!strncmp(rest, "query/", 6)) {
        if (!parse_index_view(rest + 6, &v, &view)) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, "expected /image/query/<row number>\n");
        if (v >= s->rep.nq) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "no such query\n");
        return reply_view(c, s->rep.q[v].image, view);
    }
    if (!strncmp(rest, "case/", 5)) {
        if (!parse_index_view(rest + 5, &v, &view)) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, "expected /image/case/<case id>\n");
        int64_t lo = 0, hi = s->ncase; /* binary search over the ascending ids */
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (s->case_id[mid] < v) lo = mid + 1; else hi = mid;
        }
        if (lo >= s->ncase || s->case_id[lo] != v) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "no such case\n");
        return reply_view(c, s->case_image[lo], view);
    }
    return http_reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                               const char *upload_data, size_t *upload_size, void **con_cls) {
    retrieval_server *s = cls;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return http_reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    const char *refused = http_request_refusal(c, method, url);
    if (refused) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, refused);
    if (!strcmp(url, "/")) return page_index(s, c);
    if (!strncmp(url, "/query/", 7)) return page_query(s, c, url + 7);
    if (!strncmp(url, "/image/", 7)) return route_image(s, c, url + 7);
    return http_reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

static void free_server(retrieval_server *s) {
    report_free(&s->rep);
    for (int64_t i = 0; i < s->ncase; i++) free(s->case_image[i]);
    free(s->case_image);
    free(s->case_id);
    free(s);
}

int retrieval_server_start(const retrieval_server_cfg *cfg, retrieval_server **out, int *port_out) {
    *out = NULL;
    if (!cfg->index) return er_fail(ER_INPUT, "--index is required");
    if (cfg->manifest && !cfg->query) return er_fail(ER_INPUT, "--manifest describes the query images: give --query too");
    struct sockaddr_in addr;
    int arc = http_addr_parse(cfg->bind, cfg->port, &addr); /* before any work */
    if (arc) return arc;
    casedb db;
    int rc = casedb_open(cfg->index, &db);
    if (rc) return rc;
    emb_set q;
    int have_q = 0;
    if (cfg->query) {
        if ((rc = emb_load_arg(cfg->query, "--query", &q))) { casedb_close(&db); return rc; }
        have_q = 1;
    }
    retrieval_server *s = xcalloc(1, sizeof *s);
    rc = report_build(&db, cfg->index, have_q ? &q : NULL, cfg->query, cfg->manifest, &cfg->rep, &s->rep);
    if (have_q) emb_free(&q);
    if (rc) { casedb_close(&db); free(s); return rc; }
    /* the registered case images: rows are in ascending id order at open */
    s->ncase = db.n;
    s->case_id = xmalloc((size_t)(db.n ? db.n : 1) * sizeof(int64_t));
    s->case_image = xcalloc((size_t)(db.n ? db.n : 1), sizeof(char *));
    for (int64_t i = 0; i < db.n; i++) {
        s->case_id[i] = db.ids[i];
        if (db.paths[i] && *db.paths[i]) s->case_image[i] = xstrdup(db.paths[i]); /* every view */
        if (i && s->case_id[i] <= s->case_id[i - 1]) rc = er_fail(ER_INPUT, "%s: case ids are not in ascending order", cfg->index);
    }
    casedb_close(&db);
    if (rc) { free_server(s); return rc; }
    if ((rc = http_daemon_listen("serve", &addr, handler, s, NULL, NULL, &s->d, port_out))) {
        free_server(s);
        return rc;
    }
    *out = s;
    return ER_OK;
}

const report_data *retrieval_server_report(const retrieval_server *s) { return &s->rep; }

void retrieval_server_stop(retrieval_server *s) {
    if (!s) return;
    MHD_stop_daemon(s->d);
    free_server(s);
}
