/* cmd_data.c — `endoret data import | check | bench`. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/copies.h"
#include "datasets/image.h"
#include "datasets/importers.h"
#include "datasets/kfold.h"
#include "datasets/loader.h"
#include "datasets/manifest.h"
#include "datasets/resize_tree.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/base/progress.h"

static int parse(int argc, char **argv, arg_spec *specs, int n, const char *usage, int want_pos, char ***pos,
                 int *npos) {
    int rc = args_parse(argc, argv, specs, n, usage, pos, npos);
    if (rc) return rc;
    if (*npos != want_pos) {
        free(*pos);
        *pos = NULL;
        return er_fail(ER_INPUT, "%s: expected %d positional argument(s), got %d (usage: %s)", argv[0], want_pos,
                       *npos, usage);
    }
    return ER_OK;
}

static int data_import(int argc, char **argv) {
    const char *layout = NULL, *out = NULL, *label = NULL, *map = NULL;
    seq_import_opts so = seq_import_defaults();
    int views = so.views, min_gap = so.min_gap;
    arg_spec specs[] = {
        {"layout", ARG_STR, &layout, "how SRC is laid out", "class-folders|image-mask|scenes|sequences", .required = 1},
        OPT_OUT(&out, "manifest to write (paths are written relative to its folder)", .required = 1),
        {"label", ARG_STR, &label, "image-mask / sequences layouts: label of every row (that has none)"},
        {"map", ARG_STR, &map, "sequences layout: CSV frame,sequence[,...] or sequence,start,end[,...] for a flat SRC"},
        {"views", ARG_INT, &views, "sequences layout: views per sequence, spread over it (0 = every frame, view = its position)"},
        {"min-gap", ARG_INT, &min_gap, "sequences layout: views at least this many frames apart"},
    };
    char **pos = NULL;
    int npos = 0;
    const char *usage = "endoret data import --layout class-folders|image-mask|scenes|sequences SRC --out manifest.csv "
                        "[--map FRAMES.csv --views V --min-gap G]";
    int rc = parse(argc, argv, specs, sizeof specs / sizeof *specs, usage, 1, &pos, &npos);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    const char *src = pos[0];
    free(pos);
    int seq = !strcmp(layout, "sequences");
    for (int i = 1; !seq && i < argc; i++) {
        const char *own[] = {"--map", "--views", "--min-gap"};
        for (int k = 0; k < 3; k++) {
            size_t n = strlen(own[k]);
            if (!strncmp(argv[i], own[k], n) && (!argv[i][n] || argv[i][n] == '='))
                return er_fail(ER_INPUT, "data import: %s is for --layout sequences only", own[k]);
        }
    }
    manifest m = {0};
    seq_import_stats st = {0};
    if (!strcmp(layout, "class-folders")) rc = import_class_folders(src, out, &m);
    else if (!strcmp(layout, "image-mask")) rc = import_image_mask(src, out, label, &m);
    else if (!strcmp(layout, "scenes")) rc = import_scenes(src, out, &m);
    else if (seq) {
        so.views = views;
        so.min_gap = min_gap;
        so.map = map;
        so.label = label;
        rc = import_sequences(src, out, &so, &m, &st);
    }
    if (!rc) rc = manifest_save(out, &m);
    if (!rc && seq) {
        if (st.nskipped) {
            fprintf(stderr, "data import: skipped %d of %d sequences with fewer than the %d frames that %d views %d "
                    "frame(s) apart need:", st.nskipped, st.sequences, (so.views - 1) * so.min_gap + 1, so.views, so.min_gap);
            for (int i = 0; i < st.nskipped && i < 20; i++)
                fprintf(stderr, "%s %s (%d)", i ? "," : "", st.skipped[i], st.skipped_frames[i]);
            if (st.nskipped > 20) fprintf(stderr, ", ... %d more", st.nskipped - 20);
            fprintf(stderr, "\n");
        }
        if (st.unmapped) fprintf(stderr, "data import: %d frames of %s are in no run of %s (left out)\n", st.unmapped, src, map);
        if (!so.views) printf("data import: %d rows (sequences layout: every frame of %d sequences) -> %s\n", m.n, st.sequences, out);
        else printf("data import: %d rows (sequences layout: %d sequences x %d views from %d frames, %d skipped) -> %s\n", m.n,
                    st.sequences - st.nskipped, so.views, st.frames, st.nskipped, out);
    } else if (!rc) printf("data import: %d rows (%s layout) -> %s\n", m.n, layout, out);
    seq_import_stats_free(&st);
    manifest_free(&m);
    return rc;
}

/* Counts per value of one column, printed "name n, name n". */
static void print_counts(const manifest *m, manifest_field f, const char *what) {
    int *ids, n;
    char **names;
    manifest_field_ids(m, f, &ids, &names, &n);
    int *cnt = xcalloc(n + 1, sizeof(int)), unknown = 0;
    for (int i = 0; i < m->n; i++) {
        if (ids[i] >= 0) cnt[ids[i]]++;
        else unknown++;
    }
    printf("  %-8s", what);
    if (n > 12) printf(" %d distinct", n);
    else
        for (int k = 0; k < n; k++) printf(" %s %d%s", names[k], cnt[k], k + 1 < n || unknown ? "," : "");
    if (unknown) printf(" (none) %d", unknown);
    printf("\n");
    free(cnt);
    manifest_free_labels(ids, names, n);
}

/* Decode every image and mask; report missing, unreadable, corrupt files and size mismatches. */
int data_check_manifest(const char *path, int threads, int verbose, int *nbad_out) {
    manifest m = {0};
    int rc = manifest_load(path, &m);
    if (rc) return rc;
    char **problem = xcalloc(m.n ? m.n : 1, sizeof(char *));
    int nmask = 0;
    progress pr;
    progress_begin(&pr, "data check", "images", m.n);
#pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads()) reduction(+ : nmask)
    {
        image img = {0}, msk = {0};
#pragma omp for schedule(dynamic, 4)
        for (int i = 0; i < m.n; i++) {
            char *ip = manifest_image_path(&m, i), *mp = manifest_mask_path(&m, i);
            int r = image_load(ip, 0, &img);
            nmask += mp != NULL;
            if (!r && mp) {
                r = image_load(mp, 1, &msk);
                if (!r && (msk.w != img.w || msk.h != img.h))
                    r = er_fail(ER_INPUT, "%s: mask is %dx%d but its image %s is %dx%d", mp, msk.w, msk.h, ip, img.w,
                                img.h);
            }
            if (r) problem[i] = xstrdup(er_msg());
            free(ip), free(mp);
            progress_add(&pr, 1);
        }
        image_free(&img), image_free(&msk);
    }
    progress_end(&pr);
    int nbad = 0, first = -1;
    for (int i = 0; i < m.n; i++)
        if (problem[i]) {
            if (first < 0) first = i;
            if (nbad < 20 || verbose) printf("  line %d: %s\n", i + 2, problem[i]);
            nbad++;
        }
    if (nbad > 20 && !verbose) printf("  ... %d more problems (--verbose lists all)\n", nbad - 20);
    printf("%s: %d rows, %d masks, %d problems\n", path, m.n, nmask, nbad);
    print_counts(&m, MF_LABEL, "labels");
    print_counts(&m, MF_SPLIT, "splits");
    print_counts(&m, MF_SCENE, "scenes");
    if (nbad) rc = er_fail(ER_INPUT, "data check: %d bad file(s); first at line %d: %s", nbad, first + 2, problem[first]);
    for (int i = 0; i < m.n; i++) free(problem[i]);
    free(problem);
    manifest_free(&m);
    if (nbad_out) *nbad_out = nbad;
    return rc;
}

static int data_check(int argc, char **argv) {
    int threads = 0, verbose = 0;
    arg_spec specs[] = {
        OPT_THREADS(&threads),
        {"verbose", ARG_FLAG, &verbose, "list every problem"},
    };
    char **pos = NULL;
    int npos = 0;
    int rc = parse(argc, argv, specs, 2, "endoret data check MANIFEST", 1, &pos, &npos);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    const char *path = pos[0];
    free(pos);
    return data_check_manifest(path, threads, verbose, NULL);
}

static int data_bench(int argc, char **argv) {
    loader_config cfg = loader_defaults();
    const char *aug = "sscd", *split = NULL;
    int batches = 0, json = 0, seed = 0;
    arg_spec specs[] = {
        {"batch", ARG_INT, &cfg.batch, "images per batch"},
        {"size", ARG_INT, &cfg.size, "output side"},
        OPT_THREADS(&cfg.threads),
        {"prefetch", ARG_INT, &cfg.prefetch, "batches decoded ahead"},
        {"aug", ARG_STR, &aug, "augmentation", "eval|sscd|scene|mae"},
        {"copies", ARG_INT, &cfg.copies, "augmented copies per image"},
        {"batches", ARG_INT, &batches, "stop after this many batches (0 = one epoch)"},
        {"fast-decode", ARG_FLAG, &cfg.fast_decode, "JPEG DCT downscaling while the short side stays >= size"},
        {"split", ARG_STR, &split, "only rows of this split"},
        OPT_SEED(&seed),
        OPT_JSON(&json),
    };
    char **pos = NULL;
    int npos = 0;
    int rc = parse(argc, argv, specs, sizeof specs / sizeof *specs,
                   "endoret data bench MANIFEST [--batch B --size S --threads T --aug sscd]", 1, &pos, &npos);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    const char *path = pos[0];
    free(pos);
    if (!strcmp(aug, "eval")) cfg.aug = LOADER_AUG_EVAL;
    else if (!strcmp(aug, "sscd")) cfg.aug = LOADER_AUG_SSCD;
    else if (!strcmp(aug, "scene")) cfg.aug = LOADER_AUG_SCENE;
    else cfg.aug = LOADER_AUG_MAE;
    cfg.split = split;
    cfg.seed = (uint64_t)(uint32_t)seed;
    double ips;
    int n;
    rc = loader_bench(path, &cfg, batches, &ips, &n);
    if (rc) return rc;
    if (json)
        printf("{\"manifest\":\"%s\",\"aug\":\"%s\",\"batch\":%d,\"size\":%d,\"threads\":%d,\"images\":%d,"
               "\"images_per_s\":%.1f}\n", path, aug, cfg.batch, cfg.size, cfg.threads, n, ips);
    else
        printf("data bench: %d images, aug %s, %dx%d, batch %d, %d threads: %.1f images/s\n", n, aug, cfg.size,
               cfg.size, cfg.batch, cfg.threads, ips);
    return ER_OK;
}

/* --ratios "train:60,val:40": the names and percentages (summing to 100); *folds = 100 / their gcd
 * and name_of[f] the split of fold f (consecutive folds per name, in the order given). */
static int parse_ratios(const char *text, char names[8][32], int *folds, int name_of[100]) {
    int pct[8], n = 0, sum = 0, g = 100;
    const char *p = text;
    while (*p && n < 8) {
        const char *colon = strchr(p, ':'), *comma = strchr(p, ',');
        if (!colon || (comma && comma < colon) || colon == p || colon - p >= 32) break;
        memcpy(names[n], p, colon - p);
        names[n][colon - p] = 0;
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || v < 1 || v > 100 || (*end && *end != ',')) break;
        pct[n++] = (int)v, sum += (int)v;
        p = *end ? end + 1 : end;
        if (!*end) { p = end; break; }
    }
    if (*p || n < 1 || sum != 100)
        return er_fail(ER_INPUT, "data split: --ratios '%s': need name:percent pairs summing to 100, e.g. train:60,val:40", text);
    for (int i = 0; i < n; i++) {
        int a = g, b = pct[i];
        while (b) { int t = a % b; a = b; b = t; }
        g = a;
    }
    *folds = 100 / g;
    for (int i = 0, f = 0; i < n; i++)
        for (int k = 0; k < pct[i] / g; k++) name_of[f++] = i;
    return ER_OK;
}

/* Write a copy of the manifest whose split column is fold0..fold{K-1}, or, with --holdout-fold F,
 * "test" for the rows of fold F and "train" for all others (a fixed train/test split that
 * `train image` (data.split = train) and `embed --split test` respect), or, with --ratios, named
 * splits of those shares (e.g. PGCon's train:80,val:10,test:10), stratified or grouped as --by. */
static int data_split(int argc, char **argv) {
    const char *out = NULL, *by = "label", *ratios = NULL;
    int folds = 5, seed = 0, holdout = -1, name_of[100];
    char rnames[8][32];
    arg_spec specs[] = {
        {"folds", ARG_INT, &folds, "number of folds"},
        {"by", ARG_STR, &by, "folds stratified by label, or grouped by scene or patient", "label|scene|patient"},
        OPT_SEED(&seed),
        {"holdout-fold", ARG_INT, &holdout, "write split test for this fold and train for the others (-1 = fold names)"},
        {"ratios", ARG_STR, &ratios, "named shares instead of folds, e.g. train:60,val:40 or train:80,val:10,test:10"},
        OPT_OUT(&out, "manifest to write", .required = 1),
    };
    char **pos = NULL;
    int npos = 0;
    const char *usage = "endoret data split MANIFEST --folds K --by label|scene|patient [--holdout-fold F | --ratios train:60,val:40] --out OUT.csv";
    int rc = parse(argc, argv, specs, sizeof specs / sizeof *specs, usage, 1, &pos, &npos);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    const char *path = pos[0];
    free(pos);
    if (ratios && holdout >= 0) return er_fail(ER_INPUT, "data split: --ratios and --holdout-fold exclude each other");
    if (ratios && (rc = parse_ratios(ratios, rnames, &folds, name_of))) return rc;
    if (!ratios && folds < 2) return er_fail(ER_INPUT, "data split: --folds %d: need at least 2 folds", folds);
    if (holdout < -1 || holdout >= folds)
        return er_fail(ER_INPUT, "data split: --holdout-fold %d is not a fold of 0..%d (or -1)", holdout, folds - 1);
    manifest_field f = !strcmp(by, "label") ? MF_LABEL : !strcmp(by, "scene") ? MF_SCENE : MF_PATIENT;
    manifest m = {0};
    if ((rc = manifest_load(path, &m))) return rc;
    int *ids, n, *fold = xmalloc(sizeof(int) * (m.n ? m.n : 1));
    char **names;
    manifest_field_ids(&m, f, &ids, &names, &n);
    if (f != MF_LABEL && n == 0) /* every row its own group: a scene or patient would not be kept together */
        rc = er_fail(ER_INPUT, "data split --by %s: %s has no '%s' column (or it is empty on every row)", by, path, by);
    if (!rc) rc = f == MF_LABEL ? kfold_stratified(ids, m.n, folds, (uint64_t)(uint32_t)seed, fold)
                       : kfold_grouped(ids, m.n, folds, (uint64_t)(uint32_t)seed, fold);
    if (!rc) {
        char buf[32];
        for (int i = 0; i < m.n; i++) {
            free(m.rows[i].split);
            if (ratios) snprintf(buf, sizeof buf, "%s", rnames[name_of[fold[i]]]);
            else if (holdout >= 0) snprintf(buf, sizeof buf, "%s", fold[i] == holdout ? "test" : "train");
            else snprintf(buf, sizeof buf, "fold%d", fold[i]);
            m.rows[i].split = xstrdup(buf);
        }
        /* paths stay relative to the input manifest's folder: write next to it or use absolute paths */
        char *din = path_dirname(path), *dout = path_dirname(out);
        if (strcmp(din, dout))
            for (int i = 0; i < m.n; i++) {
                char *ip = manifest_image_path(&m, i), *mp = manifest_mask_path(&m, i);
                char abs_i[4096], abs_m[4096];
                if (realpath(ip, abs_i)) free(m.rows[i].path), m.rows[i].path = xstrdup(abs_i);
                if (mp && realpath(mp, abs_m)) free(m.rows[i].mask), m.rows[i].mask = xstrdup(abs_m);
                free(ip), free(mp);
            }
        free(din), free(dout);
        rc = manifest_save(out, &m);
        if (!rc && holdout >= 0) {
            int ntest = 0;
            for (int i = 0; i < m.n; i++) ntest += fold[i] == holdout;
            printf("data split: %d rows, fold %d of %d by %s held out: %d train, %d test -> %s\n", m.n, holdout, folds, by,
                   m.n - ntest, ntest, out);
        } else if (!rc && ratios) printf("data split: %d rows into %s by %s (%d folds) -> %s\n", m.n, ratios, by, folds, out);
        else if (!rc) printf("data split: %d rows into %d folds by %s -> %s\n", m.n, folds, by, out);
    }
    manifest_free_labels(ids, names, n);
    free(fold);
    manifest_free(&m);
    return rc;
}

/* Augmented copies of a split for copy-detection re-ID (datasets/copies.h). */
static int data_copies(int argc, char **argv) {
    copies_config cfg = {0};
    const char *preset = "copydet", *format = "jpg";
    int seed = 0;
    cfg.copies = 5;
    cfg.size = 256;
    arg_spec specs[] = {
        OPT_MANIFEST(&cfg.manifest, "source manifest", .required = 1),
        {"split", ARG_STR, &cfg.split, "only rows of this split", .def = "all rows"},
        OPT_OUT(&cfg.out_dir, "output folder: manifest.csv, copies.csv, images/", .required = 1),
        {"copies", ARG_INT, &cfg.copies, "copies per source image"},
        OPT_SEED(&seed),
        {"preset", ARG_STR, &preset, "augmentation strength: light, copydet or strong"},
        {"size", ARG_INT, &cfg.size, "side of the square copies"},
        {"format", ARG_STR, &format, "image format (jpg: the file is the JPEG re-encoding)", "jpg|png"},
        OPT_THREADS(&cfg.threads),
    };
    const char *usage = "endoret data copies --manifest M --split S --out DIR --copies N --seed S [--preset copydet]";
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, usage, NULL, NULL);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    if (!(cfg.preset = copy_preset_find(preset)))
        return er_fail(ER_INPUT, "data copies: unknown --preset '%s' (%s)", preset, copy_preset_names());
    cfg.png = !strcmp(format, "png");
    cfg.seed = (uint64_t)(uint32_t)seed;
    double t0 = now_seconds();
    int n;
    if ((rc = copies_make(&cfg, &n))) return rc;
    printf("data copies: %d source images x %d copies (preset %s, seed %d, %dx%d %s) -> %s/manifest.csv in %.1f s\n", n,
           cfg.copies, preset, seed, cfg.size, cfg.size, format, cfg.out_dir, now_seconds() - t0);
    return ER_OK;
}

/* A smaller copy of a dataset folder (datasets/resize_tree.h). */
static int data_resize(int argc, char **argv) {
    resize_tree_opts o = {.side = 256, .quality = 95, .mask_dir = "masks"};
    const char *out = NULL;
    arg_spec specs[] = {
        OPT_OUT(&out, "output folder (the same tree, images smaller; must not be inside SRC)", .required = 1),
        {"side", ARG_INT, &o.side, "the shorter side of every image larger than this, in pixels (never enlarged)",
         "[8, 32768]"},
        {"quality", ARG_INT, &o.quality, "JPEG quality of re-encoded JPEG images (PNG stays lossless)", "[1, 100]"},
        {"mask-dir", ARG_STR, &o.mask_dir, "images under folders of this name are masks: nearest-neighbour resizing"},
    };
    const char *usage = "endoret data resize SRC --out DIR [--side 256 --quality 95 --mask-dir masks]";
    char **pos = NULL;
    int npos = 0;
    int rc = parse(argc, argv, specs, sizeof specs / sizeof *specs, usage, 1, &pos, &npos);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    const char *src = pos[0];
    free(pos);
    resize_tree_stats st;
    double t0 = now_seconds();
    if ((rc = resize_tree(src, out, &o, &st))) return rc;
    printf("data resize: %d images (%d masks), %d made smaller (shorter side %d), %d other files copied, %d links or "
           "special files skipped; %.1f MB -> %.1f MB in %.1f s -> %s\n",
           st.images, st.masks, st.shrunk, o.side, st.copied, st.skipped, st.bytes_in / 1e6, st.bytes_out / 1e6,
           now_seconds() - t0, out);
    return ER_OK;
}

int cmd_data(int argc, char **argv) {
    static const arg_sub subs[] = {
        {"import", data_import, "--layout class-folders|image-mask|scenes|sequences SRC --out manifest.csv [--map F --views V]"},
        {"check", data_check, "MANIFEST: decode every file; exit 2 naming the first bad one"},
        {"bench", data_bench, "MANIFEST --batch B --size S --threads T: loader images/s"},
        {"split", data_split, "MANIFEST --folds K --by label|scene|patient [--holdout-fold F | --ratios train:60,val:40] --out OUT.csv"},
        {"copies", data_copies, "--manifest M --split S --out DIR --copies N --seed S [--preset copydet]: copy-detection queries"},
        {"resize", data_resize, "SRC --out DIR [--side 256]: a copy of a dataset folder with smaller images (same names)"},
    };
    return args_dispatch(argc, argv, "endoret data import|check|bench|split|copies|resize ... (endoret data SUB --help)", subs,
                         6);
}
