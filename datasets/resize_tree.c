/* resize_tree.c — see resize_tree.h. */
#include "datasets/resize_tree.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/image.h"
#include "nn/base/base.h"
#include "nn/base/paths.h"

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* one image file: shrunk into dst in its own format, or copied as it is when already small enough */
static int resize_one(const char *sp, const char *dp, int mask, const resize_tree_opts *o, const char *buf, size_t len,
                      resize_tree_stats *st) {
    image im = {0}, out = {0};
    int rc = image_decode((const uint8_t *)buf, len, sp, 0, &im);
    if (rc) return rc;
    st->images++;
    st->masks += mask;
    const int shorter = im.h < im.w ? im.h : im.w;
    if (shorter <= o->side) { /* nothing to gain: the original bytes */
        rc = write_file_atomic(dp, buf, len);
        st->bytes_out += rc ? 0 : (int64_t)len;
        image_free(&im);
        return rc;
    }
    const double f = (double)o->side / shorter;
    int h = im.h == shorter ? o->side : (int)lround(im.h * f), w = im.w == shorter ? o->side : (int)lround(im.w * f);
    image_resize(&im, &out, h < 1 ? 1 : h, w < 1 ? 1 : w, mask ? RESIZE_NEAREST : RESIZE_BICUBIC);
    if (image_sniff((const uint8_t *)buf, len) == IMAGE_PNG) {
        rc = image_save_png(dp, &out);
    } else {
        uint8_t *jpg = NULL;
        size_t jl = 0;
        rc = image_encode_jpeg(&out, o->quality, &jpg, &jl);
        if (!rc) rc = write_file_atomic(dp, jpg, jl);
        free(jpg);
    }
    if (!rc) {
        struct stat s;
        st->shrunk++;
        st->bytes_out += stat(dp, &s) ? 0 : (int64_t)s.st_size;
    }
    image_free(&im);
    image_free(&out);
    return rc;
}

static int walk(const char *src, const char *dst, int in_mask, const resize_tree_opts *o, resize_tree_stats *st) {
    int rc = make_dirs(dst);
    if (rc) return rc;
    DIR *d = opendir(src);
    if (!d) return er_fail(ER_INPUT, "%s: cannot open this folder", src);
    /* names sorted: the same order (and the same first error) on every file system */
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n == cap) names = xrealloc(names, sizeof *names * (size_t)(cap = cap ? 2 * cap : 64));
        names[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 0; i < n && !rc; i++) {
        char *sp = path_join(src, names[i]), *dp = path_join(dst, names[i]);
        struct stat s;
        if (lstat(sp, &s)) {
            rc = er_fail(ER_INPUT, "%s: cannot stat", sp);
        } else if (S_ISDIR(s.st_mode)) {
            rc = walk(sp, dp, in_mask || (o->mask_dir && !strcmp(names[i], o->mask_dir)), o, st);
        } else if (!S_ISREG(s.st_mode)) {
            st->skipped++; /* symbolic links, FIFOs: never followed */
        } else {
            char *buf = NULL;
            size_t len = 0;
            rc = read_file(sp, &buf, &len);
            if (!rc) {
                st->bytes_in += (int64_t)len;
                if (image_name_ok(names[i])) {
                    rc = resize_one(sp, dp, in_mask, o, buf, len, st);
                } else {
                    rc = write_file_atomic(dp, buf, len);
                    st->copied += !rc;
                    st->bytes_out += rc ? 0 : (int64_t)len;
                }
            }
            free(buf);
        }
        free(sp);
        free(dp);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* dst as an absolute path with its existing part resolved (symbolic links followed), before
 * anything is made: the nearest folder of it that exists, then the components still to be made */
static int resolve_out(const char *dst, char *rd) {
    char cwd[PATH_MAX], *abs;
    if (dst[0] == '/') {
        abs = xstrdup(dst);
    } else {
        if (!getcwd(cwd, sizeof cwd)) return er_fail(ER_RUNTIME, "data resize: cannot read the working folder");
        abs = path_join(cwd, dst);
    }
    char *head = path_normalize(abs), suffix[PATH_MAX] = "";
    free(abs);
    for (;;) {
        if (realpath(head, rd)) break;
        char *slash = strrchr(head, '/'), tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s%s", slash ? slash : "/", suffix);
        snprintf(suffix, sizeof suffix, "%s", tmp);
        if (!slash || slash == head) {
            snprintf(rd, PATH_MAX, "%s", "");
            break;
        }
        *slash = 0;
    }
    free(head);
    const size_t lr = strlen(rd);
    snprintf(rd + lr, PATH_MAX - lr, "%s", lr > 0 && rd[lr - 1] == '/' && suffix[0] == '/' ? suffix + 1 : suffix);
    return ER_OK;
}

int resize_tree(const char *src, const char *dst, const resize_tree_opts *o, resize_tree_stats *st) {
    memset(st, 0, sizeof *st);
    if (o->side < 8 || o->side > IMAGE_MAX_SIDE) return er_fail(ER_INPUT, "--side %d: expected 8..%d", o->side, IMAGE_MAX_SIDE);
    if (o->quality < 1 || o->quality > 100) return er_fail(ER_INPUT, "--quality %d: expected 1..100", o->quality);
    struct stat s;
    if (stat(src, &s) || !S_ISDIR(s.st_mode)) return er_fail(ER_INPUT, "%s: no such folder", src);
    char rs[PATH_MAX], rd[PATH_MAX];
    if (!realpath(src, rs)) return er_fail(ER_INPUT, "%s: cannot resolve this folder", src);
    int rc = resolve_out(dst, rd);
    if (rc) return rc;
    const size_t ls = strlen(rs);
    if (!strncmp(rd, rs, ls) && (ls == 1 || rd[ls] == '/' || rd[ls] == 0)) /* ls 1: SRC is / */
        return er_fail(ER_INPUT, "%s: the output folder is %s %s (it would be read while written)", dst,
                       rd[ls] ? "inside the source" : "the source", src);
    return walk(src, dst, 0, o, st);
}
