/* cmd_bow.c — `endoret bow train|embed|cv`: the Dense-SIFT bag-of-visual-words baseline.
 *
 *   endoret bow train --manifest M.csv --out vocab.safetensors [--k 200 --step 20 --radius 60
 *                     --downscale 0 --rotate 1 --max-desc 100000 --iters 50 --seed 1 --split train --max-side 0]
 *   endoret bow embed --manifest M.csv --vocab vocab.safetensors --out E.safetensors [--pool scene] [--max-side 0]
 *   endoret bow cv    --manifest M.csv --gt pairs.csv [--m 30 --q 3 --k 200 ... --gamma 5 --slope 1 --lambda 0] [--json]
 *
 * embed writes the standard embedding file (infer/retrieval/embeddings.h) with "distance" = "chi2", so
 * `eval perceived`, indexes and sweeps apply unchanged. Images are read as grayscale (luma). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/image.h"
#include "datasets/manifest.h"
#include "infer/perceived/bow_cv.h"
#include "infer/perceived/bow_model.h"
#include "infer/retrieval/embeddings.h"
#include "infer/perceived/perceived_table.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"

/* Grayscale image of manifest row i, longest side limited to max_side (0 = as stored). */
static int load_gray(const manifest *m, int i, int max_side, image *im, image *tmp) {
    char *path = manifest_image_path(m, i);
    int rc = image_load(path, 1, im);
    free(path);
    if (rc) return rc;
    int side = im->w > im->h ? im->w : im->h;
    if (max_side > 0 && side > max_side) {
        int w = (int)lround((double)im->w * max_side / side), h = (int)lround((double)im->h * max_side / side);
        image_resize(im, tmp, h < 1 ? 1 : h, w < 1 ? 1 : w, RESIZE_BILINEAR);
        image_copy(im, tmp);
    }
    return ER_OK;
}

/* Descriptors of every selected row (sel == NULL: all), images in parallel (one decoder and
 * scratch image per thread; the per-image kernels then run single-threaded inside). The first
 * failure's message is kept and re-raised on the calling thread. */
static int all_descriptors(const manifest *m, const int *sel, int nsel, const dsift_cfg *c, int max_side, float ***desc, int **nd) {
    *desc = xcalloc(nsel ? nsel : 1, sizeof **desc);
    *nd = xcalloc(nsel ? nsel : 1, sizeof **nd);
    int rc = ER_OK, done = 0;
    char msg[512] = "";
    double t0 = now_seconds();
    #pragma omp parallel
    {
        image im = {0}, tmp = {0};
        #pragma omp for schedule(dynamic, 4)
        for (int j = 0; j < nsel; j++) {
            int bad;
            #pragma omp atomic read
            bad = rc;
            if (bad) continue;
            int i = sel ? sel[j] : j, r = load_gray(m, i, max_side, &im, &tmp);
            if (r) {
                #pragma omp critical(bow_err)
                if (!rc) { rc = r; snprintf(msg, sizeof msg, "%s", er_msg()); }
                continue;
            }
            (*desc)[j] = bow_image_descriptors(im.data, im.w, im.h, c, &(*nd)[j]);
            int k;
            #pragma omp atomic capture
            k = ++done;
            if (isatty(2) && (k % 50 == 0 || k == nsel))
                fprintf(stderr, "\rdense SIFT: %d/%d images, %.1f img/s ", k, nsel, k / (now_seconds() - t0 + 1e-9));
        }
        image_free(&im);
        image_free(&tmp);
    }
    if (isatty(2) && nsel) fputc('\n', stderr);
    if (rc) return er_fail(rc, "%s", msg);
    return ER_OK;
}
static void free_descriptors(float **d, int *nd, int n) {
    for (int i = 0; i < n; i++) free(d[i]);
    free(d);
    free(nd);
}

/* the dense-SIFT options of bow train and bow cv, declared once */
#define SIFT_OPTS(c)                                                                                            \
    {"step", ARG_INT, &(c).step, "grid step in pixels", "[1, 10000]"},                                          \
    {"radius", ARG_INT, &(c).radius, "disk radius in pixels", "[2, 10000]"},                                    \
    {"downscale", ARG_INT, &(c).downscale, "box-downscale factor before SIFT (0 = radius/8)", "[0, 1000]"},     \
    {"rotate", ARG_INT, &(c).rotate, "1 = rotation-normalised descriptors, 0 = upright", "[0, 1]"}
#define MAX_SIDE_OPT(dst)                                                                                       \
    {"max-side", ARG_INT, (dst), "resize images so the longest side is at most this (0 = as stored)", "[0, inf)"}

static int cmd_bow_train(int argc, char **argv) {
    const char *mpath = NULL, *out = NULL, *split = NULL;
    int k = 200, max_desc = 100000, iters = 50, seed = 1, max_side = 0, json = 0;
    dsift_cfg c;
    dsift_cfg_default(&c);
    arg_spec specs[] = {
        OPT_MANIFEST(&mpath, "training images (manifest CSV)", .required = 1),
        OPT_OUT(&out, "vocabulary file to write (safetensors)", .required = 1),
        {"k", ARG_INT, &k, "number of visual words (paper: 100 per class)", "[2, 100000]"},
        SIFT_OPTS(c),
        {"max-desc", ARG_INT, &max_desc, "descriptors used by k-means (at least --k)"},
        {"iters", ARG_INT, &iters, "k-means iterations at most", "[1, inf)"},
        OPT_SEED(&seed),
        {"split", ARG_STR, &split, "use only rows whose split column equals this"},
        MAX_SIDE_OPT(&max_side),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, "endoret bow train --manifest M.csv --out vocab.safetensors [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (max_desc < k) return er_fail(ER_INPUT, "--max-desc: %d is smaller than --k %d", max_desc, k);
    manifest m;
    if ((rc = manifest_load(mpath, &m))) return rc;
    int *sel = xmalloc((m.n ? m.n : 1) * sizeof(int)), nsel = 0;
    for (int i = 0; i < m.n; i++) if (!split || (m.rows[i].split && !strcmp(m.rows[i].split, split))) sel[nsel++] = i;
    if (nsel == 0) { rc = er_fail(ER_INPUT, "%s: no rows%s%s", mpath, split ? " with split " : "", split ? split : ""); }
    float **d = NULL;
    int *nd = NULL;
    double t0 = now_seconds();
    if (!rc) rc = all_descriptors(&m, sel, nsel, &c, max_side, &d, &nd);
    double t1 = now_seconds();
    bow_vocab v = {0};
    if (!rc) rc = bow_vocab_train(d, nd, nsel, k, max_desc, iters, (uint64_t)seed, &c, &v);
    double t2 = now_seconds();
    if (!rc) rc = bow_vocab_save(out, &v);
    if (!rc) {
        long long tot = 0;
        for (int i = 0; i < nsel; i++) tot += nd[i];
        if (json)
            printf("{\"images\":%d,\"descriptors\":%lld,\"k\":%d,\"step\":%d,\"radius\":%d,\"sift_s\":%.3f,\"kmeans_s\":%.3f,\"out\":\"%s\"}\n",
                   nsel, tot, k, c.step, c.radius, t1 - t0, t2 - t1, out);
        else
            printf("bow train: %d images, %lld dense SIFT descriptors (step %d, radius %d) in %.1f s; %d words by k-means++ on <= %d descriptors in %.1f s -> %s\n",
                   nsel, tot, c.step, c.radius, t1 - t0, k, max_desc, t2 - t1, out);
    }
    bow_vocab_free(&v);
    if (d) free_descriptors(d, nd, nsel);
    free(sel);
    manifest_free(&m);
    return rc;
}

static int cmd_bow_embed(int argc, char **argv) {
    const char *mpath = NULL, *vpath = NULL, *out = NULL, *pool = "none";
    int max_side = 0, json = 0;
    arg_spec specs[] = {
        OPT_MANIFEST(&mpath, "images to describe (manifest CSV)", .required = 1),
        {"vocab", ARG_STR, &vpath, "vocabulary from `bow train`", .required = 1},
        OPT_OUT(&out, "embedding file to write", .required = 1),
        {"pool", ARG_STR, &pool, "scene: one signature per scene (mean of its frames' histograms)", "none|scene"},
        MAX_SIDE_OPT(&max_side),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, "endoret bow embed --manifest M.csv --vocab V --out E.safetensors", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    bow_vocab v;
    if ((rc = bow_vocab_load(vpath, &v))) return rc;
    manifest m;
    if ((rc = manifest_load(mpath, &m))) { bow_vocab_free(&v); return rc; }
    const int K = v.k;
    float *h = xmalloc((size_t)(m.n ? m.n : 1) * K * sizeof(float));
    double t0 = now_seconds();
    long long tot = 0;
    char msg[512] = "";
    #pragma omp parallel reduction(+ : tot)
    {
        image im = {0}, tmp = {0};
        #pragma omp for schedule(dynamic, 4)
        for (int i = 0; i < m.n; i++) {
            int bad;
            #pragma omp atomic read
            bad = rc;
            if (bad) continue;
            int r = load_gray(&m, i, max_side, &im, &tmp);
            if (r) {
                #pragma omp critical(bow_err)
                if (!rc) { rc = r; snprintf(msg, sizeof msg, "%s", er_msg()); }
                continue;
            }
            int nd;
            float *d = bow_image_descriptors(im.data, im.w, im.h, &v.sift, &nd);
            bow_signature(&v, d, nd, h + (size_t)i * K);
            tot += nd;
            free(d);
        }
        image_free(&im);
        image_free(&tmp);
    }
    if (rc) rc = er_fail(rc, "%s", msg);
    double t1 = now_seconds();
    int *lab = NULL, nlab = 0, nsc = 0;
    int64_t *sc = NULL;
    char **lnames = NULL, **snames = NULL;
    if (!rc) {
        manifest_label_ids(&m, &lab, &lnames, &nlab);
        manifest_field_values(&m, MF_SCENE, &sc, &snames, &nsc);
        int has_scene = 0;
        for (int i = 0; i < m.n; i++) has_scene |= sc[i] >= 0;
        emb_set e;
        char model[160];
        snprintf(model, sizeof model, "dense-sift bow k=%d step=%d radius=%d rotate=%d%s", K, v.sift.step, v.sift.radius, v.sift.rotate,
                 strcmp(pool, "scene") ? "" : " pooled per scene");
        if (!strcmp(pool, "scene")) {
            if (!has_scene) rc = er_fail(ER_INPUT, "--pool scene: %s has no scene column", mpath);
            int64_t *grp = xmalloc((m.n ? m.n : 1) * sizeof(int64_t));
            for (int i = 0; i < m.n; i++) grp[i] = sc[i];
            float *ph = NULL;
            int64_t *gid = NULL;
            int *first = NULL;
            int ng = rc ? 0 : bow_pool(h, m.n, K, grp, &ph, &gid, &first);
            if (!rc) {
                emb_alloc(&e, ng, K);
                memcpy(e.x, ph, (size_t)ng * K * sizeof(float));
                e.labels = xmalloc(ng * sizeof(int64_t));
                e.scene = xmalloc(ng * sizeof(int64_t));
                for (int g = 0; g < ng; g++) { e.ids[g] = gid[g] >= 0 ? gid[g] : -1 - first[g]; e.labels[g] = lab[first[g]]; e.scene[g] = gid[g]; }
                if (nsc) { /* string scene values: the file keeps their names */
                    e.nscene_names = nsc;
                    e.scene_names = xmalloc(nsc * sizeof(char *));
                    for (int j = 0; j < nsc; j++) e.scene_names[j] = xstrdup(snames[j]);
                }
                if (nlab) {
                    e.nlabel_names = nlab;
                    e.label_names = xmalloc(nlab * sizeof(char *));
                    for (int j = 0; j < nlab; j++) e.label_names[j] = xstrdup(lnames[j]);
                }
            }
            free(grp); free(ph); free(gid); free(first);
        } else {
            emb_alloc(&e, m.n, K);
            memcpy(e.x, h, (size_t)m.n * K * sizeof(float));
            emb_fill_from_manifest(&e, &m, NULL, 0);
        }
        if (!rc) {
            e.model = xstrdup(model);
            e.manifest = xstrdup(mpath);
            e.distance = xstrdup("chi2");
            rc = emb_save(out, &e);
            if (!rc) {
                if (json)
                    printf("{\"images\":%d,\"items\":%d,\"dim\":%d,\"descriptors\":%lld,\"seconds\":%.3f,\"distance\":\"chi2\",\"out\":\"%s\"}\n", m.n, e.n, K, tot, t1 - t0, out);
                else
                    printf("bow embed: %d images (%lld descriptors, %.1f img/s) -> %d signatures of %d visual words (chi2) -> %s\n", m.n, tot,
                           m.n / (t1 - t0 + 1e-9), e.n, K, out);
            }
            emb_free(&e);
        }
        manifest_free_labels(lab, lnames, nlab);
        manifest_free_labels(NULL, snames, nsc);
        free(sc);
    }
    free(h);
    manifest_free(&m);
    bow_vocab_free(&v);
    return rc;
}

static int cmd_bow_cv(int argc, char **argv) {
    const char *mpath = NULL, *gtpath = NULL;
    int max_side = 0, json = 0, seed = 1, verbose = 0;
    bow_cv_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.m = 30; cfg.q = 3; cfg.k = 200; cfg.max_desc = 50000; cfg.iters = 30;
    chi2_cfg_default(&cfg.metric);
    dsift_cfg c;
    dsift_cfg_default(&c);
    arg_spec specs[] = {
        OPT_MANIFEST(&mpath, "images (row i = id i of the ground truth); patient column groups the folds", .required = 1),
        {"gt", ARG_STR, &gtpath, "Likert pair file", .required = 1},
        {"m", ARG_INT, &cfg.m, "repetitions (paper: 30)"},
        {"q", ARG_INT, &cfg.q, "folds (paper: 3)"},
        {"k", ARG_INT, &cfg.k, "visual words", "[2, inf)"},
        SIFT_OPTS(c),
        {"max-desc", ARG_INT, &cfg.max_desc, "descriptors per k-means (at least --k)"},
        {"iters", ARG_INT, &cfg.iters, "k-means iterations at most", "[1, inf)"},
        {"gamma", ARG_DOUBLE, &cfg.metric.gamma, "weight of the dissimilar term (paper: 5)", "(0, inf)"},
        {"slope", ARG_DOUBLE, &cfg.metric.slope, "logistic slope", "(0, inf)"},
        {"lambda", ARG_DOUBLE, &cfg.metric.lambda, "l2 pull of w towards 1", "[0, inf)"},
        {"max-iter", ARG_INT, &cfg.metric.max_iter, "metric-learning iterations at most", "[0, inf)"},
        OPT_SEED(&seed),
        MAX_SIDE_OPT(&max_side),
        {"verbose", ARG_FLAG, &verbose, "per-fold progress on stderr"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, "endoret bow cv --manifest M.csv --gt pairs.csv [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (cfg.max_desc < cfg.k) return er_fail(ER_INPUT, "--max-desc: %d is smaller than --k %d", cfg.max_desc, cfg.k);
    cfg.seed = (uint64_t)seed;
    cfg.verbose = verbose;
    likert_gt gt;
    if ((rc = likert_load(gtpath, &gt))) return rc;
    manifest m;
    if ((rc = manifest_load(mpath, &m))) { likert_free(&gt); return rc; }
    int *pid = NULL, npid = 0;
    char **pnames = NULL;
    manifest_field_ids(&m, MF_PATIENT, &pid, &pnames, &npid);
    const char *grouping = "patient";
    if (npid == 0) { manifest_free_labels(pid, pnames, npid); manifest_field_ids(&m, MF_SCENE, &pid, &pnames, &npid); grouping = "scene"; }
    int64_t *patient = xmalloc((m.n ? m.n : 1) * sizeof(int64_t));
    int next = npid;
    for (int i = 0; i < m.n; i++) patient[i] = npid && pid[i] >= 0 ? pid[i] : next++;
    if (npid == 0) grouping = "image";
    float **d = NULL;
    int *nd = NULL;
    rc = all_descriptors(&m, NULL, m.n, &c, max_side, &d, &nd);
    bow_cv_result res;
    if (!rc) rc = bow_cv_run(d, nd, patient, m.n, &gt, &c, &cfg, &res);
    if (!rc) {
        if (json) {
            printf("{\"m\":%d,\"q\":%d,\"k\":%d,\"repetitions_used\":%d,\"n_test_pairs\":%.1f,\"grouping\":\"%s\","
                   "\"before\":{\"pearson\":%.6f,\"spearman\":%.6f,\"kendall_tau_b\":%.6f,\"se_kendall_tau_b\":%.6f},"
                   "\"after\":{\"pearson\":%.6f,\"spearman\":%.6f,\"kendall_tau_b\":%.6f,\"se_kendall_tau_b\":%.6f},"
                   "\"tau_before_after\":%.6f,\"steiger_z\":%.4f,\"steiger_p_greater\":%.6g}\n",
                   cfg.m, cfg.q, cfg.k, res.reps_used, res.n_test, grouping, res.before.pearson, res.before.spearman, res.before.kendall,
                   res.before.se_kendall, res.after.pearson, res.after.spearman, res.after.kendall, res.after.se_kendall, res.tau_between,
                   res.steiger.z, res.steiger.p_greater);
        } else {
            char n1[64], n2[64];
            snprintf(n1, sizeof n1, "%dx%d-DS-learn", cfg.m, cfg.q);
            snprintf(n2, sizeof n2, "%dx%d-DS", cfg.m, cfg.q);
            const char *names[2] = {n1, n2};
            corr_summary cs[2] = {res.after, res.before};
            double taub[4] = {1, res.tau_between, res.tau_between, 1};
            corr_ztest st[4];
            perceived_compare(cs, taub, 2, st);
            printf("bow cv: %d x %d-fold cross-validation grouped by %s, %d images, %d scored couples; vocabulary (k=%d) and weights re-learnt per fold;\n"
                   "        %.0f test couples pooled per repetition, %d repetitions used\n\n",
                   cfg.m, cfg.q, grouping, m.n, gt.npairs, cfg.k, res.n_test, res.reps_used);
            perceived_table_print(stdout, names, cs, st, 2, 0.05);
            printf("Steiger z (M1 > M2, tau) = %.3f, one-sided p = %.3g; tau between the two distances = %.3f\n", res.steiger.z, res.steiger.p_greater, res.tau_between);
        }
    }
    if (d) free_descriptors(d, nd, m.n);
    free(patient);
    manifest_free_labels(pid, pnames, npid);
    manifest_free(&m);
    likert_free(&gt);
    return rc;
}

int cmd_bow(int argc, char **argv) {
    static const arg_sub subs[] = {
        {"train", cmd_bow_train, "learn a visual vocabulary (dense SIFT + k-means++)"},
        {"embed", cmd_bow_embed, "write bag-of-words signatures as an embedding file (chi2 distance)"},
        {"cv", cmd_bow_cv, "m x q-fold cross-validation of the chi2 distance before/after metric learning (table 1)"},
    };
    return args_dispatch(argc, argv, "endoret bow train|embed|cv [options]   (--help on each)", subs, 3);
}
