/* case_upload.c — reading a new case's POST body (case_upload.h). */
#include "infer/report/case_upload.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nn/base/base.h"
#include "nn/base/json.h"

struct case_upload {
    int json, max_views;
    struct MHD_PostProcessor *pp;
    case_file *f;
    int n, cap;
    size_t total;
    char *body;            /* JSON body */
    size_t blen;
    const char *over;      /* the limit exceeded, NULL = none */
    int busy;              /* over: the server's budget, not this request */
    int announced;         /* the last file chunk was (off 0, size 0): the part's data is still to come */
    case_upload_budget *budget;
    int64_t charged;       /* bytes charged to the budget */
    char diagnosis[CASE_MAX_LABEL + 1]; /* the "diagnosis" field (filing a case), "" = none */
    int diagnosis_over;    /* it was longer than CASE_MAX_LABEL */
};

/* Appends a chunk of the "diagnosis" field. */
static void add_diagnosis(case_upload *u, const char *data, size_t size) {
    size_t have = strlen(u->diagnosis);
    if (have + size > CASE_MAX_LABEL || memchr(data, 0, size)) { u->diagnosis_over = 1; return; }
    memcpy(u->diagnosis + have, data, size);
    u->diagnosis[have + size] = 0;
}

/* Charges size more bytes to the server's budget: 0 (and u->over) when they do not fit. */
static int charge(case_upload *u, size_t size) {
    case_upload_budget *b = u->budget;
    if (!b) return 1;
    int64_t before = atomic_fetch_add(&b->used, (int64_t)size);
    if (before + (int64_t)size > b->cap) {
        atomic_fetch_sub(&b->used, (int64_t)size);
        u->over = "the server holds too many uploads now: retry later";
        u->busy = 1;
        return 0;
    }
    u->charged += (int64_t)size;
    return 1;
}

static case_file *add_file(case_upload *u, const char *name) {
    if (u->n == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 4;
        u->f = xrealloc(u->f, (size_t)u->cap * sizeof(case_file));
    }
    case_file *f = &u->f[u->n++];
    memset(f, 0, sizeof *f);
    f->name = xstrdup(name ? name : "");
    return f;
}

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                               const char *content_type, const char *transfer_encoding, const char *data, uint64_t off,
                               size_t size) {
    (void)kind; (void)key; (void)content_type; (void)transfer_encoding;
    case_upload *u = cls;
    if (!filename && key && !strcmp(key, "diagnosis")) { add_diagnosis(u, data, size); return MHD_YES; }
    if (!filename || u->over) return MHD_YES; /* other plain form fields are ignored; past a limit: drain */
    /* The first chunk of a file part has off 0, but libmicrohttpd may announce a part with an empty
     * chunk (off 0, size 0) when the data so far ends with the part's headers, and then give its
     * first bytes with off 0 again: that is the same part (a part left empty is then dropped). */
    if (off == 0 && !u->announced) {
        if (u->n == u->max_views) { u->over = "too many images for one case"; return MHD_YES; }
        add_file(u, filename);
    } else if (off == 0 && strcmp(u->f[u->n - 1].name, filename)) { /* an empty part, then another */
        free(u->f[u->n - 1].name);
        u->f[u->n - 1].name = xstrdup(filename);
    }
    u->announced = off == 0 && size == 0;
    if (u->n == 0) return MHD_YES;
    case_file *f = &u->f[u->n - 1];
    if (f->len + size > CASE_MAX_IMAGE_BYTES) { u->over = "an image is larger than 20 MB"; return MHD_YES; }
    if (u->total + size > CASE_MAX_BODY_BYTES) { u->over = "the upload is larger than 64 MB"; return MHD_YES; }
    if (size) {
        f->data = xrealloc(f->data, f->len + size);
        memcpy(f->data + f->len, data, size);
        f->len += size;
        u->total += size;
    }
    return MHD_YES;
}

case_upload *case_upload_new(struct MHD_Connection *c, int max_views, case_upload_budget *budget, unsigned *status,
                             const char **msg) {
    const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    case_upload *u = xcalloc(1, sizeof *u);
    u->max_views = max_views;
    u->budget = budget;
    if (type && !strncasecmp(type, "application/json", 16)) {
        u->json = 1;
        return u;
    }
    if (type && !strncasecmp(type, "multipart/form-data", 19)) {
        u->pp = MHD_create_post_processor(c, 64 * 1024, on_part, u);
        if (u->pp) return u;
        *msg = "malformed multipart/form-data request (no boundary?)\n";
        *status = MHD_HTTP_BAD_REQUEST;
    } else {
        *msg = "send the case's images as multipart/form-data, or {\"paths\": [...]} as application/json\n";
        *status = MHD_HTTP_UNSUPPORTED_MEDIA_TYPE;
    }
    free(u);
    return NULL;
}

void case_upload_feed(case_upload *u, const char *data, size_t size) {
    if (!u->over && !charge(u, size)) return; /* the raw body is what the server holds */
    if (u->json) {
        if (u->over) return;
        if (u->blen + size > CASE_MAX_JSON_BYTES) { u->over = "the JSON body is larger than 1 MB"; return; }
        u->body = xrealloc(u->body, u->blen + size + 1);
        memcpy(u->body + u->blen, data, size);
        u->blen += size;
        u->body[u->blen] = 0;
        return;
    }
    if (MHD_post_process(u->pp, data, size) != MHD_YES && !u->over) u->over = "malformed multipart body";
}

unsigned case_upload_finish(case_upload *u, char *msg, size_t n) {
    if (u->over) {
        int malformed = !strcmp(u->over, "malformed multipart body");
        snprintf(msg, n, "%s\n", u->over);
        return u->busy ? MHD_HTTP_SERVICE_UNAVAILABLE : malformed ? MHD_HTTP_BAD_REQUEST : 413u;
    }
    if (u->json) {
        json_value v;
        if (json_parse(u->body ? u->body : "", u->blen, "request body", &v)) {
            snprintf(msg, n, "%s\n", er_msg());
            return MHD_HTTP_BAD_REQUEST;
        }
        const json_value *p = json_get(&v, "paths"), *dg = json_get(&v, "diagnosis");
        unsigned st = 0;
        if (dg && dg->type == JSON_STRING) add_diagnosis(u, dg->string, strlen(dg->string));
        else if (dg) u->diagnosis_over = 1;
        if (!p || p->type != JSON_ARRAY) snprintf(msg, n, "expected {\"paths\": [\"image\", ...]}\n"), st = MHD_HTTP_BAD_REQUEST;
        else if (p->n > u->max_views) snprintf(msg, n, "too many images for one case (%d > %d)\n", p->n, u->max_views), st = 413u;
        for (int i = 0; !st && i < p->n; i++) {
            if (p->items[i].type != JSON_STRING || !p->items[i].string[0]) {
                snprintf(msg, n, "paths[%d] is not a file name\n", i);
                st = MHD_HTTP_BAD_REQUEST;
            } else add_file(u, p->items[i].string);
        }
        json_free(&v);
        if (!st && u->n == 0) snprintf(msg, n, "no image in the request\n"), st = MHD_HTTP_BAD_REQUEST;
        return st;
    }
    for (int i = 0; i < u->n; i++)
        if (u->f[i].len == 0) { snprintf(msg, n, "%s: an empty file\n", u->f[i].name); return MHD_HTTP_BAD_REQUEST; }
    if (u->n == 0) { snprintf(msg, n, "no image file in the upload\n"); return MHD_HTTP_BAD_REQUEST; }
    return 0;
}

unsigned case_upload_raw(case_upload *u, const char **body, size_t *len, char *msg, size_t n) {
    if (u->over) return case_upload_finish(u, msg, n);
    *body = u->body ? u->body : "";
    *len = u->blen;
    return 0;
}

int case_upload_count(const case_upload *u) { return u->n; }
const case_file *case_upload_file(const case_upload *u, int i) { return &u->f[i]; }
int case_upload_is_json(const case_upload *u) { return u->json; }
const char *case_upload_diagnosis(const case_upload *u) { return u->diagnosis_over ? NULL : u->diagnosis; }

void case_upload_free(case_upload *u) {
    if (!u) return;
    if (u->budget) atomic_fetch_sub(&u->budget->used, u->charged);
    if (u->pp) MHD_destroy_post_processor(u->pp);
    for (int i = 0; i < u->n; i++) { free(u->f[i].data); free(u->f[i].name); }
    free(u->f);
    free(u->body);
    free(u);
}
