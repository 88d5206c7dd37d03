/* perceived_svg.c — see perceived_svg.h. */
#include "infer/perceived/perceived_svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

static const char *COLORS[] = {"#c0392b", "#e67e22", "#27ae60", "#2471a3", "#7d3c98", "#17202a", "#b7950b", "#148f77"};

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

int psvg_write(const char *path, const char *title, const char *xlabel, const char *ylabel, const psvg_series *s, int ns) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            double xe = s[k].x[i];
            if (s[k].steps && i == s[k].n - 1 && i > 0) xe += s[k].x[i] - s[k].x[i - 1];
            if (s[k].x[i] < x0) x0 = s[k].x[i];
            if (xe > x1) x1 = xe;
            if (isfinite(s[k].y[i]) && s[k].y[i] > y1) y1 = s[k].y[i];
            if (isfinite(s[k].y[i]) && s[k].y[i] < y0) y0 = s[k].y[i];
        }
    if (!(x0 < x1)) { x0 = 0; x1 = 1; }
    if (!(y0 < y1)) { y1 = y0 + 1; }
    const double W = 640, H = 420, L = 70, R = 170, T = 40, B = 55, pw = W - L - R, ph = H - T - B;
#define PX(v) (L + ((v) - x0) / (x1 - x0) * pw)
#define PY(v) (T + ph - ((v) - y0) / (y1 - y0) * ph)
    atomic_file af;
    int rc = atomic_open(&af, path);
    if (rc) return rc;
    FILE *f = af.f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%g\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">", L + pw / 2);
    esc(f, title);
    fprintf(f, "</text>\n<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#444\"/>\n", L, T, pw, ph);
    for (int t = 0; t <= 5; t++) {
        double xv = x0 + (x1 - x0) * t / 5, yv = y0 + (y1 - y0) * t / 5;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#444\"/><text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%.3g</text>\n",
                PX(xv), T + ph, PX(xv), T + ph + 5, PX(xv), T + ph + 18, xv);
        fprintf(f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#444\"/><text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n",
                L - 5, PY(yv), L, PY(yv), L - 8, PY(yv) + 4, yv);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">", L + pw / 2, H - 12);
    esc(f, xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(18 %g) rotate(-90)\" text-anchor=\"middle\">", T + ph / 2);
    esc(f, ylabel);
    fputs("</text>\n", f);
    for (int k = 0; k < ns; k++) {
        const char *col = COLORS[k % 8];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i])) continue;
            if (s[k].steps) {
                double xe = i + 1 < s[k].n ? s[k].x[i + 1] : (i > 0 ? 2 * s[k].x[i] - s[k].x[i - 1] : s[k].x[i] + 1);
                fprintf(f, "%.1f,%.1f %.1f,%.1f ", PX(s[k].x[i]), PY(s[k].y[i]), PX(xe), PY(s[k].y[i]));
            } else {
                fprintf(f, "%.1f,%.1f ", PX(s[k].x[i]), PY(s[k].y[i]));
            }
        }
        fputs("\"/>\n", f);
        fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/><text x=\"%g\" y=\"%g\">",
                L + pw + 12, T + 12 + 18.0 * k, L + pw + 32, T + 12 + 18.0 * k, col, L + pw + 38, T + 16 + 18.0 * k);
        esc(f, s[k].name);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
#undef PX
#undef PY
    return atomic_commit(&af);
}
