/* image.c — storage of float CHW images (see image.h). */
#include "datasets/image.h"

#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

void image_ensure(image *im, int c, int h, int w) {
    size_t n = (size_t)c * h * w;
    if (n > im->cap || !im->data) {
        free(im->data);
        im->data = xmalloc_aligned((n ? n : 1) * sizeof(float));
        im->cap = n;
    }
    im->c = c, im->h = h, im->w = w;
}

void image_free(image *im) {
    free(im->data);
    memset(im, 0, sizeof *im);
}

void image_copy(image *dst, const image *src) {
    image_ensure(dst, src->c, src->h, src->w);
    memcpy(dst->data, src->data, (size_t)src->c * src->h * src->w * sizeof(float));
}
