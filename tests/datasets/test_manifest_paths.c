/* test_manifest_paths.c — imported paths are relative to the manifest and normalised, and still
 * resolve after the tree moves (issue 33); the path helpers behind it (nn/base/paths.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/image.h"
#include "datasets/importers.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "nn/base/paths.h"
#include "tests/test_util.h"

static void put_png(const char *dir, const char *rel, int c) {
    char *p = path_join(dir, rel), *d = path_dirname(p);
    make_dirs(d);
    image im = {0};
    image_ensure(&im, c, 6, 7);
    for (int i = 0; i < c * 6 * 7; i++) im.data[i] = 0.5f;
    cr_assert_eq(image_save_png(p, &im), ER_OK, "%s", er_msg());
    image_free(&im);
    free(p), free(d);
}

/* a named segment followed by ".." ("kv/../x"): what a normalised path never holds */
static int has_cancelling_dotdot(const char *p) {
    int named = 0;
    for (const char *s = p; *s;) {
        while (*s == '/') s++;
        const char *e = s;
        while (*e && *e != '/') e++;
        size_t n = (size_t)(e - s);
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            if (named) return 1;
        } else if (n && !(n == 1 && s[0] == '.')) named = 1;
        s = e;
    }
    return 0;
}

/* A clone beside a `shared` link to the data (the README's ../shared/data): the manifest keeps the
 * link in its paths ("../../../shared/images/a.png", not the link's target and never "kv/../.."),
 * and after the whole tree moves and the link points at the data's new place, the manifest loads
 * and every path resolves, normalised. */
Test(datasets_paths, imported_manifest_survives_moving_the_tree) {
    const char *root = test_tmpdir();
    char *tree = path_join(root, "tree"), *store = path_join(tree, "store"), *link = path_join(tree, "shared");
    put_png(store, "images/a.png", 3);
    put_png(store, "images/b.png", 3);
    put_png(store, "masks/a.png", 1);
    put_png(store, "masks/b.png", 1);
    cr_assert_eq(symlink("store", link), 0);
    char *clone = path_join(tree, "clone/out"), *src = path_join(tree, "clone/../shared");
    make_dirs(clone);
    char *out = path_join(tree, "clone/out/kv/manifest.csv");
    manifest m;
    cr_assert_eq(import_image_mask(src, out, "polyp", &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 2);
    for (int i = 0; i < m.n; i++) {
        cr_expect_str_eq(m.rows[i].path, i ? "../../../shared/images/b.png" : "../../../shared/images/a.png");
        cr_expect_str_eq(m.rows[i].mask, i ? "../../../shared/masks/b.png" : "../../../shared/masks/a.png");
    }
    cr_assert_eq(manifest_save(out, &m), ER_OK, "%s", er_msg());
    manifest_free(&m);
    /* move the tree, and the data inside it; the link follows the data */
    char *moved = path_join(root, "moved"), *mstore = path_join(moved, "store"), *mstore2 = path_join(moved, "store2");
    char *mlink = path_join(moved, "shared"), *mout = path_join(moved, "clone/out/kv/manifest.csv");
    cr_assert_eq(rename(tree, moved), 0);
    cr_assert_eq(rename(mstore, mstore2), 0);
    cr_assert_eq(unlink(mlink), 0);
    cr_assert_eq(symlink("store2", mlink), 0);
    cr_assert_eq(manifest_load(mout, &m), ER_OK, "%s", er_msg());
    for (int i = 0; i < m.n; i++) {
        char *ip = manifest_image_path(&m, i), *mp = manifest_mask_path(&m, i);
        cr_expect(access(ip, R_OK) == 0, "row %d: %s does not resolve", i, ip);
        cr_expect(access(mp, R_OK) == 0, "row %d: %s does not resolve", i, mp);
        cr_expect(!has_cancelling_dotdot(ip), "row %d: %s", i, ip);
        cr_expect(!has_cancelling_dotdot(mp), "row %d: %s", i, mp);
        free(ip), free(mp);
    }
    manifest_free(&m);
    int nbad = -1;
    cr_expect_eq(data_check_manifest(mout, 1, 0, &nbad), ER_OK, "%s", er_msg());
    cr_expect_eq(nbad, 0);
    free(tree), free(store), free(link), free(clone), free(src), free(out);
    free(moved), free(mstore), free(mstore2), free(mlink), free(mout);
}

Test(datasets_paths, normalize_is_lexical) {
    const char *cases[][2] = {
        {"a/b/../c", "a/c"},          {"out/kv/../../../shared/x.jpg", "../shared/x.jpg"},
        {"./a//b/./", "a/b"},         {"../../a", "../../a"},
        {"a/..", "."},                {"", "."},
        {"/a/../..", "/"},            {"/x/./y/../z", "/x/z"},
        {"../a/../../b", "../../b"},  {"a/b/c/../../..", "."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *n = path_normalize(cases[i][0]);
        cr_expect_str_eq(n, cases[i][1], "'%s'", cases[i][0]);
        free(n);
    }
}

/* ".." after a symbolic link leads to the link target's parent: the clean join keeps the plain
 * path then, and path_relative gives a path that reaches the same file */
Test(datasets_paths, links_before_dotdot_are_not_cancelled) {
    const char *root = test_tmpdir();
    char *deep = path_join(root, "far/away"), *ln = path_join(root, "ln");
    make_dirs(deep);
    put_png(root, "far/x.png", 1);
    cr_assert_eq(symlink(deep, ln), 0); /* ln/.. is far/, not root */
    char *j = path_join_clean(root, "ln/../x.png");
    cr_expect(access(j, R_OK) == 0, "%s", j);
    char *x = path_join(root, "far/x.png"), *from = path_join(root, "ln");
    char *rel = path_relative(from, x), *back = path_join(from, rel);
    cr_expect(access(back, R_OK) == 0, "%s from %s", rel, from);
    free(deep), free(ln), free(j), free(x), free(from), free(rel), free(back);
}
