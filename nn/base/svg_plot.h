/* svg_plot.h — a tiny dependency-free SVG line-plot writer (sweeps, loss curves): series of (x, y)
 * points, axis labels, a legend, linear or log2 x axis. Written atomically. */
#ifndef ENDORET_SVG_PLOT_H
#define ENDORET_SVG_PLOT_H

typedef struct {
    const char *name;     /* legend entry */
    int n;
    const double *x, *y;  /* n points; non-finite y values are skipped */
} svg_series;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int width, height;    /* pixels; 0 = 640 x 400 */
    int logx;             /* log2 x axis (hash lengths) */
    double ymin, ymax;    /* both 0 = from the data */
} svg_opts;

int svg_line_plot(const char *path, const svg_opts *o, const svg_series *s, int ns);

#endif
