/* resize_check.c — dump decoded Kvasir-SEG images and endoret's 224x224 resizes as raw float32 to
 * a folder, for resize_check.py to compare with torch's antialiased interpolate. Not part of the
 * build or the suite (real images, outputs never committed). Build and run from the repo root:
 *   gcc -O2 -I. tests/datasets/ref/resize_check.c datasets/image.c datasets/png_io.c \
 *       datasets/jpeg_io.c datasets/image_load.c datasets/resize.c nn/base/base.c -lpng -ljpeg -lm \
 *       -o /tmp/resize_check && /tmp/resize_check /work/shared/data/kvasir_seg/images /tmp/rc 20
 *   /usr/bin/python3 tests/datasets/ref/resize_check.py /tmp/rc */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "nn/base/base.h"

static void dump(const char *dir, const char *name, const image *im) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s_%dx%dx%d.f32", dir, name, im->c, im->h, im->w);
    FILE *f = fopen(p, "wb");
    fwrite(im->data, sizeof(float), (size_t)im->c * im->h * im->w, f);
    fclose(f);
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    make_dirs(argv[2]);
    DIR *d = opendir(argv[1]);
    char *names[2000];
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 2000)
        if (strstr(e->d_name, ".jpg")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    int want = atoi(argv[3]);
    image im = {0}, out = {0};
    for (int i = 0; i < n && i < want; i++) {
        char *p = path_join(argv[1], names[i]), tag[64];
        if (image_load(p, 3, &im)) return fprintf(stderr, "%s\n", er_msg()), 1;
        snprintf(tag, sizeof tag, "%03d_src", i);
        dump(argv[2], tag, &im);
        image_resize(&im, &out, 224, 224, RESIZE_BILINEAR);
        snprintf(tag, sizeof tag, "%03d_bilinear", i);
        dump(argv[2], tag, &out);
        image_resize(&im, &out, 224, 224, RESIZE_BICUBIC);
        snprintf(tag, sizeof tag, "%03d_bicubic", i);
        dump(argv[2], tag, &out);
        free(p);
    }
    return 0;
}
