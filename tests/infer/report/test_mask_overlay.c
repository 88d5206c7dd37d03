/* The recorded lesion mask on the pages (issue #32, "the lesion mask overlay on click"): the outline
 * drawn from the mask (against a brute-force distance), index build keeping each case's mask from the
 * manifest (one view, scenes all-or-nothing), a database from before the mask column opening and
 * taking new cases, and serve's /mask and /view routes and the toggle on the query page and in
 * report.html, with no server path on any page. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "infer/report/mask_overlay.h"
#include "infer/report/retrieval_server.h"
#include "infer/retrieval/casedb.h"
#include "nn/base/base.h"
#include "tests/test_browser.h"
#include "tests/test_http.h"
#include "tests/test_util.h"

int cmd_index(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* Chebyshev distance from (x, y) to the nearest in-frame non-lesion pixel (the frame itself does not
 * count), by brute force */
static int dist_out(const uint8_t *in, int w, int h, int x, int y) {
    int best = 1 << 30;
    for (int yy = 0; yy < h; yy++)
        for (int xx = 0; xx < w; xx++) {
            if (in[yy * w + xx]) continue;
            int d = abs(xx - x) > abs(yy - y) ? abs(xx - x) : abs(yy - y);
            if (d < best) best = d;
        }
    return best;
}

Test(mask_overlay, outline_is_the_lesion_band_within_line_pixels_of_the_background) {
    enum { W = 40, H = 30 };
    image m = {.c = 1, .h = H, .w = W, .data = xcalloc(W * H, sizeof(float))};
    uint8_t in[W * H];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) { /* a blob touching the left border, with a notch */
            int v = x < 25 && y >= 4 && y < 26 && !(x > 15 && y > 12 && y < 17);
            in[y * W + x] = (uint8_t)v;
            m.data[y * W + x] = v ? 0.9f : 0.1f;
        }
    for (int line = 1; line <= 3; line++) {
        uint8_t *px;
        mask_outline_rgba(&m, W, H, line, &px);
        int outline = 0, tint = 0;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                const uint8_t *p = px + 4 * (y * W + x);
                int want = !in[y * W + x] ? 0 : dist_out(in, W, H, x, y) <= line ? 255 : 56;
                cr_assert_eq(p[3], want, "line %d: alpha at (%d, %d) is %d, expected %d", line, x, y, p[3], want);
                if (want) cr_assert(p[0] == 0 && p[1] == 214 && p[2] == 255, "the lesion is drawn cyan");
                outline += want == 255;
                tint += want == 56;
            }
        cr_assert(outline > 0 && tint > 0);
        /* the left border cuts the lesion: no outline along it */
        cr_assert_eq(px[4 * (15 * W + 0) + 3], 56, "line %d: the frame is not the lesion's edge", line);
        free(px);
    }
    /* resampled (nearest) to twice the size: the same picture at twice the scale */
    uint8_t *big;
    mask_outline_rgba(&m, 2 * W, 2 * H, 2, &big);
    for (int y = 0; y < 2 * H; y++)
        for (int x = 0; x < 2 * W; x++)
            cr_assert_eq(big[4 * (y * 2 * W + x) + 3] != 0, in[(y / 2) * W + x / 2]);
    free(big);
    image_free(&m);
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

Test(mask_overlay, png_keeps_the_aspect_and_is_never_enlarged) {
    char path[600];
    snprintf(path, sizeof path, "%s/m.png", test_tmpdir());
    uint8_t *g = xcalloc(600 * 400, 1);
    for (int i = 0; i < 600 * 400; i++) g[i] = (i % 600) > 300 ? 255 : 0;
    cr_assert_eq(png_save_u8(path, g, 1, 400, 600), ER_OK, "%s", er_msg());
    free(g);
    uint8_t *png;
    size_t len;
    cr_assert_eq(mask_overlay_png(path, 300, &png, &len), ER_OK, "%s", er_msg());
    cr_assert(len > 33 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8));
    cr_assert_eq(be32(png + 16), 300u);
    cr_assert_eq(be32(png + 20), 200u);
    free(png);
    cr_assert_eq(mask_overlay_png(path, 2000, &png, &len), ER_OK);
    cr_assert_eq(be32(png + 16), 600u, "never enlarged");
    free(png);
    snprintf(path, sizeof path, "%s/none.png", test_tmpdir());
    cr_assert_eq(mask_overlay_png(path, 300, &png, &len), ER_INPUT);
    cr_assert(strstr(er_msg(), "none.png"), "the error names the file: %s", er_msg());
}

/* 6 one-view cases (masks on rows 0, 2, 4) and 2 scenes of 2 views (scene b has one mask only) */
typedef struct { char dir[300], man[600], emb[600], db[600], scn[600], sdb[600], sman[600]; } mfx;

static void write_png(const char *dir, const char *name, uint8_t v, int mask) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    uint8_t px[24 * 32 * 3];
    for (int i = 0; i < 24 * 32 * 3; i++) px[i] = mask ? (uint8_t)((i / 3) % 32 > 10 && (i / 3) / 32 > 6 ? 255 : 0) : (uint8_t)(v + i % 7);
    cr_assert_eq(png_save_u8(p, px, 3, 24, 32), ER_OK, "%s", er_msg());
}

static void make_mfx(mfx *f) {
    snprintf(f->dir, sizeof f->dir, "%s", test_tmpdir());
    snprintf(f->man, sizeof f->man, "%s/man.csv", f->dir);
    snprintf(f->emb, sizeof f->emb, "%s/e.safetensors", f->dir);
    snprintf(f->db, sizeof f->db, "%s/c.db", f->dir);
    snprintf(f->sman, sizeof f->sman, "%s/scenes.csv", f->dir);
    snprintf(f->scn, sizeof f->scn, "%s/s.safetensors", f->dir);
    snprintf(f->sdb, sizeof f->sdb, "%s/s.db", f->dir);
    FILE *m = fopen(f->man, "w");
    fprintf(m, "path,label,mask\n");
    for (int i = 0; i < 6; i++) {
        char im[32], mk[32];
        snprintf(im, sizeof im, "i%d.png", i);
        snprintf(mk, sizeof mk, "m%d.png", i);
        write_png(f->dir, im, (uint8_t)(30 * i), 0);
        if (i % 2 == 0) write_png(f->dir, mk, 0, 1);
        fprintf(m, "%s,%s,%s\n", im, i < 3 ? "adenoma" : "hyperplastic", i % 2 == 0 ? mk : "");
    }
    fclose(m);
    emb_set e;
    emb_alloc(&e, 6, 4);
    for (int i = 0; i < 24; i++) e.x[i] = (float)((i * 37) % 11) - 5.0f + (i % 4 == 0);
    cr_assert_eq(emb_save(f->emb, &e), ER_OK, "%s", er_msg());
    emb_free(&e);
    m = fopen(f->sman, "w"); /* scene a: rows 0, 1 both masked; scene b: rows 2 (masked), 3 (not) */
    fprintf(m, "path,label,mask,scene,view\ni0.png,adenoma,m0.png,a,0\ni1.png,adenoma,m2.png,a,1\n"
               "i2.png,hyperplastic,m4.png,b,0\ni3.png,hyperplastic,,b,1\n");
    fclose(m);
    emb_alloc(&e, 2, 4); /* a scene file: ids = each scene's first manifest row, scene ids, no views */
    for (int i = 0; i < 8; i++) e.x[i] = (float)(i % 3) - 1.0f + (i == 0);
    e.ids[0] = 0; e.ids[1] = 2;
    e.scene = xmalloc(2 * sizeof(int64_t));
    e.scene[0] = 0; e.scene[1] = 1;
    cr_assert_eq(emb_save(f->scn, &e), ER_OK, "%s", er_msg());
    emb_free(&e);
}

static void build(const char *emb, const char *man, const char *db) {
    char *argv[] = {"build", "--emb", (char *)emb, "--manifest", (char *)man, "--out", (char *)db};
    char *args[] = {"index", argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], argv[6]};
    cr_assert_eq(cmd_index(8, args), ER_OK, "%s", er_msg());
}

/* the path a manifest entry resolves to, as stored (absolute under the test folder) */
static int ends_with(const char *s, const char *tail) { size_t a = strlen(s), b = strlen(tail); return a >= b && !strcmp(s + a - b, tail); }

Test(mask_overlay, index_build_keeps_each_cases_mask_and_old_databases_open) {
    mfx f;
    make_mfx(&f);
    build(f.emb, f.man, f.db);
    casedb db;
    cr_assert_eq(casedb_open(f.db, &db), ER_OK, "%s", er_msg());
    cr_assert(db.mask_col);
    for (int i = 0; i < 6; i++) {
        char tail[16];
        snprintf(tail, sizeof tail, "/m%d.png", i);
        if (i % 2) cr_assert_null(db.masks[i], "row %d has no mask", i);
        else cr_assert(db.masks[i] && ends_with(db.masks[i], tail), "row %d: %s", i, db.masks[i] ? db.masks[i] : "(null)");
    }
    casedb_close(&db);
    build(f.scn, f.sman, f.sdb); /* scenes: a list when every view has a mask, none otherwise */
    cr_assert_eq(casedb_open(f.sdb, &db), ER_OK, "%s", er_msg());
    cr_assert(db.masks[0] && strstr(db.masks[0], "/m0.png;") && ends_with(db.masks[0], "/m2.png"), "%s", db.masks[0] ? db.masks[0] : "(null)");
    cr_assert_null(db.masks[1], "scene b lacks a mask for one view: none, never a misaligned list");
    casedb_close(&db);

    /* a database written before the column: opens with no masks, and the first add brings the column */
    sqlite3 *s;
    cr_assert_eq(sqlite3_open(f.db, &s), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(s, "ALTER TABLE cases DROP COLUMN mask_paths;", NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(s));
    sqlite3_close(s);
    cr_assert_eq(casedb_open(f.db, &db), ER_OK, "%s", er_msg());
    cr_assert_eq(db.mask_col, 0);
    for (int i = 0; i < 6; i++) cr_assert_null(db.masks[i]);
    float x[4] = {1, 2, 3, 4};
    case_rec r = {77, x, 0, "new.png", -1, -1, NULL, NULL, "newmask.png"};
    cr_assert_eq(casedb_add(&db, &r, 1), ER_OK, "%s", er_msg());
    casedb_close(&db);
    cr_assert_eq(casedb_open(f.db, &db), ER_OK, "%s", er_msg());
    cr_assert(db.mask_col);
    int64_t row = casedb_row(&db, 77);
    cr_assert(row >= 0 && db.masks[row] && !strcmp(db.masks[row], "newmask.png"));
    cr_assert_eq(db.n, 7);
    casedb_close(&db);
}

/* A read-only server on the fixture's database (leave-one-out queries, k 3); its port. */
static int serve_fixture(const mfx *f, retrieval_server **sv) {
    retrieval_server_cfg cfg = {f->db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    int port;
    cr_assert_eq(retrieval_server_start(&cfg, sv, &port), ER_OK, "%s", er_msg());
    return port;
}

static int has(const char *body, size_t len, const char *s) { return memmem(body, len, s, strlen(s)) != NULL; }

Test(mask_overlay, serve_draws_the_outline_on_click_and_report_html_has_the_toggle) {
    mfx f;
    make_mfx(&f);
    build(f.emb, f.man, f.db);
    retrieval_server *sv;
    int port = serve_fixture(&f, &sv);
    const char *body;
    size_t len;
    /* case ids are the embedding rows 0..5 */
    cr_assert_eq(test_http(port, "GET", "/mask/case/2", NULL, NULL, &body, &len), 200);
    cr_assert(len > 33 && !memcmp(body, "\x89PNG\r\n\x1a\n", 8), "a PNG");
    cr_assert_eq(be32((const uint8_t *)body + 16), 32u);
    cr_assert_eq(be32((const uint8_t *)body + 20), 24u, "the mask's own size and aspect");
    cr_assert_eq(test_http(port, "GET", "/mask/case/1", NULL, NULL, &body, &len), 404, "no mask recorded");
    cr_assert(has(body, len, "no lesion outline"));
    cr_assert_eq(test_http(port, "GET", "/mask/case/2/1", NULL, NULL, &body, &len), 404, "no second view");
    cr_assert_eq(test_http(port, "GET", "/mask/case/x", NULL, NULL, &body, &len), 400);
    cr_assert_eq(test_http(port, "GET", "/mask/elsewhere/1", NULL, NULL, &body, &len), 404);
    cr_assert_eq(test_http(port, "GET", "/view/case/4", NULL, NULL, &body, &len), 200);
    cr_assert(has(body, len, "src=\"/image/case/4\"") && has(body, len, "src=\"/mask/case/4\""), "%.*s", (int)len, body);
    cr_assert(has(body, len, "annotator") && has(body, len, "recorded ground truth") && has(body, len, "checked"));
    cr_assert(has(body, len, "i4.png") && !has(body, len, f.dir), "the file's name, never its folder");
    cr_assert_eq(test_http(port, "GET", "/view/case/3", NULL, NULL, &body, &len), 200);
    cr_assert(has(body, len, "No lesion outline is recorded") && !has(body, len, "/mask/"));
    cr_assert_eq(test_http(port, "GET", "/view/case/99", NULL, NULL, &body, &len), 404);
    /* a query page (leave-one-out: query 0 is case 0): the toggle, off, and the thumbnails open /view */
    cr_assert_eq(test_http(port, "GET", "/query/0", NULL, NULL, &body, &len), 200);
    cr_assert(has(body, len, "class=\"mktog\"><input type=\"checkbox\">"), "the box starts unticked");
    cr_assert(has(body, len, "src=\"/mask/query/0\"") && has(body, len, "href=\"/view/query/0\""), "%.*s", (int)len, body);
    cr_assert_eq(test_http(port, "GET", "/mask/query/0", NULL, NULL, &body, &len), 200);
    cr_assert_eq(test_http(port, "GET", "/view/query/0", NULL, NULL, &body, &len), 200);
    cr_assert(has(body, len, "<h1>Query 1</h1>") && has(body, len, "src=\"/mask/query/0\""));
    cr_assert(!has(body, len, f.dir), "no server path on the page");
    retrieval_server_stop(sv);

    char out[700];
    snprintf(out, sizeof out, "%s/report.html", f.dir);
    char *argv[] = {"report", "--index", f.db, "--k", "3", "--out", out};
    cr_assert_eq(cmd_report(7, argv), ER_OK, "%s", er_msg());
    char *html;
    size_t hl;
    cr_assert_eq(read_file(out, &html, &hl), ER_OK);
    cr_assert(has(html, hl, "class=\"mko\" loading=\"lazy\" alt=\"\" src=\"data:image/png;base64,"), "embedded outlines");
    cr_assert(has(html, hl, "show lesion outlines") && !has(html, hl, f.dir));
    free(html);
}

/* What a browser draws (chromium, when installed): the outline's cyan on the full-size page of a case
 * with a mask, none on one without. */
Test(mask_overlay, screenshot_of_the_full_size_page_shows_the_outline) {
    const char *browser = find_chromium();
    if (!browser) cr_skip_test("chromium not installed: screenshot test skipped (apt-get install chromium)");
    mfx f;
    make_mfx(&f);
    build(f.emb, f.man, f.db);
    retrieval_server *sv;
    int port = serve_fixture(&f, &sv);
    int cyan[2];
    for (int k = 0; k < 2; k++) {
        char cmd[1024], png[700];
        snprintf(png, sizeof png, "%s/view%d.png", f.dir, k);
        snprintf(cmd, sizeof cmd, "timeout 90 %s --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot=%s "
                                  "--window-size=800,600 'http://127.0.0.1:%d/view/case/%d' >/dev/null 2>&1", browser, png, port, k ? 3 : 2);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        image im = {0};
        cr_assert_eq(image_load(png, 3, &im), ER_OK, "%s", er_msg());
        cyan[k] = count_colour(&im, 0, 214, 255);
        image_free(&im);
    }
    retrieval_server_stop(sv);
    cr_expect_gt(cyan[0], 20, "the outline is not drawn (%d cyan pixels)", cyan[0]);
    cr_expect_eq(cyan[1], 0, "an outline on a case without a mask (%d cyan pixels)", cyan[1]);
}
