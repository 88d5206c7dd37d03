/* resize.c — separable resampling (PIL / torch antialias=True semantics).
 *
 * Output pixel i along an axis of length in -> out has centre c = (i + 0.5) * s, s = in/out.
 * When downscaling (s > 1) the filter is stretched by s (support = radius * s): that is the
 * antialiasing; when upscaling it is the plain kernel. Taps j in [c - support, c + support) get
 * weight filter((j + 0.5 - c) / max(s,1)), normalised to sum 1. Rows are resampled first along x
 * (into a scratch buffer), then along y. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "nn/base/base.h"

static float filt_bilinear(float x) {
    x = fabsf(x);
    return x < 1.0f ? 1.0f - x : 0.0f;
}
static float filt_bicubic(float x) { /* Keys cubic, a = -0.5 (PIL, torch antialias) */
    const float a = -0.5f;
    x = fabsf(x);
    if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
    if (x < 2.0f) return (((x - 5.0f) * x + 8.0f) * x - 4.0f) * a;
    return 0.0f;
}

typedef struct {
    int ntaps;   /* taps per output pixel (max) */
    int *start;  /* first input index per output */
    int *count;  /* taps used per output */
    float *w;    /* out * ntaps weights */
} axis_plan;

static void plan_axis(axis_plan *p, int in, int out, resize_mode mode) {
    double s = (double)in / out;
    double radius = mode == RESIZE_BICUBIC ? 2.0 : 1.0;
    double fs = s > 1.0 ? s : 1.0;
    double support = radius * fs;
    p->ntaps = (int)ceil(support) * 2 + 1;
    p->start = xmalloc(sizeof(int) * out);
    p->count = xmalloc(sizeof(int) * out);
    p->w = xcalloc((size_t)out * p->ntaps, sizeof(float));
    for (int i = 0; i < out; i++) {
        double c = (i + 0.5) * s;
        int lo = (int)(c - support + 0.5), hi = (int)(c + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        if (hi - lo > p->ntaps) hi = lo + p->ntaps;
        double tot = 0;
        float *w = p->w + (size_t)i * p->ntaps;
        for (int j = lo; j < hi; j++) {
            double x = (j + 0.5 - c) / fs;
            double v = mode == RESIZE_BICUBIC ? filt_bicubic((float)x) : filt_bilinear((float)x);
            w[j - lo] = (float)v;
            tot += v;
        }
        if (tot != 0)
            for (int j = 0; j < hi - lo; j++) w[j] = (float)(w[j] / tot);
        p->start[i] = lo;
        p->count[i] = hi - lo;
    }
}

static void plan_free(axis_plan *p) {
    free(p->start), free(p->count), free(p->w);
}

static void resize_nearest(const image *src, int top, int left, int ch, int cw, image *dst, int h, int w) {
    double sy = (double)ch / h, sx = (double)cw / w;
    for (int c = 0; c < src->c; c++)
        for (int y = 0; y < h; y++) {
            int iy = (int)((y + 0.5) * sy);
            if (iy >= ch) iy = ch - 1;
            for (int x = 0; x < w; x++) {
                int ix = (int)((x + 0.5) * sx);
                if (ix >= cw) ix = cw - 1;
                IMG_AT(dst, c, y, x) = IMG_AT(src, c, top + iy, left + ix);
            }
        }
}

void image_resize(const image *src, image *dst, int h, int w, resize_mode mode) {
    if (h == src->h && w == src->w && mode != RESIZE_NEAREST) {
        if (dst != src) image_copy(dst, src);
        return;
    }
    image_resize_crop(src, 0, 0, src->h, src->w, dst, h, w, mode);
}

void image_resize_crop(const image *src, int top, int left, int ch, int cw, image *dst, int h, int w,
                       resize_mode mode) {
    if (mode == RESIZE_NEAREST) {
        if (dst == src) { /* in place: resample from a copy */
            image tmp = {0};
            image_copy(&tmp, src);
            image_ensure(dst, tmp.c, h, w);
            resize_nearest(&tmp, top, left, ch, cw, dst, h, w);
            image_free(&tmp);
        } else {
            image_ensure(dst, src->c, h, w);
            resize_nearest(src, top, left, ch, cw, dst, h, w);
        }
        return;
    }
    axis_plan px, py;
    plan_axis(&px, cw, w, mode);
    plan_axis(&py, ch, h, mode);
    int C = src->c, H = ch;
    float *tmp = xmalloc_aligned(sizeof(float) * (size_t)C * H * w);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++) {
            const float *in = src->data + ((size_t)c * src->h + top + y) * src->w + left;
            float *o = tmp + ((size_t)c * H + y) * w;
            for (int x = 0; x < w; x++) {
                const float *wt = px.w + (size_t)x * px.ntaps;
                const float *ip = in + px.start[x];
                float acc = 0;
                for (int k = 0; k < px.count[x]; k++) acc += wt[k] * ip[k];
                o[x] = acc;
            }
        }
    image_ensure(dst, C, h, w);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < h; y++) {
            float *o = dst->data + ((size_t)c * h + y) * w;
            const float *wt = py.w + (size_t)y * py.ntaps;
            const float *base = tmp + ((size_t)c * H + py.start[y]) * w;
            for (int x = 0; x < w; x++) o[x] = 0;
            for (int k = 0; k < py.count[y]; k++) {
                const float *ip = base + (size_t)k * w;
                float wk = wt[k];
                for (int x = 0; x < w; x++) o[x] += wk * ip[x];
            }
        }
    free(tmp);
    plan_free(&px);
    plan_free(&py);
}
