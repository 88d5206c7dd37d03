/* baseline_desc.c — see baseline_desc.h. */
#include "infer/retrieval/baseline_desc.h"
#include "nn/base/base.h"

#include <string.h>

int baseline_parse(const char *s, baseline_kind *k) {
    if (!strcmp(s, "colorhist")) *k = BASELINE_COLORHIST;
    else if (!strcmp(s, "thumbnail")) *k = BASELINE_THUMBNAIL;
    else return er_fail(ER_INPUT, "--baseline: '%s' is not a baseline (colorhist, thumbnail)", s);
    return ER_OK;
}

int baseline_dim(baseline_kind k) {
    return k == BASELINE_COLORHIST ? COLORHIST_BINS * COLORHIST_BINS * COLORHIST_BINS : THUMBNAIL_SIDE * THUMBNAIL_SIDE;
}

const char *baseline_distance(baseline_kind k) { return k == BASELINE_COLORHIST ? "chi2" : "cosine"; }

const char *baseline_describe(baseline_kind k) {
    return k == BASELINE_COLORHIST ? "baseline colorhist: 8x8x8 RGB histogram, L1-normalised, chi2"
                                   : "baseline thumbnail: 16x16 grey thumbnail minus its mean, cosine";
}

static int bin_of(float v) {
    int b = (int)(v * COLORHIST_BINS);
    return b < 0 ? 0 : b >= COLORHIST_BINS ? COLORHIST_BINS - 1 : b;
}

static void colorhist(const image *im, float *out) {
    const int B = COLORHIST_BINS;
    size_t plane = (size_t)im->h * im->w;
    memset(out, 0, sizeof *out * (size_t)B * B * B);
    for (size_t i = 0; i < plane; i++)
        out[(bin_of(im->data[i]) * B + bin_of(im->data[plane + i])) * B + bin_of(im->data[2 * plane + i])] += 1.0f;
    for (int i = 0; i < B * B * B; i++) out[i] /= (float)plane;
}

/* area average: output cell (ty, tx) covers source rows [ty h / S, (ty + 1) h / S) and likewise columns */
static void thumbnail(const image *im, float *out) {
    const int S = THUMBNAIL_SIDE;
    size_t plane = (size_t)im->h * im->w;
    double mean = 0;
    for (int ty = 0; ty < S; ty++)
        for (int tx = 0; tx < S; tx++) {
            int y0 = ty * im->h / S, y1 = (ty + 1) * im->h / S, x0 = tx * im->w / S, x1 = (tx + 1) * im->w / S;
            if (y1 <= y0) y1 = y0 + 1; /* images smaller than the thumbnail repeat pixels */
            if (x1 <= x0) x1 = x0 + 1;
            double s = 0;
            for (int y = y0; y < y1; y++)
                for (int x = x0; x < x1; x++) {
                    size_t i = (size_t)y * im->w + x;
                    s += (im->data[i] + im->data[plane + i] + im->data[2 * plane + i]) / 3.0;
                }
            out[ty * S + tx] = (float)(s / ((y1 - y0) * (x1 - x0)));
            mean += out[ty * S + tx];
        }
    mean /= S * S;
    for (int i = 0; i < S * S; i++) out[i] -= (float)mean;
}

void baseline_descriptor(baseline_kind k, const image *im, float *out) {
    if (k == BASELINE_COLORHIST) colorhist(im, out);
    else thumbnail(im, out);
}
