/* image_load.c — read a file and decode it by its magic bytes (PNG signature or JPEG SOI). */
#include <limits.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "datasets/image.h"
#include "nn/base/base.h"

static const uint8_t PNG_MAGIC[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

image_format image_sniff(const uint8_t *buf, size_t len) {
    if (len >= 8 && !memcmp(buf, PNG_MAGIC, 8)) return IMAGE_PNG;
    if (len >= 3 && buf[0] == 0xFF && buf[1] == 0xD8 && buf[2] == 0xFF) return IMAGE_JPEG;
    return IMAGE_UNKNOWN;
}

int image_name_ok(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

int image_decode(const uint8_t *buf, size_t len, const char *name, int channels, image *out) {
    const image_format f = image_sniff(buf, len);
    if (f == IMAGE_PNG) return image_decode_png(buf, len, name, channels, out);
    if (f == IMAGE_JPEG) return image_decode_jpeg(buf, len, name, channels, out);
    if (len == 0) return er_fail(ER_INPUT, "%s: empty file", name);
    return er_fail(ER_INPUT, "%s: not a PNG or JPEG file (unknown magic bytes)", name);
}

int image_load(const char *path, int channels, image *out) {
    char *buf;
    size_t len;
    int rc = read_file(path, &buf, &len);
    if (rc) return rc;
    rc = image_decode((const uint8_t *)buf, len, path, channels, out);
    free(buf);
    return rc;
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

/* PNG: IHDR follows the signature. JPEG: walk the markers to the first SOFn. */
int image_probe_mem(const uint8_t *b, size_t len, const char *name, int *w, int *h) {
    if (len >= 24 && !memcmp(b, PNG_MAGIC, 8) && !memcmp(b + 12, "IHDR", 4)) {
        uint32_t pw = be32(b + 16), ph = be32(b + 20); /* libpng refuses sides over 2^31 - 1 */
        *w = pw > INT_MAX ? INT_MAX : (int)pw, *h = ph > INT_MAX ? INT_MAX : (int)ph;
        return ER_OK;
    }
    if (len >= 4 && b[0] == 0xFF && b[1] == 0xD8) {
        size_t i = 2;
        while (i + 9 < len) {
            if (b[i] != 0xFF) break;
            uint8_t mk = b[i + 1];
            size_t seg = (size_t)b[i + 2] << 8 | b[i + 3];
            if (mk >= 0xC0 && mk <= 0xCF && mk != 0xC4 && mk != 0xC8 && mk != 0xCC) {
                *h = b[i + 5] << 8 | b[i + 6];
                *w = b[i + 7] << 8 | b[i + 8];
                return ER_OK;
            }
            i += 2 + seg;
        }
    }
    return er_fail(ER_INPUT, "%s: not a PNG or JPEG file, or header truncated", name);
}

int image_probe(const char *path, int *w, int *h) {
    char *buf;
    size_t len;
    int rc = read_file(path, &buf, &len);
    if (rc) return rc;
    rc = image_probe_mem((const uint8_t *)buf, len, path, w, h);
    free(buf);
    return rc;
}
