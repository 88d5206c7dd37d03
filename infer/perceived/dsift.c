/* dsift.c — see dsift.h. */
#include "infer/perceived/dsift.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

void dsift_cfg_default(dsift_cfg *c) { c->step = 20; c->radius = 60; c->downscale = 0; c->rotate = 1; }

static int grid_n(int size, int radius, int step) {
    if (size < 2 * radius) return 1;
    return (size - 2 * radius) / step + 1;
}

int dsift_count(int w, int h, const dsift_cfg *c) {
    return grid_n(w, c->radius, c->step) * grid_n(h, c->radius, c->step);
}

static float grid_pos(int i, int size, int radius, int step) {
    if (size < 2 * radius) return 0.5f * (size - 1);
    int n = (size - 2 * radius) / step + 1;
    float used = (float)(n - 1) * step, off = 0.5f * ((size - 1) - used); /* centre the grid */
    (void)radius;
    return off + (float)i * step;
}

int dsift_compute(const float *img, int w, int h, const dsift_cfg *c, float *desc, float *centers) {
    int f = c->downscale > 0 ? c->downscale : (c->radius / 8 > 1 ? c->radius / 8 : 1);
    int sw = w / f > 0 ? w / f : 1, sh = h / f > 0 ? h / f : 1;
    if (f > w || f > h) f = 1, sw = w, sh = h;
    /* box-average by f */
    float *s = xmalloc((size_t)sw * sh * sizeof(float));
    for (int y = 0; y < sh; y++)
        for (int x = 0; x < sw; x++) {
            double a = 0;
            for (int dy = 0; dy < f; dy++)
                for (int dx = 0; dx < f; dx++) a += img[(size_t)(y * f + dy) * w + x * f + dx];
            s[(size_t)y * sw + x] = (float)(a / (f * f));
        }
    /* gradients (central differences, one-sided at the border) */
    float *mag = xmalloc((size_t)sw * sh * 2 * sizeof(float)), *ang = mag + (size_t)sw * sh;
    for (int y = 0; y < sh; y++)
        for (int x = 0; x < sw; x++) {
            int x0 = x > 0 ? x - 1 : x, x1 = x < sw - 1 ? x + 1 : x, y0 = y > 0 ? y - 1 : y, y1 = y < sh - 1 ? y + 1 : y;
            float gx = x1 > x0 ? (s[(size_t)y * sw + x1] - s[(size_t)y * sw + x0]) / (x1 - x0) : 0;
            float gy = y1 > y0 ? (s[(size_t)y1 * sw + x] - s[(size_t)y0 * sw + x]) / (y1 - y0) : 0;
            mag[(size_t)y * sw + x] = sqrtf(gx * gx + gy * gy);
            ang[(size_t)y * sw + x] = atan2f(gy, gx);
        }
    const int nx = grid_n(w, c->radius, c->step), ny = grid_n(h, c->radius, c->step);
    const float r = (float)c->radius / f;
    const float TWO_PI = 6.283185307f;
    #pragma omp parallel for schedule(dynamic) collapse(2) if (nx * ny >= 256)
    for (int gy = 0; gy < ny; gy++)
        for (int gx = 0; gx < nx; gx++) {
            int id = gy * nx + gx;
            float cx = grid_pos(gx, w, c->radius, c->step), cy = grid_pos(gy, h, c->radius, c->step);
            if (centers) { centers[2 * id] = cx; centers[2 * id + 1] = cy; }
            /* centre in the downscaled image (pixel centres map as (p + 0.5)/f - 0.5) */
            float scx = (cx + 0.5f) / f - 0.5f, scy = (cy + 0.5f) / f - 0.5f;
            int xa = (int)floorf(scx - r), xb = (int)ceilf(scx + r), ya = (int)floorf(scy - r), yb = (int)ceilf(scy + r);
            if (xa < 0) xa = 0;
            if (ya < 0) ya = 0;
            if (xb > sw - 1) xb = sw - 1;
            if (yb > sh - 1) yb = sh - 1;
            const float sig2 = 2.f * (0.5f * r) * (0.5f * r);
            float th0 = 0;
            if (c->rotate) {
                float hist[36] = {0}, sm[36];
                for (int y = ya; y <= yb; y++)
                    for (int x = xa; x <= xb; x++) {
                        float dx = x - scx, dy = y - scy, d2 = dx * dx + dy * dy;
                        if (d2 > r * r) continue;
                        float a = ang[(size_t)y * sw + x];
                        int b = (int)floorf((a + TWO_PI * 0.5f) / TWO_PI * 36) % 36;
                        if (b < 0) b += 36;
                        hist[b] += mag[(size_t)y * sw + x] * expf(-d2 / sig2);
                    }
                for (int b = 0; b < 36; b++) sm[b] = 0.25f * hist[(b + 35) % 36] + 0.5f * hist[b] + 0.25f * hist[(b + 1) % 36];
                int best = 0;
                for (int b = 1; b < 36; b++) if (sm[b] > sm[best]) best = b;
                /* parabolic refinement of the peak */
                float l = sm[(best + 35) % 36], m = sm[best], rr = sm[(best + 1) % 36], den = l - 2 * m + rr;
                float off = den != 0 ? 0.5f * (l - rr) / den : 0;
                th0 = ((best + 0.5f + off) / 36.f) * TWO_PI - TWO_PI * 0.5f;
            }
            float ct = cosf(th0), st = sinf(th0);
            float *d = desc + (size_t)id * DSIFT_DIM;
            memset(d, 0, DSIFT_DIM * sizeof(float));
            for (int y = ya; y <= yb; y++)
                for (int x = xa; x <= xb; x++) {
                    float dx = x - scx, dy = y - scy, d2 = dx * dx + dy * dy;
                    if (d2 > r * r) continue;
                    float m = mag[(size_t)y * sw + x];
                    if (m == 0) continue;
                    /* coordinates in the disk frame, in [-1, 1] -> cell coordinates in [-0.5, 3.5] */
                    float u = (ct * dx + st * dy) / r, v = (-st * dx + ct * dy) / r;
                    float bx = (u + 1.f) * 2.f - 0.5f, by = (v + 1.f) * 2.f - 0.5f;
                    float o = ang[(size_t)y * sw + x] - th0;
                    o = fmodf(o, TWO_PI);
                    if (o < 0) o += TWO_PI;
                    float bo = o / TWO_PI * 8.f;
                    int ix = (int)floorf(bx), iy = (int)floorf(by), io = (int)floorf(bo);
                    float fx = bx - ix, fy = by - iy, fo = bo - io;
                    float wgt = m * expf(-d2 / sig2);
                    for (int ky = 0; ky < 2; ky++) {
                        int cyb = iy + ky;
                        if (cyb < 0 || cyb > 3) continue;
                        float wy = ky ? fy : 1 - fy;
                        for (int kx = 0; kx < 2; kx++) {
                            int cxb = ix + kx;
                            if (cxb < 0 || cxb > 3) continue;
                            float wx = kx ? fx : 1 - fx;
                            for (int ko = 0; ko < 2; ko++) {
                                int ob = (io + ko) % 8;
                                float wo = ko ? fo : 1 - fo;
                                d[(cyb * 4 + cxb) * 8 + ob] += wgt * wx * wy * wo;
                            }
                        }
                    }
                }
            /* normalise, clip at 0.2, re-normalise */
            for (int pass = 0; pass < 2; pass++) {
                double n2 = 0;
                for (int k = 0; k < DSIFT_DIM; k++) n2 += (double)d[k] * d[k];
                if (n2 <= 1e-30) { memset(d, 0, DSIFT_DIM * sizeof(float)); break; }
                float inv = (float)(1.0 / sqrt(n2));
                for (int k = 0; k < DSIFT_DIM; k++) {
                    d[k] *= inv;
                    if (pass == 0 && d[k] > 0.2f) d[k] = 0.2f;
                }
            }
        }
    free(s);
    free(mag);
    return nx * ny;
}
