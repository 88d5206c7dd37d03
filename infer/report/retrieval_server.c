/* retrieval_server.c — see retrieval_server.h. The report data and the id -> image table are
 * read-only once the daemon runs, so request handlers share them without a lock. */
#include "infer/report/retrieval_server.h"
#include "infer/report/http_reply.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "datasets/image.h"
#include "datasets/view_list.h"
#include "infer/report/case_query.h"
#include "infer/report/case_upload.h"
#include "infer/report/case_views.h"
#include "infer/report/thumbnail.h"
#include "infer/report/work_queue.h"
#include "infer/retrieval/casedb.h"
#include "infer/report/report_html.h"
#include "nn/base/base.h"

struct retrieval_server {
    http_daemon *d;
    report_data rep;
    int64_t ncase;
    int64_t *case_id;   /* ascending */
    char **case_image;  /* image paths of each case (';'-separated views), NULL if none */
    /* online cases (--model): the database stays open; one worker embeds one case at a time, the
     * pages are served by the daemon's threads meanwhile */
    int online, max_views;
    int64_t max_view_px, max_case_px;
    model *m;
    casedb db;
    case_engine engine;
    char **roots;       /* NULL-terminated real paths of --image-root */
    work_queue *work;
    case_upload_budget budget;
};

/* A POST /case request: its body as it arrives, then, once the worker has answered, the reply. */
typedef struct {
    case_upload *u;
    struct MHD_Connection *c;
    int json, answered;
    unsigned status;
    const char *type;
    html_buf body;
} case_req;

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
    if (s->online)
        hb_puts(&b, "<section class=\"card\"><h2>A new case</h2><p><a href=\"/new\">Upload its images</a> to see the most "
                    "similar past cases and their vote.</p></section>\n");
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
    snprintf(title, sizeof title, "endoret: query %lld of %d", (long long)i + 1, s->rep.nq);
    report_html_head(&b, title);
    hb_printf(&b, "<header><h1>Query %lld of %d</h1><p><a style=\"color:#fff\" href=\"/\">&larr; all queries</a>", (long long)i + 1, s->rep.nq);
    if (i > 0) hb_printf(&b, " &middot; <a style=\"color:#fff\" href=\"/query/%lld\">previous</a>", (long long)i - 1);
    if (i + 1 < s->rep.nq) hb_printf(&b, " &middot; <a style=\"color:#fff\" href=\"/query/%lld\">next</a>", (long long)i + 1);
    hb_puts(&b, "</p></header><main>\n");
    report_html_opts o = {.embed = 0};
    report_html_query(&b, &s->rep, (int)i, &o);
    hb_puts(&b, "</main>");
    report_html_tail(&b);
    return reply_html(c, &b);
}

/* ---- online cases ---- */

static enum MHD_Result page_new(retrieval_server *s, struct MHD_Connection *c) {
    html_buf b = {0};
    report_html_head(&b, "endoret: a new case");
    hb_printf(&b, "<header><h1>A new case</h1><p><a style=\"color:#fff\" href=\"/\">&larr; all queries</a></p></header><main>"
                  "<section class=\"card\"><form method=\"post\" action=\"/case\" enctype=\"multipart/form-data\">"
                  "<p>The views of one lesion (1 to %d PNG or JPEG images, each at most 20 MB):</p>"
                  "<p><input type=\"file\" name=\"views\" accept=\"image/png,image/jpeg\" multiple required></p>"
                  "<p><button type=\"submit\">Find similar past cases</button></p></form></section></main>",
              s->max_views);
    report_html_tail(&b);
    return reply_html(c, &b);
}

static void req_text(case_req *r, unsigned status, const char *msg) {
    r->status = status;
    r->type = "text/plain; charset=utf-8";
    hb_puts(&r->body, msg);
}

/* The worker's part of a new case: size the views from their headers (case_views.h), decode them
 * one at a time into the model's input (and, for the page, a thumbnail made from the decoded view,
 * so no file is written and no name is opened again), embed, search, render. */
static void answer_case(retrieval_server *s, case_req *r) {
    char msg[600];
    case_view *v;
    int V;
    double t0 = now_seconds();
    unsigned st = case_views_prepare(r->u, s->roots, s->max_view_px, s->max_case_px, &v, &V, msg, sizeof msg);
    if (st) { case_views_free(v, V); req_text(r, st, msg); return; }
    size_t nin = case_input_floats(&s->engine);
    float *x = xmalloc((size_t)V * nin * sizeof(float));
    char **thumbs = r->json ? NULL : xcalloc((size_t)V, sizeof(char *)), **names = xcalloc((size_t)V, sizeof(char *));
    image im = {0}, tmp = {0};
    aug_workspace ws = {0};
    for (int i = 0; i < V && !st; i++) {
        names[i] = (char *)v[i].name;
        if (case_view_decode(&v[i], s->max_view_px, &im)) {
            snprintf(msg, sizeof msg, "%s: not a PNG or JPEG image\n", v[i].name);
            st = MHD_HTTP_BAD_REQUEST;
        } else if (case_input(&s->engine, &im, &ws, &tmp, x + (size_t)i * nin)) {
            snprintf(msg, sizeof msg, "%s\n", er_msg());
            st = MHD_HTTP_INTERNAL_SERVER_ERROR;
        } else if (thumbs && thumbnail_data_uri_image(&im, 112, 82, &thumbs[i])) {
            thumbs[i] = NULL; /* shown as "no image" */
        }
    }
    image_free(&im);
    image_free(&tmp);
    aug_workspace_free(&ws);
    double prep_ms = 1e3 * (now_seconds() - t0);
    report_data rep = {0};
    case_timing t = {0};
    if (!st && case_query(&s->engine, x, V, &rep, &t)) {
        snprintf(msg, sizeof msg, "%s\n", er_msg());
        st = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    free(x);
    t.embed_ms += prep_ms;
    if (st) req_text(r, st, msg);
    else if (r->json) {
        case_query_json(&r->body, &rep, &t, V);
        r->status = MHD_HTTP_OK;
        r->type = "application/json";
    } else {
        html_buf *b = &r->body;
        report_html_head(b, "endoret: a new case");
        hb_printf(b, "<header><h1>A new case</h1><p><a style=\"color:#fff\" href=\"/new\">&larr; another case</a> &middot; "
                     "%d view%s, %s, embedded in %.0f ms, searched in %.1f ms</p></header><main>\n",
                  V, V == 1 ? "" : "s", t.fusion, t.embed_ms, t.search_ms);
        report_html_opts o = {.embed = 1, .thumb = 112, .cache = thumb_cache_new(), .query_uri = thumbs,
                              .query_name = names, .query_views = V, .link = 1};
        report_html_query(b, &rep, 0, &o);
        thumb_cache_free(o.cache);
        hb_puts(b, "</main>");
        report_html_tail(b);
        r->status = MHD_HTTP_OK;
        r->type = "text/html; charset=utf-8";
    }
    report_free(&rep);
    for (int i = 0; thumbs && i < V; i++) free(thumbs[i]);
    free(thumbs);
    free(names);
    case_views_free(v, V);
}

/* The embedding worker: answers the case, then hands the connection back to the daemon, which
 * calls the handler again to send the reply. */
static void run_case(void *job, void *ctx, int stopping) {
    case_req *r = job;
    if (stopping) req_text(r, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is stopping\n");
    else answer_case(ctx, r);
    r->answered = 1;
    MHD_resume_connection(r->c);
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

/* The view-th of a view list (datasets/view_list.h): served only when the list has it. */
static enum MHD_Result reply_view(struct MHD_Connection *c, const char *paths, int64_t view) {
    int n;
    char **views = view_list_split(paths, &n);
    enum MHD_Result r = view < n ? http_reply_image_file(c, views[view], NULL)
                                 : http_reply_text(c, MHD_HTTP_NOT_FOUND, "no such view\n");
    view_list_free(views, n);
    return r;
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
    if (!strcmp(method, "POST")) {
        if (!s->online) return http_reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only (serve --model M accepts new cases)\n");
        if (strcmp(url, "/case") && strcmp(url, "/case.json")) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "POST /case or /case.json\n");
        case_req *r = *con_cls;
        if (!r) {
            unsigned st = 0;
            const char *msg = NULL;
            case_upload *u = case_upload_new(c, s->max_views, &s->budget, &st, &msg);
            if (!u) return http_reply_text(c, st, msg);
            r = xcalloc(1, sizeof *r);
            r->u = u;
            r->c = c;
            r->json = !strcmp(url, "/case.json");
            *con_cls = r;
            return MHD_YES;
        }
        if (*upload_size) {
            case_upload_feed(r->u, upload_data, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        if (r->answered) return http_reply(c, r->status, r->type, r->body.s ? r->body.s : "", r->body.len);
        char msg[600];
        unsigned st = case_upload_finish(r->u, msg, sizeof msg);
        if (st == MHD_HTTP_SERVICE_UNAVAILABLE) return http_reply_busy(c, CASE_RETRY_AFTER_S, msg);
        if (st) return http_reply_text(c, st, msg);
        /* parked until the worker answers; a full queue is told to come back */
        if (!work_queue_reserve(s->work)) return http_reply_busy(c, CASE_RETRY_AFTER_S, "the server is busy with other cases: retry later\n");
        MHD_suspend_connection(c);
        work_queue_push(s->work, r);
        return MHD_YES;
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return http_reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or POST only\n");
    const char *refused = http_request_refusal(c, method, url);
    if (refused) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, refused);
    if (!strcmp(url, "/")) return page_index(s, c);
    if (!strcmp(url, "/new") && s->online) return page_new(s, c);
    if (!strncmp(url, "/query/", 7)) return page_query(s, c, url + 7);
    if (!strncmp(url, "/image/", 7)) return route_image(s, c, url + 7);
    return http_reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

static void upload_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode code) {
    (void)cls; (void)c; (void)code;
    case_req *r = *con_cls;
    if (r) {
        case_upload_free(r->u);
        hb_free(&r->body);
        free(r);
    }
    *con_cls = NULL;
}

/* Older builds wrote uploads to /tmp/endoret_case_XXXXXX for the thumbnails, and a server killed
 * mid-request left the folder (with the patient's image) behind. A request lasted seconds, so a
 * folder of ours untouched for an hour is stale. */
static void sweep_stale_case_dirs(void) {
    DIR *d = opendir("/tmp");
    struct dirent *e;
    time_t now = time(NULL);
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "endoret_case_", 13) || strlen(e->d_name) != 19) continue;
        char path[64];
        snprintf(path, sizeof path, "/tmp/%s", e->d_name);
        struct stat st;
        if (lstat(path, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || now - st.st_mtime < 3600) continue;
        if (remove_tree(path) == ER_OK) fprintf(stderr, "serve: removed %s, left by a server that was stopped mid-request\n", path);
    }
    if (d) closedir(d);
}

static void free_server(retrieval_server *s) {
    report_free(&s->rep);
    if (s->online) {
        casedb_close(&s->db);
        model_free(s->m);
    }
    for (char **r = s->roots; r && *r; r++) free(*r);
    free(s->roots);
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
    if (cfg->model && cfg->max_views < 1) return er_fail(ER_INPUT, "--max-views must be >= 1");
    if (cfg->image_roots && !cfg->model) return er_fail(ER_INPUT, "--image-root names folders for new cases: give --model too");
    casedb db;
    int rc = casedb_open(cfg->index, &db);
    if (rc) return rc;
    model *m = NULL;
    char **roots = NULL;
    if (cfg->model) {
        if ((rc = model_load(cfg->model, NULL, NULL, 0, &m)) || (rc = model_prepack(m))) {
            model_free(m);
            casedb_close(&db);
            return rc;
        }
        if (m->dim != db.dim) {
            rc = er_fail(ER_INPUT, "--model %s gives %d-d descriptors but %s holds %d-d ones", cfg->model, m->dim, cfg->index, db.dim);
            model_free(m);
            casedb_close(&db);
            return rc;
        }
        /* the folders JSON cases may name (an empty list: none, so JSON cases can name no file) */
        roots = xcalloc(2 + (cfg->image_roots ? strlen(cfg->image_roots) : 0), sizeof(char *));
        char *copy = cfg->image_roots ? xstrdup(cfg->image_roots) : NULL, *save = NULL;
        int nr = 0;
        for (char *d = copy ? strtok_r(copy, ",", &save) : NULL; d && !rc; d = strtok_r(NULL, ",", &save)) {
            if (!(roots[nr] = http_image_root(d))) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", er_msg());
                rc = er_fail(ER_INPUT, "--image-root %s", msg);
            }
            else nr++;
        }
        free(copy);
        if (rc) {
            for (int i = 0; i < nr; i++) free(roots[i]);
            free(roots);
            model_free(m);
            casedb_close(&db);
            return rc;
        }
    }
    emb_set q;
    int have_q = 0;
    if (cfg->query) {
        if ((rc = emb_load_arg(cfg->query, "--query", &q))) { casedb_close(&db); return rc; }
        have_q = 1;
    }
    retrieval_server *s = xcalloc(1, sizeof *s);
    s->roots = roots;
    if (m) {
        s->online = 1;
        s->m = m;
        s->max_views = cfg->max_views;
        s->max_view_px = cfg->max_view_pixels;
        s->max_case_px = cfg->max_case_pixels;
        s->budget.cap = cfg->upload_budget > 0 ? cfg->upload_budget : CASE_UPLOAD_BUDGET;
    }
    rc = report_build(&db, cfg->index, have_q ? &q : NULL, cfg->query, cfg->manifest, &cfg->rep, &s->rep);
    if (have_q) emb_free(&q);
    if (rc) {
        if (s->online) { model_free(s->m); s->online = 0; }
        casedb_close(&db);
        free_server(s);
        return rc;
    }
    /* the registered case images: rows are in ascending id order at open */
    s->ncase = db.n;
    s->case_id = xmalloc((size_t)(db.n ? db.n : 1) * sizeof(int64_t));
    s->case_image = xcalloc((size_t)(db.n ? db.n : 1), sizeof(char *));
    for (int64_t i = 0; i < db.n; i++) {
        s->case_id[i] = db.ids[i];
        if (db.paths[i] && *db.paths[i]) s->case_image[i] = xstrdup(db.paths[i]); /* every view */
        if (i && s->case_id[i] <= s->case_id[i - 1]) rc = er_fail(ER_INPUT, "%s: case ids are not in ascending order", cfg->index);
    }
    if (s->online) { /* kept open for new cases; the engine points into the server */
        s->db = db;
        s->engine = (case_engine){s->m, &s->db, s->rep.index_path, cfg->rep, s->rep.valid}; /* valid: computed once, by report_build */
        s->engine.cfg.k = cfg->rep.k;
    } else {
        casedb_close(&db);
    }
    if (rc) { free_server(s); return rc; }
    if (s->online) {
        sweep_stale_case_dirs();
        if (!(s->work = work_queue_start(cfg->queue > 0 ? cfg->queue : CASE_QUEUE, run_case, s))) {
            free_server(s);
            return er_fail(ER_RUNTIME, "serve: cannot start the embedding worker");
        }
    }
    if ((rc = http_daemon_listen("serve", &addr, handler, s, upload_done, NULL, HTTP_POOL_THREADS, &s->d, port_out))) {
        work_queue_stop(s->work);
        free_server(s);
        return rc;
    }
    *out = s;
    return ER_OK;
}

const report_data *retrieval_server_report(const retrieval_server *s) { return &s->rep; }

void retrieval_server_stop(retrieval_server *s) {
    if (!s) return;
    work_queue_stop(s->work); /* every parked request is answered (resumed) before the daemon stops */
    http_daemon_stop(s->d);
    free_server(s);
}
