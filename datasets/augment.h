/* augment.h — the augmentation pipelines of the papers, on float CHW images, seeded by one
 * Philox stream per sample (so a sample's augmentation is the same whichever thread runs it).
 *
 * Every pipeline takes an RGB source image (and optionally its 1-channel mask), and writes the
 * output image (3 x size x size, ImageNet-normalised unless said) and the mask carried through the
 * same geometry (nearest), or leaves the mask untouched when `mask`/`mask_out` is NULL.
 * `ws` holds the scratch images a pipeline needs; reuse it across samples (no malloc once warm). */
#ifndef ENDORET_AUGMENT_H
#define ENDORET_AUGMENT_H

#include "datasets/image.h"
#include "nn/base/rng.h"

typedef struct {
    image a, b, c, m1, m2;
} aug_workspace;
void aug_workspace_free(aug_workspace *ws);

/* SSCD / EndoFinder "ADVANCED" (spec endofinder_sscd_mae.md 1.6), in order:
 * hflip 0.5 | p .05 rotate 90/180/270 | p .1 text overlay | p .2 emoji overlay | p .05 rotate
 * 0..359 | RandomResizedCrop(size, scale .08-1, ratio 3/4-4/3, bilinear; mask nearest) | p .8
 * ColorJitter(.8,.8,.8,.2) | gray p .2 | p .5 Gaussian blur radius U(1,5) | p .2 JPEG at quality
 * U{0..100} | ImageNet normalise.
 * Deviations, on purpose: the rotation angle is shared by image and mask (the reference samples
 * them separately, a bug); the overlays have no font or emoji files, so "text" is a line of
 * random 5x7 bitmap glyphs and "emoji" a filled face-like disc, with the spec's size, opacity,
 * colour and position distributions. The blur is PIL's GaussianBlur(radius): three box passes. */
int aug_sscd_advanced(rng_t *r, const image *src, const image *mask, int size, aug_workspace *ws,
                      image *out, image *mask_out);
/* EndoFinder-scene train transform (spec 2.5): resize short side to size*256/224, RandomCrop(size),
 * hflip .5, rotation U(-15,15), p .8 jitter(.8,.8,.8,.2), gray .2, p .5 blur kernel 3 with sigma
 * U(.1,2), p .2 JPEG U{0..100}, normalise. */
int aug_scene_train(rng_t *r, const image *src, int size, aug_workspace *ws, image *out);
/* MAE pre-training: RandomResizedCrop(size, scale .2-1, bicubic; mask nearest) + hflip .5. */
int aug_mae(rng_t *r, const image *src, const image *mask, int size, aug_workspace *ws, image *out,
            image *mask_out);
/* "views": what differs between two looks at one lesion, every strength a config key (aug.*):
 * RandomResizedCrop(size, area crop_min-1, ratio 3/4-4/3, bilinear) | rotation U(-rotate, rotate)
 * degrees (corners black) | hflip .5 | vflip p vflip | p jitter_prob ColorJitter(jitter, jitter,
 * jitter, jitter/4) | grey p grey_prob | p blur_prob Gaussian blur sigma U(.1, blur_max) px |
 * p jpeg_prob JPEG at quality U{30..95} | ImageNet normalise. The mask follows the geometry
 * (nearest). No overlays: a scope image has none. The ranges are the aug.* keys' (train/objective_image.c),
 * checked where a value is given. */
typedef struct {
    float crop_min, rotate, vflip, jitter, jitter_prob, grey_prob, blur_prob, blur_max, jpeg_prob;
} aug_view_params;
aug_view_params aug_view_defaults(void);
int aug_views(rng_t *r, const image *src, const image *mask, int size, const aug_view_params *p, aug_workspace *ws,
              image *out, image *mask_out);
/* Evaluation: resize to size x size (bilinear, antialiased) + normalise. */
int aug_eval(const image *src, int size, aug_workspace *ws, image *out);
/* aug_eval with a model's own input rule (nn/models/model.h model_input): the centre square of
 * round(crop * short side), resized to size x size (bilinear), normalised with mean / std. crop 1 with
 * the ImageNet statistics is aug_eval (the same bytes: a square source is resized directly). */
int aug_eval_input(const image *src, int size, float crop, const float mean[3], const float std[3], aug_workspace *ws,
                   image *out);

/* ---- batch-level MixUp / CutMix (ClassyVision ContrastiveMixup "elem" mode) ----
 * x: M images of c*h*w floats. Element i is mixed with probability mix_prob with partner
 * j = M-1-i taken from an unmodified copy; CutMix with probability switch_prob else MixUp, both
 * with lambda ~ Beta(alpha, alpha); CutMix pastes a box of side sqrt(1-lambda)·(H, W) with a
 * uniform centre, clipped, and corrects lambda to 1 - box area / (H W).
 * Outputs lambda[i] (1 = unmixed) and partner[i]. The positives of a mixed image are the images
 * its two sources' copies: with n_instances = M / copies, target t_i = i mod n_instances; soft
 * label y_i = lambda_i e_{t_i} + (1-lambda_i) e_{t_partner}. */
typedef struct {
    float mix_prob, mixup_alpha, cutmix_alpha, switch_prob;
} mixup_config;
extern const mixup_config MIXUP_SSCD; /* 0.05, 2, 2, 0.5 */
void mixup_batch(rng_t *r, const mixup_config *cfg, float *x, int M, int c, int h, int w, float *lambda,
                 int *partner);
/* match[i*M+j] = 1 when the soft labels of i and j overlap (Y Y^T > 0), M = batch, n = M/copies. */
void mixup_match_matrix(const float *lambda, const int *partner, int M, int n_instances, uint8_t *match);
/* Beta(a, a) sample (Marsaglia-Tsang gammas). */
float rng_beta(rng_t *r, float a, float b);

/* ---- PGCon views (spec pgcon_dual_vss.md 1.3-1.7) ---- */
typedef struct {
    int side;   /* centre crop used for the a* argmax (316 / 500 in the reference) */
    int half;   /* half box of the prior crop (50 / 75) */
    int jigsaw; /* centre crop cut into 3x3 tiles (280 / 300 / 400) */
    int prior_out, tile_out, win_out; /* 120, 90, 224 */
} pgcon_geometry;
/* The reference geometry by image size S = min(h, w): S < 500 -> (316, 50, 280 if S < 360 else
 * 300), else (500, 75, 400); images smaller than the reference side scale all three with S. */
pgcon_geometry pgcon_geometry_for(int h, int w);
/* pgcon_geometry_for(h, w) with each field of `set` that is > 0 in place of the reference's (a
 * config's explicit sizes). */
pgcon_geometry pgcon_geometry_with(int h, int w, const pgcon_geometry *set);
typedef struct {
    image prior;      /* 3 x 120 x 120, T_p applied, normalised (WCE mean/std) */
    image tiles;      /* 9 tiles stacked: 27 x 90 x 90 (tile t = channels 3t..3t+2), shuffled */
    int tile_perm[9]; /* tiles[t] came from grid tile tile_perm[t] (column-major index k = 3 col + row) */
    int shared[9];    /* 1 where grid tile k overlaps the prior quadrant (clean tiles) */
    image win;        /* 3 x win_out x win_out: prior box zeroed, T_win, normalised */
    int quadrant;     /* 0 centre, 1 TL, 2 TR, 3 BL, 4 BR */
    int cx, cy;       /* prior centre in the side-crop frame (after clamping) */
} pgcon_views;
extern const float PGCON_MEAN[3], PGCON_STD[3];
/* Argmax of CIELAB a* over the image (first in row-major order on ties). */
void lab_a_argmax(const image *rgb, int *y, int *x);
/* Which views pgcon_make_views makes (the others are left as they were): the bank fill needs the
 * prior view alone, PGCon (not WINCon) no WIN view. The prior's random draws come first and the WIN
 * view draws none, so leaving views out never changes the ones made. */
enum { PGCON_PRIOR = 1, PGCON_TILES = 2, PGCON_WIN = 4, PGCON_ALL = 7 };
int pgcon_make_views(rng_t *r, const image *src, const pgcon_geometry *g, unsigned views, aug_workspace *ws,
                     pgcon_views *v);
void pgcon_views_free(pgcon_views *v);
/* PGCon's linear-evaluation / fine-tuning train transform (spec 1.10): the centre crop and resize of
 * aug_eval_input, colour jitter (brightness 0.4, contrast 0.6) on the [0, 1] pixels, horizontal and
 * vertical flips (p 0.5 each), then the mean / std. */
int aug_pgcon_linear(rng_t *r, const image *src, int size, float crop, const float mean[3], const float std[3],
                     aug_workspace *ws, image *out);

/* ---- mask helpers ----
 * Fraction of each patch x patch cell covered by the mask (mask > 0.5), row-major over the
 * (h/patch) x (w/patch) grid: the input of mask-guided MAE masking. */
void mask_patch_fraction(const image *mask, int patch, float *out);

#endif
