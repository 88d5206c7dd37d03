/* resize_tree.h — a smaller copy of a dataset folder (`endoret data resize`): every image of SRC
 * written to the same relative path under DST with its shorter side brought down to `side` (never
 * up), in its own format (PNG stays lossless PNG, JPEG is re-encoded at `quality`), so manifests,
 * labels.csv files and importers read the copy exactly as they read the original. Images in a
 * folder named `mask_dir` (a segmentation mask: values must stay the label values) are resized by
 * nearest neighbour, others with the antialiased bicubic filter of the loaders (image_resize). Every
 * other regular file (csv, txt, md) is copied byte for byte. Symbolic links and special files are
 * skipped and counted. Each file is written to a temp name and renamed; SRC is only read.
 * Why: endoscopy frames are decoded again on every epoch, and full-size frames cost more decode than
 * a 224-px model needs; a GPU machine reached through a size-limited copy needs the smaller set. */
#ifndef ENDORET_RESIZE_TREE_H
#define ENDORET_RESIZE_TREE_H

#include <stdint.h>

typedef struct {
    int side;             /* target of the shorter side, >= 8 */
    int quality;          /* JPEG quality, 1..100 */
    const char *mask_dir; /* images under a folder of this name are masks (nearest neighbour) */
} resize_tree_opts;

typedef struct {
    int images, masks, shrunk, copied, skipped; /* shrunk: images made smaller (the others kept their size) */
    int64_t bytes_in, bytes_out;
} resize_tree_stats;

/* SRC -> DST (created; must not be SRC or inside it). ER_OK, or ER_INPUT naming the file or folder
 * (a corrupt image, a DST inside SRC, a bad option), ER_RUNTIME on a write failure. */
int resize_tree(const char *src, const char *dst, const resize_tree_opts *o, resize_tree_stats *st);

#endif
