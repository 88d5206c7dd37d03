/* region_overlay.h — a region-evidence map (region_evidence.h) drawn as a small translucent PNG, one
 * pixel per feature position, as a data: URI the page lays over the thumbnail (the browser scales it
 * smoothly). The page stays self-contained: no script, no side file. */
#ifndef ENDORET_REGION_OVERLAY_H
#define ENDORET_REGION_OVERLAY_H

#include <stddef.h>
#include <stdint.h>

/* RGBA pixels (w x h, row-major) -> a PNG file in memory (zlib, no filter), malloc'ed into *out. */
int png_encode_rgba(const uint8_t *rgba, int w, int h, uint8_t **out, size_t *len);
/* "data:image/png;base64,..." of map (gh x gw): scaled to [0, 1] by its own minimum and maximum
 * (a flat map is drawn clear), then transparent below 0.5 and rising to a warm colour at 1 (alpha
 * 0.7), so only the strongest half of the range is tinted. NULL when the map is empty. */
char *region_overlay_uri(const float *map, int gh, int gw);
/* The position of the map's maximum (row-major index). */
int region_peak(const float *map, int n);

#endif
