/* image_page.c — see image_page.h. */
#include "infer/report/image_page.h"

#include <stdio.h>

static const char page_css[] =
    "<style>.full{position:relative;display:inline-block;line-height:0;max-width:100%}"
    ".full img{max-width:100%;min-width:min(480px,calc(100vw - 60px));height:auto;border-radius:6px}" /* a small image enlarged */
    ".full img.mko{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none}"
    "body:has(.mktog input:not(:checked)) .full img.mko{display:none}"
    ".mknote{font-size:14px;background:#e8f9ff;border-left:4px solid #00b8e6;padding:6px 10px;margin:0 0 12px}"
    ".mktog{white-space:nowrap;font-weight:600;margin-right:8px}.mksw{display:inline-block;width:18px;height:10px;"
    "border:2px solid #00d6ff;background:rgba(0,214,255,.22);border-radius:5px;vertical-align:-2px}"
    ".vnav a,.vnav b{margin-right:10px}</style>";

/* "/<kind>/<base>" or "/<kind>/<base>/<v>" (view 0 is the base route itself) */
static void route(html_buf *b, const char *kind, const char *base, int v) {
    hb_printf(b, "/%s/", kind);
    hb_esc(b, base);
    if (v) hb_printf(b, "/%d", v);
}

void report_html_image_page(html_buf *b, const image_page *p) {
    report_html_head(b, "endoret: full-size image");
    hb_puts(b, "<header><h1>");
    hb_esc(b, p->title);
    if (p->nviews > 1) hb_printf(b, ", view %d of %d", p->view + 1, p->nviews);
    hb_puts(b, "</h1><p><a style=\"color:#fff\" href=\"/\">&larr; all queries</a>");
    if (p->file) { hb_puts(b, " &middot; "); hb_esc_name(b, p->file); }
    hb_puts(b, "</p></header><main>");
    hb_puts(b, page_css);
    if (p->nviews > 1) {
        hb_puts(b, "<p class=\"vnav\">Views: ");
        for (int v = 0; v < p->nviews && v < 64; v++) {
            if (v == p->view) { hb_printf(b, "<b>%d</b>", v + 1); continue; }
            hb_puts(b, "<a href=\"");
            route(b, "view", p->base, v);
            hb_printf(b, "\">%d</a>", v + 1);
        }
        hb_puts(b, "</p>");
    }
    if (p->has_mask)
        hb_puts(b, "<p class=\"mknote\"><label class=\"mktog\"><input type=\"checkbox\" checked> show lesion outline</label> "
                   "<span class=\"mksw\"></span> the lesion as an annotator outlined it on this image (recorded ground truth), "
                   "not found by the system.</p>");
    else hb_puts(b, "<p class=\"mknote\">No lesion outline is recorded for this image.</p>");
    hb_puts(b, "<div class=\"full\"><img alt=\"full-size image\" src=\"");
    route(b, "image", p->base, p->view);
    hb_puts(b, "\">");
    if (p->has_mask) {
        hb_puts(b, "<img class=\"mko\" alt=\"\" src=\"");
        route(b, "mask", p->base, p->view);
        hb_puts(b, "\">");
    }
    hb_puts(b, "</div></main>"); /* no suggestion here: the footer carries the research notice */
    report_html_tail(b);
}
