/* mask_overlay.h — an annotator's lesion mask drawn for the pages as a translucent PNG: the lesion
 * lightly tinted and outlined in cyan, everything else transparent, at the mask's own aspect ratio
 * so the page lays it over the image with the same object-fit and it lines up. Cyan is kept apart
 * from the region evidence's orange-yellow: one is recorded ground truth (where the lesion is), the
 * other what the search matched on. */
#ifndef ENDORET_MASK_OVERLAY_H
#define ENDORET_MASK_OVERLAY_H

#include <stddef.h>
#include <stdint.h>

#include "datasets/image.h"

/* The overlay of a 1-channel mask (lesion where > 0.5) resampled to w x h (nearest), as RGBA pixels
 * (malloc'ed into *rgba): lesion pixels within `line` pixels of a non-lesion pixel are the outline
 * (opaque), other lesion pixels a light tint, the rest transparent. The image border does not count
 * as outside: a lesion cut by the frame is not outlined along the frame. */
void mask_outline_rgba(const image *mask, int w, int h, int line, uint8_t **rgba);
/* The overlay of a decoded mask (1 channel) as a PNG in memory, its longer side at most max_side
 * (keeping the aspect ratio; never enlarged), with an outline about 1/160 of the longer side. */
int mask_overlay_encode(const image *mask, int max_side, uint8_t **png, size_t *len);
/* The same from the mask file at `path`; ER_INPUT (naming the file) when it cannot be read. */
int mask_overlay_png(const char *path, int max_side, uint8_t **png, size_t *len);
/* The same as a "data:image/png;base64,..." URI (the static report); NULL when it cannot be read. */
char *mask_overlay_uri(const char *path, int max_side);

#endif
