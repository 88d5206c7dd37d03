/* The region evidence on the pages (issue #32 item 2): `report --model` and `serve --model` draw an
 * overlay over the query's and every neighbour's thumbnail with the plain-words legend, the overlay
 * is a valid PNG of the feature grid, the pages still name no server path; an encoder of another
 * width than the database's is refused by `report` naming the option; a query page that finds the
 * model busy (the worker filing a case) is answered at once without evidence, saying so. Random-init tiny ViT: this is about the
 * pages, the lesion measure is test_region_evidence.c's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/manifest.h"
#include "datasets/synth.h"
#include "infer/report/region_evidence.h"
#include "infer/report/region_overlay.h"
#include "infer/report/retrieval_server.h"
#include "infer/retrieval/casedb.h"
#include "nn/base/base.h"
#include "nn/models/model.h"
#include "nn/models/vit_model.h"
#include "tests/test_http.h"
#include "tests/test_util.h"

int cmd_report(int argc, char **argv);

typedef struct { char dir[256], db[512], enc[512]; } pages_fx;

/* 8 synthetic scenes x 2 views (32 px), a tiny random ViT, a case database of every view with its path */
static void make_pages(pages_fx *f) {
    snprintf(f->dir, sizeof f->dir, "%s", test_tmpdir());
    snprintf(f->db, sizeof f->db, "%s/cases.db", f->dir);
    snprintf(f->enc, sizeof f->enc, "%s/enc.safetensors", f->dir);
    synth_config sc = {.scenes = 8, .views = 2, .size = 32, .seed = 4, .threads = 1};
    cr_assert_eq(synth_write_dataset(f->dir, &sc), 0, "%s", er_msg());
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_tiny", &c), 0);
    c.img = 32; c.patch = 8; c.dim = 32; c.depth = 1; c.heads = 2;
    model *m = vit_model_wrap(vit_new(&c, 7));
    cr_assert_eq(model_save(m, f->enc, -1), 0, "%s", er_msg());
    char man_path[600];
    snprintf(man_path, sizeof man_path, "%s/manifest.csv", f->dir);
    manifest man;
    cr_assert_eq(manifest_load(man_path, &man), 0, "%s", er_msg());
    emb_set e;
    emb_alloc(&e, man.n, m->dim);
    char **paths = xcalloc((size_t)man.n, sizeof(char *));
    for (int i = 0; i < man.n; i++) {
        image im = {0}, x = {0};
        aug_workspace ws = {0};
        paths[i] = manifest_image_path(&man, i);
        cr_assert_eq(image_load(paths[i], 3, &im), 0, "%s", er_msg());
        cr_assert_eq(aug_eval(&im, m->img, &ws, &x), 0);
        cr_assert_eq(model_embed(m, x.data, 1, e.x + (size_t)i * m->dim), 0);
        image_free(&im);
        image_free(&x);
        aug_workspace_free(&ws);
    }
    emb_fill_from_manifest(&e, &man, NULL, 0);
    cr_assert_eq(casedb_create(f->db, &e, paths, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 0), 0, "%s", er_msg());
    for (int i = 0; i < man.n; i++) free(paths[i]);
    free(paths);
    emb_free(&e);
    manifest_free(&man);
    model_free(m);
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* The first overlay's PNG decodes to the 4 x 4 feature grid (32 px / patch 8), RGBA. */
static void check_overlay_png(const char *html) {
    const char *p = strstr(html, "class=\"evo\" alt=\"\" src=\"data:image/png;base64,");
    cr_assert(p, "no overlay image");
    p = strchr(p, ',') + 1;
    size_t n = strcspn(p, "\"");
    /* base64 decode */
    static const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint8_t *bin = xmalloc(n);
    size_t len = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && p[i] != '='; i++) {
        acc = (acc << 6) | (unsigned)(strchr(A, p[i]) - A);
        if ((bits += 6) >= 8) bin[len++] = (uint8_t)(acc >> (bits -= 8));
    }
    image im = {0};
    cr_assert_eq(image_decode_png(bin, len, "overlay", 3, &im), 0, "%s", er_msg());
    cr_expect(im.w == 4 && im.h == 4, "%dx%d", im.w, im.h);
    image_free(&im);
    free(bin);
}

Test(region_pages, report_and_serve_draw_the_evidence, .timeout = 300) {
    pages_fx f;
    make_pages(&f);
    char out[600];
    snprintf(out, sizeof out, "%s/report.html", f.dir);
    char *argv[] = {"report", "--index", f.db, "--model", f.enc, "--k", "3", "--limit", "2", "--float", "--out", out};
    cr_assert_eq(cmd_report(12, argv), ER_OK, "%s", er_msg());
    size_t len;
    char *html;
    cr_assert_eq(read_file(out, &html, &len), 0, "%s", er_msg());
    cr_expect_eq(count(html, "class=\"evo\""), 2 * (1 + 3), "an overlay on each query and neighbour thumbnail");
    cr_expect_eq(count(html, "Why these cases:"), 2);
    cr_expect(strstr(html, "not a diagnosis, not an outline of the lesion"), "the legend says what the tint is not");
    cr_expect(!strstr(html, f.dir), "the report names a server path");
    check_overlay_png(html);
    free(html);
    /* k = 14 (the weighted vote shows hundreds): evidence for the REGION_MAX_CASES nearest only, said so */
    char *argv3[] = {"report", "--index", f.db, "--model", f.enc, "--k", "14", "--limit", "1", "--float", "--out", out};
    cr_assert_eq(cmd_report(12, argv3), ER_OK, "%s", er_msg());
    cr_assert_eq(read_file(out, &html, &len), 0, "%s", er_msg());
    cr_expect_eq(count(html, "class=\"evo\""), 1 + REGION_MAX_CASES);
    cr_expect(strstr(html, "drawn for the 12 nearest past cases"), "no note of the cap");
    free(html);
    /* without --model: no overlay, no legend */
    char *argv2[] = {"report", "--index", f.db, "--k", "3", "--limit", "2", "--float", "--out", out};
    cr_assert_eq(cmd_report(10, argv2), ER_OK, "%s", er_msg());
    cr_assert_eq(read_file(out, &html, &len), 0, "%s", er_msg());
    cr_expect_eq(count(html, "class=\"evo\""), 0);
    free(html);
    /* serve --model: the query page draws it */
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 1, 0}, f.enc, NULL, 4, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    retrieval_server *s;
    int port;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    const char *body;
    size_t blen;
    cr_assert_eq(test_http(port, "GET", "/query/1", NULL, NULL, &body, &blen), 200);
    cr_expect_eq(count(body, "class=\"evo\""), 1 + 3, "serve query page");
    cr_expect(strstr(body, "Why these cases:"));
    cr_expect(!strstr(body, f.dir), "the serve page names a server path");
    check_overlay_png(body);
    retrieval_server_stop(s);
}

Test(region_pages, report_refuses_a_model_of_another_width) {
    pages_fx f;
    make_pages(&f);
    char out[600];
    snprintf(out, sizeof out, "%s/r.html", f.dir);
    /* a width the database does not hold: refused before any page, naming --model */
    vit_config c;
    cr_assert_eq(vit_config_preset("vit_tiny", &c), 0);
    c.img = 32; c.patch = 8; c.dim = 16; c.depth = 1; c.heads = 2;
    char other[600];
    snprintf(other, sizeof other, "%s/other.safetensors", f.dir);
    model *m = vit_model_wrap(vit_new(&c, 1));
    cr_assert_eq(model_save(m, other, -1), 0);
    model_free(m);
    char *argv[] = {"report", "--index", f.db, "--model", other, "--out", out};
    cr_assert_eq(cmd_report(7, argv), ER_INPUT);
    cr_expect(strstr(er_msg(), "--model") && strstr(er_msg(), "16-d"), "%s", er_msg());
}

/* ---- a query page never waits for the model ---- */

static _Atomic int hook_in, hook_go;
/* inside the filed case's transaction, on the worker, which holds the model */
static void hold_model(void *ctx) {
    (void)ctx;
    hook_in = 1;
    for (int i = 0; i < 3000 && !hook_go; i++) usleep(10000);
}

typedef struct { int port; const char *body; size_t len; int status; } post_job;

/* POST /case/file.json on its own connection (test_http's buffer is not for two threads) */
static void *post_case(void *arg) {
    post_job *j = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(j->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) return NULL;
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr, "POST /case/file.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer "
                                      "region-test-token-0123456789\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n"
                                      "Content-Length: %zu\r\n\r\n", j->len);
    if (write(fd, hdr, n) != n || write(fd, j->body, j->len) != (ssize_t)j->len) { close(fd); return NULL; }
    char resp[4096];
    ssize_t got = read(fd, resp, sizeof resp - 1);
    if (got > 0) { resp[got] = 0; sscanf(resp, "HTTP/1.%*d %d", &j->status); }
    close(fd);
    return NULL;
}

Test(region_pages, a_query_page_does_not_wait_for_a_busy_model, .timeout = 120) {
    pages_fx f;
    make_pages(&f);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 1, 0}, f.enc, NULL, 4, 0, 0, 0, 0,
                                "region-test-token-0123456789", hold_model, NULL, NULL};
    retrieval_server *s;
    int port;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    /* a case to file: one view and its diagnosis */
    char img[600];
    snprintf(img, sizeof img, "%s/images/s00000_v00.png", f.dir);
    char *png;
    size_t plen;
    cr_assert_eq(read_file(img, &png, &plen), 0, "%s", er_msg());
    size_t cap = plen + 1024, o = 0;
    char *body = xmalloc(cap);
    o += (size_t)sprintf(body + o, "--XyZ\r\nContent-Disposition: form-data; name=\"diagnosis\"\r\n\r\nbenign\r\n"
                                   "--XyZ\r\nContent-Disposition: form-data; name=\"views\"; filename=\"v.png\"\r\n"
                                   "Content-Type: image/png\r\n\r\n");
    memcpy(body + o, png, plen);
    o += plen;
    o += (size_t)sprintf(body + o, "\r\n--XyZ--\r\n");
    post_job j = {port, body, o, 0};
    pthread_t th;
    hook_in = hook_go = 0;
    cr_assert_eq(pthread_create(&th, NULL, post_case, &j), 0);
    for (int i = 0; i < 3000 && !hook_in; i++) usleep(10000);
    cr_assert(hook_in, "the filed case never reached its transaction");
    /* the worker holds the model: the page comes at once, without evidence, saying why */
    const char *page;
    size_t blen;
    double t0 = now_seconds();
    cr_assert_eq(test_http(port, "GET", "/query/0", NULL, NULL, &page, &blen), 200);
    double waited = now_seconds() - t0;
    cr_expect_eq(count(page, "class=\"evo\""), 0);
    cr_expect(strstr(page, "the encoder is busy"), "no busy note");
    cr_expect_lt(waited, 5.0, "the page waited %.1f s", waited);
    hook_go = 1;
    pthread_join(th, NULL);
    cr_expect_eq(j.status, 200, "the filed case: %d", j.status);
    /* the model free again: the page draws the evidence */
    cr_assert_eq(test_http(port, "GET", "/query/0", NULL, NULL, &page, &blen), 200);
    cr_expect_eq(count(page, "class=\"evo\""), 1 + 3);
    retrieval_server_stop(s);
    free(body);
    free(png);
}
