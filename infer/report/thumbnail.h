/* thumbnail.h — small in-memory JPEG thumbnails as data: URIs, so a report page embeds its images
 * and works offline with no side files. */
#ifndef ENDORET_THUMBNAIL_H
#define ENDORET_THUMBNAIL_H

#include <stddef.h>
#include <stdint.h>

#include "datasets/image.h"

/* Standard base64 (RFC 4648, with padding); returns a malloc'ed NUL-terminated string. */
char *base64_encode(const uint8_t *data, size_t len);
/* "data:<mime>;base64,<data>", malloc'ed. */
char *data_uri(const char *mime, const uint8_t *data, size_t len);
/* Load an image file, shrink it (antialiased bilinear, aspect kept) so its longer side is at most
 * `side` pixels (never enlarged), and return "data:image/jpeg;base64,...". ER_INPUT naming the
 * file when it cannot be read or decoded. */
int thumbnail_data_uri(const char *path, int side, int quality, char **uri);
/* The same from a decoded image (an uploaded view: no file is involved). */
int thumbnail_data_uri_image(const image *im, int side, int quality, char **uri);
/* "image/png", "image/jpeg" by magic bytes, NULL for anything else. */
const char *image_mime_type(const uint8_t *data, size_t len);

#endif
