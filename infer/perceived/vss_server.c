/* vss_server.c — see vss_server.h. */
#include "infer/perceived/vss_server.h"
#include "infer/report/http_reply.h"
#include "infer/report/report_html.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infer/perceived/perceived_draw.h"
#include "infer/perceived/perceived_likert.h"
#include "nn/base/base.h"

struct vss_server {
    http_daemon *d;
    pthread_mutex_t mu;
    vss_sheet sheet;
    char *scores_path, *observer;
    char *text;     /* the scores file as it is on disk */
    size_t len, cap;
    int *done;      /* sheet.n flags: scored by this observer */
    char *roots[3]; /* real paths of the folders images may come from (sheet's, manifest's), NULL-ended */
};

/* ---- scores file ---- */
static void text_append(vss_server *s, const char *line) {
    size_t l = strlen(line);
    if (s->len + l + 1 > s->cap) {
        s->cap = (s->len + l + 1) * 2;
        s->text = xrealloc(s->text, s->cap);
    }
    memcpy(s->text + s->len, line, l + 1);
    s->len += l;
}

static int load_scores(vss_server *s) {
    struct stat st;
    s->text = NULL; s->len = s->cap = 0;
    if (stat(s->scores_path, &st) == 0) {
        char *t;
        size_t len;
        int rc = read_file(s->scores_path, &t, &len);
        if (rc) return rc;
        likert_gt gt;
        rc = likert_parse(t, s->scores_path, &gt);
        if (rc) { free(t); return rc; }
        for (int r = 0; r < gt.nrec; r++) {
            if (strcmp(gt.rec[r].observer, s->observer)) continue;
            for (int i = 0; i < s->sheet.n; i++) {
                const vss_sheet_row *w = &s->sheet.rows[i];
                if ((w->a == gt.rec[r].a && w->b == gt.rec[r].b) || (w->a == gt.rec[r].b && w->b == gt.rec[r].a)) s->done[i] = 1;
            }
        }
        likert_free(&gt);
        s->text = t; s->len = len; s->cap = len + 1;
        if (len && t[len - 1] != '\n') text_append(s, "\n");
    }
    if (s->len == 0) text_append(s, "a,b,score,observer\n");
    return ER_OK;
}

/* ---- HTTP helpers ---- */

static enum MHD_Result page(vss_server *s, struct MHD_Connection *c) {
    pthread_mutex_lock(&s->mu);
    int next = -1, ndone = 0;
    for (int i = 0; i < s->sheet.n; i++) { if (s->done[i]) ndone++; else if (next < 0) next = i; }
    html_buf b = {0};
    hb_puts(&b, "<!doctype html><html><head><meta charset=\"utf-8\"><title>Visual similarity scoring</title><style>"
                "body{font-family:sans-serif;margin:1em}img{max-width:45vw;max-height:70vh;border:1px solid #888}"
                ".pair{display:flex;gap:1em}button{font-size:1.1em;margin:0.3em;padding:0.5em 1em}</style></head><body>"
                "<h2>Visual similarity scoring</h2><p>observer <b>");
    hb_esc(&b, s->observer);
    hb_printf(&b, "</b>: %d of %d couples scored</p>", ndone, s->sheet.n);
    if (next < 0) {
        hb_printf(&b, "<p id=\"done\">All %d couples are scored. Thank you.</p>", s->sheet.n);
    } else {
        const vss_sheet_row *w = &s->sheet.rows[next];
        hb_printf(&b, "<p>couple %d of %d</p><div class=\"pair\">", next + 1, s->sheet.n);
        for (int side = 0; side < 2; side++) {
            const char *img = side ? w->image_b : w->image_a;
            if (img && *img) hb_printf(&b, "<img src=\"/image/%d/%c\" alt=\"image %c\">", next, side ? 'b' : 'a', side ? 'B' : 'A');
            else hb_printf(&b, "<div>(no image for item %c)</div>", side ? 'B' : 'A');
        }
        hb_printf(&b,
            "</div><form method=\"post\" action=\"/score\"><input type=\"hidden\" name=\"pair\" value=\"%d\">"
            "<button name=\"score\" value=\"-2\">very dissimilar</button><button name=\"score\" value=\"-1\">rather dissimilar</button>"
            "<button name=\"score\" value=\"1\">rather similar</button><button name=\"score\" value=\"2\">very similar</button>"
            "</form>", next);
    }
    hb_puts(&b, "</body></html>\n");
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r = http_reply(c, MHD_HTTP_OK, "text/html; charset=utf-8", b.s, b.len);
    hb_free(&b);
    return r;
}

static enum MHD_Result image(vss_server *s, struct MHD_Connection *c, const char *url) {
    int pair;
    char side, extra;
    if (sscanf(url, "/image/%d/%c%c", &pair, &side, &extra) != 2 || pair < 0 || pair >= s->sheet.n || (side != 'a' && side != 'b'))
        return http_reply_text(c, MHD_HTTP_NOT_FOUND, "no such image\n");
    const char *img = side == 'a' ? s->sheet.rows[pair].image_a : s->sheet.rows[pair].image_b;
    if (!img || !*img) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "no image for this item\n");
    char *path = path_join(s->sheet.dir, img);
    enum MHD_Result r = http_reply_image_file(c, path, s->roots);
    free(path);
    return r;
}

/* ---- POST /score ---- */
typedef struct {
    struct MHD_PostProcessor *pp;
    char pair[32], score[32];
    int bad; /* unknown field, oversized value */
    size_t total;
} post_state;

static enum MHD_Result post_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                  const char *content_type, const char *transfer_encoding, const char *data, uint64_t off,
                                  size_t size) {
    post_state *ps = cls;
    char *dst = !key ? NULL : !strcmp(key, "pair") ? ps->pair : !strcmp(key, "score") ? ps->score : NULL; /* a part may have no name */
    /* a NUL inside a value ("1%00x") would end the C string early and pass as "1" */
    if (!dst || off + size >= sizeof ps->pair || (size && memchr(data, 0, size))) { ps->bad = 1; return MHD_YES; }
    if (size) memcpy(dst + off, data, size); /* a field may come with no data: NULL, 0 */
    dst[off + size] = 0;
    return MHD_YES;
}

static int parse_int(const char *s, long *v) {
    char *e;
    if (!*s) return 0;
    *v = strtol(s, &e, 10);
    return *e == 0;
}

static enum MHD_Result score(vss_server *s, struct MHD_Connection *c, post_state *ps) {
    long pair, sc;
    if (ps->bad || !parse_int(ps->pair, &pair) || !parse_int(ps->score, &sc))
        return http_reply_text(c, MHD_HTTP_BAD_REQUEST, "expected form fields pair=<index>&score=<-2|-1|1|2>\n");
    if (pair < 0 || pair >= s->sheet.n) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, "pair index out of range\n");
    if (likert_level((int)sc) < 0) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, "score must be -2, -1, 1 or 2\n");
    pthread_mutex_lock(&s->mu);
    /* Several servers (observers) may share one scores file: under an exclusive lock on
     * "<scores>.lock", re-read the file, append, and replace it atomically. */
    char *lock_path = xmalloc(strlen(s->scores_path) + 6);
    sprintf(lock_path, "%s.lock", s->scores_path);
    int lk = open(lock_path, O_CREAT | O_RDWR, 0644);
    free(lock_path);
    if (lk < 0 || flock(lk, LOCK_EX) != 0) {
        if (lk >= 0) close(lk);
        pthread_mutex_unlock(&s->mu);
        return http_reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "could not lock the scores file\n");
    }
    free(s->text);
    int rc = load_scores(s);
    if (rc) {
        flock(lk, LOCK_UN);
        close(lk);
        pthread_mutex_unlock(&s->mu);
        return http_reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "the scores file on disk is no longer valid\n");
    }
    if (s->done[pair]) {
        flock(lk, LOCK_UN);
        close(lk);
        pthread_mutex_unlock(&s->mu);
        return http_reply_text(c, MHD_HTTP_CONFLICT, "this couple is already scored by this observer\n");
    }
    char line[256];
    snprintf(line, sizeof line, "%lld,%lld,%+d,%s\n", (long long)s->sheet.rows[pair].a, (long long)s->sheet.rows[pair].b, (int)sc, s->observer);
    size_t old = s->len;
    text_append(s, line);
    rc = write_file_atomic(s->scores_path, s->text, s->len);
    if (rc) { s->len = old; s->text[old] = 0; }
    else s->done[pair] = 1;
    flock(lk, LOCK_UN);
    close(lk);
    pthread_mutex_unlock(&s->mu);
    if (rc) return http_reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "could not write the scores file\n");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Location", "/");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_SEE_OTHER, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                               const char *upload_data, size_t *upload_size, void **con_cls) {
    vss_server *s = cls;
    const char *refused = *con_cls ? NULL : http_request_refusal(c, method, url);
    if (refused) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, refused);
    if (!strcmp(method, "GET")) {
        if (!strcmp(url, "/")) return page(s, c);
        if (!strncmp(url, "/image/", 7)) return image(s, c, url);
        return http_reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
    }
    if (strcmp(method, "POST")) return http_reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or POST only\n");
    post_state *ps = *con_cls;
    if (!ps) { /* first call: headers only */
        ps = xcalloc(1, sizeof *ps);
        *con_cls = ps;
        if (strcmp(url, "/score")) { ps->bad = 2; return MHD_YES; }
        ps->pp = MHD_create_post_processor(c, 1024, post_field, ps);
        if (!ps->pp) ps->bad = 3; /* not a form-urlencoded body */
        return MHD_YES;
    }
    if (*upload_size) {
        ps->total += *upload_size;
        if (ps->total > 4096) ps->bad = 1;
        if (!ps->bad && MHD_post_process(ps->pp, upload_data, *upload_size) != MHD_YES) ps->bad = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    if (ps->bad == 2) return http_reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
    if (ps->bad == 3) return http_reply_text(c, MHD_HTTP_BAD_REQUEST, "expected an application/x-www-form-urlencoded body\n");
    return score(s, c, ps);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    post_state *ps = *con_cls;
    if (!ps) return;
    if (ps->pp) MHD_destroy_post_processor(ps->pp);
    free(ps);
    *con_cls = NULL;
}

static void free_server(vss_server *s) {
    vss_sheet_free(&s->sheet);
    free(s->scores_path);
    free(s->observer);
    free(s->text);
    free(s->done);
    for (int i = 0; s->roots[i]; i++) free(s->roots[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int vss_server_start(const vss_server_cfg *cfg, vss_server **out, int *port_out) {
    *out = NULL;
    if (!cfg->observer || !*cfg->observer || strpbrk(cfg->observer, ",\n\r\"<>&") || strlen(cfg->observer) > VSS_MAX_OBSERVER)
        return er_fail(ER_INPUT, "--observer: a non-empty name of at most %d characters without , \" < > & or newlines is required",
                       VSS_MAX_OBSERVER);
    struct sockaddr_in addr;
    int arc = http_addr_parse(cfg->bind, cfg->port, &addr); /* before any work */
    if (arc) return arc;
    vss_server *s = xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->scores_path = xstrdup(cfg->scores);
    s->observer = xstrdup(cfg->observer);
    int rc = vss_sheet_load(cfg->sheet, &s->sheet);
    if (!rc && s->sheet.n == 0) rc = er_fail(ER_INPUT, "%s: the sheet has no couples to score", cfg->sheet);
    if (!rc && !(s->roots[0] = http_image_root(s->sheet.dir))) rc = ER_INPUT;
    if (!rc && cfg->manifest) {
        char *mdir = path_dirname(cfg->manifest);
        if (!(s->roots[1] = http_image_root(mdir))) rc = ER_INPUT;
        free(mdir);
    }
    if (!rc) {
        s->done = xcalloc(s->sheet.n, sizeof(int));
        rc = load_scores(s);
    }
    if (rc) { free_server(s); return rc; }
    if ((rc = http_daemon_listen("vss serve", &addr, handler, s, completed, s, 1, &s->d, port_out))) {
        free_server(s);
        return rc;
    }
    *out = s;
    return ER_OK;
}

void vss_server_progress(vss_server *s, int *n, int *done) {
    pthread_mutex_lock(&s->mu);
    *n = s->sheet.n;
    *done = 0;
    for (int i = 0; i < s->sheet.n; i++) *done += s->done[i];
    pthread_mutex_unlock(&s->mu);
}

void vss_server_stop(vss_server *s) {
    if (!s) return;
    http_daemon_stop(s->d);
    free_server(s);
}
