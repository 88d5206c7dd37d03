/* svg_plot.h — THE SVG line-plot writer of endoret (hash sweeps, training loss curves, the
 * perceived-similarity histograms and recall curves): series of (x, y) points, axis labels, a
 * legend, linear or log2 x axis, optional step (histogram) series. Dependency-free, atomic. */
#ifndef ENDORET_SVG_PLOT_H
#define ENDORET_SVG_PLOT_H

typedef struct {
    const char *name;     /* legend entry */
    int n;
    const double *x, *y;  /* n points; non-finite y values are skipped */
    int steps;            /* 1: histogram outline (x = bin left edges; the last bin as wide as the one before) */
} svg_series;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int width, height;    /* pixels; 0 = 640 x 400 */
    int logx;             /* log2 x axis (hash lengths) */
    double ymin, ymax;    /* both 0 = from the data */
    int include_zero;     /* y axis reaches 0 (fractions, histograms) */
    int no_markers;       /* lines only (long series such as loss curves) */
} svg_opts;

int svg_line_plot(const char *path, const svg_opts *o, const svg_series *s, int ns);

#endif
