/* case_views.h — the images of a new case, checked before any pixel is decoded (issue #30 F2: a
 * 196 KB all-zero 8192 x 8192 PNG decodes to 0.8 GB of floats). Each view's size is read from its
 * header; a view over the per-view pixel limit is decoded smaller when the codec can (a JPEG at 1/2,
 * 1/4 or 1/8 by libjpeg's scaled IDCT) and refused otherwise (a PNG), and the views together must
 * fit the per-case limit: 413 naming the limit. Views are decoded one at a time by the caller, so a
 * case holds one decoded view at once.
 *
 * A JSON case names files: each is resolved (symlinks, ..) and must be a regular file under one of
 * the server's image folders, and it is read once here; everything after works on those bytes, so
 * the name is never opened again (F1). */
#ifndef ENDORET_CASE_VIEWS_H
#define ENDORET_CASE_VIEWS_H

#include <stddef.h>
#include <stdint.h>

#include "datasets/image.h"
#include "infer/report/case_upload.h"

/* Decoded pixels of one view and of a case: a 4096 x 2048 frame (4K UHD fits) is 100 MB as float
 * RGB; a case may hold 8 of them. */
#define CASE_MAX_VIEW_PIXELS ((int64_t)1 << 23)
#define CASE_MAX_CASE_PIXELS ((int64_t)1 << 26)

typedef struct {
    const uint8_t *data;  /* the encoded image (the upload's bytes, or the file read) */
    size_t len;
    const char *name;     /* as the client gave it */
    int w, h;             /* header size */
    int denom;            /* decode at 1/denom (1: full size) */
    uint8_t *owned;       /* JSON cases: the bytes read from the file */
} case_view;

/* The views of upload u (after case_upload_finish): *out = V views. 0, or the HTTP status (400 not
 * an image, 403 outside roots / unreadable, 413 over a pixel limit) with one line in msg.
 * max_view / max_case <= 0 take the defaults above. */
unsigned case_views_prepare(const case_upload *u, char *const *roots, int64_t max_view, int64_t max_case, case_view **out,
                            int *V, char *msg, size_t n);
/* Decodes view v (RGB) at its planned scale; ER_INPUT naming it. */
int case_view_decode(const case_view *v, int64_t max_view, image *out);
void case_views_free(case_view *v, int V);

#endif
