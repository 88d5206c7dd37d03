/* case_views.c — a new case's images, sized before decoding (case_views.h). */
#include "infer/report/case_views.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infer/report/http_reply.h"
#include "infer/report/thumbnail.h"
#include "nn/base/base.h"

/* The bytes of a file the JSON case named: a regular file under a root, checked on the open
 * descriptor it is read through (http_open_allowed). NULL (msg, *status) otherwise. */
static uint8_t *read_named(const char *name, char *const *roots, size_t *len, unsigned *status, char *msg, size_t n) {
    struct stat st;
    int fd = http_open_allowed(name, roots, &st);
    uint8_t *buf = NULL;
    if (fd < 0) {
        snprintf(msg, n, "%s: not a readable file under the server's image folders (--image-root)\n", name);
        *status = MHD_HTTP_FORBIDDEN;
    } else if ((size_t)st.st_size > CASE_MAX_IMAGE_BYTES) {
        snprintf(msg, n, "%s: larger than 20 MB\n", name);
        *status = 413u;
    } else if (!(buf = http_read_fd(fd, (size_t)st.st_size, len))) {
        snprintf(msg, n, "%s: could not be read whole\n", name);
        *status = MHD_HTTP_FORBIDDEN;
    }
    if (fd >= 0) close(fd);
    return buf;
}

unsigned case_views_prepare(const case_upload *u, char *const *roots, int64_t max_view, int64_t max_case, case_view **out,
                            int *V, char *msg, size_t n) {
    if (max_view <= 0) max_view = CASE_MAX_VIEW_PIXELS;
    if (max_case <= 0) max_case = CASE_MAX_CASE_PIXELS;
    *V = case_upload_count(u);
    case_view *v = xcalloc((size_t)*V, sizeof(case_view));
    *out = v;
    int64_t total = 0;
    size_t read = 0;
    for (int i = 0; i < *V; i++) {
        const case_file *f = case_upload_file(u, i);
        unsigned st = 0;
        v[i].name = f->name;
        if (case_upload_is_json(u)) {
            if (!(v[i].owned = read_named(f->name, roots, &v[i].len, &st, msg, n))) return st;
            v[i].data = v[i].owned;
            if ((read += v[i].len) > CASE_MAX_BODY_BYTES) { /* as an upload's body */
                snprintf(msg, n, "the files named are larger than 64 MB together\n");
                return 413u;
            }
        } else {
            v[i].data = f->data;
            v[i].len = f->len;
        }
        if (!image_mime_type(v[i].data, v[i].len) || image_probe_mem(v[i].data, v[i].len, f->name, &v[i].w, &v[i].h) ||
            v[i].w < 1 || v[i].h < 1) {
            snprintf(msg, n, "%s: not a PNG or JPEG image\n", f->name);
            return MHD_HTTP_BAD_REQUEST;
        }
        /* the smallest scaled IDCT that fits (a JPEG); a PNG is decoded whole or not at all */
        int jpeg = v[i].data[0] == 0xFF, d = 1;
        int64_t px = (int64_t)v[i].w * v[i].h;
        while (jpeg && d < 8 && px > max_view) {
            d *= 2;
            px = (int64_t)((v[i].w + d - 1) / d) * ((v[i].h + d - 1) / d);
        }
        if (px > max_view) {
            snprintf(msg, n, "%s: %dx%d pixels, over the %lld-pixel limit of one view%s\n", f->name, v[i].w, v[i].h,
                     (long long)max_view, jpeg ? " even at 1/8 scale" : " (a PNG cannot be decoded smaller)");
            return 413u;
        }
        v[i].denom = d;
        total += px;
    }
    if (total > max_case) {
        snprintf(msg, n, "the views hold %lld pixels as decoded, over the %lld-pixel limit of a case\n", (long long)total,
                 (long long)max_case);
        return 413u;
    }
    return 0;
}

int case_view_decode(const case_view *v, int64_t max_view, image *out) {
    if (max_view <= 0) max_view = CASE_MAX_VIEW_PIXELS;
    if (v->data[0] == 0xFF) return image_decode_jpeg_at(v->data, v->len, v->name, 3, v->denom, max_view, out);
    return image_decode_png(v->data, v->len, v->name, 3, out); /* the size libpng reads is the probed IHDR */
}

void case_views_free(case_view *v, int V) {
    for (int i = 0; v && i < V; i++) free(v[i].owned);
    free(v);
}
