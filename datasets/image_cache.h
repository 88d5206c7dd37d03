/* image_cache.h — a split of a manifest held in memory for training, and an eval set.
 *
 * image_cache: the rows of one split decoded once, resized (bilinear, never upscaled) to a given
 * short side and kept as u8 planes (1/4 of the fp32 size), each with its lesion mask (nearest,
 * same size) when the row has one. A trainer converts one image back to fp32 per use and augments
 * it with its own random stream.
 *
 * Why not datasets/loader.h for training: the loader's order and augmentation draws are keyed by
 * (epoch, batch position) and produced ahead by worker threads, while the trainers key every draw
 * by (seed, step, micro, sample) so that a resumed run, any accumulation split and any thread count
 * give the same bytes (train/loop.h). Decoding once and augmenting in the step keeps that contract
 * and avoids decoding every image every epoch on small data sets such as the demo's. The loader
 * remains the tool for streaming large manifests (`endoret data`).
 *
 * eval_set: every row of a manifest split, preprocessed for evaluation (datasets/augment.h
 * aug_eval: resize + centre crop to side x side, normalised), with its scene and view ids. */
#ifndef ENDORET_DATASETS_IMAGE_CACHE_H
#define ENDORET_DATASETS_IMAGE_CACHE_H

#include <stdint.h>

#include "datasets/image.h"

typedef struct {
    int c, h, w;
    uint8_t *px;     /* c*h*w, planes; NULL for the mask of a row without one */
} u8_image;

typedef struct {
    int n;
    u8_image *imgs, *masks;
    int *scene, *view;   /* per row: dense ids of the manifest's scene / view values (sorted order), -1 = none */
    int64_t *pos;        /* per row: the view value itself when every view is a non-negative integer (a frame's
                          * position in its sequence), else its rank in sorted order; -1 = none (manifest_field_values) */
    int *label;          /* per row: dense label id over the whole manifest (sorted order), -1 = none */
    int nlabels;         /* label names in the manifest */
} image_cache;

/* Rows of `split` ('' or NULL = all rows) of the manifest at `path` with short side `side`.
 * ER_INPUT (naming the file) when the split has no rows or an image cannot be read. */
int image_cache_load(image_cache *c, const char *path, const char *split, int side);
/* The cached rows grouped by scene (counting sort, row order kept): scene s (a dense id of c->scene,
 * 0 <= s < *nscene) has rows (*rows)[(*first)[s] .. (*first)[s] + (*count)[s]); rows without a scene
 * are in no group. The three arrays are malloc'd. */
void image_cache_scenes(const image_cache *c, int **first, int **count, int **rows, int *nscene);
/* image_cache_scenes keeping the scenes with at least min_views rows, renumbered 0..*nscene-1 in
 * order (first and count compacted, rows as image_cache_scenes gives them); *nfewer counts the
 * scenes with fewer rows (but one at least). Returns how many scene ids the cache has (0: no
 * scene column). */
int image_cache_scenes_min(const image_cache *c, int min_views, int **first, int **count, int **rows, int *nscene,
                           int *nfewer);
/* Rows 0..n-1 grouped by key[i] in [0, nkeys) (counting sort, row order kept; key < 0: in no group):
 * group k has rows (*rows)[(*first)[k] .. (*first)[k] + (*count)[k]). The arrays are malloc'd. */
void rows_group_by(const int *key, int n, int nkeys, int **first, int **count, int **rows);
/* The cached u8 planes as an fp32 image in [0, 1] (im is resized with image_ensure). */
void image_cache_get(const u8_image *s, image *im);
void image_cache_free(image_cache *c);

/* Rows of `split` of the manifest at `path` as x [n, 3, side, side] (aug_eval) with their scene and
 * view ids (manifest_field_ids). The arrays are malloc'd; ER_INPUT when no row is left. */
int eval_set_load(const char *path, const char *split, int side, float **x, int64_t **scene, int64_t **view,
                  int *n);

/* The labelled rows of `split` of the manifest at `path`, preprocessed by a model's input rule
 * (aug_eval_input: centre crop `crop` of the short side, resize to side, mean / std) as x [n, 3,
 * side, side], with dense label ids (sorted label order over the whole manifest, so two splits of one
 * manifest share them; *nclass of them). Rows without a label are left out. ER_INPUT when none is
 * left. */
int labelled_set_load(const char *path, const char *split, int side, float crop, const float mean[3],
                      const float std[3], float **x, int **label, int *n, int *nclass);

#endif
