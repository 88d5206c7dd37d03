/* synth.c — the synthetic multi-view polyp scene renderer (see synth.h for the model). */
#include "datasets/synth.h"

#include <omp.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

const char *const SYNTH_LABEL_NAMES[2] = {"benign", "malignant"};

static float uni(rng_t *r, float a, float b) { return a + (b - a) * rng_uniform(r); }
static inline float clampf(float v, float a, float b) { return v < a ? a : v > b ? b : v; }
static inline float smooth01(float e0, float e1, float x) {
    float t = clampf((x - e0) / (e1 - e0), 0, 1);
    return t * t * (3 - 2 * t);
}

/* sin(x) to ~1e-6: reduce to [-pi/2, pi/2] and a degree-9 Taylor polynomial. Pure float
 * arithmetic (no libm call) so the renderer is fast and its bytes do not depend on libm. */
static inline float fsin(float x) {
    float q = x * 0.15915494f;
    q = x - rintf(q) * 6.2831853f; /* [-pi, pi] */
    if (q > 1.5707963f) q = 3.1415927f - q;
    else if (q < -1.5707963f) q = -3.1415927f - q;
    float q2 = q * q;
    return q * (1 + q2 * (-1.0f / 6 + q2 * (1.0f / 120 + q2 * (-1.0f / 5040 + q2 * (1.0f / 362880)))));
}

/* ---- value noise (hash of lattice points, smooth interpolation) ---- */
static inline uint32_t hash3(int32_t x, int32_t y, uint32_t s) {
    uint32_t h = (uint32_t)x * 0x8da6b343u ^ (uint32_t)y * 0xd8163841u ^ s * 0xcb1ab31fu;
    h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12, h *= 0x297a2d39u, h ^= h >> 15;
    return h;
}
static float vnoise(float x, float y, uint32_t s) {
    float fx = floorf(x), fy = floorf(y);
    int32_t ix = (int32_t)fx, iy = (int32_t)fy;
    float tx = x - fx, ty = y - fy;
    tx = tx * tx * (3 - 2 * tx), ty = ty * ty * (3 - 2 * ty);
    const float k = 1.0f / 4294967296.0f;
    float a = hash3(ix, iy, s) * k, b = hash3(ix + 1, iy, s) * k;
    float c = hash3(ix, iy + 1, s) * k, d = hash3(ix + 1, iy + 1, s) * k;
    return (a + (b - a) * tx) + ((c + (d - c) * tx) - (a + (b - a) * tx)) * ty;
}
static float fbm(float x, float y, uint32_t s, int oct) {
    float v = 0, amp = 0.5f, tot = 0;
    for (int o = 0; o < oct; o++) {
        v += amp * vnoise(x, y, s + 101u * o);
        tot += amp;
        x *= 2.03f, y *= 2.03f, amp *= 0.5f;
    }
    return v / tot;
}

/* ---- scene ---- */
void synth_scene_make(uint64_t seed, int scene, int label, synth_scene *s) {
    memset(s, 0, sizeof *s);
    rng_t r = rng_make(seed, rng_stream(RNG_SYNTH, (uint32_t)scene, 0));
    s->label = label, s->seed = seed, s->scene = scene;
    int mal = label == 1;
    s->radius = uni(&r, 0.35f, 0.7f);
    s->height = label < 0 ? 0 : s->radius * uni(&r, 0.3f, 0.85f);
    s->flat = uni(&r, 2.0f, 4.0f);
    /* outline: lobulation amplitude overlaps between labels */
    float lob = mal ? uni(&r, 0.10f, 0.30f) : uni(&r, 0.0f, 0.16f);
    float tot = 0, w[4];
    for (int m = 0; m < 4; m++) tot += w[m] = uni(&r, 0.2f, 1.0f) / (1 + 0.3f * m);
    for (int m = 0; m < 4; m++) {
        float ph = uni(&r, 0, 2 * (float)M_PI);
        s->lob[m][0] = lob * w[m] / tot * cosf(ph);
        s->lob[m][1] = lob * w[m] / tot * sinf(ph);
    }
    s->tex_mix = mal ? uni(&r, 0.40f, 1.0f) : uni(&r, 0.0f, 0.60f);
    s->tex_freq = uni(&r, 14.0f, 22.0f);
    s->tex_amp = uni(&r, 0.5f, 1.0f);
    s->tex_angle = uni(&r, 0, (float)M_PI);
    s->tex_cs[0] = cosf(s->tex_angle), s->tex_cs[1] = sinf(s->tex_angle);
    s->rough = mal ? uni(&r, 0.02f, 0.06f) : uni(&r, 0.0f, 0.035f);
    /* lesion colour: same distribution for both labels (paler or redder than the mucosa) */
    float red = uni(&r, -0.25f, 0.25f), pale = uni(&r, 0.85f, 1.2f);
    s->lesion_tint[0] = pale * (1 + 0.3f * red);
    s->lesion_tint[1] = pale * (1 - 0.5f * red);
    s->lesion_tint[2] = pale * (1 - 0.4f * red);
    /* mucosa folds */
    float zmax = 0;
    for (int k = 0; k < 3; k++) {
        float a = uni(&r, 0, (float)M_PI);
        s->fold_dir[k][0] = cosf(a), s->fold_dir[k][1] = sinf(a);
        s->fold_freq[k] = uni(&r, 1.2f, 4.0f);
        s->fold_amp[k] = uni(&r, 0.02f, 0.12f) / (1 + k * 0.5f);
        s->fold_phase[k] = uni(&r, 0, 2 * (float)M_PI);
        zmax += s->fold_amp[k];
        s->slope_fold += s->fold_amp[k] * s->fold_freq[k];
    }
    s->base_albedo[0] = uni(&r, 0.78f, 0.95f);
    s->base_albedo[1] = uni(&r, 0.35f, 0.55f);
    s->base_albedo[2] = uni(&r, 0.28f, 0.45f);
    s->vessel_density = uni(&r, 0.2f, 1.0f);
    s->vessel_freq = uni(&r, 1.5f, 3.5f);
    s->zmax = zmax + s->height * 1.01f + 0.05f;
}

static inline float fold_height(const synth_scene *s, float x, float y) {
    float z = 0;
    for (int k = 0; k < 3; k++)
        z += s->fold_amp[k] * fsin(s->fold_freq[k] * (s->fold_dir[k][0] * x + s->fold_dir[k][1] * y) +
                                   s->fold_phase[k]);
    return z;
}

/* rho = r / R(theta): < 1 inside the lesion outline. cos/sin(m theta) from powers of (x+iy)/r. */
static inline float lesion_rho(const synth_scene *s, float x, float y) {
    float r2 = x * x + y * y, rmax = s->radius * 1.4f;
    if (r2 >= rmax * rmax) return 2.0f;
    float r = sqrtf(r2) + 1e-12f;
    float cr = x / r, ci = y / r, pr = cr * cr - ci * ci, pi = 2 * cr * ci; /* (x+iy)^2 / r^2 */
    float mod = 1;
    for (int m = 0; m < 4; m++) {
        mod += s->lob[m][0] * pr + s->lob[m][1] * pi;
        float nr = pr * cr - pi * ci, ni = pr * ci + pi * cr;
        pr = nr, pi = ni;
    }
    return r / (s->radius * mod);
}

static inline float lesion_profile(const synth_scene *s, float rho) {
    if (rho >= 1 || s->label < 0) return 0;
    float t = 1 - powf(rho, s->flat);
    return s->height * t * t;
}

/* Geometry used for ray marching: folds + lesion bump (no fine texture). */
static inline float height_geo(const synth_scene *s, float x, float y) {
    return fold_height(s, x, y) + lesion_profile(s, lesion_rho(s, x, y));
}

/* Fine pit pattern in [0,1] (1 = groove), faded out when its period falls under ~3 pixels. */
static float lesion_pattern(const synth_scene *s, float x, float y, float footprint) {
    float ca = s->tex_cs[0], sa = s->tex_cs[1];
    float k = s->tex_freq / s->radius;
    float u = (ca * x - sa * y) * k, v = (sa * x + ca * y) * k;
    uint32_t sd = (uint32_t)s->scene * 7919u + 17u;
    float warp = fbm(u * 0.15f, v * 0.15f, sd, 2);
    float pits = smooth01(0.45f, 0.9f, 0.5f + 0.5f * fsin(u + 1.5f * warp) * fsin(v - 1.5f * warp));
    float gyri = smooth01(0.55f, 0.95f, 0.5f + 0.5f * fsin(0.8f * u + 6.0f * warp));
    float period = 2 * (float)M_PI / k;
    float aa = clampf((period / (footprint + 1e-9f) - 2.0f) / 3.0f, 0, 1);
    return aa * ((1 - s->tex_mix) * pits + s->tex_mix * gyri);
}

static float height_full(const synth_scene *s, float x, float y, float fp) {
    float rho = lesion_rho(s, x, y);
    float z = fold_height(s, x, y) + lesion_profile(s, rho);
    if (rho < 1 && s->label >= 0) {
        float in = smooth01(1.0f, 0.75f, rho);
        z -= in * 0.012f * s->radius * s->tex_amp * lesion_pattern(s, x, y, fp);
        z += in * s->rough * s->radius * (fbm(x * 12 / s->radius, y * 12 / s->radius, 77u + s->scene, 2) - 0.5f);
    }
    return z;
}

typedef struct {
    float C[3], R[3], U[3], F[3]; /* camera position, right, up, forward */
    float focal, exposure, ks, shin, ambient, vignette, dist;
} synth_cam;

static void norm3(float *v) {
    float n = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    v[0] /= n, v[1] /= n, v[2] /= n;
}

static void make_camera(const synth_scene *s, int view, synth_cam *c) {
    rng_t r = rng_make(s->seed, rng_stream(RNG_SYNTH, (uint32_t)s->scene, 1u + (uint32_t)view));
    float tilt = uni(&r, 0, 55) * (float)M_PI / 180, az = uni(&r, 0, 2 * (float)M_PI);
    float roll = uni(&r, 0, 2 * (float)M_PI);
    float dist = s->radius * uni(&r, 2.6f, 7.0f);
    float tx = s->radius * uni(&r, -0.8f, 0.8f), ty = s->radius * uni(&r, -0.8f, 0.8f);
    float fov = uni(&r, 60, 85) * (float)M_PI / 180;
    c->exposure = uni(&r, 0.75f, 1.3f);
    c->ks = uni(&r, 0.25f, 0.8f);
    c->shin = uni(&r, 15, 60);
    c->ambient = uni(&r, 0.02f, 0.06f);
    c->vignette = uni(&r, 0.95f, 1.3f);
    float T[3] = {tx, ty, height_geo(s, tx, ty)};
    float D[3] = {sinf(tilt) * cosf(az), sinf(tilt) * sinf(az), cosf(tilt)};
    for (int k = 0; k < 3; k++) c->C[k] = T[k] + dist * D[k];
    float floor_z = height_geo(s, c->C[0], c->C[1]) + 0.1f * s->radius;
    if (c->C[2] < floor_z) c->C[2] = floor_z;
    for (int k = 0; k < 3; k++) c->F[k] = T[k] - c->C[k];
    c->dist = sqrtf(c->F[0] * c->F[0] + c->F[1] * c->F[1] + c->F[2] * c->F[2]);
    norm3(c->F);
    float a[3] = {cosf(roll), sinf(roll), 0};
    /* R = a x F, U = F x R */
    c->R[0] = a[1] * c->F[2] - a[2] * c->F[1];
    c->R[1] = a[2] * c->F[0] - a[0] * c->F[2];
    c->R[2] = a[0] * c->F[1] - a[1] * c->F[0];
    norm3(c->R);
    c->U[0] = c->F[1] * c->R[2] - c->F[2] * c->R[1];
    c->U[1] = c->F[2] * c->R[0] - c->F[0] * c->R[2];
    c->U[2] = c->F[0] * c->R[1] - c->F[1] * c->R[0];
    c->focal = 1.0f / tanf(fov / 2);
}

/* March a ray from the camera to the height field; returns t of the hit or -1. Steps are
 * f / (|dz| + L |dxy|) with f the height above the surface and L a slope bound, so the march
 * never jumps over the surface except at rare steeper spots, which the bisection catches. */
static float march(const synth_scene *s, const float *C, const float *d, float eps_t) {
    float dh = sqrtf(d[0] * d[0] + d[1] * d[1]);
    float L = s->slope_fold + (s->label >= 0 ? 2.5f * s->height / s->radius : 0);
    float rate = fabsf(d[2]) + L * dh;
    /* away from the lesion only the folds' (smaller) slope bound applies */
    float rate_fold = fabsf(d[2]) + s->slope_fold * dh, rles = s->radius * 1.4f;
    float t = 0, tmax = 60 * s->radius;
    if (C[2] > s->zmax) {
        if (d[2] >= 0) return -1;
        t = (C[2] - s->zmax) / -d[2];
    }
    float tprev = t;
    for (int i = 0; i < 160 && t < tmax; i++) {
        float x = C[0] + t * d[0], y = C[1] + t * d[1], z = C[2] + t * d[2];
        float f = z - height_geo(s, x, y);
        if (f < 0) { /* bisect between tprev (above) and t (below) */
            float a = tprev, b = t;
            for (int k = 0; k < 6; k++) {
                float m = 0.5f * (a + b);
                float fm = C[2] + m * d[2] - height_geo(s, C[0] + m * d[0], C[1] + m * d[1]);
                if (fm < 0) b = m; else a = m;
            }
            return 0.5f * (a + b);
        }
        if (f < eps_t * t) return t;
        tprev = t;
        float step = f / rate_fold, r0 = sqrtf(x * x + y * y);
        if (r0 - step * dh <= rles) step = f / rate; /* the step may reach the lesion */
        t += fmaxf(step, 1e-4f * s->radius);
        if (d[2] >= 0 && z > s->zmax) return -1;
    }
    return -1;
}

void synth_render_view(const synth_scene *s, int view, int size, image *img, image *mask) {
    synth_cam c;
    make_camera(s, view, &c);
    image_ensure(img, 3, size, size);
    image_ensure(mask, 1, size, size);
    size_t hw = (size_t)size * size;
    float pix = 2.0f / (size * c.focal); /* ray angle per pixel */
    uint32_t vsd = (uint32_t)s->scene * 131u + 5u;
    for (int py = 0; py < size; py++)
        for (int px = 0; px < size; px++) {
            float nx = 2 * (px + 0.5f) / size - 1, ny = 1 - 2 * (py + 0.5f) / size;
            float d[3];
            for (int k = 0; k < 3; k++) d[k] = c.F[k] * c.focal + c.R[k] * nx + c.U[k] * ny;
            norm3(d);
            float rgb[3] = {0, 0, 0}, m = 0;
            float t = march(s, c.C, d, 0.05f * pix);
            if (t > 0) {
                float P[3] = {c.C[0] + t * d[0], c.C[1] + t * d[1], c.C[2] + t * d[2]};
                float fp = t * pix; /* pixel footprint on the surface (world units) */
                float e = fmaxf(0.5f * fp, 0.002f * s->radius);
                float h0 = height_full(s, P[0], P[1], fp); /* forward differences: 3 evaluations */
                float hx = (height_full(s, P[0] + e, P[1], fp) - h0) / e;
                float hy = (height_full(s, P[0], P[1] + e, fp) - h0) / e;
                float n[3] = {-hx, -hy, 1};
                norm3(n);
                float rho = lesion_rho(s, P[0], P[1]);
                int in_lesion = s->label >= 0 && rho < 1;
                /* mucosa albedo with a blotchy tone and a vessel network */
                float alb[3];
                float blot = 0.88f + 0.24f * fbm(P[0] * 2.5f, P[1] * 2.5f, vsd, 2);
                float vn = fbm(P[0] * s->vessel_freq, P[1] * s->vessel_freq, vsd + 9u, 3);
                float vw = 0.022f, vaa = clampf(1 - fp * s->vessel_freq * 4, 0, 1);
                float ves = s->vessel_density * vaa * smooth01(vw, 0, fabsf(vn - 0.5f));
                for (int k = 0; k < 3; k++) alb[k] = s->base_albedo[k] * blot;
                alb[0] *= 1 - 0.25f * ves, alb[1] *= 1 - 0.6f * ves, alb[2] *= 1 - 0.5f * ves;
                if (s->label >= 0 && rho < 1.05f) {
                    float wl = smooth01(1.05f, 0.85f, rho);
                    float pat = lesion_pattern(s, P[0], P[1], fp);
                    float shade = 1 - 0.35f * s->tex_amp * pat;
                    for (int k = 0; k < 3; k++)
                        alb[k] = alb[k] * (1 - wl) + wl * alb[k] * s->lesion_tint[k] * shade * (k ? 1.0f : 1.05f);
                }
                /* light at the camera: inverse-square falloff normalised at the view distance */
                float Lv[3] = {c.C[0] - P[0], c.C[1] - P[1], c.C[2] - P[2]};
                float dl = sqrtf(Lv[0] * Lv[0] + Lv[1] * Lv[1] + Lv[2] * Lv[2]);
                for (int k = 0; k < 3; k++) Lv[k] /= dl;
                float ndl = fmaxf(0, n[0] * Lv[0] + n[1] * Lv[1] + n[2] * Lv[2]);
                float I = c.exposure * (c.dist * c.dist) / (dl * dl);
                /* wet mucosa: highlights broken up by a film-thickness noise */
                float wet = fbm(P[0] * 5 / s->radius, P[1] * 5 / s->radius, vsd + 3u, 2);
                float spec = c.ks * powf(ndl, c.shin) * (0.6f + 0.8f * wet) * (in_lesion ? 1.2f : 1.0f);
                for (int k = 0; k < 3; k++) {
                    float v = I * (alb[k] * ndl + spec) + c.ambient * alb[k];
                    rgb[k] = 1 - expf(-1.5f * v); /* soft highlight roll-off */
                }
                m = in_lesion ? 1.0f : 0.0f;
            }
            /* circular field of view of the endoscope */
            float rr = sqrtf(nx * nx + ny * ny);
            float vig = smooth01(c.vignette, c.vignette - 0.08f, rr);
            size_t i = (size_t)py * size + px;
            for (int k = 0; k < 3; k++) img->data[k * hw + i] = rgb[k] * vig;
            mask->data[i] = vig > 0.5f ? m : 0;
        }
}

void synth_labels(uint64_t seed, int scenes, int *labels) {
    for (int i = 0; i < scenes; i++) labels[i] = i % 2;
    rng_t r = rng_make(seed, rng_stream(RNG_SYNTH, 0xFFFFFFFFu, 1));
    rng_shuffle(&r, labels, scenes);
}

void synth_splits(uint64_t seed, int scenes, const int *labels, const char **split) {
    int *idx = xmalloc(sizeof(int) * (scenes ? scenes : 1));
    for (int lab = 0; lab < 2; lab++) {
        int n = 0;
        for (int i = 0; i < scenes; i++)
            if (labels[i] == lab) idx[n++] = i;
        rng_t r = rng_make(seed, rng_stream(RNG_SYNTH, 0xFFFFFFFFu, 2u + lab));
        rng_shuffle(&r, idx, n);
        int ntest = (int)(0.15 * n + 0.5), nval = (int)(0.15 * n + 0.5);
        for (int k = 0; k < n; k++) split[idx[k]] = k < ntest ? "test" : k < ntest + nval ? "val" : "train";
    }
    free(idx);
}

int synth_write_dataset(const char *dir, const synth_config *cfg) {
    /* scenes x views images are listed in memory first: bounded so that count stays an int */
    if (cfg->scenes < 1 || cfg->scenes > 10000000 || cfg->views < 1 || cfg->views > 1000 || cfg->size < 8 ||
        cfg->size > 4096 || (int64_t)cfg->scenes * (cfg->views + 1) > 100000000)
        return er_fail(ER_INPUT, "synth: need 1 <= scenes <= 1e7, 1 <= views <= 1000, scenes x (views + 1) <= 1e8, "
                       "8 <= size <= 4096 (got %d scenes, %d views, size %d)", cfg->scenes, cfg->views, cfg->size);
    char *imgdir = path_join(dir, "images"), *mskdir = path_join(dir, "masks");
    int rc = make_dirs(imgdir);
    if (!rc) rc = make_dirs(mskdir);
    int S = cfg->scenes, V = cfg->views + (cfg->background ? 1 : 0);
    int *labels = xmalloc(sizeof(int) * S);
    const char **split = xmalloc(sizeof(char *) * S);
    synth_labels(cfg->seed, S, labels);
    synth_splits(cfg->seed, S, labels, split);
    int failed = 0;
    char errmsg[512] = "";
    long total = (long)S * V;
    if (!rc) {
#pragma omp parallel num_threads(cfg->threads > 0 ? cfg->threads : omp_get_max_threads())
        {
            image img = {0}, msk = {0};
            char p1[64], p2[64];
#pragma omp for schedule(dynamic, 4)
            for (long j = 0; j < total; j++) {
                int sc = (int)(j / V), v = (int)(j % V);
                int bg = cfg->background && v == cfg->views;
                synth_scene s;
                synth_scene_make(cfg->seed, sc, bg ? -1 : labels[sc], &s);
                synth_render_view(&s, bg ? 0 : v, cfg->size, &img, &msk);
                snprintf(p1, sizeof p1, "images/s%05d_v%02d%s.png", sc, v, bg ? "_bg" : "");
                snprintf(p2, sizeof p2, "masks/s%05d_v%02d%s.png", sc, v, bg ? "_bg" : "");
                char *f1 = path_join(dir, p1), *f2 = path_join(dir, p2);
                int r1 = image_save_png(f1, &img);
                if (!r1) r1 = image_save_png(f2, &msk);
                if (r1) {
#pragma omp critical
                    {
                        if (!failed) snprintf(errmsg, sizeof errmsg, "%s", er_msg());
                        failed = 1;
                    }
                }
                free(f1), free(f2);
            }
            image_free(&img), image_free(&msk);
        }
        if (failed) rc = er_fail(ER_RUNTIME, "%s", errmsg);
    }
    if (!rc) {
        manifest m;
        manifest_init(&m, dir);
        char p1[64], p2[64], scn[32], vw[16];
        for (int sc = 0; sc < S; sc++)
            for (int v = 0; v < V; v++) {
                int bg = cfg->background && v == cfg->views;
                snprintf(p1, sizeof p1, "images/s%05d_v%02d%s.png", sc, v, bg ? "_bg" : "");
                snprintf(p2, sizeof p2, "masks/s%05d_v%02d%s.png", sc, v, bg ? "_bg" : "");
                snprintf(scn, sizeof scn, "s%05d", sc);
                snprintf(vw, sizeof vw, "%d", v);
                manifest_row row = {p1, (char *)(bg ? "none" : SYNTH_LABEL_NAMES[labels[sc]]), p2, scn, vw, scn,
                                    (char *)split[sc]};
                manifest_add(&m, &row);
            }
        char *mp = path_join(dir, "manifest.csv");
        rc = manifest_save(mp, &m);
        free(mp);
        manifest_free(&m);
    }
    free(labels), free(split), free(imgdir), free(mskdir);
    return rc;
}
