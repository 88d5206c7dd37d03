/* retrieval_server.c — see retrieval_server.h. The report data and the id -> image table are
 * read-only once the daemon runs, so request handlers share them without a lock. */
#include "infer/report/retrieval_server.h"
#include "infer/report/http_reply.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "datasets/image.h"
#include "datasets/view_list.h"
#include "infer/report/access_log.h"
#include "infer/report/case_query.h"
#include "infer/report/case_upload.h"
#include "infer/report/case_views.h"
#include "infer/report/case_write.h"
#include "infer/report/image_page.h"
#include "infer/report/mask_overlay.h"
#include "infer/report/region_evidence.h"
#include "infer/report/thumbnail.h"
#include "infer/report/work_queue.h"
#include "infer/retrieval/casedb.h"
#include "infer/report/report_html.h"
#include "nn/base/base.h"
#include "nn/base/json.h"

struct retrieval_server {
    http_daemon *d;
    report_data rep;
    int64_t ncase;
    int64_t *case_id;   /* ascending */
    char **case_image;  /* image paths of each case (';'-separated views), NULL if none */
    char **case_mask;   /* its lesion masks (aligned with case_image), NULL if none recorded */
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
    /* writes (case_write.h): NULL token = read-only. The worker changes db and the id -> image
     * table below; the pool threads read that table under cases_lock. */
    char *write_token;
    int64_t next_id;    /* the id the next filed case gets */
    pthread_rwlock_t cases_lock;
    /* region evidence (region_evidence.h) runs the model on the pool threads too: one forward at a
     * time, so the worker holds this lock for each case and a query page while it draws evidence; a
     * query page that finds it taken is served without evidence (it never waits) */
    FILE *access_log;   /* one line per answered request (access_log.h); NULL: none */
    int evidence;       /* ev is set up */
    region_engine ev;
    pthread_mutex_t model_lock;
};

/* A POST /case request: its body as it arrives, then, once the worker has answered, the reply. */
enum { REQ_QUERY, REQ_FILE, REQ_DELETE };

typedef struct {
    case_upload *u;
    struct MHD_Connection *c;
    int mode;           /* REQ_* */
    int64_t label;      /* REQ_FILE: the diagnosis's label number */
    char addr[64];      /* the client, for the write log */
    const char *raw;    /* REQ_DELETE: the JSON body (owned by u) */
    size_t rlen;
    int json, answered;
    unsigned status;
    const char *type;
    html_buf body;
    double t0;          /* now_seconds() at its first call, for the access log */
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
    region_query e;
    if (s->evidence && pthread_mutex_trylock(&s->model_lock) == 0) {
        int bad = region_query_of(&s->ev, &s->rep, (int)i, NULL, 0, &e);
        pthread_mutex_unlock(&s->model_lock);
        if (!bad) o.ev = &e;
        else o.ev_note = "No region evidence for this query: its image could not be read.";
    } else if (s->evidence) { /* a pool thread never waits for the model: pages stay fast under load */
        o.ev_note = "No region evidence on this page: the encoder is busy with another request (reload to try again).";
    } else if (s->online) {
        o.ev_note = "No region evidence: the encoder has no spatial features, or no case image could be read.";
    }
    report_html_query(&b, &s->rep, (int)i, &o);
    if (o.ev) region_query_free(&e);
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
/* The V views' model inputs into x (V x case_input_floats floats), and their thumbnails when
 * thumbs is given: 0, or the HTTP status with msg. */
static unsigned decode_inputs(retrieval_server *s, const case_view *v, int V, float *x, char **thumbs, char **names,
                              char *msg, size_t nmsg) {
    size_t nin = case_input_floats(&s->engine);
    unsigned st = 0;
    image im = {0}, tmp = {0};
    aug_workspace ws = {0};
    for (int i = 0; i < V && !st; i++) {
        if (names) names[i] = (char *)v[i].name;
        if (case_view_decode(&v[i], s->max_view_px, &im)) {
            snprintf(msg, nmsg, "%s: not a PNG or JPEG image\n", v[i].name);
            st = MHD_HTTP_BAD_REQUEST;
        } else if (case_input(&s->engine, &im, &ws, &tmp, x + (size_t)i * nin)) {
            snprintf(msg, nmsg, "%s\n", er_msg());
            st = MHD_HTTP_INTERNAL_SERVER_ERROR;
        } else if (thumbs && thumbnail_data_uri_image(&im, 112, 82, &thumbs[i])) {
            thumbs[i] = NULL; /* shown as "no image" */
        }
    }
    image_free(&im);
    image_free(&tmp);
    aug_workspace_free(&ws);
    return st;
}

static void answer_case(retrieval_server *s, case_req *r) {
    char msg[600];
    case_view *v;
    int V;
    double t0 = now_seconds();
    unsigned st = case_views_prepare(r->u, s->roots, s->max_view_px, s->max_case_px, &v, &V, msg, sizeof msg);
    if (st) { case_views_free(v, V); req_text(r, st, msg); return; }
    float *x = xmalloc((size_t)V * case_input_floats(&s->engine) * sizeof(float));
    char **thumbs = r->json ? NULL : xcalloc((size_t)V, sizeof(char *)), **names = xcalloc((size_t)V, sizeof(char *));
    st = decode_inputs(s, v, V, x, thumbs, names, msg, sizeof msg);
    double prep_ms = 1e3 * (now_seconds() - t0);
    report_data rep = {0};
    case_timing t = {0};
    if (!st && case_query(&s->engine, x, V, &rep, &t)) {
        snprintf(msg, sizeof msg, "%s\n", er_msg());
        st = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    t.embed_ms += prep_ms;
    region_query e;
    int have_ev = !st && !r->json && s->evidence && !region_query_of(&s->ev, &rep, 0, x, V, &e);
    free(x);
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
                              .query_name = names, .query_views = V, .link = 1, .ev = have_ev ? &e : NULL};
        report_html_query(b, &rep, 0, &o);
        thumb_cache_free(o.cache);
        hb_puts(b, "</main>");
        report_html_tail(b);
        r->status = MHD_HTTP_OK;
        r->type = "text/html; charset=utf-8";
    }
    if (have_ev) region_query_free(&e);
    report_free(&rep);
    for (int i = 0; thumbs && i < V; i++) free(thumbs[i]);
    free(thumbs);
    free(names);
    case_views_free(v, V);
}

/* The embedding worker: answers the case, then hands the connection back to the daemon, which
 * calls the handler again to send the reply. */
static void json_str(html_buf *b, const char *str) {
    char *buf = NULL;
    size_t cap = 0, len = json_escape(&buf, &cap, 0, str);
    hb_printf(b, "%.*s", (int)len, buf);
    free(buf);
}

/* A filed case: its descriptor (as a query's), a fresh id, one transaction in the database, then the
 * in-memory index (casedb_add) and the id -> image table. Runs on the worker, so no query searches
 * the index meanwhile. */
static void answer_file(retrieval_server *s, case_req *r) {
    char msg[600];
    case_view *v;
    int V;
    unsigned st = case_views_prepare(r->u, s->roots, s->max_view_px, s->max_case_px, &v, &V, msg, sizeof msg);
    float *x = NULL, *q = NULL;
    char **paths = NULL, *joined = NULL, *meta = NULL;
    case_timing t = {0};
    if (!st) {
        x = xmalloc((size_t)V * case_input_floats(&s->engine) * sizeof(float));
        st = decode_inputs(s, v, V, x, NULL, NULL, msg, sizeof msg);
    }
    if (!st) {
        q = xmalloc((size_t)s->m->dim * sizeof(float));
        if (case_descriptor(&s->engine, x, V, q, &t)) snprintf(msg, sizeof msg, "%s\n", er_msg()), st = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    int64_t id = s->next_id;
    if (!st && case_upload_is_json(r->u)) { /* the files, as resolved when they were read: the case's images */
        paths = xcalloc((size_t)V, sizeof(char *));
        for (int i = 0; i < V; i++) paths[i] = realpath(v[i].name, NULL);
        for (int i = 0; i < V; i++)
            if (!paths[i]) paths[i] = xstrdup(v[i].name);
        joined = view_list_join(paths, V);
    }
    if (!st) {
        meta = write_metadata(r->addr, V);
        case_rec rec = {id, q, r->label, joined, -1, -1, NULL, meta, NULL};
        if (casedb_add(&s->db, &rec, 1)) snprintf(msg, sizeof msg, "%s\n", er_msg()), st = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    const char *label = s->db.label_names[r->label];
    if (st) {
        write_log(r->addr, "file", -1, label, st >= 500 ? "failed" : "refused");
        req_text(r, st, msg);
    } else {
        s->next_id = id + 1;
        pthread_rwlock_wrlock(&s->cases_lock); /* ids stay ascending: id is above every other */
        s->case_id = xrealloc(s->case_id, (size_t)(s->ncase + 1) * sizeof(int64_t));
        s->case_image = xrealloc(s->case_image, (size_t)(s->ncase + 1) * sizeof(char *));
        s->case_mask = xrealloc(s->case_mask, (size_t)(s->ncase + 1) * sizeof(char *));
        s->case_id[s->ncase] = id;
        s->case_image[s->ncase] = joined ? xstrdup(joined) : NULL;
        s->case_mask[s->ncase] = NULL; /* an upload carries images only */
        s->ncase++;
        pthread_rwlock_unlock(&s->cases_lock);
        write_log(r->addr, "file", id, label, "ok");
        hb_printf(&r->body, "{\"filed\": %lld, \"diagnosis\": ", (long long)id);
        json_str(&r->body, label);
        hb_printf(&r->body, ", \"views\": %d, \"fusion\": \"%s\", \"images_kept\": %s, \"cases\": %lld, \"embed_ms\": %.2f}\n", V,
                  t.fusion, joined ? "true" : "false", (long long)s->db.n, t.embed_ms);
        r->status = MHD_HTTP_OK;
        r->type = "application/json";
    }
    for (int i = 0; paths && i < V; i++) free(paths[i]);
    free(paths); free(joined); free(meta); free(q); free(x);
    case_views_free(v, V);
}

static void answer_delete(retrieval_server *s, case_req *r) {
    char msg[600];
    int64_t id = -1;
    unsigned st = write_parse_delete(r->raw, r->rlen, &id, msg, sizeof msg);
    int64_t row = st ? -1 : casedb_row(&s->db, id);
    const char *label = row >= 0 ? casedb_label_name(&s->db, s->db.labels[row]) : NULL;
    char *keep = label ? xstrdup(label) : NULL;
    if (!st && row < 0) snprintf(msg, sizeof msg, "no case %lld in the database\n", (long long)id), st = MHD_HTTP_NOT_FOUND;
    if (!st && casedb_delete(&s->db, &id, 1)) snprintf(msg, sizeof msg, "%s\n", er_msg()), st = MHD_HTTP_INTERNAL_SERVER_ERROR;
    if (st) {
        write_log(r->addr, "delete", id, keep, st >= 500 ? "failed" : "refused");
        req_text(r, st, msg);
    } else {
        pthread_rwlock_wrlock(&s->cases_lock);
        for (int64_t i = 0; i < s->ncase; i++)
            if (s->case_id[i] == id) {
                free(s->case_image[i]);
                free(s->case_mask[i]);
                memmove(s->case_id + i, s->case_id + i + 1, (size_t)(s->ncase - i - 1) * sizeof(int64_t));
                memmove(s->case_image + i, s->case_image + i + 1, (size_t)(s->ncase - i - 1) * sizeof(char *));
                memmove(s->case_mask + i, s->case_mask + i + 1, (size_t)(s->ncase - i - 1) * sizeof(char *));
                s->ncase--;
                break;
            }
        pthread_rwlock_unlock(&s->cases_lock);
        write_log(r->addr, "delete", id, keep, "ok");
        hb_printf(&r->body, "{\"deleted\": %lld, \"cases\": %lld}\n", (long long)id, (long long)s->db.n);
        r->status = MHD_HTTP_OK;
        r->type = "application/json";
    }
    free(keep);
}

static void run_case(void *job, void *ctx, int stopping) {
    case_req *r = job;
    retrieval_server *s = ctx;
    pthread_mutex_lock(&s->model_lock);
    if (stopping) req_text(r, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is stopping\n");
    else if (r->mode == REQ_FILE) answer_file(ctx, r);
    else if (r->mode == REQ_DELETE) answer_delete(ctx, r);
    else answer_case(ctx, r);
    pthread_mutex_unlock(&s->model_lock);
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

/* One view of a query or past case named by "query/<row>[/<view>]" or "case/<id>[/<view>]": copies of
 * its image and mask lists, or the status and text of the refusal. */
typedef struct {
    char *images, *masks;   /* view lists (owned), NULL when none */
    int64_t view;
    int query;              /* a query row, not a case id */
    int64_t n;              /* the row or the id */
    char base[48];          /* "query/<row>" or "case/<id>": the item's routes without the view */
} item_ref;

static unsigned find_item(retrieval_server *s, const char *rest, item_ref *it, const char **msg) {
    memset(it, 0, sizeof *it);
    int64_t v;
    it->query = !strncmp(rest, "query/", 6);
    if (!it->query && strncmp(rest, "case/", 5)) return *msg = "not found\n", MHD_HTTP_NOT_FOUND;
    if (!parse_index_view(rest + (it->query ? 6 : 5), &v, &it->view))
        return *msg = it->query ? "expected query/<row number>[/<view>]\n" : "expected case/<case id>[/<view>]\n", MHD_HTTP_BAD_REQUEST;
    it->n = v;
    snprintf(it->base, sizeof it->base, "%s/%lld", it->query ? "query" : "case", (long long)v);
    if (it->query) {
        if (v >= s->rep.nq) return *msg = "no such query\n", MHD_HTTP_NOT_FOUND;
        it->images = s->rep.q[v].image ? xstrdup(s->rep.q[v].image) : NULL;
        it->masks = s->rep.q[v].mask ? xstrdup(s->rep.q[v].mask) : NULL;
        return 0;
    }
    pthread_rwlock_rdlock(&s->cases_lock); /* the worker files and deletes cases */
    int64_t lo = 0, hi = s->ncase; /* binary search over the ascending ids */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (s->case_id[mid] < v) lo = mid + 1; else hi = mid;
    }
    int found = lo < s->ncase && s->case_id[lo] == v;
    if (found && s->case_image[lo]) it->images = xstrdup(s->case_image[lo]);
    if (found && s->case_mask[lo]) it->masks = xstrdup(s->case_mask[lo]);
    pthread_rwlock_unlock(&s->cases_lock);
    return found ? 0 : (*msg = "no such case\n", MHD_HTTP_NOT_FOUND);
}

static void item_free(item_ref *it) { free(it->images); free(it->masks); }

/* The view's mask (its own path from the database or manifest, opened as the images are) drawn as
 * the outline overlay (mask_overlay.h), at most 1024 px on its longer side. */
static enum MHD_Result reply_mask(struct MHD_Connection *c, const char *masks, int64_t view) {
    int n;
    char **mv = view_list_split(masks, &n);
    const char *why = view < n ? "the lesion mask of this view cannot be read\n" : "no lesion outline is recorded for this view\n";
    size_t len = 0;
    uint8_t *data = view < n ? http_read_allowed(mv[view], NULL, &len) : NULL;
    image m = {0};
    uint8_t *png = NULL;
    size_t plen = 0;
    int ok = data && image_decode(data, len, mv[view], 1, &m) == ER_OK && mask_overlay_encode(&m, 1024, &png, &plen) == ER_OK;
    if (!ok) er_clear();
    enum MHD_Result r = ok ? http_reply(c, MHD_HTTP_OK, "image/png", png, plen) : http_reply_text(c, MHD_HTTP_NOT_FOUND, why);
    image_free(&m);
    free(png);
    free(data);
    view_list_free(mv, n);
    return r;
}

/* /image/<item>, /mask/<item> and /view/<item> (the full-size page). */
static enum MHD_Result route_item(retrieval_server *s, struct MHD_Connection *c, const char *kind, const char *rest) {
    item_ref it;
    const char *msg = NULL;
    unsigned st = find_item(s, rest, &it, &msg);
    if (st) return http_reply_text(c, st, msg);
    enum MHD_Result r;
    if (!strcmp(kind, "image")) r = reply_view(c, it.images, it.view);
    else if (!strcmp(kind, "mask")) r = reply_mask(c, it.masks, it.view);
    else {
        int n, nm;
        char **views = view_list_split(it.images, &n), **mv = view_list_split(it.masks, &nm);
        if (it.view >= n) r = http_reply_text(c, MHD_HTTP_NOT_FOUND, "no such view\n");
        else {
            char title[64];
            if (it.query) snprintf(title, sizeof title, "Query %lld", (long long)it.n + 1);
            else snprintf(title, sizeof title, "Past case");
            image_page p = {title, it.base, views[it.view], (int)it.view, n, nm == n && it.view < nm};
            html_buf b = {0};
            report_html_image_page(&b, &p);
            r = reply_html(c, &b);
        }
        view_list_free(views, n);
        view_list_free(mv, nm);
    }
    item_free(&it);
    return r;
}

static enum MHD_Result route(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                             const char *upload_data, size_t *upload_size, void **con_cls) {
    retrieval_server *s = cls;
    if (!strcmp(method, "POST")) {
        if (!s->online) return http_reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only (serve --model M accepts new cases)\n");
        int mode = !strcmp(url, "/case") || !strcmp(url, "/case.json") ? REQ_QUERY
                 : !strcmp(url, "/case/file.json")                      ? REQ_FILE
                 : !strcmp(url, "/case/delete.json")                    ? REQ_DELETE : -1;
        if (mode < 0) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "POST /case, /case.json, /case/file.json or /case/delete.json\n");
        case_req *r = *con_cls;
        if (!r) {
            char addr[64];
            if (mode != REQ_QUERY && !write_token_ok(c, s->write_token)) { /* before any byte of the body is kept */
                write_client_addr(c, addr, sizeof addr);
                write_log(addr, mode == REQ_FILE ? "file" : "delete", -1, NULL, s->write_token ? "refused (no or wrong token)" : "refused (read-only server)");
                return http_reply_text(c, MHD_HTTP_FORBIDDEN, s->write_token ? "a write needs Authorization: Bearer <the server's write token>\n"
                                                                             : "this server is read-only (start it with --write-token to file cases)\n");
            }
            unsigned st = 0;
            const char *msg = NULL;
            case_upload *u = case_upload_new(c, mode == REQ_DELETE ? 0 : s->max_views, &s->budget, &st, &msg);
            if (!u) return http_reply_text(c, st, msg);
            if (mode == REQ_DELETE && !case_upload_is_json(u)) {
                case_upload_free(u);
                return http_reply_text(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "send {\"id\": <case id>} as application/json\n");
            }
            r = xcalloc(1, sizeof *r);
            r->u = u;
            r->c = c;
            r->mode = mode;
            r->t0 = now_seconds();
            r->json = mode != REQ_QUERY || !strcmp(url, "/case.json");
            if (mode != REQ_QUERY) write_client_addr(c, r->addr, sizeof r->addr);
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
        unsigned st = r->mode == REQ_DELETE ? case_upload_raw(r->u, &r->raw, &r->rlen, msg, sizeof msg)
                                            : case_upload_finish(r->u, msg, sizeof msg);
        if (!st && r->mode == REQ_FILE) { /* the diagnosis, before any work: one of the database's names (read-only) */
            const char *dg = case_upload_diagnosis(r->u);
            if (!dg || (r->label = write_label(&s->db, dg, msg, sizeof msg)) < 0) {
                if (!dg) snprintf(msg, sizeof msg, "\"diagnosis\" must be a label name of at most %d characters\n", CASE_MAX_LABEL);
                write_log(r->addr, "file", -1, dg, "refused (unknown diagnosis)");
                st = MHD_HTTP_BAD_REQUEST;
            }
        }
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
    if (!strncmp(url, "/image/", 7)) return route_item(s, c, "image", url + 7);
    if (!strncmp(url, "/mask/", 6)) return route_item(s, c, "mask", url + 6);
    if (!strncmp(url, "/view/", 6)) return route_item(s, c, "view", url + 6);
    return http_reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* Every call MHD makes, routed; the call that queues a reply writes the request's access-log line
 * (a POST is answered on a later call than its first: its time counts from the first). */
static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                               const char *upload_data, size_t *upload_size, void **con_cls) {
    retrieval_server *s = cls;
    double t0 = now_seconds();
    http_reply_take_status();
    enum MHD_Result res = route(cls, c, url, method, version, upload_data, upload_size, con_cls);
    unsigned st = http_reply_take_status();
    if (st && s->access_log) {
        case_req *r = !strcmp(method, "POST") ? *con_cls : NULL;
        char addr[64];
        write_client_addr(c, addr, sizeof addr);
        access_log_write(s->access_log, addr, method, url, st, 1e3 * (now_seconds() - (r ? r->t0 : t0)));
    }
    return res;
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
    region_engine_free(&s->ev);
    if (s->online) {
        casedb_close(&s->db);
        model_free(s->m);
    }
    for (char **r = s->roots; r && *r; r++) free(*r);
    free(s->roots);
    if (s->write_token) memset(s->write_token, 0, strlen(s->write_token));
    free(s->write_token);
    pthread_rwlock_destroy(&s->cases_lock);
    pthread_mutex_destroy(&s->model_lock);
    for (int64_t i = 0; i < s->ncase; i++) { free(s->case_image[i]); free(s->case_mask[i]); }
    free(s->case_image);
    free(s->case_mask);
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
    if (cfg->write_token && !cfg->model) return er_fail(ER_INPUT, "a write token files new cases, embedded by the model: give --model too");
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
    pthread_rwlock_init(&s->cases_lock, NULL);
    pthread_mutex_init(&s->model_lock, NULL);
    s->access_log = cfg->access_log;
    s->write_token = cfg->write_token ? xstrdup(cfg->write_token) : NULL;
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
    s->case_mask = xcalloc((size_t)(db.n ? db.n : 1), sizeof(char *));
    for (int64_t i = 0; i < db.n; i++) {
        s->case_id[i] = db.ids[i];
        if (db.paths[i] && *db.paths[i]) s->case_image[i] = xstrdup(db.paths[i]); /* every view */
        if (db.masks[i]) s->case_mask[i] = xstrdup(db.masks[i]);
        if (i && s->case_id[i] <= s->case_id[i - 1]) rc = er_fail(ER_INPUT, "%s: case ids are not in ascending order", cfg->index);
    }
    s->next_id = db.n ? s->case_id[db.n - 1] + 1 : 0; /* a filed case: above every id */
    /* region evidence, on by default with a model that has spatial features: the reference bank from
     * the case images (none readable: pages say so and show no overlay) */
    if (s->online && region_supported(s->m)) s->evidence = !region_engine_init(&s->ev, s->m, db.paths, db.n);
    if (s->online) { /* kept open for new cases; the engine points into the server */
        s->db = db;
        s->db.before_commit = cfg->before_commit;
        s->db.before_commit_ctx = cfg->before_commit_ctx;
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
