/* copies.h — copy-detection query sets (SSCD / DISC21 style) from a manifest split.
 *
 * Every source row of the chosen split becomes one scene: view 0 = the original image (its path,
 * made absolute, so nothing derived from it is written), views 1..N = N augmented copies written
 * as image files. `eval reid --emb E --ref-view 0` then measures copy detection: each copy is a
 * query whose only true match is its source.
 *
 * One copy, in order (probabilities and ranges from the preset; every draw comes from one Philox
 * stream per (seed, source row, copy index), so the output is a pure function of those three and
 * does not depend on the thread count):
 *   rot90 (p, k in 1..3, exact transpose-based, the canvas turns with it)
 *   | small rotation (p, angle U(-max, max), bilinear, black corners)
 *   | RandomResizedCrop(area scale, ratio 3/4..4/3) resized to size x size (bilinear, antialiased)
 *   | hflip (p) | vflip (p)
 *   | ColorJitter (p; brightness, contrast, saturation, hue strengths) | grayscale (p)
 *   | Gaussian blur (p, sigma U(lo, hi))
 *   | caption band overlay (p: a dark band along the top or bottom edge, 6-14 % of the side, with
 *     light blocky pseudo-text) | occluding box (p: an opaque rectangle of random colour covering
 *     3-12 % of the area)
 *   | JPEG re-encoding at quality U{q_lo..q_hi} (the file itself for --format jpg; for png the
 *     image is JPEG round-tripped at that quality, then stored losslessly).
 * Training (SSCD ADVANCED) never uses vertical flips, exact rot90 with a turned canvas, the caption
 * band or the occluding box, and its JPEG step is applied with p .2 only. */
#ifndef ENDORET_COPIES_H
#define ENDORET_COPIES_H

#include <stdint.h>

#include "datasets/image.h"
#include "nn/base/rng.h"

typedef struct {
    const char *name;
    float scale_lo, scale_hi;      /* RandomResizedCrop area fraction */
    float p_rot90, p_rotate, max_deg;
    float p_hflip, p_vflip;
    float p_jitter, jit_b, jit_c, jit_s, jit_h;
    float p_gray;
    float p_blur, sigma_lo, sigma_hi;
    float p_caption, p_box;
    int q_lo, q_hi;                /* JPEG quality range */
} copy_preset;

/* "light", "copydet" (default) and "strong"; NULL for an unknown name. */
const copy_preset *copy_preset_find(const char *name);
/* Comma-separated preset names, for messages. */
const char *copy_preset_names(void);

typedef struct {
    image a, b, c; /* scratch, reused across copies */
} copy_workspace;
void copy_workspace_free(copy_workspace *ws);

/* Make one copy of `src` (RGB in [0,1]) into `out` (3 x size x size, [0,1], JPEG re-encoding not
 * yet applied); *quality gets the JPEG quality to encode with; `ops` (may be NULL) receives a
 * short description such as "crop .52|hflip|rot 12.3|jitter|box|jpeg 47". */
int copy_make(rng_t *r, const copy_preset *p, const image *src, int size, copy_workspace *ws, image *out,
              int *quality, char *ops, int ops_len);

typedef struct {
    const char *manifest;  /* source manifest */
    const char *split;     /* rows of this split ("" or NULL = all rows) */
    const char *out_dir;   /* DIR: DIR/manifest.csv, DIR/copies.csv, DIR/images/ */
    int copies;            /* N >= 1 */
    uint64_t seed;
    const copy_preset *preset;
    int size;              /* side of the copies (default 256) */
    int png;               /* 1 = write PNG, 0 = JPEG */
    int threads;           /* 0 = OpenMP default */
} copies_config;

/* Writes the copies, DIR/manifest.csv (path,label,mask,scene,view,patient,split: view 0 = the
 * original by absolute path, views 1..N = the copies by DIR-relative path; scene = the source file's
 * name without extension, or "row<i>-<name>" when two sources share a name) and DIR/copies.csv
 * (path,scene,view,source,quality,ops). *nsrc = source rows used. */
int copies_make(const copies_config *cfg, int *nsrc);

#endif
