/* test_copies.c — `data copies` (copy-detection query sets) and `data split --holdout-fold / --ratios`. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/copies.h"
#include "datasets/image.h"
#include "datasets/manifest.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

int cmd_data(int argc, char **argv);

/* A textured RGB source (so crops, flips and rotations change the pixels). */
static void write_src(const char *dir, const char *name, int h, int w, int salt) {
    char *p = path_join(dir, name);
    image im = {0};
    image_ensure(&im, 3, h, w);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                IMG_AT(&im, c, y, x) = (float)(((x * (c + 1) + y * 3 + salt * 17) % 37) / 36.0);
    cr_assert_eq(image_save_png(p, &im), ER_OK, "%s", er_msg());
    image_free(&im);
    free(p);
}

/* root/src/{a,b,c}.png and root/src/m.csv: a, c in split test; b in train; labels x, y, x */
static char *make_source(const char *root) {
    char *src = path_join(root, "src");
    make_dirs(src);
    write_src(src, "a.png", 40, 52, 1);
    write_src(src, "b.png", 33, 30, 2);
    write_src(src, "c.png", 48, 41, 3);
    char *m = path_join(src, "m.csv");
    const char *txt = "path,label,split\na.png,x,test\nb.png,y,train\nc.png,x,test\n";
    cr_assert_eq(write_file_atomic(m, txt, strlen(txt)), ER_OK);
    free(src);
    return m;
}

static copies_config config(const char *man, const char *out) {
    copies_config c = {0};
    c.manifest = man;
    c.split = "test";
    c.out_dir = out;
    c.copies = 3;
    c.seed = 11;
    c.preset = copy_preset_find("copydet");
    c.size = 32;
    c.threads = 1;
    return c;
}

static int same_file(const char *a, const char *b) {
    char *x, *y;
    size_t nx, ny;
    cr_assert_eq(read_file(a, &x, &nx), ER_OK, "%s", er_msg());
    cr_assert_eq(read_file(b, &y, &ny), ER_OK, "%s", er_msg());
    int same = nx == ny && !memcmp(x, y, nx);
    free(x), free(y);
    return same;
}

Test(datasets_copies, count_and_manifest) {
    const char *root = test_tmpdir();
    char *man = make_source(root), *out = path_join(root, "copies");
    copies_config c = config(man, out);
    int n = 0;
    cr_assert_eq(copies_make(&c, &n), ER_OK, "%s", er_msg());
    cr_assert_eq(n, 2);
    char *mp = path_join(out, "manifest.csv");
    manifest m;
    cr_assert_eq(manifest_load(mp, &m), ER_OK, "%s", er_msg());
    cr_assert_eq(m.n, 2 * (1 + 3));
    const char *srcs[2] = {"a", "c"};
    for (int s = 0; s < 2; s++) {
        /* view 0: the original by absolute path */
        const manifest_row *o = &m.rows[s * 4];
        char *want = path_join(root, s ? "src/c.png" : "src/a.png"), abs_want[PATH_MAX];
        cr_assert(realpath(want, abs_want));
        cr_assert_str_eq(o->path, abs_want);
        cr_assert_str_eq(o->view, "0");
        cr_assert_str_eq(o->scene, srcs[s]);
        cr_assert_str_eq(o->label, "x");
        cr_assert_str_eq(o->split, "test");
        free(want);
        for (int v = 1; v <= 3; v++) {
            const manifest_row *r = &m.rows[s * 4 + v];
            char vs[8], rel[64];
            snprintf(vs, sizeof vs, "%d", v);
            snprintf(rel, sizeof rel, "images/%s_c%d.jpg", srcs[s], v);
            cr_assert_str_eq(r->view, vs);
            cr_assert_str_eq(r->scene, srcs[s]);
            cr_assert_str_eq(r->path, rel);
            cr_assert_str_eq(r->label, "x");
            cr_assert_eq(r->mask, NULL);
            char *ip = manifest_image_path(&m, s * 4 + v);
            image im = {0};
            cr_assert_eq(image_load(ip, 0, &im), ER_OK, "%s", er_msg());
            cr_assert_eq(im.c, 3);
            cr_assert_eq(im.h, 32);
            cr_assert_eq(im.w, 32);
            image_free(&im);
            free(ip);
        }
    }
    /* nothing was made for the train row */
    char *b1 = path_join(out, "images/b_c1.jpg");
    struct stat st;
    cr_assert_neq(stat(b1, &st), 0);
    /* copies.csv: header + one line per copy */
    char *cp = path_join(out, "copies.csv"), *txt;
    size_t len;
    cr_assert_eq(read_file(cp, &txt, &len), ER_OK);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += txt[i] == '\n';
    cr_assert_eq(lines, 1 + 2 * 3);
    cr_assert(strstr(txt, "path,scene,view,source,quality,ops\n") == txt);
    cr_assert(strstr(txt, "jpeg "));
    free(txt), free(cp), free(b1);
    manifest_free(&m);
    free(mp), free(man), free(out);
}

Test(datasets_copies, deterministic_and_thread_independent) {
    const char *root = test_tmpdir();
    char *man = make_source(root);
    char *o1 = path_join(root, "o1"), *o2 = path_join(root, "o2"), *o3 = path_join(root, "o3");
    copies_config c = config(man, o1);
    cr_assert_eq(copies_make(&c, NULL), ER_OK, "%s", er_msg());
    c.out_dir = o2;
    c.threads = 2;
    cr_assert_eq(copies_make(&c, NULL), ER_OK, "%s", er_msg());
    c.out_dir = o3;
    c.seed = 12;
    cr_assert_eq(copies_make(&c, NULL), ER_OK, "%s", er_msg());
    int differ = 0;
    const char *names[] = {"images/a_c1.jpg", "images/a_c2.jpg", "images/a_c3.jpg",
                           "images/c_c1.jpg", "images/c_c2.jpg", "images/c_c3.jpg", "copies.csv", "manifest.csv"};
    for (int i = 0; i < 8; i++) {
        char *p1 = path_join(o1, names[i]), *p2 = path_join(o2, names[i]), *p3 = path_join(o3, names[i]);
        cr_assert(same_file(p1, p2), "%s differs between runs with the same seed", names[i]);
        if (i < 6) differ += !same_file(p1, p3);
        free(p1), free(p2), free(p3);
    }
    cr_assert_gt(differ, 3, "another seed changed only %d of 6 copies", differ);
    /* the copies of one source differ from each other */
    char *a1 = path_join(o1, names[0]), *a2 = path_join(o1, names[1]);
    cr_assert(!same_file(a1, a2));
    free(a1), free(a2);
    free(man), free(o1), free(o2), free(o3);
}

Test(datasets_copies, copy_make_ranges) {
    image src = {0}, out = {0};
    image_ensure(&src, 3, 30, 45);
    for (size_t i = 0; i < (size_t)3 * 30 * 45; i++) src.data[i] = (float)(i % 11) / 10.0f;
    copy_workspace ws = {0};
    const char *presets[] = {"light", "copydet", "strong"};
    for (int p = 0; p < 3; p++) {
        const copy_preset *pr = copy_preset_find(presets[p]);
        cr_assert(pr);
        for (int k = 0; k < 40; k++) {
            rng_t r = rng_make(5, (uint64_t)k);
            char ops[256];
            int q = -1;
            cr_assert_eq(copy_make(&r, pr, &src, 24, &ws, &out, &q, ops, sizeof ops), ER_OK, "%s", er_msg());
            cr_assert_eq(out.c, 3);
            cr_assert_eq(out.h, 24);
            cr_assert_eq(out.w, 24);
            cr_assert(q >= pr->q_lo && q <= pr->q_hi);
            for (size_t i = 0; i < (size_t)3 * 24 * 24; i++) cr_assert(out.data[i] >= 0 && out.data[i] <= 1);
            cr_assert(strstr(ops, "crop ") && strstr(ops, "jpeg "), "ops '%s'", ops);
        }
    }
    cr_assert_eq(copy_preset_find("nope"), NULL);
    image gray = {0};
    image_ensure(&gray, 1, 8, 8);
    rng_t r = rng_make(1, 1);
    int q;
    cr_assert_eq(copy_make(&r, copy_preset_find("copydet"), &gray, 16, &ws, &out, &q, NULL, 0), ER_INPUT);
    image_free(&gray), image_free(&src), image_free(&out);
    copy_workspace_free(&ws);
}

Test(datasets_copies, bad_input_one_clear_error) {
    const char *root = test_tmpdir();
    char *man = make_source(root), *out = path_join(root, "bad");
    copies_config c = config(man, out);
    c.copies = 0;
    cr_assert_eq(copies_make(&c, NULL), ER_INPUT);
    cr_assert(strstr(er_msg(), "--copies"), "%s", er_msg());
    c = config(man, out);
    c.split = "val";
    cr_assert_eq(copies_make(&c, NULL), ER_INPUT);
    cr_assert(strstr(er_msg(), "no rows in split val"), "%s", er_msg());
    c = config("/nonexistent/m.csv", out);
    cr_assert_eq(copies_make(&c, NULL), ER_INPUT);
    cr_assert(strstr(er_msg(), "/nonexistent/m.csv"), "%s", er_msg());
    /* a missing source image: the error names it */
    char *a = path_join(root, "src/a.png");
    cr_assert_eq(unlink(a), 0);
    c = config(man, out);
    cr_assert_eq(copies_make(&c, NULL), ER_INPUT);
    cr_assert(strstr(er_msg(), "a.png"), "%s", er_msg());
    /* a corrupt source image: the error names it */
    cr_assert_eq(write_file_atomic(a, "not a png", 9), ER_OK);
    cr_assert_eq(copies_make(&c, NULL), ER_INPUT);
    cr_assert(strstr(er_msg(), "a.png"), "%s", er_msg());
    /* CLI: unknown preset */
    char *argv[] = {"data", "copies", "--manifest", man, "--out", out, "--preset", "wild", NULL};
    cr_assert_eq(cmd_data(8, argv), ER_INPUT);
    cr_assert(strstr(er_msg(), "wild"), "%s", er_msg());
    free(a), free(man), free(out);
}

Test(datasets_copies, split_holdout_fold) {
    const char *root = test_tmpdir();
    char *man = path_join(root, "m.csv"), *out = path_join(root, "s.csv"), *folds = path_join(root, "f.csv");
    char txt[4096] = "path,label\n";
    for (int i = 0; i < 50; i++) snprintf(txt + strlen(txt), sizeof txt - strlen(txt), "i%d.png,polyp\n", i);
    cr_assert_eq(write_file_atomic(man, txt, strlen(txt)), ER_OK);
    char *a1[] = {"data", "split", man, "--folds", "5", "--seed", "3", "--holdout-fold", "2", "--out", out, NULL};
    cr_assert_eq(cmd_data(11, a1), ER_OK, "%s", er_msg());
    char *a2[] = {"data", "split", man, "--folds", "5", "--seed", "3", "--out", folds, NULL};
    cr_assert_eq(cmd_data(9, a2), ER_OK, "%s", er_msg());
    manifest s, f;
    cr_assert_eq(manifest_load(out, &s), ER_OK);
    cr_assert_eq(manifest_load(folds, &f), ER_OK);
    int ntest = 0;
    for (int i = 0; i < 50; i++) {
        int in2 = !strcmp(f.rows[i].split, "fold2");
        cr_assert_str_eq(s.rows[i].split, in2 ? "test" : "train");
        ntest += in2;
    }
    cr_assert_eq(ntest, 10);
    manifest_free(&s), manifest_free(&f);
    char *a3[] = {"data", "split", man, "--folds", "5", "--holdout-fold", "5", "--out", out, NULL};
    cr_assert_eq(cmd_data(9, a3), ER_INPUT);
    cr_assert(strstr(er_msg(), "--holdout-fold"), "%s", er_msg());
    free(man), free(out), free(folds);
}

/* --ratios: named stratified shares (PGCon's CAD-CAP 80:10:10), seeded; bad lists name the option */
Test(datasets_copies, split_ratios) {
    const char *root = test_tmpdir();
    char *man = path_join(root, "m.csv"), *out = path_join(root, "r.csv"), *again = path_join(root, "r2.csv");
    char txt[8192] = "path,label\n";
    for (int i = 0; i < 100; i++) snprintf(txt + strlen(txt), sizeof txt - strlen(txt), "i%d.png,%s\n", i, i % 4 ? "normal" : "lesion");
    cr_assert_eq(write_file_atomic(man, txt, strlen(txt)), ER_OK);
    char *a1[] = {"data", "split", man, "--ratios", "train:80,val:10,test:10", "--seed", "4", "--out", out, NULL};
    cr_assert_eq(cmd_data(9, a1), ER_OK, "%s", er_msg());
    char *a2[] = {"data", "split", man, "--ratios", "train:80,val:10,test:10", "--seed", "4", "--out", again, NULL};
    cr_assert_eq(cmd_data(9, a2), ER_OK, "%s", er_msg());
    manifest s, t;
    cr_assert_eq(manifest_load(out, &s), ER_OK);
    cr_assert_eq(manifest_load(again, &t), ER_OK);
    int count[3][2] = {{0}};
    for (int i = 0; i < 100; i++) {
        cr_assert_str_eq(s.rows[i].split, t.rows[i].split, "same seed, same split");
        int k = !strcmp(s.rows[i].split, "train") ? 0 : !strcmp(s.rows[i].split, "val") ? 1 : 2;
        cr_assert(k < 2 || !strcmp(s.rows[i].split, "test"), "%s", s.rows[i].split);
        count[k][!strcmp(s.rows[i].label, "lesion")]++;
    }
    /* 75 normal, 25 lesion: each class 80 / 10 / 10 % up to one row of rounding */
    cr_assert(abs(count[0][0] - 60) <= 1 && abs(count[1][0] - 7) <= 1 && abs(count[2][0] - 7) <= 1, "normal %d %d %d",
              count[0][0], count[1][0], count[2][0]);
    cr_assert(abs(count[0][1] - 20) <= 1 && abs(count[1][1] - 2) <= 1 && abs(count[2][1] - 2) <= 1, "lesion %d %d %d",
              count[0][1], count[1][1], count[2][1]);
    manifest_free(&s), manifest_free(&t);
    char *bad[] = {"data", "split", man, "--ratios", "train:60,val:30", "--out", out, NULL};
    cr_assert_eq(cmd_data(7, bad), ER_INPUT);
    cr_assert(strstr(er_msg(), "--ratios 'train:60,val:30'"), "%s", er_msg());
    char *both[] = {"data", "split", man, "--ratios", "train:50,val:50", "--holdout-fold", "1", "--out", out, NULL};
    cr_assert_eq(cmd_data(9, both), ER_INPUT);
    free(man), free(out), free(again);
}
