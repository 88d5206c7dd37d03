/* perceived_svg.h — a minimal SVG line-plot writer for the perceived-similarity figures
 * (per-Likert-level histograms, fig. 2; sparse recall curves, fig. 3). Self-contained so this area
 * does not depend on the generic plot writer; written atomically. */
#ifndef ENDORET_PERCEIVED_SVG_H
#define ENDORET_PERCEIVED_SVG_H

typedef struct {
    const char *name;
    const double *x, *y; /* n points; NaN y values are skipped */
    int n;
    int steps;           /* 1: draw as a histogram outline (x = bin left edges, last bin width = previous) */
} psvg_series;

/* One panel per call; `ny` rows of panels are not needed here. ER_OK / ER_RUNTIME. */
int psvg_write(const char *path, const char *title, const char *xlabel, const char *ylabel,
               const psvg_series *s, int ns);

#endif
