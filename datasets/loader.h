/* loader.h — threaded batch loader: decode + augment in worker threads, a ring of `prefetch`
 * reusable batch buffers, epoch shuffling, drop-last, multi-view (scene) batches, pairs/triplets.
 *
 * Determinism: item order comes from rng_stream(RNG_SHUFFLE, epoch, 0), pair/triplet/view picks
 * from rng_stream(RNG_SAMPLING, epoch, item), and the augmentation of output image k of the epoch
 * from rng_stream(RNG_AUGMENT, epoch, k). No random number depends on which thread did the work
 * or when, so a batch's bytes are the same for any thread count.
 *
 * Batch layout (copy-major, as SSCD's repeated augmentation expects, target t_i = i mod N):
 *   image index = copy * (items * per_item) + item * per_item + v
 * where per_item is 1 (single), V (scene views), 2 (pairs: anchor, positive) or 3 (triplets:
 * anchor, positive, negative). Positives share the scene when scenes are known, else the label;
 * negatives differ in it. */
#ifndef ENDORET_LOADER_H
#define ENDORET_LOADER_H

#include <stdint.h>

#include "datasets/manifest.h"

typedef enum { LOADER_AUG_EVAL, LOADER_AUG_SSCD, LOADER_AUG_SCENE, LOADER_AUG_MAE } loader_aug;
typedef enum { LOADER_SINGLE, LOADER_SCENES, LOADER_PAIRS, LOADER_TRIPLETS } loader_grouping;

typedef struct {
    int batch;      /* items per batch */
    int size;       /* output side (square) */
    int threads;    /* worker threads (>= 1) */
    int prefetch;   /* batches decoded ahead (>= 1) */
    int copies;     /* augmented copies of each image (2 for SSCD) */
    int drop_last, shuffle, with_masks;
    int views;      /* LOADER_SCENES: views per scene (0 = smallest scene's count) */
    int fast_decode;/* let libjpeg shrink by 1/2..1/8 while the short side stays >= size */
    uint64_t seed;
    loader_aug aug;
    loader_grouping grouping;
    const char *split; /* keep only rows of this split (NULL = all) */
} loader_config;
loader_config loader_defaults(void);

typedef struct {
    int epoch, index;          /* batch `index` of `epoch` */
    int items, per_item, copies, n_images, size;
    float *images;             /* [n_images, 3, size, size] */
    float *masks;              /* [n_images, 1, size, size] (values 0/1) or NULL */
    int *rows, *labels, *scenes; /* per image: manifest row, label id, scene id (-1 unknown) */
} loader_batch;

typedef struct loader loader;

int loader_open(loader **L, const manifest *m, const loader_config *cfg);
/* Items and batches of the current epoch (valid after loader_start_epoch). */
int loader_num_batches(const loader *L);
int loader_num_items(const loader *L);
/* Label names (sorted) for the ids in loader_batch.labels. */
const char *loader_label_name(const loader *L, int id);
int loader_start_epoch(loader *L, int epoch);
/* Next batch of the epoch: ER_OK with *b set, or ER_OK with *b = NULL at the end of the epoch,
 * or an error (a file that cannot be decoded, named in the message). The batch stays valid until
 * the next call. */
int loader_next(loader *L, const loader_batch **b);
void loader_close(loader *L);

/* Throughput of one epoch (or max_batches > 0 batches) from a manifest: images/s delivered, i.e.
 * read + decode + augmentation + batch copy, wall clock from epoch start (`endoret data bench`;
 * the building block for `endoret bench loader`). */
int loader_bench(const char *manifest_path, const loader_config *cfg, int max_batches, double *images_per_s,
                 int *n_images);

#endif
