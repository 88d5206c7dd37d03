/* cmd_embed.c — `endoret embed --model CKPT --manifest M --out emb.safetensors`: the descriptor of
 * every image (the model's, e.g. the L2-normalised [CLS] of a ViT; no_grad forward, the training
 * kernels), written as the embedding file (infer/retrieval/embeddings.h) with labels / scene / view
 * from the manifest.
 *
 * Any registered model (nn/models/model.h): our encoder.safetensors, a training checkpoint (its
 * stored config says the architecture) or a plain timm / MAE ViT file (recognised from its tensor
 * names, or named with --arch; a ViT's heads = dim / 64 unless --heads). `--config C [--set k=v]`
 * without --model embeds with the seeded random initialisation of that config (the "random init"
 * baseline). --device cuda runs the same kernels on
 * the GPU (weights loaded on the host and moved once); --precision bf16 as in training. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/manifest.h"
#include "cli/embed_hybrid.h"
#include "cli/embed_scene.h"
#include "infer/retrieval/baseline_desc.h"
#include "infer/retrieval/embeddings.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/base/progress.h"
#include "nn/models/model.h"
#include "nn/precision.h"

/* the manifest rows to embed: every row, or those of `split` ('' = all); ER_INPUT when none */
static int select_rows(const manifest *m, const char *man_path, const char *split, int **rows, int *n) {
    *rows = xmalloc((m->n ? m->n : 1) * sizeof(int));
    *n = 0;
    for (int i = 0; i < m->n; i++)
        if (!split[0] || (m->rows[i].split && !strcmp(m->rows[i].split, split))) (*rows)[(*n)++] = i;
    if (*n == 0) return er_fail(ER_INPUT, "%s: no rows%s%s", man_path, split[0] ? " in split " : "", split);
    return ER_OK;
}

/* `embed --baseline colorhist|thumbnail`: no-learning descriptors as an ordinary embedding file */
static int embed_baseline(const char *name, const char *man_path, const char *split, const char *out, int json) {
    baseline_kind kind;
    int rc = baseline_parse(name, &kind);
    if (rc) return rc;
    manifest m;
    if ((rc = manifest_load(man_path, &m))) return rc;
    int *rows = NULL, n = 0, D = baseline_dim(kind);
    emb_set e = {0};
    image im = {0};
    double t0 = now_seconds();
    if (!(rc = select_rows(&m, man_path, split, &rows, &n))) {
        emb_alloc(&e, n, D);
        emb_fill_from_manifest(&e, &m, rows, 1);
        progress pr;
        progress_begin(&pr, "embed", "images", n);
        for (int k = 0; k < n && !rc; k++) {
            char *p = manifest_image_path(&m, rows[k]);
            rc = image_load(p, 3, &im);
            free(p);
            if (!rc) baseline_descriptor(kind, &im, e.x + (size_t)k * D);
            progress_add(&pr, 1);
        }
        progress_end(&pr);
    }
    double dt = now_seconds() - t0;
    if (!rc) {
        e.manifest = xstrdup(man_path);
        e.model = xstrdup(baseline_describe(kind));
        e.distance = xstrdup(baseline_distance(kind));
        rc = emb_save(out, &e);
    }
    if (!rc) {
        if (json) printf("{\"out\": \"%s\", \"n\": %d, \"dim\": %d, \"baseline\": \"%s\", \"distance\": \"%s\", \"seconds\": %.3f}\n", out, n, D, name, e.distance, dt);
        else printf("embed: %d images -> %s (%d-d %s) in %.1f s\n", n, out, D, e.model, dt);
    }
    image_free(&im);
    emb_free(&e);
    free(rows);
    manifest_free(&m);
    return rc;
}

int cmd_embed(int argc, char **argv) {
    if (embed_wants_hybrid(argc, argv)) return embed_hybrid(argc, argv); /* a file from two files: no model, no images */
    char **rest, **sets, *set_help = NULL;
    int nrest, nsets, rc = cli_split_sets(argc, argv, &rest, &nrest, &sets, &nsets); /* --set may repeat */
    const char *model_path = NULL, *arch = NULL, *config = NULL, *man_path = NULL, *out = NULL, *split = "", *device_s = "cpu",
               *precision = "fp32", *baseline = NULL, *fusion = "transformer", *groups = NULL;
    int img = 0, batch = 32, threads = 0, heads = 0, json = 0, scene = 0, max_views = 64, no_prepack = 0;
    arg_spec specs[] = {
        {"model", ARG_STR, &model_path, "encoder weights: encoder.safetensors, a training checkpoint or a timm/MAE ViT file"},
        {"arch", ARG_STR, &arch, "model.arch of a --model file that does not say, e.g. vit_base (docs/models.md)"},
        {"config", ARG_STR, &config, "training config: random-init encoder of that config (when no --model)"},
        OPT_SET(&set_help),
        OPT_MANIFEST(&man_path, "images to embed (CSV manifest)", .required = 1),
        {"split", ARG_STR, &split, "only rows of this split ('' = all)"},
        OPT_OUT(&out, "output embedding file (.safetensors)", .required = 1),
        {"img", ARG_INT, &img, "input side (pos-embed resampled when not the model's)", "[0, 4096]", .def = "the model's"},
        {"batch", ARG_INT, &batch, "images per forward pass", "[1, 65536]"},
        {"heads", ARG_INT, &heads, "attention heads of a timm file", .def = "dim/64"},
        OPT_THREADS(&threads),
        OPT_JSON(&json),
        OPT_DEVICE(&device_s),
        OPT_PRECISION(&precision),
        {"baseline", ARG_STR, &baseline, "a no-learning descriptor instead of an encoder", "colorhist|thumbnail"},
        {"scene", ARG_FLAG, &scene, "one descriptor per case (scene) from its views (cli/embed_scene.h)"},
        {"fusion", ARG_STR, &fusion, "with --scene: the model's scene encoder, or the average of the views", "transformer|mean"},
        {"groups", ARG_STR, &groups, "with --scene: view groups fused separately, e.g. \"0,1;2,3\" (rows' view = \"0+1\", \"2+3\")"},
        {"max-views", ARG_INT, &max_views, "with --scene: most views a case may have", "[1, 65536]"},
        {"no-prepack", ARG_FLAG, &no_prepack, "read the weights as they are (less memory) instead of packing them once for the products (CPU: faster, +50 % of the weights' memory in bf16, +100 % in fp32; same descriptors)"},
    };
    int device = DEV_CPU, prec = ER_PREC_FP32;
    model *net = NULL;
    manifest m = {0};
    emb_set e = {0};
    int *rows = NULL, mloaded = 0;
    float *x = NULL;
    if (!rc) rc = args_parse(nrest, rest, specs, sizeof specs / sizeof *specs,
                    "endoret embed --model CKPT --manifest M --out emb.safetensors [--split S] [--device cpu|cuda] [--precision fp32|bf16]\n"
                    "                  [--set k=v: the keys the file leaves open, e.g. model.layout=nhwc (ResNet), model.heads (ViT)]\n"
                    "       endoret embed --config C [--set k=v ...] --manifest M --out E   (random init)\n"
                    "       endoret embed --model M --scene [--fusion transformer|mean] [--groups \"0,1;2,3\"] --manifest M --out E\n"
                    "       endoret embed --baseline colorhist|thumbnail --manifest M --out E   (no learning)\n"
                    "       endoret embed --hybrid A --hist H --hist-weight W --out E   (learned + colour histogram, cli/embed_hybrid.h)", NULL, NULL);
    if (rc == ARGS_HELP) { rc = ER_OK; goto done; }
    if (rc) goto done;
    progress_quiet(json);
    if ((rc = er_device_parse(device_s, &device)) || (rc = er_precision_parse(precision, &prec))) goto done; /* before any work */
    if (baseline) {
        rc = model_path || config ? er_fail(ER_INPUT, "embed: --baseline replaces --model / --config; give one of them")
                                  : embed_baseline(baseline, man_path, split, out, json);
        goto done;
    }
    if (!model_path && !config) { rc = er_fail(ER_INPUT, "embed: --model (or --config for a random-init encoder) is required"); goto done; }
    if (!scene && (groups || strcmp(fusion, "transformer"))) { rc = er_fail(ER_INPUT, "embed: --fusion and --groups need --scene"); goto done; }
    if (threads > 0) omp_set_num_threads(threads);
    if (model_path) {
        /* --set on a file: the keys its loader leaves open (a ViT's model.heads, a ResNet's
         * model.layout, ...); any other is refused by name, not ignored */
        char heads_kv[32], **lsets = xmalloc((size_t)(nsets + 1) * sizeof *lsets);
        memcpy(lsets, sets, (size_t)nsets * sizeof *lsets);
        snprintf(heads_kv, sizeof heads_kv, "model.heads=%d", heads);
        if (heads > 0) lsets[nsets] = heads_kv;
        rc = model_load(model_path, arch, lsets, nsets + (heads > 0), &net);
        free(lsets);
    } else {
        rc = model_create(arch, config, sets, nsets, &net);
    }
    if (rc) goto done;
    if (img > 0 && (rc = model_set_img(net, img))) goto done;
    /* before the weights are packed and any image read: --scene checks its own batch (the views) */
    if (!scene && (rc = model_forward_check(net, batch, "embed", "--batch or --img"))) goto done;
    if ((rc = model_to_device(net, device))) goto done; /* loaded on the host, moved once */
    model_set_precision(net, prec);
    if (!no_prepack && (rc = model_prepack(net))) goto done; /* inference only: packed once */
    int S = net->img, D = net->dim;
    if ((rc = manifest_load(man_path, &m))) goto done;
    mloaded = 1;
    int n = 0;
    if ((rc = select_rows(&m, man_path, split, &rows, &n))) goto done;
    if (scene) {
        double t0 = now_seconds();
        int skipped = 0;
        embed_scene_opts so = {.fusion = fusion, .groups = groups, .max_views = max_views};
        if ((rc = embed_scenes(net, &m, man_path, rows, n, &so, &e, &skipped))) goto done;
        e.manifest = xstrdup(man_path);
        char what[200], desc[1200];
        model_describe(net, what, sizeof what);
        snprintf(desc, sizeof desc, "%s (%s), %s fusion of each case's views", what, model_path ? model_path : "random init", fusion);
        e.model = xstrdup(desc);
        e.distance = xstrdup("cosine");
        if ((rc = emb_save(out, &e))) goto done;
        double dt = now_seconds() - t0;
        if (json) printf("{\"out\": \"%s\", \"cases\": %d, \"images\": %d, \"dim\": %d, \"fusion\": \"%s\", \"skipped\": %d, \"seconds\": %.3f}\n",
                         out, e.n, n, D, fusion, skipped, dt);
        else printf("embed --scene: %d cases from %d images -> %s (%d-d, %s fusion)%s in %.1f s\n", e.n, n, out, D, fusion,
                    skipped ? " (cases lacking a view of a group skipped)" : "", dt);
        if (skipped && !json) printf("embed --scene: %d (case, group) pairs skipped: a view of the group is missing\n", skipped);
        goto done;
    }
    emb_alloc(&e, n, D);
    emb_fill_from_manifest(&e, &m, rows, 1);
    e.manifest = xstrdup(man_path);
    char what[200], desc[1200];
    model_describe(net, what, sizeof what);
    snprintf(desc, sizeof desc, "%s (%s)", what, model_path ? model_path : "random init");
    e.model = xstrdup(desc);
    e.distance = xstrdup("cosine");
    x = xmalloc((size_t)batch * 3 * S * S * sizeof(float));
    double t0 = now_seconds();
    image src = {0}, dst = {0};
    aug_workspace ws = {0};
    model_input in = model_input_of(net);
    progress pr;
    progress_begin(&pr, "embed", "images", n);
    for (int b0 = 0; b0 < n && !rc; b0 += batch) {
        int B = n - b0 < batch ? n - b0 : batch;
        for (int k = 0; k < B && !rc; k++) {
            char *p = manifest_image_path(&m, rows[b0 + k]);
            rc = image_load(p, 3, &src);
            free(p);
            if (!rc) rc = aug_eval_input(&src, S, in.crop, in.mean, in.std, &ws, &dst);
            if (!rc) memcpy(x + (size_t)k * 3 * S * S, dst.data, (size_t)3 * S * S * sizeof(float));
        }
        if (rc) break;
        rc = model_embed(net, x, B, e.x + (size_t)b0 * D); /* images uploaded once per batch */
        if (!rc) rc = er_device_check(device, "embed");
        progress_add(&pr, B);
    }
    progress_end(&pr);
    image_free(&src);
    image_free(&dst);
    aug_workspace_free(&ws);
    double dt = now_seconds() - t0;
    if (!rc) rc = emb_save(out, &e);
    if (!rc) {
        if (json) printf("{\"out\": \"%s\", \"n\": %d, \"dim\": %d, \"img\": %d, \"seconds\": %.3f, \"img_per_s\": %.2f}\n", out, n, D, S, dt, n / dt);
        else printf("embed: %d images -> %s (%d-d %s, %dx%d) in %.1f s (%.1f img/s)\n", n, out, D, net->arch->what, S, S, dt, n / dt);
    }
    goto done;
done:
    free(x);
    emb_free(&e);
    if (mloaded) {
        manifest_free(&m);
    }
    free(rows);
    model_free(net);
    free(rest);
    free(sets);
    return rc;
}
