/* cmd_synth.c — `endoret synth`: render the synthetic multi-view polyp dataset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "datasets/synth.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"

/* A grid of views: one row per scene (first `rows` scenes), one column per view, with the mask
 * outline drawn in green and a label marker in the top-left corner. */
static int write_sheet(const char *path, const synth_config *cfg, int rows) {
    int S = cfg->size, V = cfg->views, gap = 2;
    if (rows > cfg->scenes) rows = cfg->scenes;
    int W = V * (S + gap) + gap, H = rows * (S + gap) + gap;
    uint8_t *px = xcalloc((size_t)W * H * 3, 1);
    memset(px, 255, (size_t)W * H * 3);
    int *labels = xmalloc(sizeof(int) * cfg->scenes);
    synth_labels(cfg->seed, cfg->scenes, labels);
    image img = {0}, msk = {0};
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < V; v++) {
            synth_scene s;
            synth_scene_make(cfg->seed, r, labels[r], &s);
            synth_render_view(&s, v, S, &img, &msk);
            int ox = gap + v * (S + gap), oy = gap + r * (S + gap);
            size_t hw = (size_t)S * S;
            for (int y = 0; y < S; y++)
                for (int x = 0; x < S; x++) {
                    uint8_t *o = px + ((size_t)(oy + y) * W + ox + x) * 3;
                    float m = msk.data[y * S + x];
                    int edge = m > 0 && (x == 0 || y == 0 || x == S - 1 || y == S - 1 || msk.data[y * S + x - 1] == 0 ||
                                         msk.data[y * S + x + 1] == 0 || msk.data[(y - 1) * S + x] == 0 ||
                                         msk.data[(y + 1) * S + x] == 0);
                    for (int k = 0; k < 3; k++) {
                        float val = img.data[k * hw + y * S + x];
                        if (edge) val = k == 1 ? 1.0f : 0.0f;
                        o[k] = (uint8_t)(val < 0 ? 0 : val > 1 ? 255 : val * 255 + 0.5f);
                    }
                }
            /* label marker: a small square in the corner, blue = benign, orange = malignant */
            for (int y = 2; y < 8; y++)
                for (int x = 2; x < 8; x++) {
                    uint8_t *o = px + ((size_t)(oy + y) * W + ox + x) * 3;
                    o[0] = labels[r] ? 255 : 40, o[1] = labels[r] ? 150 : 90, o[2] = labels[r] ? 0 : 255;
                }
        }
    int rc = png_save_u8(path, px, 3, H, W);
    image_free(&img), image_free(&msk);
    free(px), free(labels);
    return rc;
}

int cmd_synth(int argc, char **argv) {
    const char *out = NULL, *sheet = NULL;
    int scenes = 100, views = 4, size = 128, seed = 0, threads = 0, background = 0, sheet_rows = 8,
        json = 0;
    arg_spec specs[] = {
        OPT_OUT(&out, "output folder", .required = 1),
        {"scenes", ARG_INT, &scenes, "number of scenes"},
        {"views", ARG_INT, &views, "views per scene"},
        {"size", ARG_INT, &size, "image side in pixels"},
        OPT_SEED(&seed),
        OPT_THREADS(&threads),
        {"background", ARG_FLAG, &background, "also write one lesion-free view per scene (label none)"},
        {"sheet", ARG_STR, &sheet, "also write a contact sheet PNG (rows = scenes, columns = views)"},
        {"sheet-rows", ARG_INT, &sheet_rows, "scenes on the contact sheet", "[1, 1000]"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret synth --out DIR [--scenes N --views V --size S --seed K]", NULL, NULL);
    if (rc) return rc == ARGS_HELP ? 0 : rc;
    synth_config cfg = {scenes, views, size, (uint64_t)(uint32_t)seed, background, threads};
    double t0 = now_seconds();
    rc = synth_write_dataset(out, &cfg);
    if (rc) return rc;
    double dt = now_seconds() - t0;
    if (sheet && (rc = write_sheet(sheet, &cfg, sheet_rows))) return rc;
    long n = (long)scenes * (views + (background ? 1 : 0));
    if (json)
        printf("{\"out\":\"%s\",\"scenes\":%d,\"views\":%d,\"size\":%d,\"seed\":%d,\"images\":%ld,\"seconds\":%.3f}\n",
               out, scenes, views, size, seed, n, dt);
    else
        printf("synth: %ld views (%d scenes x %d views, %dx%d) -> %s/manifest.csv in %.2f s (%.0f views/s)\n", n,
               scenes, views + (background ? 1 : 0), size, size, out, dt, n / dt);
    return 0;
}
