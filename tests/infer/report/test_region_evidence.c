/* Region evidence against known lesion masks (issue #32 item 2). On synthetic scenes the evidence of
 * why a case was retrieved lies on the lesion more than on the background (sign test and pointing
 * game against chance, Wilson 95 % intervals), printed beside a control that only knows the image
 * centre (the synthetic lesion sits near it, and the control does better: see
 * bench/RESULTS_report.md); and when the lesion alone is moved, the map changes where the lesion left
 * and arrived more than elsewhere. The encoder is a tiny ViT trained briefly by the image objective
 * on synthetic scenes; the scenes scored are held out (another synth seed).
 *
 * ENDORET_REGION_BENCH=1 runs the larger measurement of bench/RESULTS_report.md (more scenes, more
 * steps, 64 px) and prints its raw numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datasets/augment.h"
#include "datasets/synth.h"
#include "infer/report/region_evidence.h"
#include "infer/report/region_overlay.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/vit_model.h"
#include "nn/models/resnet.h"
#include "nn/models/resnet_model.h"
#include "nn/autograd.h"

#include "tests/test_util.h"

int cmd_train(int argc, char **argv);

typedef struct {
    int bench, size, patch, dim, depth, steps, train_scenes, eval_scenes, k;
} ev_cfg;

static ev_cfg ev_config(void) {
    const char *b = getenv("ENDORET_REGION_BENCH");
    if (b && *b == '1') return (ev_cfg){1, 64, 8, 128, 4, 600, 400, 100, 3};
    return (ev_cfg){0, 64, 8, 64, 2, 300, 100, 40, 3};
}

/* A tiny encoder trained by `train image` on synthetic scenes (seed 3); "" for random init. */
static model *trained_model(const ev_cfg *c, int steps) {
    model *m;
    const char *keep = getenv("ENDORET_REGION_MODEL"); /* reuse one training across runs (measuring) */
    if (keep && steps > 1 && !model_load(keep, NULL, NULL, 0, &m)) return m;
    const char *d = test_tmpdir();
    synth_config sc = {.scenes = c->train_scenes, .views = 4, .size = c->size, .seed = 3, .threads = 2};
    cr_assert_eq(synth_write_dataset(d, &sc), 0, "%s", er_msg());
    char cfg[512], text[2048], out[512], enc[600];
    snprintf(cfg, sizeof cfg, "%s/c.cfg", d);
    snprintf(out, sizeof out, "%s/run", d);
    snprintf(text, sizeof text,
             "[model]\narch = vit_tiny\nimg = %d\npatch = %d\ndim = %d\ndepth = %d\nheads = 2\nhead_dim = 64\n"
             "[decoder]\ndim = 32\ndepth = 1\nheads = 2\n[mae]\nmask_ratio = 0.5\nmasking = guided\n"
             "[aug]\npreset = mae\nmix_prob = 0.05\n[data]\nmanifest = %s/manifest.csv\nsplit = \n"
             "[train]\nsteps = %d\nbatch = 16\nlr = 3e-3\nmin_lr = 1e-5\nwarmup_steps = 10\nclip = 3.0\nseed = 0\nthreads = 2\n"
             "[out]\ndir = %s\nlog_every = 1000\nckpt_every = 100000\n",
             c->size, c->patch, c->dim, c->depth, d, steps, out);
    cr_assert_eq(write_file_atomic(cfg, text, strlen(text)), 0);
    char *argv[] = {"train", "image", "--config", cfg, "--quiet", NULL};
    cr_assert_eq(cmd_train(5, argv), 0, "%s", er_msg());
    snprintf(enc, sizeof enc, "%s/encoder.safetensors", out);
    cr_assert_eq(model_load(enc, NULL, NULL, 0, &m), 0, "%s", er_msg());
    if (keep && steps > 1) cr_assert_eq(model_save(m, keep, -1), 0);
    return m;
}

/* One held-out view: the model input and the lesion share of every grid cell. */
typedef struct {
    float *x;
    float *cell;   /* gh*gw: fraction of the cell's pixels inside the lesion mask */
    int scene, label;
} ev_view;

static void cells_of(const image *mask, int g, float *cell) {
    int s = mask->w / g;
    for (int gy = 0; gy < g; gy++)
        for (int gx = 0; gx < g; gx++) {
            double a = 0;
            for (int y = 0; y < s; y++)
                for (int x = 0; x < s; x++) a += IMG_AT(mask, 0, gy * s + y, gx * s + x) > 0.5f;
            cell[gy * g + gx] = (float)(a / (s * s));
        }
}

static void input_of(model *m, const image *im, float *x) {
    model_input in = model_input_of(m);
    image tmp = {0};
    aug_workspace ws = {0};
    cr_assert_eq(aug_eval_input(im, m->img, in.crop, in.mean, in.std, &ws, &tmp), 0);
    memcpy(x, tmp.data, (size_t)3 * m->img * m->img * sizeof(float));
    image_free(&tmp);
    aug_workspace_free(&ws);
}

static void render(model *m, int g, uint64_t seed, int scene, int label, int view, ev_view *v, image *keep, image *keep_mask) {
    synth_scene s;
    synth_scene_make(seed, scene, label, &s);
    image im = {0}, mask = {0};
    synth_render_view(&s, view, m->img, &im, &mask);
    v->x = xmalloc((size_t)3 * m->img * m->img * sizeof(float));
    v->cell = xmalloc((size_t)g * g * sizeof(float));
    input_of(m, &im, v->x);
    cells_of(&mask, g, v->cell);
    v->scene = scene;
    v->label = label;
    if (keep) image_copy(keep, &im);
    if (keep_mask) image_copy(keep_mask, &mask);
    image_free(&im);
    image_free(&mask);
}

static double wilson_lo(int x, int n) {
    if (!n) return 0;
    double p = (double)x / n, z = 1.96, d = 1 + z * z / n;
    return (p + z * z / (2 * n) - z * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n))) / d;
}
static double wilson_hi(int x, int n) { return 1 - wilson_lo(n - x, n); }

typedef struct {
    int maps, above, hits;     /* maps scored, maps with mean(in) > mean(out), peaks on the lesion */
    double chance, ratio, in, out; /* mean share of lesion cells (the pointing game's chance), mean of in / out, mean in, mean out */
} ev_score;

/* in: cells at least half lesion; out: cells with no lesion pixel */
static void score_map(const float *map, const float *cell, int P, ev_score *s) {
    double in = 0, out = 0;
    int nin = 0, nout = 0;
    for (int p = 0; p < P; p++) {
        if (cell[p] >= 0.5f) in += map[p], nin++;
        else if (cell[p] == 0) out += map[p], nout++;
    }
    if (!nin || !nout) return;
    in /= nin;
    out /= nout;
    s->maps++;
    s->above += in > out;
    s->hits += cell[region_peak(map, P)] >= 0.5f;
    s->chance += (double)nin / P;
    s->ratio += in / out;
    s->in += in;
    s->out += out;
}

/* The reference bank (region_evidence.h): view `view` of the first REGION_REFS scenes of v (4 views
 * per scene), as a page builds it from its case base. */
static void bank_of(model *m, const ev_view *v, int view, region_feats *ref) {
    size_t per = (size_t)3 * m->img * m->img;
    float *x = xmalloc(REGION_REFS * per * sizeof(float));
    for (int r = 0; r < REGION_REFS; r++) memcpy(x + r * per, v[r * 4 + view].x, per * sizeof(float));
    cr_assert_eq(region_feats_of(m, x, REGION_REFS, ref), 0, "%s", er_msg());
    free(x);
}

/* Every held-out scene's view 0 queries the other scenes' views (4 each) by descriptor cosine; the
 * k nearest are its neighbours: the query's map and each case's map are scored against their masks. */
static ev_score measure(model *m, const ev_cfg *c, ev_score *prior) {
    int g = m->img / c->patch, P = g * g, S = c->eval_scenes, NV = S * 4, D = m->dim;
    float *centre_map = xmalloc((size_t)P * sizeof(float));
    for (int p = 0; p < P; p++) centre_map[p] = -(float)hypot(p % g - (g - 1) / 2.0, p / g - (g - 1) / 2.0) + 1e-3f * (p % 3);
    int *labels = xmalloc((size_t)S * sizeof(int));
    synth_labels(11, S, labels);
    ev_view *v = xcalloc((size_t)NV, sizeof(ev_view));
    for (int i = 0; i < NV; i++) render(m, g, 11, i / 4, labels[i / 4], i % 4, &v[i], NULL, NULL);
    float *desc = xmalloc((size_t)NV * D * sizeof(float));
    for (int i = 0; i < NV; i++) cr_assert_eq(model_embed(m, v[i].x, 1, desc + (size_t)i * D), 0);
    region_feats *f = xcalloc((size_t)NV, sizeof(region_feats));
    for (int i = 0; i < NV; i++) cr_assert_eq(region_feats_of(m, v[i].x, 1, &f[i]), 0, "%s", er_msg());
    ev_score s = {0};
    region_feats ref;
    bank_of(m, v, 2, &ref);
    for (int q = 4 * REGION_REFS; q < NV; q += 4) { /* the bank's scenes are not queries */
        int used[4096] = {0};
        for (int j = 0; j < c->k; j++) {
            int best = -1;
            double bs = -2;
            for (int i = 0; i < NV; i++) {
                if (v[i].scene == v[q].scene || used[i]) continue;
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)desc[(size_t)q * D + d] * desc[(size_t)i * D + d];
                if (dot > bs) bs = dot, best = i;
            }
            used[best] = 1;
            region_pair p;
            cr_assert_eq(region_pair_of(&f[q], &f[best], &ref, &p), 0);
            score_map(p.q, v[q].cell, P, &s);
            score_map(p.c, v[best].cell, P, &s);
            if (prior) { /* the control: a map that only knows the image centre */
                score_map(centre_map, v[q].cell, P, prior);
                score_map(centre_map, v[best].cell, P, prior);
            }
            region_pair_free(&p);
        }
    }
    for (int i = 0; i < NV; i++) { free(v[i].x); free(v[i].cell); region_feats_free(&f[i]); }
    region_feats_free(&ref);
    free(v); free(f); free(desc); free(labels); free(centre_map);
    if (s.maps) { s.chance /= s.maps; s.ratio /= s.maps; s.in /= s.maps; s.out /= s.maps; }
    if (prior && prior->maps) { prior->chance /= prior->maps; prior->ratio /= prior->maps; prior->in /= prior->maps; prior->out /= prior->maps; }
    return s;
}

static void report_score(const char *what, const ev_score *s) {
    fprintf(stderr, "region evidence [%s]: %d maps; mean(in) > mean(out) in %d (%.1f %%, 95 %% CI %.1f-%.1f %%); "
                    "mean in %.4f out %.4f, mean ratio in/out %.2f; pointing game %d hits (%.1f %%, CI %.1f-%.1f %%) vs chance %.1f %%\n",
            what, s->maps, s->above, 100.0 * s->above / s->maps, 100 * wilson_lo(s->above, s->maps), 100 * wilson_hi(s->above, s->maps),
            s->in, s->out, s->ratio, s->hits, 100.0 * s->hits / s->maps, 100 * wilson_lo(s->hits, s->maps),
            100 * wilson_hi(s->hits, s->maps), 100 * s->chance);
}

Test(region_evidence, falls_on_the_lesion, .timeout = 600) {
    SLOW_TEST(); /* a training of seconds, or a ViT-S */
    ev_cfg c = ev_config();
    model *m = trained_model(&c, c.steps);
    ev_score cp = {0}, s = measure(m, &c, &cp);
    report_score(c.bench ? "bench, trained" : "trained", &s);
    report_score("control: distance to the image centre", &cp);
    cr_assert_gt(s.maps, 20);
    /* significantly more inside than outside: the sign test's interval is above one half, and the
     * pointing game's above chance */
    cr_expect_gt(wilson_lo(s.above, s.maps), 0.5, "evidence inside the lesion above outside in only %d of %d maps", s.above, s.maps);
    cr_expect_gt(wilson_lo(s.hits, s.maps), s.chance, "pointing game %d of %d, chance %.3f", s.hits, s.maps, s.chance);
    model_free(m);
    if (c.bench) { /* the same measure with the untrained encoder (what the training adds) */
        model *r = trained_model(&c, 1);
        ev_score sr = measure(r, &c, NULL);
        report_score("bench, 1 step (about random init)", &sr);
        model_free(r);
    }
}

/* The lesion alone moved: the scene rendered without its lesion (label -1: the same mucosa), the
 * lesion's pixels pasted back shifted by (dx, 0) cells. */
static void move_lesion(const image *im, const image *mask, const image *bg, int dx_px, image *out, image *out_mask) {
    image_copy(out, bg);
    image_copy(out_mask, mask);
    memset(out_mask->data, 0, (size_t)mask->h * mask->w * sizeof(float));
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < im->w; x++) {
            int nx = x + dx_px;
            if (IMG_AT(mask, 0, y, x) <= 0.5f || nx < 0 || nx >= im->w) continue;
            for (int ch = 0; ch < 3; ch++) IMG_AT(out, ch, y, nx) = IMG_AT(im, ch, y, x);
            IMG_AT(out_mask, 0, y, nx) = 1;
        }
}

Test(region_evidence, changes_where_the_lesion_moved, .timeout = 600) {
    SLOW_TEST(); /* a training of seconds, or a ViT-S */
    ev_cfg c = ev_config();
    model *m = trained_model(&c, c.steps);
    int g = m->img / c.patch, P = g * g, S = c.eval_scenes, D = m->dim;
    int *labels = xmalloc((size_t)S * sizeof(int));
    synth_labels(11, S, labels);
    /* the cases: view 1 of every held-out scene */
    ev_view *cs = xcalloc((size_t)S, sizeof(ev_view));
    region_feats *cf = xcalloc((size_t)S, sizeof(region_feats));
    float *cd = xmalloc((size_t)S * D * sizeof(float));
    for (int i = 0; i < S; i++) {
        render(m, g, 11, i, labels[i], 1, &cs[i], NULL, NULL);
        cr_assert_eq(region_feats_of(m, cs[i].x, 1, &cf[i]), 0);
        cr_assert_eq(model_embed(m, cs[i].x, 1, cd + (size_t)i * D), 0);
    }
    /* the bank: view 3 of the first REGION_REFS scenes (not queried) */
    ev_view *bv4 = xcalloc((size_t)REGION_REFS * 4, sizeof(ev_view));
    for (int i = 0; i < REGION_REFS; i++) render(m, g, 11, i, labels[i], 3, &bv4[4 * i + 3], NULL, NULL);
    region_feats ref;
    bank_of(m, bv4, 3, &ref);
    for (int i = 0; i < REGION_REFS; i++) { free(bv4[4 * i + 3].x); free(bv4[4 * i + 3].cell); }
    free(bv4);
    int trials = 0, peak_moved = 0, pairs = 0, moved = 0, on_before = 0, on_after = 0, local = 0, local_n = 0;
    for (int q = REGION_REFS; q < S; q++) {
        ev_view v;
        image im = {0}, mask = {0}, bg = {0}, bgm = {0}, mv = {0}, mvm = {0};
        render(m, g, 11, q, labels[q], 0, &v, &im, &mask);
        ev_view bv;
        render(m, g, 11, q, -1, 0, &bv, &bg, &bgm);
        free(bv.x); free(bv.cell);
        /* the lesion's centre column (cells) and a shift of a third of the image toward the wider side */
        double cx = 0, a = 0;
        for (int y = 0; y < mask.h; y++)
            for (int x = 0; x < mask.w; x++) if (IMG_AT(&mask, 0, y, x) > 0.5f) cx += x, a++;
        if (a < 2.0 * c.patch * c.patch) { free(v.x); free(v.cell); goto next; }
        cx /= a;
        int dcell = (cx < mask.w / 2 ? 1 : -1) * (g / 3);
        move_lesion(&im, &mask, &bg, dcell * c.patch, &mv, &mvm);
        ev_view w = {.x = xmalloc((size_t)3 * m->img * m->img * sizeof(float)), .cell = xmalloc((size_t)P * sizeof(float))};
        input_of(m, &mv, w.x);
        cells_of(&mvm, g, w.cell);
        /* the neighbour: the case nearest the original view (another scene) */
        float qd[1024];
        cr_assert_eq(model_embed(m, v.x, 1, qd), 0);
        int best = -1;
        double bs = -2;
        for (int i = 0; i < S; i++) {
            if (i == q) continue;
            double dot = 0;
            for (int d = 0; d < D; d++) dot += (double)qd[d] * cd[(size_t)i * D + d];
            if (dot > bs) bs = dot, best = i;
        }
        region_feats f0, f1;
        region_pair p0, p1;
        cr_assert_eq(region_feats_of(m, v.x, 1, &f0), 0);
        cr_assert_eq(region_feats_of(m, w.x, 1, &f1), 0);
        cr_assert_eq(region_pair_of(&f0, &cf[best], &ref, &p0), 0);
        cr_assert_eq(region_pair_of(&f1, &cf[best], &ref, &p1), 0);
        int k0 = region_peak(p0.q, P), k1 = region_peak(p1.q, P);
        trials++;
        on_before += v.cell[k0] > 0;
        on_after += w.cell[k1] > 0;
        /* the peak moved with the lesion: by the shift, within one cell */
        peak_moved += abs((k1 % g - k0 % g) - dcell) <= 1 && abs(k1 / g - k0 / g) <= 1;
        /* the evidence moved with it: on the lesion's old cells (not covered by the moved lesion) it
         * fell, on its new cells it rose, relative to each other */
        double o0 = 0, n0 = 0, o1 = 0, n1 = 0;
        int no = 0, nn = 0;
        for (int p = 0; p < P; p++) {
            int old_ = v.cell[p] >= 0.5f && w.cell[p] == 0, new_ = w.cell[p] >= 0.5f && v.cell[p] == 0;
            if (old_) o0 += p0.q[p], o1 += p1.q[p], no++;
            if (new_) n0 += p0.q[p], n1 += p1.q[p], nn++;
        }
        if (no && nn) {
            pairs++;
            moved += o0 / no > n0 / nn && n1 / nn > o1 / no;
        }
        /* where the map changed: on the cells the lesion left or reached, against the cells it never touched */
        double ch = 0, un = 0;
        int nch = 0, nun = 0;
        for (int p = 0; p < P; p++) {
            double d = fabs(p1.q[p] - p0.q[p]);
            if (v.cell[p] >= 0.5f || w.cell[p] >= 0.5f) ch += d, nch++;
            else if (v.cell[p] == 0 && w.cell[p] == 0) un += d, nun++;
        }
        if (nch && nun) { local_n++; local += ch / nch > un / nun; }
        region_pair_free(&p0); region_pair_free(&p1); region_feats_free(&f0); region_feats_free(&f1);
        free(v.x); free(v.cell); free(w.x); free(w.cell);
    next:
        image_free(&im); image_free(&mask); image_free(&bg); image_free(&bgm); image_free(&mv); image_free(&mvm);
    }
    fprintf(stderr, "region evidence%s, lesion alone moved by a third of the image: evidence moved with it (higher on the "
                    "old lesion cells before, on the new ones after) in %d of %d (%.1f %%, 95 %% CI %.1f-%.1f %%; 25 %% if the "
                    "map ignored the move); peak moved by the shift (+-1 cell) in %d of %d (%.1f %%); peak on the lesion "
                    "before %d, after %d\n", c.bench ? " [bench]" : "", moved, pairs, 100.0 * moved / pairs,
            100 * wilson_lo(moved, pairs), 100 * wilson_hi(moved, pairs), peak_moved, trials, 100.0 * peak_moved / trials,
            on_before, on_after);
    fprintf(stderr, "region evidence%s, lesion moved: the map changed more on the cells the lesion left or reached than on cells "
                    "it never touched in %d of %d (%.1f %%, 95 %% CI %.1f-%.1f %%)\n", c.bench ? " [bench]" : "", local, local_n,
            100.0 * local / local_n, 100 * wilson_lo(local, local_n), 100 * wilson_hi(local, local_n));
    cr_assert_gt(local_n, 8);
    /* the map changes where the lesion left and arrived more than where nothing changed: its 95 %
     * interval above one half. Whether the evidence itself moves with the lesion (the peak or the
     * ranking of the two cell sets) is printed above and in bench/RESULTS_report.md: with the encoders
     * trained here briefly it does not (about the 25 % of a map blind to the move), so it is not
     * asserted. */
    cr_expect_gt(wilson_lo(local, local_n), 0.5, "the map changed more where the lesion moved in only %d of %d trials", local, local_n);
    for (int i = 0; i < S; i++) { free(cs[i].x); free(cs[i].cell); region_feats_free(&cf[i]); }
    free(cs); free(cf); free(cd); free(labels);
    region_feats_free(&ref);
    model_free(m);
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return 1e3 * ts.tv_sec + 1e-6 * ts.tv_nsec;
}

/* The page-time budget (region_evidence.h REGION_PAGE_BUDGET_MS): the evidence of one query card with
 * k = 6 single-view neighbours on a ViT-S/16 at 224 px (random weights: the time does not depend on
 * them), reading the 7 PNG files included, after the reference bank is built (once per report or
 * server). The best of 3 runs, printed against the budget; asserted on CPU time against the same 7
 * descriptor forwards measured in turn with it (the machine is shared: its load changes wall times). */
Test(region_evidence, page_time_budget, .timeout = 600) {
    SLOW_TEST(); /* a training of seconds, or a ViT-S */
    vit_config vc;
    cr_assert_eq(vit_config_preset("vit_small", &vc), 0);
    model *m = vit_model_wrap(vit_new(&vc, 1));
    cr_assert_eq(model_prepack(m), 0);
    const char *d = test_tmpdir();
    enum { K = 6 };
    char *paths[K + 1];
    uint8_t *px = xmalloc(256 * 256 * 3);
    for (int i = 0; i <= K; i++) {
        for (int p = 0; p < 256 * 256 * 3; p++) px[p] = (uint8_t)((p * 31 + i * 97 + (p / 768) * 7) % 251);
        char name[600];
        snprintf(name, sizeof name, "%s/v%d.png", d, i);
        cr_assert_eq(png_save_u8(name, px, 3, 256, 256), 0);
        paths[i] = xstrdup(name);
    }
    free(px);
    region_engine e;
    double t0 = now_seconds();
    cr_assert_eq(region_engine_init(&e, m, paths, K + 1), 0, "%s", er_msg());
    double bank_ms = 1e3 * (now_seconds() - t0);
    report_data r = {0};
    report_query q = {0};
    report_neighbour nb[K];
    memset(nb, 0, sizeof nb);
    q.image = paths[0];
    q.nnb = K;
    q.nb = nb;
    for (int j = 0; j < K; j++) nb[j].image = paths[j + 1];
    r.nq = 1;
    r.q = &q;
    /* interleaved with the same 7 images' descriptors (what embedding them costs anyway), so both
     * meet the machine's load alike; wall and process CPU time, best of 3 each */
    size_t per = (size_t)3 * 224 * 224;
    float *x = xmalloc((K + 1) * per * sizeof(float)), desc[384];
    for (size_t i = 0; i < (K + 1) * per; i++) x[i] = (float)((i * 13) % 29) / 14.f - 1.f;
    /* each run's page and descriptors are measured back to back and compared as a pair: the best of
     * one against the best of the other compared two different moments of a shared machine's load */
    double best = 1e30, emb = 1e30, best_cpu = 1e30, emb_cpu = 1e30, over = 1e30;
    for (int run = 0; run < 3; run++) {
        region_query ev;
        double c0 = cpu_ms();
        cr_assert_eq(region_query_of(&e, &r, 0, NULL, 0, &ev), 0, "%s", er_msg());
        double c1 = cpu_ms();
        cr_assert(ev.query && ev.nnb == K && ev.gh == 14 && ev.nb[K - 1].gh == 14);
        if (ev.ms < best) best = ev.ms;
        if (c1 - c0 < best_cpu) best_cpu = c1 - c0;
        region_query_free(&ev);
        double t1 = now_seconds();
        for (int i = 0; i <= K; i++) cr_assert_eq(model_embed(m, x + i * per, 1, desc), 0);
        double ms = 1e3 * (now_seconds() - t1), c2 = cpu_ms();
        if (ms < emb) emb = ms;
        if (c2 - c1 < emb_cpu) emb_cpu = c2 - c1;
        const double excess = (c1 - c0) - (2.0 * (c2 - c1) + 400); /* this run's page against its own descriptors */
        if (excess < over) over = excess;
    }
    free(x);
    double load[1] = {0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) { if (fscanf(la, "%lf", &load[0]) != 1) load[0] = -1; fclose(la); }
    fprintf(stderr, "region evidence page time, ViT-S/16 224 px, k = %d: %.0f ms wall, %.0f ms CPU (best of 3; budget %d ms); "
                    "the %d descriptors alone: %.0f ms wall, %.0f ms CPU; reference bank of %d views: %.0f ms once; load average %.1f\n",
            K, best, best_cpu, REGION_PAGE_BUDGET_MS, K + 1, emb, emb_cpu, e.ref.V, bank_ms, load[0]);
    /* the machine is shared (the whole suite runs 2 jobs), so the check is on CPU time against the
     * descriptors' forwards: the evidence is those forwards again plus reading 7 files and the maps */
    cr_expect_lt(over, 0.0, "in every run the card took more than twice its descriptors' CPU time + 400 ms (best of 3: %.0f ms "
                            "CPU for one card against %.0f ms for its descriptors)", best_cpu, emb_cpu);
    region_engine_free(&e);
    for (int i = 0; i <= K; i++) free(paths[i]);
    model_free(m);
}

/* A ResNet's evidence comes from its last stage's map before the pooling (img / 32 per side), and the
 * pooling of that map is the descriptor's input: the map is what the descriptor averages. */
Test(region_evidence, resnet_map_before_pooling) {
    resnet_config rc = {.depth = 18, .width = 8, .num_classes = 0, .bn_momentum = 0.1f, .bn_eps = 1e-5f};
    cr_assert_eq(resnet_config_preset("resnet18", &rc), 0);
    rc.width = 8; rc.num_classes = 0;
    resnet *r = resnet_new(&rc, 3);
    cr_assert(r, "%s", er_msg());
    model *m = resnet_model_wrap(r, 96);
    cr_assert(region_supported(m));
    float *x = xmalloc(2 * 3 * 96 * 96 * sizeof(float));
    for (int i = 0; i < 2 * 3 * 96 * 96; i++) x[i] = (float)((i * 37) % 101) / 50.f - 1.f;
    region_feats f;
    cr_assert_eq(region_feats_of(m, x, 2, &f), 0, "%s", er_msg());
    cr_assert(f.V == 2 && f.gh == 3 && f.gw == 3 && f.D == r->features, "%d %dx%dx%d", f.V, f.gh, f.gw, f.D);
    /* the map's positions, un-normalised, average to the pooled features (same forward) */
    float *map = xmalloc((size_t)2 * r->features * 9 * sizeof(float)), *pool = xmalloc((size_t)2 * r->features * sizeof(float));
    NO_GRAD {
        tensor *in = tensor_upload(m->device, 4, SHAPE(2, 3, 96, 96), x);
        tensor_to_host(resnet_feature_map(r, &NN_EVAL, in), map);
        tensor_to_host(resnet_features(r, &NN_EVAL, in), pool);
    }
    nn_step_end();
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < r->features; c++) {
            double s = 0, n2 = 0;
            for (int p = 0; p < 9; p++) s += map[((size_t)b * r->features + c) * 9 + p];
            cr_assert_float_eq(s / 9, pool[(size_t)b * r->features + c], 1e-4);
            /* and region_feats holds position p's vector over the channels, unit-length */
            for (int d = 0; d < f.D; d++) n2 += (double)f.f[((size_t)b * 9 + 4) * f.D + d] * f.f[((size_t)b * 9 + 4) * f.D + d];
            cr_assert_float_eq(n2, 1.0, 1e-4);
        }
    free(x); free(map); free(pool);
    region_feats_free(&f);
    model_free(m);
}

/* A case of several views: the view identical to the query is "the view that matched best", the
 * query's map is taken against it (its best cosines are 1, minus the bank's), and a position whose
 * content only the bank lacks scores highest. Hand-made features, no model. */
Test(region_evidence, best_view_of_a_scene_case) {
    enum { P = 4, D = 3 };
    static const float e[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    float qf[P * D], cf[3 * P * D], rf[P * D];
    const int qpos[P] = {0, 1, 2, 0}, other[P] = {1, 1, 1, 1}, bank[P] = {0, 0, 1, 1};
    for (int p = 0; p < P; p++) {
        memcpy(qf + p * D, e[qpos[p]], sizeof e[0]);
        memcpy(cf + p * D, e[other[p]], sizeof e[0]);          /* view 0: all e1 */
        memcpy(cf + (P + p) * D, e[other[p]], sizeof e[0]);    /* view 1: the same */
        memcpy(cf + (2 * P + p) * D, e[qpos[p]], sizeof e[0]); /* view 2: the query itself */
        memcpy(rf + p * D, e[bank[p]], sizeof e[0]);           /* the bank has e0 and e1, never e2 */
    }
    region_feats q = {1, 2, 2, D, qf}, c = {3, 2, 2, D, cf}, ref = {1, 2, 2, D, rf};
    region_pair pr;
    cr_assert_eq(region_pair_of(&q, &c, &ref, &pr), 0, "%s", er_msg());
    cr_expect_eq(pr.best, 2);
    cr_expect_float_eq(pr.cmatch[2], 1.0f, 1e-6);
    cr_expect_float_eq(pr.cmatch[0], 0.25f, 1e-6); /* only the query's e1 position finds a match */
    /* query map against view 2: best 1 everywhere, minus the bank's best (1 for e0, e1; 0 for e2) */
    const float want[P] = {0, 0, 1, 0};
    for (int p = 0; p < P; p++) cr_expect_float_eq(pr.q[p], want[p], 1e-6, "position %d: %f", p, pr.q[p]);
    cr_expect_eq(region_peak(pr.q, P), 2);
    region_pair_free(&pr);
    /* grids of two models are refused */
    region_feats other_grid = {1, 1, 4, D, qf};
    cr_expect_eq(region_pair_of(&q, &other_grid, &ref, &pr), ER_INPUT);
}
