/* report_html.c — see report_html.h. */
#include "infer/report/report_html.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/view_list.h"
#include "infer/report/region_evidence.h"
#include "infer/report/mask_overlay.h"
#include "infer/report/region_overlay.h"
#include "infer/report/thumbnail.h"
#include "nn/base/progress.h"
#include "nn/base/base.h"

/* ---- text buffer ---- */
static void hb_reserve(html_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
}

void hb_puts(html_buf *b, const char *s) {
    size_t n = strlen(s);
    hb_reserve(b, n);
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void hb_printf(html_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    hb_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void hb_esc(html_buf *b, const char *s) {
    if (!s) return;
    for (; *s; s++) {
        switch (*s) {
        case '&': hb_puts(b, "&amp;"); break;
        case '<': hb_puts(b, "&lt;"); break;
        case '>': hb_puts(b, "&gt;"); break;
        case '"': hb_puts(b, "&quot;"); break;
        case '\'': hb_puts(b, "&#39;"); break;
        default:
            hb_reserve(b, 1);
            b->s[b->len++] = *s;
            b->s[b->len] = 0;
        }
    }
}

void hb_esc_name(html_buf *b, const char *path) {
    if (!path) return;
    const char *slash = strrchr(path, '/');
    hb_esc(b, slash ? slash + 1 : path);
}

void hb_esc_nopath(html_buf *b, const char *s) {
    if (!s) return;
    while (*s) {
        size_t sep = strcspn(s, " \t()[],;");
        if (sep == 0) { char c[2] = {*s++, 0}; hb_esc(b, c); continue; }
        char *word = xmalloc(sep + 1);
        memcpy(word, s, sep);
        word[sep] = 0;
        hb_esc_name(b, word);
        free(word);
        s += sep;
    }
}

void hb_free(html_buf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}

/* ---- thumbnail cache: open addressing on the path's FNV-1a hash ---- */
typedef struct { char *path, *uri; } thumb_entry;
struct thumb_cache {
    thumb_entry *e;
    size_t n, cap;
};

thumb_cache *thumb_cache_new(void) {
    thumb_cache *c = xcalloc(1, sizeof *c);
    c->cap = 256;
    c->e = xcalloc(c->cap, sizeof(thumb_entry));
    return c;
}

void thumb_cache_free(thumb_cache *c) {
    if (!c) return;
    for (size_t i = 0; i < c->cap; i++) { free(c->e[i].path); free(c->e[i].uri); }
    free(c->e);
    free(c);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static thumb_entry *cache_slot(thumb_cache *c, const char *path) {
    size_t i = fnv1a(path) & (c->cap - 1);
    while (c->e[i].path && strcmp(c->e[i].path, path)) i = (i + 1) & (c->cap - 1);
    return &c->e[i];
}

/* data: URI of a path's thumbnail, or NULL when it cannot be read (remembered as "") */
/* The data: URI of the image at path (mask 0) or of its lesion-outline overlay (mask 1), made once. */
static const char *cache_get(thumb_cache *c, const char *path, int side, int mask) {
    char *key = NULL;
    if (mask) { /* a key no image path can equal: the same file may be shown as an image elsewhere */
        key = xmalloc(strlen(path) + 7);
        memcpy(key, "\001mask\001", 6);
        strcpy(key + 6, path);
        path = key;
    }
    thumb_entry *e = cache_slot(c, path);
    if (!e->path) {
        if (2 * (c->n + 1) > c->cap) { /* grow, then find the slot again */
            thumb_cache old = *c;
            c->cap *= 2;
            c->e = xcalloc(c->cap, sizeof(thumb_entry));
            for (size_t i = 0; i < old.cap; i++) if (old.e[i].path) *cache_slot(c, old.e[i].path) = old.e[i];
            free(old.e);
            e = cache_slot(c, path);
        }
        char *uri = NULL;
        if (mask) uri = mask_overlay_uri(path + 6, side);
        else if (thumbnail_data_uri(path, side, 82, &uri)) uri = NULL;
        e->path = xstrdup(path);
        e->uri = uri ? uri : xstrdup("");
        c->n++;
    }
    free(key);
    return e->uri[0] ? e->uri : NULL;
}

/* ---- page parts ---- */
static const char *CSS =
    ":root{--ok:#1b7f3b;--bad:#b3261e;--ink:#1d2330;--mute:#5b6475;--line:#d9dde5;--bg:#f6f7f9;--card:#fff;--accent:#2f5d9e}"
    "*{box-sizing:border-box}"
    "body{margin:0;font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;color:var(--ink);background:var(--bg)}"
    "header{background:#22324d;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px;font-weight:600}"
    "header p{margin:4px 0 0;color:#c9d3e4}"
    "main{max-width:1180px;margin:0 auto;padding:18px 24px 40px}"
    "h2{font-size:18px;margin:0 0 10px}"
    ".panel{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:16px 18px;margin:0 0 18px}"
    ".grid{display:flex;flex-wrap:wrap;gap:18px 36px;align-items:flex-start}"
    ".acc{max-width:240px}.big{font-size:28px;font-weight:600}.mute{color:var(--mute)}"
    "table{border-collapse:collapse;font-size:14px}th,td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:right}"
    "th:first-child,td:first-child{text-align:left}thead th{color:var(--mute);font-weight:600}"
    "table.conf td.diag{background:#e3f1e7;font-weight:600}table.params td{text-align:left}"
    ".query{background:var(--card);border:1px solid var(--line);border-left:6px solid var(--line);border-radius:8px;padding:14px 16px;margin:0 0 16px}"
    ".query.ok{border-left-color:var(--ok)}.query.bad{border-left-color:var(--bad)}"
    ".qhead{display:flex;gap:18px;align-items:flex-start}"
    ".qimg{width:160px;height:160px;object-fit:cover;border-radius:6px;border:1px solid var(--line);background:#ddd;flex:none}"
    ".qtext h2{margin:0 0 4px}.meta{color:var(--mute);margin:0 0 8px}"
    ".vote{font-size:17px;margin:6px 0}.pred{font-weight:700}"
    ".mark{display:inline-block;padding:1px 9px;border-radius:10px;font-size:13px;font-weight:600;color:#fff;margin-left:6px}"
    ".mark.ok{background:var(--ok)}.mark.bad{background:var(--bad)}.mark.na{background:#8a93a3}"
    ".bars{display:flex;flex-direction:column;gap:3px;margin-top:6px;max-width:420px}"
    ".bar{display:flex;align-items:center;gap:8px;font-size:13px}.bar span.name{width:110px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}"
    ".bar .track{flex:1;height:10px;background:#eceff4;border-radius:5px;overflow:hidden}.bar .fill{height:100%;background:var(--accent)}"
    "ol.nbs{list-style:none;padding:0;margin:14px 0 0;display:grid;grid-template-columns:repeat(auto-fill,minmax(116px,1fr));gap:8px}"
    "ol.nbs li{border:1px solid var(--line);border-radius:6px;padding:4px;font-size:11.5px;line-height:1.3;background:#fbfbfc}"
    "ol.nbs li.same{border-color:#9fd0ae;background:#f2faf4}ol.nbs li.diff{border-color:#e8b3ae;background:#fdf4f3}"
    "ol.nbs img,.noimg{width:100%;aspect-ratio:1;object-fit:cover;border-radius:4px;display:block;background:#ddd}"
    ".views{display:grid;grid-template-columns:repeat(2,1fr);gap:2px;flex:none}.views.qimg{width:160px;height:auto;border:0}"
    ".vimg{width:100%;aspect-ratio:1;object-fit:cover;border-radius:3px;display:block;background:#ddd}"
    ".noimg{display:flex;align-items:center;justify-content:center;color:var(--mute);font-size:11px}"
    "ol.nbs .pt{display:block;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}table.qlist td,table.qlist th{text-align:left}"
    ".rank{font-weight:700;color:var(--mute)}.lab{font-weight:600}"
    "a{color:var(--accent)}footer{color:var(--mute);font-size:12px;text-align:center;padding:10px}"
    ".answers{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0}"
    ".ans{border:1px solid var(--line);border-radius:6px;padding:6px 12px;min-width:200px}"
    ".ans .k{font-size:12px;color:var(--mute);text-transform:uppercase;letter-spacing:.03em}"
    ".ans .v{font-size:18px;font-weight:700}.ans.recorded{background:#f3f5f8}.ans.suggestion{background:#eef3fb;border-color:#b9c9e4}"
    ".ans .v.nomaj{font-weight:400;font-style:italic;color:var(--mute)}"
    ".valid{font-size:13px;color:var(--ink);margin:4px 0}"
    ".notice{font-size:12.5px;background:#fff6e0;border:1px solid #ecd193;border-radius:5px;padding:4px 9px;margin:6px 0;color:#5a4500}"
    ".legend{font-size:12.5px;color:var(--mute);margin:12px 0 0}"
    ".sw{display:inline-block;width:12px;height:12px;border-radius:3px;border:2px solid;vertical-align:-2px;margin:0 3px 0 8px}"
    ".sw.same{border-color:#9fd0ae;background:#f2faf4}.sw.diff{border-color:#e8b3ae;background:#fdf4f3}.sw.unk{border-color:var(--line);background:#fbfbfc}"
    ".sim{font-weight:600;white-space:nowrap}.raw{color:var(--mute);font-size:10.5px}.fname{color:var(--mute);font-size:12.5px}"
    ".evw{position:relative;display:block;line-height:0}.qhead>.evw{flex:none}"
    ".evw img.evo{position:absolute;width:100%;height:100%;left:0;top:0;pointer-events:none;border-radius:4px;background:none;border:0}"
    ".best{position:absolute;left:2px;bottom:2px;background:rgba(29,35,48,.8);color:#fff;font-size:10px;line-height:1.3;"
    "padding:0 4px;border-radius:3px}"
    ".evnote{font-size:12.5px;color:var(--ink);background:#fff4e5;border-left:4px solid #ffa51e;padding:4px 9px;margin:10px 0 0}"
    ".evsw{display:inline-block;width:26px;height:10px;border-radius:2px;vertical-align:-1px;"
    "background:linear-gradient(90deg,rgba(255,90,20,.2),rgba(255,240,60,.7))}"
    ".query:has(.evtog input:not(:checked)) .evo{display:none}.evtog{white-space:nowrap;margin-left:8px}"
    ".evw img.mko{position:absolute;width:100%;height:100%;left:0;top:0;object-fit:cover;pointer-events:none;border-radius:4px;"
    "background:none;border:0}.query:not(:has(.mktog input:checked)) .mko{display:none}"
    ".mknote{font-size:12.5px;color:var(--ink);background:#e8f9ff;border-left:4px solid #00b8e6;padding:4px 9px;margin:10px 0 0}"
    ".mktog{white-space:nowrap;font-weight:600;margin-right:6px}.mksw{display:inline-block;width:18px;height:10px;border:2px solid #00d6ff;"
    "background:rgba(0,214,255,.22);border-radius:5px;vertical-align:-2px}";

void report_html_head(html_buf *b, const char *title) {
    hb_puts(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
               "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>");
    hb_esc(b, title);
    hb_puts(b, "</title><style>");
    hb_puts(b, CSS);
    hb_puts(b, "</style></head><body>\n");
}

void report_html_tail(html_buf *b) {
    hb_printf(b, "<footer>endoret: retrieval of similar past cases. %s</footer></body></html>\n", REPORT_NOTICE);
}

void report_html_params(html_buf *b, const report_data *r) {
    hb_puts(b, "<section class=\"panel\"><h2>Parameters</h2><table class=\"params\"><tbody>");
    hb_puts(b, "<tr><td>case database</td><td>");
    hb_esc_name(b, r->index_path);
    hb_printf(b, " (%lld cases, %d-d embeddings)</td></tr>", (long long)r->ncases, r->dim);
    hb_puts(b, "<tr><td>queries</td><td>");
    if (r->query_path) hb_esc_name(b, r->query_path);
    else hb_puts(b, "the database's own cases, leave-one-out");
    hb_printf(b, " (%d shown)</td></tr>", r->nq);
    if (r->manifest_path) { hb_puts(b, "<tr><td>query manifest</td><td>"); hb_esc_name(b, r->manifest_path); hb_puts(b, "</td></tr>"); }
    if (r->model) { hb_puts(b, "<tr><td>encoder</td><td>"); hb_esc_nopath(b, r->model); hb_puts(b, "</td></tr>"); }
    if (r->use_float) hb_puts(b, "<tr><td>search</td><td>exact float cosine (distance 1 &minus; cos)</td></tr>");
    else hb_printf(b, "<tr><td>search</td><td>%d-bit %s hash codes, Hamming distance, %s index</td></tr>", r->bits, r->hash_name,
                   r->index_name);
    hb_printf(b, "<tr><td>neighbours</td><td>k = %d</td></tr>", r->k);
    if (r->weighted) hb_printf(b, "<tr><td>vote</td><td>similarity-weighted, score = &sum; exp(sim / &tau;), &tau; = %g</td></tr>", r->tau);
    else hb_puts(b, "<tr><td>vote</td><td>majority (a tie goes to the label of the nearer case)</td></tr>");
    hb_puts(b, "</tbody></table></section>\n");
}

void report_html_summary(html_buf *b, const report_data *r) {
    int C = r->nclass;
    hb_puts(b, "<section class=\"panel\"><h2>Summary</h2><div class=\"grid\"><div class=\"acc\">");
    if (r->scored) {
        hb_printf(b, "<div class=\"big\" id=\"accuracy\">%.1f%%</div><div class=\"mute\">vote accuracy: %d of %d queries with a known "
                     "diagnosis predicted correctly</div>", 100.0 * r->accuracy, r->correct, r->scored);
    } else {
        hb_printf(b, "<div class=\"big\">&ndash;</div><div class=\"mute\">no query has a known diagnosis (%d queries)</div>", r->nq);
    }
    hb_puts(b, "</div>");
    if (C) {
        /* per class: queries with that truth, predicted as it, correct */
        hb_puts(b, "<div><table class=\"classes\"><thead><tr><th>class</th><th>truth</th><th>predicted</th><th>correct</th>"
                   "<th>recall</th></tr></thead><tbody>");
        for (int c = 0; c < C; c++) {
            int64_t t = 0;
            for (int j = 0; j < C; j++) t += r->conf[(size_t)c * C + j];
            int npred = 0; /* every query predicted as c, with or without a known truth */
            for (int i = 0; i < r->nq; i++) npred += r->q[i].pred == c;
            hb_puts(b, "<tr><td>");
            hb_esc(b, r->label_names[c]);
            hb_printf(b, "</td><td>%lld</td><td>%d</td><td>%lld</td>", (long long)t, npred, (long long)r->conf[(size_t)c * C + c]);
            if (t) hb_printf(b, "<td>%.1f%%</td></tr>", 100.0 * r->conf[(size_t)c * C + c] / t);
            else hb_puts(b, "<td>&ndash;</td></tr>");
        }
        hb_puts(b, "</tbody></table></div>");
        hb_puts(b, "<div><table class=\"conf\"><thead><tr><th>truth \\ predicted</th>");
        for (int c = 0; c < C; c++) { hb_puts(b, "<th>"); hb_esc(b, r->label_names[c]); hb_puts(b, "</th>"); }
        hb_puts(b, "</tr></thead><tbody>");
        for (int t = 0; t < C; t++) {
            hb_puts(b, "<tr><td>");
            hb_esc(b, r->label_names[t]);
            hb_puts(b, "</td>");
            for (int p = 0; p < C; p++) hb_printf(b, "<td%s>%lld</td>", p == t ? " class=\"diag\"" : "", (long long)r->conf[(size_t)t * C + p]);
            hb_puts(b, "</tr>");
        }
        hb_puts(b, "</tbody></table><div class=\"mute\">confusion matrix (queries with a known diagnosis)</div></div>");
    }
    hb_puts(b, "</div>");
    report_html_validity(b, r);
    hb_printf(b, "<p class=\"notice\">%s</p></section>\n", REPORT_NOTICE);
}

void report_vote_text(const report_data *r, int i, char *out, size_t n) {
    const report_query *w = &r->q[i];
    if (w->pred < 0) {
        snprintf(out, n, "none of the %d similar past cases has a known diagnosis", w->nnb);
        return;
    }
    const char *name = report_label(r, w->pred);
    int len;
    if (w->voters == w->nnb) len = snprintf(out, n, "%d of %d similar past cases were %s", w->agree, w->nnb, name);
    else len = snprintf(out, n, "%d of %d similar past cases with a known diagnosis were %s", w->agree, w->voters, name);
    if (r->weighted || len < 0 || (size_t)len >= n) return;
    /* a majority tie: no majority to suggest (classify counts the nearest case's label) */
    for (int c = 0; c < r->nclass; c++) {
        int cnt = 0;
        for (int j = 0; j < w->nnb; j++) cnt += w->nb[j].label == c;
        if (c != w->pred && cnt == w->agree) {
            snprintf(out + len, n - len, ", as many as were %s (a tie: no majority)", report_label(r, c));
            return;
        }
    }
}

void report_html_validity(html_buf *b, const report_data *r) {
    const report_validation *v = &r->valid;
    hb_puts(b, "<p class=\"valid\">");
    if (v->n > 0)
        hb_printf(b, "Accuracy of this vote on the case base: <b class=\"vacc\">%.1f %%</b> (95 %% interval <span class=\"vci\">%.1f&ndash;%.1f "
                     "%%</span>), leave-one-out over %d labelled past cases, k = %d", 100.0 * v->acc, 100.0 * v->lo, 100.0 * v->hi, v->n, v->k);
    else hb_puts(b, "Accuracy of this vote on the case base: not known (the case base has too few labelled cases)");
    hb_puts(b, "</p>");
}

/* One image: src is a data: URI or a server URL (NULL: "no image"); title: its file (the name only
 * is shown); href: the full-size image (NULL: none). */
static void img_src(html_buf *b, const char *cls, const char *src, const char *title, const char *alt, const char *href) {
    if (!src) {
        hb_printf(b, "<div class=\"noimg %s\">no image</div>", cls);
        return;
    }
    if (href) { hb_puts(b, "<a href=\""); hb_esc(b, href); hb_puts(b, "\" target=\"_blank\" title=\"open the full-size image\">"); }
    hb_printf(b, "<img class=\"%s\" loading=\"lazy\" src=\"", cls);
    hb_esc(b, src);
    hb_puts(b, "\" alt=\"");
    hb_esc(b, alt);
    hb_puts(b, "\"");
    if (title && !href) { hb_puts(b, " title=\""); hb_esc_name(b, title); hb_puts(b, "\""); }
    hb_puts(b, ">");
    if (href) hb_puts(b, "</a>");
}

/* The region-evidence maps of one image strip: n views of gh x gw, view `best` marked when n > 1. */
typedef struct {
    const float *map;
    int gh, gw, n, best;
    float crop;
} ev_maps;

/* An image with its overlays: the evidence map (view v of e; none when e is NULL or has no map) and
 * the recorded lesion outline (mask: a URL or data: URI, NULL when none; hidden until the card's
 * "show lesion outlines" box is ticked, and only then fetched). */
static void with_overlay(html_buf *b, const ev_maps *e, int v, const char *mask, void (*draw)(html_buf *, void *), void *arg) {
    char *uri = e && e->map && v < e->n ? region_overlay_uri(e->map + (size_t)v * e->gh * e->gw, e->gh, e->gw) : NULL;
    if (!uri && !mask) { draw(b, arg); return; }
    hb_puts(b, "<span class=\"evw\">");
    draw(b, arg);
    if (mask) { hb_puts(b, "<img class=\"mko\" loading=\"lazy\" alt=\"\" src=\""); hb_esc(b, mask); hb_puts(b, "\">"); }
    if (uri) {
        hb_puts(b, "<img class=\"evo\" alt=\"\" src=\"");
        hb_puts(b, uri);
        hb_puts(b, "\"");
        if (e->crop > 0 && e->crop < 1) { /* the model saw the centre `crop` of the square the thumbnail shows */
            double in = 50.0 * (1 - e->crop);
            hb_printf(b, " style=\"left:%.1f%%;top:%.1f%%;width:%.1f%%;height:%.1f%%\"", in, in, 100 - 2 * in, 100 - 2 * in);
        }
        hb_puts(b, ">");
        if (e->n > 1 && v == e->best) hb_puts(b, "<span class=\"best\">best match</span>");
    }
    hb_puts(b, "</span>");
    free(uri);
}

typedef struct { const char *cls, *path, *url, *alt; const report_html_opts *o; } img_args;

static void draw_img1(html_buf *b, void *arg) {
    const img_args *a = arg;
    const report_html_opts *o = a->o;
    const char *src = NULL;
    if (o->embed) src = a->path && o->cache ? cache_get(o->cache, a->path, o->thumb, 0) : NULL;
    else src = a->path ? a->url : NULL;
    char view[128]; /* a click opens the full-size page: "/image/<rest>" -> "/view/<rest>" */
    snprintf(view, sizeof view, "/view/%s", a->url + 7);
    img_src(b, a->cls, src, a->path, a->alt, !o->embed || o->link ? view : NULL);
}

/* The overlay of one view's mask: the server's route (written into buf), or a data: URI of the
 * thumbnail's size (embedded pages, made once per file); NULL when the view has no mask. */
static const char *mask_src(const char *mask_path, const char *url, const report_html_opts *o, char *buf, size_t n) {
    if (!mask_path) return NULL;
    if (o->embed) return o->cache ? cache_get(o->cache, mask_path, o->thumb, 1) : NULL;
    snprintf(buf, n, "/mask/%s", url + 7); /* "/image/<rest>" -> "/mask/<rest>" */
    return buf;
}

static void image_tag1(html_buf *b, const char *cls, const char *path, const char *mask, const char *url, const char *alt,
                       const report_html_opts *o, const ev_maps *e, int v) {
    img_args a = {cls, path, url, alt, o};
    char buf[128];
    with_overlay(b, e, v, mask_src(mask, url, o, buf, sizeof buf), draw_img1, &a);
}

/* A case's views: `paths` is a view list (datasets/view_list.h: one path, or several of a scene
 * case); view v > 0 is served at <url>/<v>. Several views are shown side by side in a strip. `masks`:
 * the views' lesion masks, aligned with paths (NULL, or a list of another length: none). */
static void image_tag(html_buf *b, const char *cls, const char *paths, const char *masks, const char *url, const char *alt,
                      const report_html_opts *o, const ev_maps *e) {
    int n, nm;
    char **views = view_list_split(paths, &n), **mv = view_list_split(masks, &nm);
    if (nm != n) { view_list_free(mv, nm); mv = NULL; nm = 0; }
    if (n <= 1) image_tag1(b, cls, n ? views[0] : NULL, nm ? mv[0] : NULL, url, alt, o, e, 0);
    else {
        hb_printf(b, "<div class=\"views %s\">", cls);
        for (int v = 0; v < n && v < 16; v++) {
            char u[96], a[96];
            if (v) snprintf(u, sizeof u, "%s/%d", url, v); else snprintf(u, sizeof u, "%s", url);
            snprintf(a, sizeof a, "%s, view %d", alt, v + 1);
            image_tag1(b, "vimg", views[v], nm ? mv[v] : NULL, u, a, o, e, v);
        }
        hb_puts(b, "</div>");
    }
    view_list_free(views, n);
    view_list_free(mv, nm);
}

typedef struct { const char *cls, *src, *title, *alt; } src_args;

static void draw_src(html_buf *b, void *arg) {
    const src_args *a = arg;
    img_src(b, a->cls, a->src, a->title, a->alt, NULL);
}

/* An online case's views from their thumbnails (o->query_uri): no path is opened. */
static void query_views_tag(html_buf *b, const char *alt, const report_html_opts *o, const ev_maps *e) {
    int n = o->query_views;
    if (n > 1) hb_puts(b, "<div class=\"views qimg\">");
    for (int v = 0; v < n; v++) {
        char a[96];
        snprintf(a, sizeof a, "%s, view %d", alt, v + 1);
        src_args sa = {n > 1 ? "vimg" : "qimg", o->query_uri[v], o->query_name ? o->query_name[v] : NULL, n > 1 ? a : alt};
        with_overlay(b, e, v, NULL, draw_src, &sa);
    }
    if (n > 1) hb_puts(b, "</div>");
}

/* The file names of a view list, "a.png; b.png" */
static void view_names(html_buf *b, const char *paths) {
    int n;
    char **views = view_list_split(paths, &n);
    for (int v = 0; v < n; v++) {
        if (v) hb_puts(b, "; ");
        hb_esc_name(b, views[v]);
    }
    view_list_free(views, n);
}

/* Similarity a reader can take in (100 % = the same code / direction), the raw distance beside it. */
static void similarity(html_buf *b, const report_data *r, const report_neighbour *n) {
    if (n->hamming >= 0)
        hb_printf(b, "<span class=\"sim\">similarity %.0f %%</span><br><span class=\"raw\">Hamming %d of %d bits</span>",
                  100.0 * (1.0 - (double)n->hamming / r->bits), n->hamming, r->bits);
    else
        hb_printf(b, "<span class=\"sim\">similarity %.0f %%</span><br><span class=\"raw\">cosine distance %.3f</span>",
                  100.0 * (1.0 - n->cosine), n->cosine);
}

static void legend(html_buf *b, const report_data *r, const report_query *w) {
    hb_puts(b, "<p class=\"legend\">Frames: <span class=\"sw same\"></span>past case's recorded diagnosis is the suggested one"
               "<span class=\"sw diff\"></span>it is another one<span class=\"sw unk\"></span>no recorded diagnosis");
    if (w->pred < 0 || report_is_tie(r, (int)(w - r->q))) hb_puts(b, " or no suggestion");
    hb_puts(b, " (the frame says nothing about being right). ");
    if (r->use_float) hb_puts(b, "Similarity = the cosine of the two descriptors (100 % = the same direction).");
    else hb_printf(b, "Similarity = the share of the %d code bits two cases have in common (1 &minus; Hamming distance / %d; "
                      "unrelated cases share about 50 %%).", r->bits, r->bits);
    hb_puts(b, "</p>");
}

/* Whether query w or any of its cases has a recorded lesion mask. */
static int card_has_mask(const report_query *w) {
    int any = w->mask != NULL;
    for (int j = 0; j < w->nnb; j++) any |= w->nb[j].mask != NULL;
    return any;
}

/* What the cyan outline is, with the box that shows it (off: a page is about the retrieval). */
static void mask_legend(html_buf *b, const report_query *w) {
    if (!card_has_mask(w)) return;
    hb_puts(b, "<p class=\"mknote\"><label class=\"mktog\"><input type=\"checkbox\"> show lesion outlines</label> "
               "<span class=\"mksw\"></span> the lesion as an annotator outlined it on that image (recorded ground truth, "
               "where known), not found by the system. Click an image for its full size.</p>");
}

/* What the tint means, in plain words, with the toggle that hides it. */
static void ev_legend(html_buf *b, const report_html_opts *o) {
    const region_query *e = o->ev;
    if (!e) {
        if (o->ev_note) { hb_puts(b, "<p class=\"evnote\">"); hb_esc(b, o->ev_note); hb_puts(b, "</p>"); }
        return;
    }
    hb_puts(b, "<p class=\"evnote\"><b>Why these cases:</b> <span class=\"evsw\"></span> tinted regions (yellow = strongest) are "
               "the parts of an image that resemble the other side more than they resemble past cases in general: on a past case, "
               "the regions that resemble the query; on the query, the regions that resemble the retrieved cases (on average). "
               "They come from the encoder's features, the network that found these cases");
    int multi = 0;
    for (int j = 0; j < e->nnb; j++) multi |= e->nb[j].cviews > 1;
    if (multi) hb_puts(b, "; \"best match\" marks the view of a past case that resembles the query most");
    if (e->nnb > REGION_MAX_CASES) hb_printf(b, " (drawn for the %d nearest past cases)", REGION_MAX_CASES);
    hb_printf(b, ". They show what the search matched on &mdash; not a diagnosis, not an outline of the lesion "
                 "(computed in %.0f ms).<label class=\"evtog\"><input type=\"checkbox\" checked> show</label></p>", e->ms);
}

void report_html_query(html_buf *b, const report_data *r, int i, const report_html_opts *o) {
    const report_query *w = &r->q[i];
    const region_query *ev = o->ev;
    ev_maps qe = {0};
    if (ev && ev->query) qe = (ev_maps){ev->query, ev->gh, ev->gw, ev->qviews, -1, ev->crop};
    int tie = report_is_tie(r, i), none = w->pred < 0 || tie;
    const char *state = w->truth < 0 || none ? "na" : w->pred == w->truth ? "ok" : "bad";
    hb_printf(b, "<section class=\"query %s\" id=\"q%d\" data-query=\"%lld\"><div class=\"qhead\">", state, i, (long long)w->id);
    char url[64], alt[64];
    snprintf(url, sizeof url, "/image/query/%d", i);
    if (o->query_uri) snprintf(alt, sizeof alt, "uploaded case");
    else snprintf(alt, sizeof alt, "query %d", i + 1);
    if (o->query_uri) query_views_tag(b, alt, o, &qe);
    else image_tag(b, "qimg", w->image, w->mask, url, alt, o, &qe);
    if (o->query_uri) hb_puts(b, "<div class=\"qtext\"><h2>Uploaded case</h2><p class=\"meta\">");
    else hb_printf(b, "<div class=\"qtext\"><h2>Query %d of %d</h2><p class=\"meta\">", i + 1, r->nq);
    int sep = 0;
    if (w->scene) { hb_puts(b, "scene "); hb_esc(b, w->scene); sep = 1; }
    if (w->view) { hb_puts(b, sep ? " &middot; view " : "view "); hb_esc(b, w->view); sep = 1; }
    if (w->patient) { hb_puts(b, sep ? " &middot; patient " : "patient "); hb_esc(b, w->patient); sep = 1; }
    if (o->query_uri && o->query_name) {
        hb_puts(b, sep ? "<br><span class=\"fname\">" : "<span class=\"fname\">");
        for (int v = 0; v < o->query_views; v++) { if (v) hb_puts(b, "; "); hb_esc_name(b, o->query_name[v]); }
        hb_puts(b, "</span>");
    } else if (w->image) {
        hb_puts(b, sep ? "<br><span class=\"fname\">" : "<span class=\"fname\">");
        view_names(b, w->image);
        hb_puts(b, "</span>");
    }
    hb_puts(b, "</p><div class=\"answers\"><div class=\"ans recorded\"><div class=\"k\">Recorded diagnosis (ground truth)</div>"
               "<div class=\"v truth\">");
    if (w->truth_name) hb_esc(b, w->truth_name);
    else hb_puts(b, "<span class=\"nomaj\">not recorded</span>");
    hb_puts(b, "</div></div><div class=\"ans suggestion\"><div class=\"k\">System's suggestion</div>");
    if (w->pred < 0) hb_puts(b, "<div class=\"v nomaj\">none (no past case with a known diagnosis)</div>");
    else if (tie) hb_puts(b, "<div class=\"v nomaj\">no majority</div>");
    else { hb_puts(b, "<div class=\"v pred\">"); hb_esc(b, report_label(r, w->pred)); hb_puts(b, "</div>"); }
    if (w->truth >= 0 && !none)
        hb_printf(b, "<span class=\"mark %s\">%s</span>", state,
                  w->pred == w->truth ? "&#10003; correct: matches the recorded diagnosis" : "&#10007; incorrect: differs from the recorded diagnosis");
    hb_puts(b, "</div></div>");
    char vote[512];
    report_vote_text(r, i, vote, sizeof vote);
    hb_puts(b, "<p class=\"vote\">");
    hb_esc(b, vote);
    hb_puts(b, "</p>");
    report_html_validity(b, r);
    hb_printf(b, "<p class=\"notice\">%s</p>", REPORT_NOTICE);
    if (r->nclass) {
        hb_printf(b, "<div class=\"bars\" title=\"%s\">", r->weighted ? "similarity-weighted vote share" : "vote share");
        for (int c = 0; c < r->nclass; c++) {
            hb_puts(b, "<div class=\"bar\"><span class=\"name\">");
            hb_esc(b, r->label_names[c]);
            double v = w->score[c] >= 0 && w->score[c] <= 1 ? w->score[c] : 0;
            hb_printf(b, "</span><span class=\"track\"><span class=\"fill\" style=\"display:block;width:%.1f%%\"></span></span>"
                         "<span>%.0f %%</span></div>", 100.0 * v, 100.0 * v);
        }
        hb_puts(b, "</div>");
    }
    hb_puts(b, "</div></div>");
    legend(b, r, w);
    mask_legend(b, w);
    ev_legend(b, o);
    hb_puts(b, "<ol class=\"nbs\">");
    for (int j = 0; j < w->nnb; j++) {
        const report_neighbour *n = &w->nb[j];
        const char *cls = n->label < 0 || none ? "" : n->label == w->pred ? "same" : "diff";
        hb_printf(b, "<li class=\"nb %s\" data-case=\"%lld\">", cls, (long long)n->id);
        snprintf(url, sizeof url, "/image/case/%lld", (long long)n->id);
        snprintf(alt, sizeof alt, "past case %d", j + 1);
        ev_maps ne = {0};
        if (ev && j < ev->nnb && ev->nb[j].gh)
            ne = (ev_maps){ev->nb[j].c, ev->nb[j].gh, ev->nb[j].gw, ev->nb[j].cviews, ev->nb[j].best, ev->crop};
        image_tag(b, "nimg", n->image, n->mask, url, alt, o, &ne);
        hb_printf(b, "<span class=\"rank\">#%d</span> <span class=\"lab\">", j + 1);
        hb_esc(b, n->label < 0 ? "no recorded diagnosis" : report_label(r, n->label));
        hb_puts(b, "</span><br>");
        similarity(b, r, n);
        if (n->view >= 0) hb_printf(b, "<br>view %lld", (long long)n->view);
        /* the patient names the lesion across databases; the stored scene is a dense id */
        if (n->patient) { hb_puts(b, "<span class=\"pt\">patient "); hb_esc(b, n->patient); hb_puts(b, "</span>"); }
        else if (n->scene >= 0) hb_printf(b, "<span class=\"pt\">lesion %lld</span>", (long long)n->scene);
        hb_puts(b, "</li>");
    }
    hb_puts(b, "</ol></section>\n");
}

void report_html_query_list(html_buf *b, const report_data *r, const char *href_prefix) {
    hb_puts(b, "<section class=\"panel\"><h2>Queries</h2><table class=\"qlist\"><thead><tr><th>query</th>"
               "<th>recorded diagnosis (ground truth)</th><th>system's suggestion</th><th>agreement</th><th></th></tr></thead><tbody>");
    for (int i = 0; i < r->nq; i++) {
        const report_query *w = &r->q[i];
        int tie = report_is_tie(r, i), none = w->pred < 0 || tie;
        hb_puts(b, "<tr><td><a href=\"");
        if (href_prefix) { hb_esc(b, href_prefix); hb_printf(b, "%d", i); }
        else hb_printf(b, "#q%d", i);
        hb_printf(b, "\">query %d</a></td><td>", i + 1);
        hb_esc(b, w->truth_name ? w->truth_name : "not recorded");
        hb_puts(b, "</td><td>");
        if (tie) hb_puts(b, "<i>no majority</i>");
        else hb_esc(b, w->pred < 0 ? "none" : report_label(r, w->pred));
        hb_printf(b, "</td><td>%d / %d</td><td>", w->agree, w->voters);
        if (w->truth >= 0 && !none) hb_printf(b, "<span class=\"mark %s\">%s</span>", w->pred == w->truth ? "ok" : "bad",
                                              w->pred == w->truth ? "&#10003;" : "&#10007;");
        hb_puts(b, "</td></tr>");
    }
    hb_puts(b, "</tbody></table></section>\n");
}

void report_html_page(html_buf *b, const report_data *r, int thumb, const region_engine *ev, double *ev_ms) {
    report_html_head(b, "endoret retrieval report");
    hb_printf(b, "<header><h1>Similar past cases: retrieval report</h1><p>%d quer%s, each shown with the %d most similar past "
                 "cases of the database and the vote of their recorded diagnoses. Images are thumbnails (full-size images: "
                 "<code>endoret serve</code>).</p></header><main>\n", r->nq, r->nq == 1 ? "y" : "ies", r->k);
    report_html_summary(b, r);
    report_html_params(b, r);
    report_html_opts o = {.embed = 1, .thumb = thumb, .cache = thumb_cache_new()};
    progress pr; /* the thumbnails take the time */
    progress_begin(&pr, "report", "queries", r->nq);
    double ms = 0;
    for (int i = 0; i < r->nq; i++) {
        region_query e;
        int have = ev && !region_query_of(ev, r, i, NULL, 0, &e);
        o.ev = have ? &e : NULL;
        o.ev_note = ev && !have ? "No region evidence for this query: its image could not be read." : NULL;
        if (have) ms += e.ms;
        report_html_query(b, r, i, &o);
        if (have) region_query_free(&e);
        progress_add(&pr, 1);
    }
    if (ev_ms) *ev_ms = ms;
    progress_end(&pr);
    thumb_cache_free(o.cache);
    hb_puts(b, "</main>");
    report_html_tail(b);
}
