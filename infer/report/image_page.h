/* image_page.h — the page a click on a thumbnail opens in `serve`: one view of a query or past case
 * at full size, its file name (never where it lies on the server), and, when an annotator's lesion
 * mask is recorded for it, the mask's outline over the image (shown, with a box to hide it) and a
 * line saying what the outline is. Images come from the server's /image and /mask routes. */
#ifndef ENDORET_IMAGE_PAGE_H
#define ENDORET_IMAGE_PAGE_H

#include "infer/report/report_html.h"

typedef struct {
    const char *title;     /* "Query 3" / "Past case" (plain text, escaped here) */
    const char *base;      /* the item's route without the view, e.g. "case/17" */
    const char *file;      /* the view's image path (only its name is shown), NULL unknown */
    int view, nviews;      /* this view (0-based) of nviews */
    int has_mask;          /* an outline is recorded for this view */
} image_page;

void report_html_image_page(html_buf *b, const image_page *p);

#endif
