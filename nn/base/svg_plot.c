/* svg_plot.c — SVG line plots with axes, ticks, labels and a legend. */
#include "nn/base/svg_plot.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static void put_text(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

static double nice_step(double range, int target) {
    double raw = range / target, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10) * p;
}

/* Right edge of bin j of a step series. */
static double step_end(const svg_series *s, int j) {
    if (j + 1 < s->n) return s->x[j + 1];
    return j > 0 ? 2 * s->x[j] - s->x[j - 1] : s->x[j] + 1;
}

int svg_line_plot(const char *path, const svg_opts *o, const svg_series *s, int ns) {
    int W = o->width ? o->width : 640, H = o->height ? o->height : 400;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < s[i].n; j++) {
            double x = o->logx ? log2(s[i].x[j]) : s[i].x[j], y = s[i].y[j];
            double xe = s[i].steps && !o->logx ? step_end(&s[i], j) : x;
            if (!isfinite(x) || !isfinite(y)) continue;
            if (x < x0) x0 = x;
            if (xe > x1) x1 = xe;
            if (y < y0) y0 = y;
            if (y > y1) y1 = y;
        }
    if (!isfinite(x0)) return er_fail(ER_INPUT, "%s: no finite points to plot", path);
    if (o->include_zero) { y0 = fmin(y0, 0); y1 = fmax(y1, 0); }
    if (o->ymin != 0 || o->ymax != 0) { y0 = o->ymin; y1 = o->ymax; }
    if (x1 == x0) { x0 -= 1; x1 += 1; }
    if (y1 == y0) { y0 -= 1; y1 += 1; }
    const double L = 70, R = 190, T = 40, B = 55; /* margins; legend on the right */
    double pw = W - L - R, ph = H - T - B;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (T + ph - ((y) - y0) / (y1 - y0) * ph)
    atomic_file af;
    int rc = atomic_open(&af, path);
    if (rc) return rc;
    FILE *f = af.f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
    if (o->title) { fprintf(f, "<text x=\"%g\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">", L + pw / 2); put_text(f, o->title); fputs("</text>\n", f); }
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#333\"/>\n", L, T, pw, ph);
    /* y ticks */
    double st = nice_step(y1 - y0, 5);
    for (double y = ceil(y0 / st) * st; y <= y1 + 1e-9 * st; y += st) {
        fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>", L, PY(y), L + pw, PY(y));
        fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%g</text>\n", L - 6, PY(y) + 4, fabs(y) < 1e-12 ? 0 : y);
    }
    /* x ticks: at data x values for log2 axes (powers of two), else nice steps */
    if (o->logx) {
        for (double x = ceil(x0); x <= x1 + 1e-9; x += 1) {
            fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>", PX(x), T, PX(x), T + ph);
            fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%g</text>\n", PX(x), T + ph + 16, pow(2, x));
        }
    } else {
        double sx = nice_step(x1 - x0, 6);
        for (double x = ceil(x0 / sx) * sx; x <= x1 + 1e-9 * sx; x += sx) {
            fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>", PX(x), T, PX(x), T + ph);
            fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%g</text>\n", PX(x), T + ph + 16, fabs(x) < 1e-12 ? 0 : x);
        }
    }
    if (o->xlabel) { fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">", L + pw / 2, (double)H - 14); put_text(f, o->xlabel); fputs("</text>\n", f); }
    if (o->ylabel) {
        fprintf(f, "<text x=\"18\" y=\"%g\" text-anchor=\"middle\" transform=\"rotate(-90 18 %g)\">", T + ph / 2, T + ph / 2);
        put_text(f, o->ylabel);
        fputs("</text>\n", f);
    }
    for (int i = 0; i < ns; i++) {
        const char *c = COLORS[i % 8];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", c, i >= 8 ? " stroke-dasharray=\"5,3\"" : "");
        for (int j = 0; j < s[i].n; j++) {
            double x = o->logx ? log2(s[i].x[j]) : s[i].x[j], y = s[i].y[j];
            if (!isfinite(x) || !isfinite(y)) continue;
            fprintf(f, "%.1f,%.1f ", PX(x), PY(y));
            if (s[i].steps && !o->logx) fprintf(f, "%.1f,%.1f ", PX(step_end(&s[i], j)), PY(y));
        }
        fputs("\"/>\n", f);
        for (int j = 0; j < s[i].n && !o->no_markers && !s[i].steps; j++) {
            double x = o->logx ? log2(s[i].x[j]) : s[i].x[j], y = s[i].y[j];
            if (isfinite(x) && isfinite(y)) fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>", PX(x), PY(y), c);
        }
        double ly = T + 10 + 18 * i;
        fprintf(f, "\n<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/>", W - R + 12, ly, W - R + 36, ly, c);
        fprintf(f, "<text x=\"%g\" y=\"%g\">", W - R + 42, ly + 4);
        put_text(f, s[i].name);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
#undef PX
#undef PY
    if (ferror(f)) { atomic_abort(&af); return er_fail(ER_RUNTIME, "%s: write failed", path); }
    return atomic_commit(&af);
}
