/* `endoret serve` against hostile clients (issue #30 F1, F2, F17): a path whose ';' would split it
 * never reaches the page as two files; decompression bombs are refused by their header before any
 * pixel is decoded; temporary folders of killed servers are swept at start. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <utime.h>

#include "datasets/image.h"
#include "datasets/manifest.h"
#include "infer/retrieval/embeddings.h"
#include "infer/report/retrieval_server.h"
#include "infer/report/thumbnail.h"
#include "nn/base/base.h"
#include "tests/test_http.h"
#include "tests/test_util.h"
#include "tests/infer/report/online_fixture.h"

static retrieval_server *start(const retrieval_server_cfg *cfg, int *port) {
    retrieval_server *s;
    cr_assert_eq(retrieval_server_start(cfg, &s, port), ER_OK, "%s", er_msg());
    return s;
}

/* A copy of an in-root image at ROOT/x;/<outside>/secret.png, and a different image at
 * <outside>/secret.png: re-splitting the path at ';' would name the outside file. */
static void plant_semicolon(const char *root, const char *inroot_src, char *inside, size_t n, char *outside, size_t m) {
    const char *out_dir = test_tmpdir();
    snprintf(outside, m, "%s/secret.png", out_dir);
    const uint8_t red[3 * 4 * 4] = {255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255};
    cr_assert_eq(png_save_u8(outside, red, 3, 4, 4), 0, "%s", er_msg());
    char dir[900];
    snprintf(dir, sizeof dir, "%s/x;%s", root, out_dir);
    cr_assert_eq(make_dirs(dir), 0, "%s", er_msg());
    snprintf(inside, n, "%s/secret.png", dir);
    char *data;
    size_t len;
    cr_assert_eq(read_file(inroot_src, &data, &len), 0);
    cr_assert_eq(write_file_atomic(inside, data, len), 0);
    free(data);
}

/* F1: {"paths": ["ROOT/x;/OUT/secret.png"]} names one file under ROOT; the page shows that one
 * image and never the thumbnail of /OUT/secret.png. */
Test(serve_hostile, a_semicolon_in_a_json_path_never_names_a_second_file) { /* bounded by socket timeouts: no Criterion .timeout (it leaks in libcriterion under make asan) */
    online_fx f;
    make_online(&f);
    char *images = path_join(f.dir, "images"), src[700], inside[1200], outside[200];
    snprintf(src, sizeof src, "%s/s00001_v00.png", images);
    plant_semicolon(images, src, inside, sizeof inside, outside, sizeof outside);
    char *secret_uri;
    cr_assert_eq(thumbnail_data_uri(outside, 112, 82, &secret_uri), 0, "%s", er_msg());
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, images, 4, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s = start(&cfg, &port);
    char js[1500];
    snprintf(js, sizeof js, "{\"paths\": [\"%s\"]}", inside);
    const char *body;
    size_t len;
    cr_assert_eq(test_http(port, "POST", "/case", "application/json", js, &body, &len), 200, "%.*s", (int)len, body);
    cr_expect_null(strstr(body, secret_uri), "the page shows the image outside --image-root");
    cr_expect_null(strstr(body, "class=\"vimg\""), "one path became several views");
    cr_expect(strstr(body, "class=\"qimg\" loading=\"lazy\" src=\"data:image/jpeg"), "the query's own thumbnail is shown");
    cr_assert_eq(test_http(port, "POST", "/case.json", "application/json", js, &body, &len), 200, "%.*s", (int)len, body);
    retrieval_server_stop(s);
    free(secret_uri);
    free(images);
    free_online(&f);
}

/* F1: a scene case whose view path holds ';' (manifest -> case database) is one view, served as the
 * file it names; /image/case/<id>/1 does not exist. */
Test(serve_hostile, a_semicolon_in_a_case_view_path_is_part_of_the_path) { /* bounded by socket timeouts: no Criterion .timeout (it leaks in libcriterion under make asan) */
    online_fx f;
    make_online(&f);
    char *images = path_join(f.dir, "images"), src[700], inside[1200], outside[200];
    snprintf(src, sizeof src, "%s/s00001_v00.png", images);
    plant_semicolon(images, src, inside, sizeof inside, outside, sizeof outside);
    char *man = path_join(f.dir, "semi.csv"), *db = path_join(f.dir, "semi.db");
    char csv[1600];
    snprintf(csv, sizeof csv, "path,label,scene\n\"%s\",a,0\n%s/s00002_v00.png,b,1\n", inside, images);
    cr_assert_eq(write_file_atomic(man, csv, strlen(csv)), 0);
    manifest m;
    cr_assert_eq(manifest_load(man, &m), 0, "%s", er_msg());
    int *of, n;
    char **joined;
    manifest_scene_paths(&m, &of, &joined, &n);
    cr_assert_eq(n, 2);
    emb_set e = {0};
    e.n = 2; e.dim = 32;
    e.x = xcalloc(64, sizeof(float));
    e.ids = xmalloc(2 * sizeof(int64_t));
    e.labels = xmalloc(2 * sizeof(int64_t));
    for (int i = 0; i < 2; i++) { e.ids[i] = i; e.labels[i] = i; e.x[i * 32 + i] = 1; }
    char *paths[2] = {joined[of[0]], joined[of[1]]};
    cr_assert_eq(casedb_create(db, &e, paths, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 1), 0, "%s", er_msg());
    retrieval_server_cfg cfg = {db, NULL, NULL, "127.0.0.1", 0, {1, 0, 0.1, 0, 0}, NULL, NULL, 1, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s = start(&cfg, &port);
    const char *body;
    size_t len;
    cr_expect_eq(test_http(port, "GET", "/image/case/0/1", NULL, NULL, &body, &len), 404, "a second view of a one-view case");
    char *want;
    size_t wlen;
    cr_assert_eq(read_file(inside, &want, &wlen), 0);
    cr_expect_eq(test_http(port, "GET", "/image/case/0", NULL, NULL, &body, &len), 200);
    cr_expect(len == wlen && !memcmp(body, want, wlen), "the view is the file its path names");
    free(want);
    retrieval_server_stop(s);
    manifest_free_labels(of, joined, n);
    manifest_free(&m);
    free(e.x); free(e.ids); free(e.labels);
    free(man); free(db); free(images);
    free_online(&f);
}

/* F2: a 65 KB all-zero 8192 x 8192 PNG (0.8 GB as float RGB) is refused by its header: 413 naming
 * the limit, at once. */
Test(serve_hostile, a_decompression_bomb_is_refused_before_decoding) { /* bounded by socket timeouts: no Criterion .timeout (it leaks in libcriterion under make asan) */
    online_fx f;
    make_online(&f);
    char *bomb = path_join(f.dir, "bomb.png");
    uint8_t *zero = xcalloc((size_t)8192 * 8192, 1);
    cr_assert_eq(png_save_u8(bomb, zero, 1, 8192, 8192), 0, "%s", er_msg());
    free(zero);
    char *data;
    size_t dl;
    cr_assert_eq(read_file(bomb, &data, &dl), 0);
    cr_assert_lt(dl, 300000, "the bomb is small (%zu bytes)", dl);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 4, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s = start(&cfg, &port);
    char *names[2] = {"bomb.png", "bomb2.png"}, *datas[2] = {data, data};
    size_t lens[2] = {dl, dl}, bl;
    char *mp = multipart(2, names, datas, lens, &bl);
    const char *body;
    size_t len;
    double t0 = now_seconds();
    cr_expect_eq(test_http_bin(port, "POST", "/case.json", "multipart/form-data; boundary=XyZ", mp, bl, &body, &len), 413,
                 "%.*s", (int)len, body);
    cr_expect(strstr(body, "bomb.png: 8192x8192 pixels") && strstr(body, "pixel limit"), "%.*s", (int)len, body);
    cr_expect_lt(now_seconds() - t0, 2.0, "refused without decoding");
    retrieval_server_stop(s);
    free(mp); free(data); free(bomb);
    free_online(&f);
}

/* F2: with a per-view limit of 16 x 16 pixels, a 32 x 32 JPEG is decoded at half size by libjpeg's
 * scaled IDCT and answered; a 32 x 32 PNG (no scaled decoding) is refused; three half-size views
 * are over a per-case limit of two views' pixels. */
Test(serve_hostile, large_jpegs_are_decoded_smaller_and_the_case_has_a_pixel_budget) { /* bounded by socket timeouts: no Criterion .timeout (it leaks in libcriterion under make asan) */
    online_fx f;
    make_online(&f);
    char *images = path_join(f.dir, "images"), p[700];
    snprintf(p, sizeof p, "%s/s00001_v00.png", images);
    char *png;
    size_t pl;
    cr_assert_eq(read_file(p, &png, &pl), 0);
    image im = {0};
    cr_assert_eq(image_load(p, 3, &im), 0);
    cr_assert(im.w == 32 && im.h == 32);
    uint8_t *jpg;
    size_t jl;
    cr_assert_eq(image_encode_jpeg(&im, 90, &jpg, &jl), 0);
    image_free(&im);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 4, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    cfg.max_view_pixels = 16 * 16;
    cfg.max_case_pixels = 2 * 16 * 16;
    int port;
    retrieval_server *s = start(&cfg, &port);
    const char *ct = "multipart/form-data; boundary=XyZ", *body;
    char *names[3] = {"a.jpg", "b.jpg", "c.jpg"}, *jd[3] = {(char *)jpg, (char *)jpg, (char *)jpg};
    size_t jls[3] = {jl, jl, jl}, bl, len;
    char *mp = multipart(1, names, jd, jls, &bl);
    cr_expect_eq(test_http_bin(port, "POST", "/case.json", ct, mp, bl, &body, &len), 200, "%.*s", (int)len, body);
    free(mp);
    char *pn[1] = {"big.png"}, *pd[1] = {png};
    mp = multipart(1, pn, pd, &pl, &bl);
    cr_expect_eq(test_http_bin(port, "POST", "/case.json", ct, mp, bl, &body, &len), 413, "%.*s", (int)len, body);
    cr_expect(strstr(body, "big.png: 32x32 pixels") && strstr(body, "256-pixel limit"), "%.*s", (int)len, body);
    free(mp);
    mp = multipart(3, names, jd, jls, &bl);
    cr_expect_eq(test_http_bin(port, "POST", "/case.json", ct, mp, bl, &body, &len), 413, "%.*s", (int)len, body);
    cr_expect(strstr(body, "512-pixel limit of a case"), "%.*s", (int)len, body);
    free(mp);
    retrieval_server_stop(s);
    free(jpg); free(png); free(images);
    free_online(&f);
}

/* F17: a server killed mid-request left its endoret_case_* folder in /tmp (older builds wrote the
 * uploads there for the thumbnails); the next server removes folders older than an hour, and
 * leaves a recent one (a running server's) alone. */
Test(serve_hostile, stale_case_folders_are_swept_at_start) { /* bounded by socket timeouts: no Criterion .timeout (it leaks in libcriterion under make asan) */
    online_fx f;
    make_online(&f);
    char stale[] = "/tmp/endoret_case_XXXXXX", fresh[] = "/tmp/endoret_case_XXXXXX";
    cr_assert(mkdtemp(stale) && mkdtemp(fresh));
    char *img = path_join(stale, "0_upload.png");
    cr_assert_eq(write_file_atomic(img, "x", 1), 0);
    struct utimbuf old = {time(NULL) - 7200, time(NULL) - 7200};
    cr_assert_eq(utime(stale, &old), 0);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 4, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s = start(&cfg, &port);
    struct stat st;
    cr_expect_neq(stat(stale, &st), 0, "%s is still there", stale);
    cr_expect_eq(stat(fresh, &st), 0, "a recent folder was removed");
    retrieval_server_stop(s);
    remove_tree(stale);
    remove_tree(fresh);
    free(img);
    free_online(&f);
}

int cmd_index(int argc, char **argv);

/* F1: a one-view case (index build from a per-image manifest) whose path holds ';' is stored as a
 * view list too: /image/case/0 is that file, /image/case/0/1 does not exist; a report query whose
 * manifest path holds ';' shows one image. */
Test(serve_hostile, a_semicolon_in_a_single_image_path_is_part_of_the_path) { /* bounded by socket timeouts: no Criterion .timeout (it leaks in libcriterion under make asan) */
    online_fx f;
    make_online(&f);
    char *images = path_join(f.dir, "images"), src[700], inside[1200], outside[200];
    snprintf(src, sizeof src, "%s/s00001_v00.png", images);
    plant_semicolon(images, src, inside, sizeof inside, outside, sizeof outside);
    char *man = path_join(f.dir, "single.csv"), *db = path_join(f.dir, "single.db"), *emb = path_join(f.dir, "single.safetensors");
    char csv[1600];
    snprintf(csv, sizeof csv, "path,label\n\"%s\",a\n%s/s00002_v00.png,b\n", inside, images);
    cr_assert_eq(write_file_atomic(man, csv, strlen(csv)), 0);
    emb_set e = {0};
    e.n = 2; e.dim = 32;
    e.x = xcalloc(64, sizeof(float));
    e.ids = xmalloc(2 * sizeof(int64_t));
    for (int i = 0; i < 2; i++) { e.ids[i] = i; e.x[i * 32 + i] = 1; }
    cr_assert_eq(emb_save(emb, &e), 0, "%s", er_msg());
    char *build[] = {"index", "build", "--emb", emb, "--out", db, "--manifest", man, NULL};
    cr_assert_eq(cmd_index(8, build), ER_OK, "%s", er_msg());
    retrieval_server_cfg cfg = {db, emb, man, "127.0.0.1", 0, {1, 0, 0.1, 0, 0}, NULL, NULL, 1, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    retrieval_server *s = start(&cfg, &port);
    const char *body;
    size_t len;
    cr_expect_eq(test_http(port, "GET", "/image/case/0/1", NULL, NULL, &body, &len), 404, "a second view of a one-view case");
    cr_expect_eq(test_http(port, "GET", "/image/query/0/1", NULL, NULL, &body, &len), 404, "a second view of a one-image query");
    char *want;
    size_t wlen;
    cr_assert_eq(read_file(inside, &want, &wlen), 0);
    cr_expect_eq(test_http(port, "GET", "/image/case/0", NULL, NULL, &body, &len), 200);
    cr_expect(len == wlen && !memcmp(body, want, wlen), "the case's view is the file its path names");
    cr_expect_eq(test_http(port, "GET", "/image/query/0", NULL, NULL, &body, &len), 200);
    cr_expect(len == wlen && !memcmp(body, want, wlen), "the query's image is the file its path names");
    free(want);
    retrieval_server_stop(s);
    free(e.x); free(e.ids);
    free(man); free(db); free(emb); free(images);
    free_online(&f);
}
