/* importers.h — turn common public dataset layouts into manifests.
 *   class-folders : SRC/<class>/...image        label = class folder name (Kvasir, HyperKvasir,
 *                   CAD-CAP, KID style); images found recursively under each class folder.
 *   image-mask    : SRC/images/<stem>.*  +  SRC/masks/<stem>.*  matched by file stem
 *                   (Kvasir-SEG, CVC-ClinicDB style); an image without a mask is an error.
 *   scenes        : SRC/<scene>/<view images>   or   SRC/<class>/<scene>/<view images>
 *                   (one folder per lesion holding its views/frames; views numbered in name order).
 * Files are taken in byte order of their names, so the manifest is deterministic. Image files are
 * recognised by extension (.png .jpg .jpeg, any case); `data check` then verifies their content.
 * Paths are written relative to the folder of `out_path`. */
#ifndef ENDORET_IMPORTERS_H
#define ENDORET_IMPORTERS_H

#include "datasets/manifest.h"

int import_class_folders(const char *src, const char *out_path, manifest *m);
int import_image_mask(const char *src, const char *out_path, const char *label, manifest *m);
int import_scenes(const char *src, const char *out_path, manifest *m);

/* `endoret data check`: decode every image and mask of a manifest (threads: 0 = OpenMP default),
 * print counts and problems; ER_INPUT naming the first bad file when there is any. */
int data_check_manifest(const char *path, int threads, int verbose, int *nbad_out);

#endif
