/* cmd_bench_latency.c — `endoret bench latency`: the time to answer one new case on the CPU, the
 * online path of a point-of-care retrieval (issue 18): decode the JPEG -> resize + normalise (the
 * model's input rule) -> encoder forward at batch 1 -> sign hash -> top-k Hamming search in a case
 * database of --db cases. Each stage is timed on every run; p50 / p99 (nearest rank) over --runs runs
 * after --warmup untimed ones. The image is --image (a JPEG or PNG file) or, by default, a synthetic
 * endoscopy view (datasets/synth.h) encoded as a quality-90 JPEG in memory, --side pixels square.
 * The database holds random codes (the search time does not depend on their values for a scan).
 *
 *   endoret bench latency --model vit_small --img 224 --threads 2 [--precision bf16] [--json]
 *   endoret bench latency --weights encoder.safetensors ... (a trained file instead of random init)
 * The PyTorch figure beside it: bench/torch_latency.py (the same ViT, eager forward, batch 1). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/synth.h"
#include "infer/retrieval/hash.h"
#include "infer/retrieval/index.h"
#include "kernels/profile.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "nn/models/model.h"
#include "nn/precision.h"

enum { ST_DECODE, ST_PREP, ST_ENCODER, ST_HASH, ST_SEARCH, ST_TOTAL, NSTAGES };
static const char *const STAGE[NSTAGES] = {"decode", "resize_normalise", "encoder", "hash", "search", "total"};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank percentile of n sorted values */
static double pct(const double *v, int n, double p) {
    int k = (int)ceil(p / 100.0 * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* the default input: view 0 of a synthetic scene, side x side, as a JPEG in memory */
static int synthetic_jpeg(int side, uint8_t **buf, size_t *len) {
    synth_scene s;
    synth_scene_make(7, 0, 1, &s);
    image img = {0}, mask = {0};
    synth_render_view(&s, 0, side, &img, &mask);
    int rc = image_encode_jpeg(&img, 90, buf, len);
    image_free(&img);
    image_free(&mask);
    return rc;
}

int cmd_bench_latency(int argc, char **argv) {
    const char *arch = "vit_small", *weights = NULL, *img_path = NULL, *precision = "fp32";
    int img = 224, threads = 0, runs = 200, warmup = 10, k = 10, side = 576, json = 0, profile = 0;
    int db = 100000, no_prepack = 0;
    arg_spec specs[] = {
        {"model", ARG_STR, &arch, "a registered model.arch (random init): vit_small, vit_large, resnet50, ..."},
        {"weights", ARG_STR, &weights, "a weights file instead of --model (its own architecture and input rule)"},
        {"img", ARG_INT, &img, "encoder input side", "[16, 4096]"},
        OPT_THREADS(&threads),
        OPT_PRECISION(&precision),
        {"runs", ARG_INT, &runs, "timed runs", "[1, 1000000]"},
        {"warmup", ARG_INT, &warmup, "untimed runs first", "[0, 1000000]"},
        {"db", ARG_INT, &db, "cases in the database searched", "[1, 100000000]"},
        OPT_K(&k),
        {"image", ARG_STR, &img_path, "the query image file", .def = "a synthetic view as a JPEG in memory"},
        {"side", ARG_INT, &side, "side of the synthetic query image", "[16, 4096]"},
        OPT_JSON(&json),
        {"no-prepack", ARG_FLAG, &no_prepack, "read the weights as they are instead of packing them once for the products (model_prepack, as embed and serve run)"},
        {"profile", ARG_FLAG, &profile, "time every kernel of the timed runs (kernels/profile.h): decode + resize as phase data, the encoder as forward, hash + search as loop"},
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret bench latency --model vit_small --img 224 --threads 2 [--precision bf16] [--json]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    /* every size in range before any work (the declared ranges above, and k at most the database):
     * 1e9 runs or neighbours, a side of 2^31 (its size wrapped) aborted in the allocator */
    if ((rc = args_range("k", k, 1, db < 100000 ? db : 100000))) return rc;
    if (!weights && !model_arch_find(arch)) { /* named by this command's option, not model_create's --arch */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", er_msg());
        return er_fail(ER_INPUT, "--model: %s", msg);
    }
    int prec;
    if ((rc = er_precision_parse(precision, &prec))) return rc;
    if (threads > 0) omp_set_num_threads(threads);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (img_path) rc = read_file(img_path, (char **)&buf, &len);
    else rc = synthetic_jpeg(side, &buf, &len);
    if (rc) return rc;
    model *m = NULL;
    if (weights) rc = model_load(weights, NULL, NULL, 0, &m);
    else {
        char set_img[32], *sets[1] = {set_img};
        snprintf(set_img, sizeof set_img, "model.img=%d", img);
        rc = model_create(arch, NULL, sets, 1, &m);
    }
    if (!rc && m->img != img) rc = model_set_img(m, img);
    if (!rc) rc = model_forward_check(m, 1, "bench latency", "--img or the model");
    if (!rc) model_set_precision(m, prec);
    if (!rc && !no_prepack) rc = model_prepack(m);
    const char *prepack = no_prepack ? "off" : "on";
    if (rc) { free(buf); model_free(m); return rc; }
    int D = m->dim, words = hash_words(D);
    model_input in = model_input_of(m);
    hasher h = {0};
    bindex ix = {0};
    uint64_t *codes = xmalloc((size_t)db * words * sizeof(uint64_t)), *q = xmalloc((size_t)words * sizeof(uint64_t));
    int64_t *ids = xmalloc((size_t)db * sizeof(int64_t)), *out_ids = xmalloc((size_t)k * sizeof(int64_t));
    int32_t *out_d = xmalloc((size_t)k * sizeof(int32_t));
    rng_t r = rng_make(3, rng_stream(RNG_SAMPLING, 0, 0));
    for (int64_t i = 0; i < db; i++) {
        ids[i] = i;
        for (int w = 0; w < words; w++) codes[i * words + w] = rng_u64(&r);
        if (D % 64) codes[i * words + words - 1] &= (1ULL << (D % 64)) - 1;
    }
    if (!(rc = hasher_set(&h, HASH_SIGN, D, D, NULL, NULL))) rc = bindex_build(&ix, INDEX_SCAN, D, codes, ids, db, 0);
    free(codes);
    free(ids);
    double *t = xmalloc(sizeof(double) * NSTAGES * runs);
    float *desc = xmalloc((size_t)D * sizeof(float));
    image src = {0}, dst = {0};
    aug_workspace ws = {0};
    double prof_measured = 0;
    for (int it = 0; it < warmup + runs && !rc; it++) {
        double s[NSTAGES + 1];
        if (profile && it == warmup) prof_start();
        prof_phase(PROF_DATA);
        s[0] = now_seconds();
        rc = image_decode(buf, len, img_path ? img_path : "synthetic.jpg", 3, &src);
        s[1] = now_seconds();
        if (!rc) rc = aug_eval_input(&src, img, in.crop, in.mean, in.std, &ws, &dst);
        s[2] = now_seconds();
        prof_phase(PROF_FORWARD);
        if (!rc) rc = model_embed(m, dst.data, 1, desc);
        s[3] = now_seconds();
        prof_phase(PROF_LOOP);
        if (it >= warmup) prof_measured += s[3] - s[0];
        hasher_encode(&h, desc, 1, q);
        s[4] = now_seconds();
        int count;
        if (!rc) bindex_search(&ix, q, 1, k, out_ids, out_d, &count);
        s[5] = now_seconds();
        if (it >= warmup) {
            double *row = t + (size_t)(it - warmup) * NSTAGES;
            for (int st = 0; st < ST_TOTAL; st++) row[st] = 1e3 * (s[st + 1] - s[st]);
            row[ST_TOTAL] = 1e3 * (s[5] - s[0]);
        }
    }
    prof_stop();
    if (!rc) {
        double p50[NSTAGES], p99[NSTAGES], *col = xmalloc(sizeof(double) * runs);
        for (int st = 0; st < NSTAGES; st++) {
            for (int i = 0; i < runs; i++) col[i] = t[(size_t)i * NSTAGES + st];
            qsort(col, runs, sizeof *col, cmp_double);
            p50[st] = pct(col, runs, 50), p99[st] = pct(col, runs, 99);
        }
        free(col);
        char what[256];
        model_describe(m, what, sizeof what);
        if (json) {
            printf("{\"bench\": \"latency\", \"model\": \"%s\", \"img\": %d, \"threads\": %d, \"precision\": \"%s\", "
                   "\"prepack\": \"%s\", \"runs\": %d, \"db\": %lld, \"bits\": %d, \"k\": %d, \"image_bytes\": %zu, \"image_w\": %d, \"image_h\": %d",
                   weights ? weights : arch, img, omp_get_max_threads(), precision, prepack, runs, (long long)db, D, k, len, src.w, src.h);
            for (int st = 0; st < NSTAGES; st++)
                printf(", \"%s_ms_p50\": %.4f, \"%s_ms_p99\": %.4f", STAGE[st], p50[st], STAGE[st], p99[st]);
            printf("}\n");
        } else {
            printf("bench latency: %s, %dx%d input from a %dx%d %s (%zu bytes), %d threads, %s, weights prepacked %s, %d runs after %d warm-up;\n"
                   "  search: sign codes of %d bits, exact scan of %lld cases, top-%d\n",
                   what, img, img, src.w, src.h, img_path ? img_path : "synthetic JPEG", len, omp_get_max_threads(),
                   precision, prepack, runs, warmup, D, (long long)db, k);
            printf("  %-18s %10s %10s\n", "stage", "p50 ms", "p99 ms");
            for (int st = 0; st < NSTAGES; st++) printf("  %-18s %10.3f %10.3f\n", STAGE[st], p50[st], p99[st]);
        }
        if (profile) prof_report(stdout, runs, prof_measured, json);
    }
    image_free(&src);
    image_free(&dst);
    aug_workspace_free(&ws);
    free(t); free(desc); free(q); free(out_ids); free(out_d); free(buf);
    hasher_free(&h);
    bindex_free(&ix);
    model_free(m);
    return rc;
}
