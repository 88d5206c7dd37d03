/* baseline_desc.h — no-learning image descriptors, so every table can carry an honest floor beside
 * the learned encoders (`endoret embed --baseline NAME`):
 *   colorhist  8x8x8 joint RGB histogram (512 bins, each channel cut into 8 equal ranges of [0,1]),
 *              L1-normalised; compared with chi2 (the file's distance metadata says so)
 *   thumbnail  16x16 grey thumbnail (mean of R,G,B, area-averaged), its own mean subtracted so
 *              cosine compares structure rather than brightness; compared with cosine */
#ifndef ENDORET_BASELINE_DESC_H
#define ENDORET_BASELINE_DESC_H

#include "datasets/image.h"

typedef enum { BASELINE_COLORHIST, BASELINE_THUMBNAIL } baseline_kind;

#define COLORHIST_BINS 8
#define THUMBNAIL_SIDE 16

/* "colorhist" | "thumbnail"; ER_INPUT naming --baseline otherwise */
int baseline_parse(const char *s, baseline_kind *k);
int baseline_dim(baseline_kind k);
const char *baseline_distance(baseline_kind k); /* "chi2" | "cosine" */
const char *baseline_describe(baseline_kind k);
/* the descriptor of a 3-channel image in [0,1] into out[baseline_dim(k)] */
void baseline_descriptor(baseline_kind k, const image *im, float *out);

#endif
