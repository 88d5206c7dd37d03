/* retrieval_server.c — see retrieval_server.h. The report data and the id -> image table are
 * read-only once the daemon runs, so request handlers share them without a lock. */
#include "infer/report/retrieval_server.h"
#include "infer/report/http_reply.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "datasets/image.h"
#include "infer/report/case_query.h"
#include "infer/report/case_upload.h"
#include "infer/retrieval/casedb.h"
#include "infer/report/report_html.h"
#include "nn/base/base.h"

struct retrieval_server {
    struct MHD_Daemon *d;
    report_data rep;
    int64_t ncase;
    int64_t *case_id;   /* ascending */
    char **case_image;  /* image paths of each case (';'-separated views), NULL if none */
    /* online cases (--model): the database stays open; one case is embedded at a time */
    int online, max_views;
    model *m;
    casedb db;
    case_engine engine;
    char **roots;       /* NULL-terminated real paths of --image-root */
    pthread_mutex_t lock;
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

/* The uploaded bytes of file i as <dir>/<i>_<name> (name reduced to [A-Za-z0-9._-]): the page's
 * thumbnails are made from files. Returns the path (malloc'd) or NULL. */
static char *save_upload(const char *dir, int i, const case_file *f) {
    char name[80];
    size_t k = 0;
    for (const char *p = f->name; *p && k < sizeof name - 1; p++) {
        char ch = *p;
        if (ch == '/') { k = 0; continue; } /* the base name only */
        name[k++] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' ? ch : '_';
    }
    name[k] = 0;
    char *path = xmalloc(strlen(dir) + sizeof name + 16);
    sprintf(path, "%s/%d_%s", dir, i, k ? name : "image");
    if (write_file_atomic(path, f->data, f->len)) { free(path); return NULL; }
    return path;
}

static enum MHD_Result answer_case(retrieval_server *s, struct MHD_Connection *c, case_upload *u, int json) {
    char msg[600];
    unsigned st = case_upload_finish(u, msg, sizeof msg);
    if (st) return http_reply_text(c, st, msg);
    int V = case_upload_count(u), rc = ER_OK;
    image *im = xcalloc(V, sizeof(image));
    char **paths = xcalloc(V, sizeof(char *));
    char dir[] = "/tmp/endoret_case_XXXXXX";
    int have_dir = 0;
    for (int i = 0; i < V && !st; i++) {
        const case_file *f = case_upload_file(u, i);
        if (case_upload_is_json(u)) {
            char *real = http_path_allowed(f->name, s->roots);
            if (!real) {
                snprintf(msg, sizeof msg, "%s: not a readable file under the server's image folders (--image-root)\n", f->name);
                st = MHD_HTTP_FORBIDDEN;
            } else if (image_load(real, 3, &im[i])) {
                snprintf(msg, sizeof msg, "%s: not a PNG or JPEG image\n", f->name);
                st = MHD_HTTP_BAD_REQUEST;
            }
            free(real);
            if (!st) paths[i] = xstrdup(f->name);
        } else {
            if (image_decode(f->data, f->len, f->name, 3, &im[i])) {
                snprintf(msg, sizeof msg, "%s: not a PNG or JPEG image\n", f->name);
                st = MHD_HTTP_BAD_REQUEST;
            } else if (!json) { /* thumbnails for the page */
                if (!have_dir) have_dir = mkdtemp(dir) != NULL;
                paths[i] = have_dir ? save_upload(dir, i, f) : NULL;
            }
        }
    }
    report_data rep = {0};
    case_timing t = {0};
    if (!st) {
        size_t len = 1;
        for (int i = 0; i < V; i++) len += (paths[i] ? strlen(paths[i]) : 0) + 1;
        char *joined = xcalloc(len, 1);
        for (int i = 0; i < V; i++) if (paths[i]) { if (*joined) strcat(joined, ";"); strcat(joined, paths[i]); }
        pthread_mutex_lock(&s->lock);
        rc = case_query(&s->engine, im, V, *joined ? joined : NULL, &rep, &t);
        pthread_mutex_unlock(&s->lock);
        free(joined);
        if (rc) snprintf(msg, sizeof msg, "%s\n", er_msg()), st = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    enum MHD_Result r;
    if (st) r = http_reply_text(c, st, msg);
    else {
        html_buf b = {0};
        if (json) {
            case_query_json(&b, &rep, &t, V);
            r = http_reply(c, MHD_HTTP_OK, "application/json", b.s, b.len);
            hb_free(&b);
        } else {
            report_html_head(&b, "endoret: a new case");
            hb_printf(&b, "<header><h1>A new case</h1><p><a style=\"color:#fff\" href=\"/new\">&larr; another case</a> &middot; "
                          "%d view%s, %s, embedded in %.0f ms, searched in %.1f ms</p></header><main>\n",
                      V, V == 1 ? "" : "s", t.fusion, t.embed_ms, t.search_ms);
            report_html_opts o = {1, 112, thumb_cache_new()};
            report_html_query(&b, &rep, 0, &o);
            thumb_cache_free(o.cache);
            hb_puts(&b, "</main>");
            report_html_tail(&b);
            r = reply_html(c, &b);
        }
    }
    report_free(&rep);
    for (int i = 0; i < V; i++) { image_free(&im[i]); free(paths[i]); }
    free(im); free(paths);
    if (have_dir) remove_tree(dir);
    return r;
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
    if (!strcmp(method, "POST")) {
        if (!s->online) return http_reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only (serve --model M accepts new cases)\n");
        if (strcmp(url, "/case") && strcmp(url, "/case.json")) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "POST /case or /case.json\n");
        case_upload *u = *con_cls;
        if (!u) {
            unsigned st = 0;
            const char *msg = NULL;
            if (!(u = case_upload_new(c, s->max_views, &st, &msg))) return http_reply_text(c, st, msg);
            *con_cls = u;
            return MHD_YES;
        }
        if (*upload_size) {
            case_upload_feed(u, upload_data, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        return answer_case(s, c, u, !strcmp(url, "/case.json"));
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
    case_upload_free(*con_cls);
    *con_cls = NULL;
}

static void free_server(retrieval_server *s) {
    report_free(&s->rep);
    if (s->online) {
        casedb_close(&s->db);
        model_free(s->m);
        pthread_mutex_destroy(&s->lock);
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
        pthread_mutex_init(&s->lock, NULL);
    }
    rc = report_build(&db, cfg->index, have_q ? &q : NULL, cfg->query, cfg->manifest, &cfg->rep, &s->rep);
    if (have_q) emb_free(&q);
    if (rc) {
        if (s->online) { model_free(s->m); pthread_mutex_destroy(&s->lock); s->online = 0; }
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
        s->engine = (case_engine){s->m, &s->db, s->rep.index_path, cfg->rep};
        s->engine.cfg.k = cfg->rep.k;
    } else {
        casedb_close(&db);
    }
    if (rc) { free_server(s); return rc; }
    if ((rc = http_daemon_listen("serve", &addr, handler, s, upload_done, NULL, &s->d, port_out))) {
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
