/* perceived_draw.h — drawing the couples that observers will score, and the scoring sheet.
 *
 * Drawing (paper §3): a scoring process = one reference item V0 (uniform) and `per_process`
 * candidates from patients other than V0's, each candidate c drawn (without replacement) with
 * probability proportional to 1 / density(D_prior(V0, c)), where the density of the prior
 * distance is a histogram over all cross-patient couples (a random subset of 2e6 when there are
 * more). Rare distances (typically the very similar couples) are thus not swamped by the many
 * dissimilar ones. A couple is never drawn twice.
 *
 * Sheet (CSV with header): pair,a,b,process,prior_distance,image_a,image_b
 * pair = 0..n-1 (row order), a/b = item ids, image_* = image paths (may be empty; relative paths
 * are relative to the sheet's folder). */
#ifndef ENDORET_PERCEIVED_DRAW_H
#define ENDORET_PERCEIVED_DRAW_H

#include <stdint.h>

#include "infer/perceived/perceived_eval.h"

typedef struct {
    int a, b;         /* row indices into the descriptor set */
    int process;
    double prior;     /* prior distance */
} vss_draw_pair;

/* Draw up to npairs couples (processes of per_process). group[i] < 0 = unknown patient (then only
 * i itself is excluded). Returns the number drawn (fewer when candidates run out). out: npairs. */
int vss_draw(const pdist_set *p, const int64_t *group, int npairs, int per_process, int nbins, uint64_t seed,
             vss_draw_pair *out);

typedef struct {
    int64_t a, b;
    int process;
    double prior;
    char *image_a, *image_b; /* owned, may be "" */
} vss_sheet_row;

typedef struct {
    char *dir; /* folder of the sheet (image paths are relative to it) */
    int n;
    vss_sheet_row *rows;
} vss_sheet;

int vss_sheet_load(const char *path, vss_sheet *s);
int vss_sheet_save(const char *path, const vss_sheet *s);
void vss_sheet_free(vss_sheet *s);

#endif
