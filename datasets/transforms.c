/* transforms.c — geometry and colour ops on float CHW images (torchvision semantics unless said). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "nn/base/base.h"

const float IMAGENET_MEAN[3] = {0.485f, 0.456f, 0.406f};
const float IMAGENET_STD[3] = {0.229f, 0.224f, 0.225f};

static inline float clamp01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

/* ---------------- geometry ---------------- */

void image_crop(const image *src, image *dst, int top, int left, int h, int w) {
    image_ensure(dst, src->c, h, w);
    for (int c = 0; c < src->c; c++)
        for (int y = 0; y < h; y++) {
            int sy = top + y;
            float *o = dst->data + ((size_t)c * h + y) * w;
            if (sy < 0 || sy >= src->h) {
                memset(o, 0, sizeof(float) * w);
                continue;
            }
            for (int x = 0; x < w; x++) {
                int sx = left + x;
                o[x] = sx >= 0 && sx < src->w ? IMG_AT(src, c, sy, sx) : 0.0f;
            }
        }
}

/* torchvision center_crop: top = round((H - h) / 2) (Python round of a .5 is to even; int()
 * of (H-h)/2.0 + 0.5 differs only for odd differences, where torchvision uses int(round(x))). */
static int tv_round_half(int diff) {
    double v = diff / 2.0;
    double r = nearbyint(v); /* banker's rounding like Python round() */
    return (int)r;
}
void image_center_crop(const image *src, image *dst, int h, int w) {
    image_crop(src, dst, tv_round_half(src->h - h), tv_round_half(src->w - w), h, w);
}

void image_hflip(image *im) {
    for (int c = 0; c < im->c; c++)
        for (int y = 0; y < im->h; y++) {
            float *r = im->data + ((size_t)c * im->h + y) * im->w;
            for (int a = 0, b = im->w - 1; a < b; a++, b--) {
                float t = r[a];
                r[a] = r[b], r[b] = t;
            }
        }
}

void image_vflip(image *im) {
    for (int c = 0; c < im->c; c++)
        for (int a = 0, b = im->h - 1; a < b; a++, b--) {
            float *ra = im->data + ((size_t)c * im->h + a) * im->w;
            float *rb = im->data + ((size_t)c * im->h + b) * im->w;
            for (int x = 0; x < im->w; x++) {
                float t = ra[x];
                ra[x] = rb[x], rb[x] = t;
            }
        }
}

/* Inverse mapping: output pixel centre (x+.5, y+.5) rotated by -deg about the image centre gives
 * the source point (PIL's affine with the centre at (w/2, h/2)); y grows downward, so a CCW
 * rotation on screen is the matrix below. */
void image_rotate(const image *src, image *dst, float deg, int nearest) {
    int H = src->h, W = src->w;
    image_ensure(dst, src->c, H, W);
    double t = deg * M_PI / 180.0, ct = cos(t), st = sin(t);
    double cx = W * 0.5, cy = H * 0.5;
    for (int y = 0; y < H; y++) {
        double dy = y + 0.5 - cy, dx0 = 0.5 - cx;
        /* source position for x = 0, then step (ct, st) per output pixel */
        double sx = ct * dx0 - st * dy + cx - 0.5, sy = st * dx0 + ct * dy + cy - 0.5;
        for (int x = 0; x < W; x++, sx += ct, sy += st) {
            if (nearest) {
                int ix = (int)floor(sx + 0.5), iy = (int)floor(sy + 0.5);
                for (int c = 0; c < src->c; c++)
                    IMG_AT(dst, c, y, x) = ix >= 0 && ix < W && iy >= 0 && iy < H ? IMG_AT(src, c, iy, ix) : 0.0f;
                continue;
            }
            int x0 = (int)floor(sx), y0 = (int)floor(sy);
            if (x0 < -1 || y0 < -1 || x0 >= W || y0 >= H) {
                for (int c = 0; c < src->c; c++) IMG_AT(dst, c, y, x) = 0.0f;
                continue;
            }
            float fx = (float)(sx - x0), fy = (float)(sy - y0);
            for (int c = 0; c < src->c; c++) {
                float v = 0;
                for (int k = 0; k < 4; k++) {
                    int xx = x0 + (k & 1), yy = y0 + (k >> 1);
                    float wgt = ((k & 1) ? fx : 1 - fx) * ((k >> 1) ? fy : 1 - fy);
                    if (xx >= 0 && xx < W && yy >= 0 && yy < H) v += wgt * IMG_AT(src, c, yy, xx);
                }
                IMG_AT(dst, c, y, x) = v;
            }
        }
    }
}

void rrc_params(rng_t *r, int h, int w, const float scale[2], const float ratio[2], int *top,
                int *left, int *ch, int *cw) {
    double area = (double)h * w;
    double lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (scale[0] + (scale[1] - scale[0]) * rng_uniform_double(r));
        double aspect = exp(lr0 + (lr1 - lr0) * rng_uniform_double(r));
        int ww = (int)nearbyint(sqrt(target * aspect));
        int hh = (int)nearbyint(sqrt(target / aspect));
        if (ww > 0 && ww <= w && hh > 0 && hh <= h) {
            *top = (int)rng_below(r, (uint32_t)(h - hh + 1));
            *left = (int)rng_below(r, (uint32_t)(w - ww + 1));
            *ch = hh, *cw = ww;
            return;
        }
    }
    double in_ratio = (double)w / h;
    int ww, hh;
    if (in_ratio < ratio[0]) {
        ww = w, hh = (int)nearbyint(w / ratio[0]);
    } else if (in_ratio > ratio[1]) {
        hh = h, ww = (int)nearbyint(h * ratio[1]);
    } else {
        ww = w, hh = h;
    }
    *ch = hh, *cw = ww, *top = (h - hh) / 2, *left = (w - ww) / 2;
}

/* ---------------- colour ---------------- */

static inline float luma(float r, float g, float b) { return 0.299f * r + 0.587f * g + 0.114f * b; }

void image_adjust_brightness(image *im, float f) {
    size_t n = (size_t)im->c * im->h * im->w;
    for (size_t i = 0; i < n; i++) im->data[i] = clamp01(im->data[i] * f);
}

void image_adjust_contrast(image *im, float f) {
    size_t hw = (size_t)im->h * im->w, n = hw * im->c;
    double mean = 0;
    if (im->c == 3)
        for (size_t i = 0; i < hw; i++) mean += luma(im->data[i], im->data[hw + i], im->data[2 * hw + i]);
    else
        for (size_t i = 0; i < hw; i++) mean += im->data[i];
    float m = (float)(mean / hw);
    for (size_t i = 0; i < n; i++) im->data[i] = clamp01(f * im->data[i] + (1 - f) * m);
}

void image_adjust_saturation(image *im, float f) {
    if (im->c != 3) return;
    size_t hw = (size_t)im->h * im->w;
    float *r = im->data, *g = r + hw, *b = g + hw;
    for (size_t i = 0; i < hw; i++) {
        float l = luma(r[i], g[i], b[i]);
        r[i] = clamp01(f * r[i] + (1 - f) * l);
        g[i] = clamp01(f * g[i] + (1 - f) * l);
        b[i] = clamp01(f * b[i] + (1 - f) * l);
    }
}

/* RGB -> HSV, shift hue, back (torchvision's _rgb2hsv/_hsv2rgb on float tensors). */
void image_adjust_hue(image *im, float f) {
    if (im->c != 3 || f == 0) return;
    size_t hw = (size_t)im->h * im->w;
    float *R = im->data, *G = R + hw, *B = G + hw;
    for (size_t i = 0; i < hw; i++) {
        float r = R[i], g = G[i], b = B[i];
        float mx = fmaxf(r, fmaxf(g, b)), mn = fminf(r, fminf(g, b)), d = mx - mn;
        float h = 0, s = mx > 0 ? d / mx : 0, v = mx;
        if (d > 0) {
            if (mx == r) h = (g - b) / d;
            else if (mx == g) h = 2.0f + (b - r) / d;
            else h = 4.0f + (r - g) / d;
            h /= 6.0f;
            h -= floorf(h);
        }
        h += f;
        h -= floorf(h);
        float h6 = h * 6.0f;
        int k = (int)h6 % 6;
        float fr = h6 - floorf(h6);
        float p = v * (1 - s), q = v * (1 - s * fr), t = v * (1 - s * (1 - fr));
        float rr, gg, bb;
        switch (k) {
        case 0: rr = v, gg = t, bb = p; break;
        case 1: rr = q, gg = v, bb = p; break;
        case 2: rr = p, gg = v, bb = t; break;
        case 3: rr = p, gg = q, bb = v; break;
        case 4: rr = t, gg = p, bb = v; break;
        default: rr = v, gg = p, bb = q; break;
        }
        R[i] = clamp01(rr), G[i] = clamp01(gg), B[i] = clamp01(bb);
    }
}

void image_color_jitter(image *im, rng_t *r, float b, float c, float s, float h) {
    int order[4] = {0, 1, 2, 3};
    rng_shuffle(r, order, 4);
    float fb = fmaxf(0, 1 - b) + (1 + b - fmaxf(0, 1 - b)) * rng_uniform(r);
    float fc = fmaxf(0, 1 - c) + (1 + c - fmaxf(0, 1 - c)) * rng_uniform(r);
    float fs = fmaxf(0, 1 - s) + (1 + s - fmaxf(0, 1 - s)) * rng_uniform(r);
    float fh = -h + 2 * h * rng_uniform(r);
    for (int k = 0; k < 4; k++) {
        switch (order[k]) {
        case 0: if (b > 0) image_adjust_brightness(im, fb); break;
        case 1: if (c > 0) image_adjust_contrast(im, fc); break;
        case 2: if (s > 0) image_adjust_saturation(im, fs); break;
        default: if (h > 0) image_adjust_hue(im, fh); break;
        }
    }
}

void image_grayscale(image *im) {
    if (im->c != 3) return;
    size_t hw = (size_t)im->h * im->w;
    for (size_t i = 0; i < hw; i++) {
        float l = luma(im->data[i], im->data[hw + i], im->data[2 * hw + i]);
        im->data[i] = im->data[hw + i] = im->data[2 * hw + i] = l;
    }
}

static inline int reflect(int i, int n) {
    if (n == 1) return 0;
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * n - 2 - i;
    return i;
}

void image_gaussian_blur(image *im, float sigma, image *scratch) {
    image_gaussian_blur_kernel(im, sigma, 2 * (int)ceilf(3 * sigma) + 1, scratch);
}

void image_gaussian_blur_kernel(image *im, float sigma, int ksize, image *scratch) {
    if (sigma <= 0 || ksize < 3) return;
    int rad = ksize / 2;
    float kern[256];
    if (rad > 127) rad = 127;
    double tot = 0;
    for (int k = -rad; k <= rad; k++) tot += kern[k + rad] = expf(-0.5f * k * k / (sigma * sigma));
    for (int k = 0; k <= 2 * rad; k++) kern[k] = (float)(kern[k] / tot);
    int H = im->h, W = im->w;
    image_ensure(scratch, im->c, H, W);
    for (int c = 0; c < im->c; c++) {
        for (int y = 0; y < H; y++) {
            const float *in = im->data + ((size_t)c * H + y) * W;
            float *o = scratch->data + ((size_t)c * H + y) * W;
            for (int x = 0; x < W; x++) {
                float acc = 0;
                if (x >= rad && x + rad < W)
                    for (int k = -rad; k <= rad; k++) acc += kern[k + rad] * in[x + k];
                else
                    for (int k = -rad; k <= rad; k++) acc += kern[k + rad] * in[reflect(x + k, W)];
                o[x] = acc;
            }
        }
        for (int y = 0; y < H; y++) {
            float *o = im->data + ((size_t)c * H + y) * W;
            for (int x = 0; x < W; x++) o[x] = 0;
            for (int k = -rad; k <= rad; k++) {
                const float *in = scratch->data + ((size_t)c * H + reflect(y + k, H)) * W;
                float wk = kern[k + rad];
                for (int x = 0; x < W; x++) o[x] += wk * in[x];
            }
        }
    }
}

/* PIL ImageFilter.GaussianBlur(radius): three passes of a box blur whose fractional radius makes
 * the passes' variance radius^2 (PIL's _gaussian_blur_radius), edges extended (clamped). */
static float pil_box_radius(float radius, int passes) {
    float sigma2 = radius * radius / passes;
    float L = sqrtf(12.0f * sigma2 + 1.0f);
    float l = floorf((L - 1.0f) / 2.0f);
    float a = (2 * l + 1) * (l * (l + 1) - 3 * sigma2);
    a /= 6 * (sigma2 - (l + 1) * (l + 1));
    return l + a;
}

/* One box pass along a line of n samples (in -> out), running sum over the clamped line. */
static inline float clamped(const float *in, int j, int n) { return in[j < 0 ? 0 : j >= n ? n - 1 : j]; }
static void box_line(const float *in, float *out, int n, float r) {
    int ri = (int)r;
    float inv = 1.0f / (2 * r + 1), fw = (r - ri) * inv; /* weight of the two partial edge taps */
    double acc = 0;
    for (int k = -ri; k <= ri; k++) acc += clamped(in, k, n);
    for (int x = 0; x < n; x++) {
        out[x] = (float)(acc * inv) + fw * (clamped(in, x - ri - 1, n) + clamped(in, x + ri + 1, n));
        acc += clamped(in, x + ri + 1, n) - clamped(in, x - ri, n);
    }
}

void image_pil_gaussian_blur(image *im, float radius, image *scratch) {
    if (radius <= 0) return;
    float r = pil_box_radius(radius, 3);
    int H = im->h, W = im->w, n = H > W ? H : W;
    image_ensure(scratch, 1, 2, n);
    float *t0 = scratch->data, *t1 = scratch->data + n;
    for (int c = 0; c < im->c; c++) {
        float *P = im->data + (size_t)c * H * W;
        for (int y = 0; y < H; y++) {
            float *row = P + (size_t)y * W;
            box_line(row, t0, W, r), box_line(t0, t1, W, r), box_line(t1, row, W, r);
        }
        for (int x = 0; x < W; x++) {
            for (int y = 0; y < H; y++) t0[y] = P[(size_t)y * W + x];
            box_line(t0, t1, H, r), box_line(t1, t0, H, r), box_line(t0, t1, H, r);
            for (int y = 0; y < H; y++) P[(size_t)y * W + x] = t1[y];
        }
    }
}

void image_normalize(image *im, const float mean[], const float std[]) {
    size_t hw = (size_t)im->h * im->w;
    for (int c = 0; c < im->c; c++) {
        float m = mean[c], is = 1.0f / std[c];
        float *p = im->data + c * hw;
        for (size_t i = 0; i < hw; i++) p[i] = (p[i] - m) * is;
    }
}

/* sRGB -> linear -> XYZ (D65, the sRGB matrix) -> CIELAB with white (0.95047, 1, 1.08883). */
static inline float srgb_lin(float v) {
    return v <= 0.04045f ? v / 12.92f : powf((v + 0.055f) / 1.055f, 2.4f);
}
static inline float lab_f(float t) {
    const float d = 6.0f / 29.0f;
    return t > d * d * d ? cbrtf(t) : t / (3 * d * d) + 4.0f / 29.0f;
}
void rgb_to_lab(const float rgb[3], float lab[3]) {
    float r = srgb_lin(rgb[0]), g = srgb_lin(rgb[1]), b = srgb_lin(rgb[2]);
    float X = 0.412453f * r + 0.357580f * g + 0.180423f * b;
    float Y = 0.212671f * r + 0.715160f * g + 0.072169f * b;
    float Z = 0.019334f * r + 0.119193f * g + 0.950227f * b;
    float fx = lab_f(X / 0.95047f), fy = lab_f(Y), fz = lab_f(Z / 1.08883f);
    lab[0] = 116 * fy - 16;
    lab[1] = 500 * (fx - fy);
    lab[2] = 200 * (fy - fz);
}

void image_rgb_to_lab(const image *src, image *dst) {
    size_t hw = (size_t)src->h * src->w;
    image_ensure(dst, 3, src->h, src->w);
    for (size_t i = 0; i < hw; i++) {
        float rgb[3] = {src->data[i], src->data[hw + i], src->data[2 * hw + i]}, lab[3];
        rgb_to_lab(rgb, lab);
        dst->data[i] = lab[0], dst->data[hw + i] = lab[1], dst->data[2 * hw + i] = lab[2];
    }
}
