/* copies.c — augmented copies of a manifest split for copy-detection re-ID (see copies.h). */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/copies.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"

static const copy_preset PRESETS[] = {
    /* name       scale       rot90 rot  deg  hflip vflip jit  b    c    s    h     gray blur s_lo s_hi  cap  box  q       */
    {"light",     .60f, 1.f,  0.f, .3f, 10.f, .5f, 0.f,  .5f, .2f, .2f, .2f, .02f, 0.f, .2f, .5f, 1.f,  0.f, 0.f, 60, 95},
    {"copydet",   .35f, 1.f,  .2f, .5f, 25.f, .5f, .5f,  .8f, .4f, .4f, .4f, .05f, .1f, .4f, .5f, 2.f,  .3f, .3f, 30, 85},
    {"strong",    .15f, 1.f,  .3f, .6f, 45.f, .5f, .5f,  .9f, .6f, .6f, .6f, .1f,  .2f, .6f, 1.f, 3.f,  .5f, .5f, 10, 60},
};
#define NPRESETS ((int)(sizeof PRESETS / sizeof *PRESETS))

const copy_preset *copy_preset_find(const char *name) {
    for (int i = 0; i < NPRESETS; i++)
        if (name && !strcmp(name, PRESETS[i].name)) return &PRESETS[i];
    return NULL;
}

const char *copy_preset_names(void) { return "light, copydet, strong"; }

void copy_workspace_free(copy_workspace *ws) { image_free(&ws->a), image_free(&ws->b), image_free(&ws->c); }

static float uni(rng_t *r, float a, float b) { return a + (b - a) * rng_uniform(r); }

/* Rotate by k * 90 degrees counter-clockwise; the canvas turns with the image (w x h for odd k). */
static void rot90(const image *src, image *dst, int k) {
    int h = src->h, w = src->w, oh = k & 1 ? w : h, ow = k & 1 ? h : w;
    image_ensure(dst, src->c, oh, ow);
    for (int c = 0; c < src->c; c++)
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++) {
                int sy, sx;
                if (k == 1) sy = x, sx = w - 1 - y;          /* CCW 90: out(y,x) = in(x, w-1-y) */
                else if (k == 2) sy = h - 1 - y, sx = w - 1 - x;
                else sy = h - 1 - x, sx = y;                  /* CCW 270 */
                IMG_AT(dst, c, y, x) = IMG_AT(src, c, sy, sx);
            }
}

static void fill_rect(image *im, int y0, int x0, int y1, int x1, const float col[3], float op) {
    if (y0 < 0) y0 = 0;
    if (x0 < 0) x0 = 0;
    if (y1 > im->h) y1 = im->h;
    if (x1 > im->w) x1 = im->w;
    for (int c = 0; c < 3; c++)
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++) {
                float *p = &IMG_AT(im, c, y, x);
                *p = (1 - op) * *p + op * col[c];
            }
}

/* A dark band along the top or bottom edge with light 3x5 blocky glyphs (a burnt-in caption). */
static void overlay_caption(rng_t *r, image *im) {
    int S = im->h < im->w ? im->h : im->w;
    int bh = (int)(uni(r, 0.06f, 0.14f) * S);
    if (bh < 5) bh = 5;
    int top = rng_uniform(r) < 0.5f ? 0 : im->h - bh;
    float dark[3], light[3], op = uni(r, 0.6f, 1.0f);
    for (int k = 0; k < 3; k++) dark[k] = uni(r, 0.0f, 0.25f), light[k] = uni(r, 0.8f, 1.0f);
    fill_rect(im, top, 0, top + bh, im->w, dark, op);
    float px = bh * 0.6f / 5; /* glyph pixel side: a glyph is 5 pixels high, 60 % of the band */
    float x = uni(r, 0.02f, 0.2f) * im->w, y = top + bh * 0.2f;
    int n = 4 + (int)rng_below(r, 13);
    for (int g = 0; g < n && x < im->w; g++, x += 4 * px) {
        uint32_t bits = rng_u32(r) & 0x7fffu; /* 3 x 5 */
        for (int gy = 0; gy < 5; gy++)
            for (int gx = 0; gx < 3; gx++)
                if (bits >> (gy * 3 + gx) & 1)
                    fill_rect(im, (int)(y + gy * px), (int)(x + gx * px), (int)(y + (gy + 1) * px) + (px < 1),
                              (int)(x + (gx + 1) * px) + (px < 1), light, 1.0f);
    }
}

/* An opaque rectangle of random colour covering 3-12 % of the area, aspect 1/2..2. */
static void overlay_box(rng_t *r, image *im) {
    float area = uni(r, 0.03f, 0.12f) * im->h * im->w, ar = expf(uni(r, logf(0.5f), logf(2.0f)));
    int bw = (int)sqrtf(area * ar), bh = (int)sqrtf(area / ar);
    if (bw > im->w) bw = im->w;
    if (bh > im->h) bh = im->h;
    if (bw < 1) bw = 1;
    if (bh < 1) bh = 1;
    int x0 = (int)rng_below(r, (uint32_t)(im->w - bw + 1)), y0 = (int)rng_below(r, (uint32_t)(im->h - bh + 1));
    float col[3];
    for (int k = 0; k < 3; k++) col[k] = rng_uniform(r);
    fill_rect(im, y0, x0, y0 + bh, x0 + bw, col, 1.0f);
}

/* append to the description of a copy's operations */
static void ops_add(char *ops, int ops_len, int *used, const char *fmt, ...) {
    if (!ops || *used >= ops_len - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(ops + *used, (size_t)(ops_len - *used), fmt, ap);
    va_end(ap);
    if (k > 0) *used += k;
}
#define OPS(...) ops_add(ops, ops_len, &used, __VA_ARGS__)

int copy_make(rng_t *r, const copy_preset *p, const image *src, int size, copy_workspace *ws, image *out,
              int *quality, char *ops, int ops_len) {
    if (src->c != 3) return er_fail(ER_INPUT, "copies: need an RGB image (got %d channels)", src->c);
    if (size < 8) return er_fail(ER_INPUT, "copies: size %d is too small (>= 8)", size);
    int used = 0;
    if (ops && ops_len) ops[0] = 0;
    const image *cur = src;
    if (rng_uniform(r) < p->p_rot90) {
        int k = 1 + (int)rng_below(r, 3);
        rot90(cur, &ws->a, k);
        cur = &ws->a;
        OPS("rot90x%d|", k);
    }
    if (rng_uniform(r) < p->p_rotate) {
        float deg = uni(r, -p->max_deg, p->max_deg);
        image *dst = cur == &ws->a ? &ws->b : &ws->a;
        image_rotate(cur, dst, deg, 0);
        cur = dst;
        OPS("rot %.1f|", deg);
    }
    const float scale[2] = {p->scale_lo, p->scale_hi}, ratio[2] = {3.0f / 4, 4.0f / 3};
    int top, left, ch, cw;
    rrc_params(r, cur->h, cur->w, scale, ratio, &top, &left, &ch, &cw);
    image_resize_crop(cur, top, left, ch, cw, out, size, size, RESIZE_BILINEAR);
    OPS("crop %.2f|", (double)ch * cw / ((double)cur->h * cur->w));
    if (rng_uniform(r) < p->p_hflip) image_hflip(out), OPS("hflip|");
    if (rng_uniform(r) < p->p_vflip) image_vflip(out), OPS("vflip|");
    if (rng_uniform(r) < p->p_jitter) image_color_jitter(out, r, p->jit_b, p->jit_c, p->jit_s, p->jit_h), OPS("jitter|");
    if (rng_uniform(r) < p->p_gray) image_grayscale(out), OPS("gray|");
    if (rng_uniform(r) < p->p_blur) {
        float s = uni(r, p->sigma_lo, p->sigma_hi);
        image_gaussian_blur(out, s, &ws->c);
        OPS("blur %.2f|", s);
    }
    if (rng_uniform(r) < p->p_caption) overlay_caption(r, out), OPS("caption|");
    if (rng_uniform(r) < p->p_box) overlay_box(r, out), OPS("box|");
    for (size_t i = 0, n = (size_t)3 * size * size; i < n; i++) /* jitter/blur keep [0,1]; be sure */
        out->data[i] = out->data[i] < 0 ? 0 : out->data[i] > 1 ? 1 : out->data[i];
    *quality = p->q_lo + (int)rng_below(r, (uint32_t)(p->q_hi - p->q_lo + 1));
    OPS("jpeg %d", *quality);
    return ER_OK;
}

/* "dir/name.ext" -> "name" (caller frees) */
static char *stem_of(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    char *s = xmalloc(n + 1);
    memcpy(s, b, n);
    s[n] = 0;
    for (char *c = s; *c; c++) /* keep generated file names and CSV fields plain */
        if (*c == ',' || *c == '"' || *c == '\n' || *c == '\r' || *c == '/') *c = '_';
    return s;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct { char *buf; size_t len, cap; } strbuf;
static void sb_add(strbuf *s, const char *t) {
    size_t n = strlen(t);
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        s->buf = xrealloc(s->buf, s->cap);
    }
    memcpy(s->buf + s->len, t, n + 1);
    s->len += n;
}

int copies_make(const copies_config *cfg, int *nsrc) {
    if (nsrc) *nsrc = 0;
    if (!cfg->manifest || !cfg->out_dir) return er_fail(ER_INPUT, "data copies: --manifest and --out are required");
    if (cfg->copies < 1 || cfg->copies > 999) return er_fail(ER_INPUT, "data copies: --copies must be 1..999 (got %d)", cfg->copies);
    if (cfg->size < 8 || cfg->size > 4096) return er_fail(ER_INPUT, "data copies: --size must be 8..4096 (got %d)", cfg->size);
    if (!cfg->preset) return er_fail(ER_INPUT, "data copies: no preset");
    manifest m = {0};
    int rc = manifest_load(cfg->manifest, &m);
    if (rc) return rc;
    const char *split = cfg->split ? cfg->split : "";
    int *rows = xmalloc(sizeof(int) * (m.n ? m.n : 1)), n = 0;
    for (int i = 0; i < m.n; i++)
        if (!split[0] || (m.rows[i].split && !strcmp(m.rows[i].split, split))) rows[n++] = i;
    if (!n) {
        free(rows);
        manifest_free(&m);
        return er_fail(ER_INPUT, "%s: no rows%s%s", cfg->manifest, split[0] ? " in split " : "", split);
    }
    /* scene names: file stems, unless two sources share one */
    char **scene = xmalloc(sizeof(char *) * n), **sorted = xmalloc(sizeof(char *) * n);
    for (int k = 0; k < n; k++) scene[k] = stem_of(m.rows[rows[k]].path), sorted[k] = scene[k];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
    int dup = 0;
    for (int k = 1; k < n; k++) dup |= !strcmp(sorted[k], sorted[k - 1]);
    free(sorted);
    if (dup)
        for (int k = 0; k < n; k++) {
            char *s = xmalloc(strlen(scene[k]) + 32);
            sprintf(s, "row%d-%s", rows[k], scene[k]);
            free(scene[k]);
            scene[k] = s;
        }
    char *img_dir = path_join(cfg->out_dir, "images");
    rc = make_dirs(img_dir);
    char **orig = xcalloc((size_t)n, sizeof(char *)), **omask = xcalloc((size_t)n, sizeof(char *));
    char **problem = xcalloc((size_t)n, sizeof(char *));
    int *qual = xcalloc((size_t)n * cfg->copies, sizeof(int));
    char **opsv = xcalloc((size_t)n * cfg->copies, sizeof(char *));
    const char *ext = cfg->png ? "png" : "jpg";
    if (!rc) {
#pragma omp parallel num_threads(cfg->threads > 0 ? cfg->threads : omp_get_max_threads())
        {
            image src = {0}, out = {0};
            copy_workspace ws = {0};
            char ops[256];
#pragma omp for schedule(dynamic, 1)
            for (int k = 0; k < n; k++) {
                int i = rows[k], r = ER_OK;
                char *ip = manifest_image_path(&m, i), *mp = manifest_mask_path(&m, i), abs_p[PATH_MAX];
                if (!realpath(ip, abs_p)) r = er_fail(ER_INPUT, "%s: line %d: image %s not found", cfg->manifest, i + 2, ip);
                else orig[k] = xstrdup(abs_p);
                if (!r && mp && realpath(mp, abs_p)) omask[k] = xstrdup(abs_p);
                if (!r) r = image_load(ip, 3, &src);
                for (int c = 0; c < cfg->copies && !r; c++) {
                    rng_t g = rng_make(cfg->seed, rng_stream(RNG_AUGMENT, (uint32_t)i, 0x40000000u | (uint32_t)c));
                    int q;
                    r = copy_make(&g, cfg->preset, &src, cfg->size, &ws, &out, &q, ops, sizeof ops);
                    if (r) break;
                    char name[512];
                    snprintf(name, sizeof name, "%s_c%d.%s", scene[k], c + 1, ext);
                    char *path = path_join(img_dir, name);
                    if (cfg->png) {
                        r = image_jpeg_roundtrip(&out, q);
                        if (!r) r = image_save_png(path, &out);
                    } else {
                        uint8_t *buf = NULL;
                        size_t len = 0;
                        r = image_encode_jpeg(&out, q, &buf, &len);
                        if (!r) r = write_file_atomic(path, buf, len);
                        free(buf);
                    }
                    free(path);
                    qual[(size_t)k * cfg->copies + c] = q;
                    opsv[(size_t)k * cfg->copies + c] = xstrdup(ops);
                }
                if (r) problem[k] = xstrdup(er_msg());
                free(ip), free(mp);
            }
            image_free(&src), image_free(&out);
            copy_workspace_free(&ws);
        }
        for (int k = 0; k < n && !rc; k++)
            if (problem[k]) rc = er_fail(ER_INPUT, "data copies: %s", problem[k]);
    }
    if (!rc) {
        manifest out = {0};
        manifest_init(&out, cfg->out_dir);
        strbuf csv = {0};
        sb_add(&csv, "path,scene,view,source,quality,ops\n");
        char view[16], rel[600], line[2048];
        for (int k = 0; k < n; k++) {
            const manifest_row *s = &m.rows[rows[k]];
            manifest_row row = {orig[k], s->label, omask[k], scene[k], "0", s->patient, s->split};
            manifest_add(&out, &row);
            for (int c = 0; c < cfg->copies; c++) {
                snprintf(view, sizeof view, "%d", c + 1);
                snprintf(rel, sizeof rel, "images/%s_c%d.%s", scene[k], c + 1, ext);
                manifest_row cr = {rel, s->label, NULL, scene[k], view, s->patient, s->split};
                manifest_add(&out, &cr);
                snprintf(line, sizeof line, "%s,%s,%d,\"%s\",%d,%s\n", rel, scene[k], c + 1, orig[k],
                         qual[(size_t)k * cfg->copies + c], opsv[(size_t)k * cfg->copies + c]);
                sb_add(&csv, line);
            }
        }
        char *mpath = path_join(cfg->out_dir, "manifest.csv"), *cpath = path_join(cfg->out_dir, "copies.csv");
        rc = manifest_save(mpath, &out);
        if (!rc) rc = write_file_atomic(cpath, csv.buf, csv.len);
        free(mpath), free(cpath), free(csv.buf);
        manifest_free(&out);
        if (!rc && nsrc) *nsrc = n;
    }
    for (int k = 0; k < n; k++) {
        free(scene[k]), free(orig[k]), free(omask[k]), free(problem[k]);
        for (int c = 0; c < cfg->copies; c++) free(opsv[(size_t)k * cfg->copies + c]);
    }
    free(scene), free(orig), free(omask), free(problem), free(qual), free(opsv), free(rows), free(img_dir);
    manifest_free(&m);
    return rc;
}
