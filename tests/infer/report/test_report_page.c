/* What the report and serve pages say to a clinician (issue #32): the recorded diagnosis (ground
 * truth) apart from the system's suggestion, a tie shown as "no majority", the frame legend and the
 * research notice, the vote's validated accuracy (leave-one-out over the case base, Wilson 95 %
 * interval) equal to an independent computation, and no server path, temp folder or internal id
 * on any page (report.html, the serve query page, the page of an uploaded case). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/image.h"
#include "infer/report/access_log.h"
#include "infer/report/report.h"
#include "infer/report/retrieval_server.h"
#include "infer/retrieval/casedb.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_browser.h"
#include "tests/test_http.h"
#include "tests/test_util.h"
#include "tests/infer/report/online_fixture.h"

int cmd_report(int argc, char **argv);

#define NDB 20
#define NQ 4
#define DIM 8
#define K 5
#define GROUP 5 /* cases 0..4 lie near e0: labels A, B, unknown, A, B, so a query at e0 ties 2 : 2 */

static const char *LAB[2] = {"adenoma", "hyperplastic"}; /* sorted: the database's label order */

typedef struct {
    char dir[256], db[512], qemb[512], qman[512];
    float dbx[NDB * DIM], qx[NQ * DIM];
    int dblab[NDB], qlab[NQ];
    int64_t dbid[NDB];
} page_fx;

static void make_page_fx(page_fx *f) {
    snprintf(f->dir, sizeof f->dir, "%s", test_tmpdir());
    snprintf(f->db, sizeof f->db, "%s/cases.db", f->dir);
    snprintf(f->qemb, sizeof f->qemb, "%s/q.safetensors", f->dir);
    snprintf(f->qman, sizeof f->qman, "%s/q.csv", f->dir);
    rng_t r = rng_make(23, rng_stream(2, 0, 0));
    static const int glab[GROUP] = {0, 1, -1, 0, 1};
    for (int i = 0; i < NDB; i++) {
        float *x = f->dbx + i * DIM;
        for (int d = 0; d < DIM; d++) x[d] = rng_normal(&r);
        if (i < GROUP) { /* near e0 */
            for (int d = 0; d < DIM; d++) x[d] *= 0.1f;
            x[0] = 10;
            f->dblab[i] = glab[i];
        } else {
            x[0] = -fabsf(x[0]) - 1; /* away from e0 */
            f->dblab[i] = (i * 7 / 3) % 2;
        }
        f->dbid[i] = 1000 + 7 * i; /* 4-digit ids: no other number on the page looks like one */
    }
    /* query 0 at e0 (the tie, recorded diagnosis known); the others near cases 6, 9, 13 */
    for (int q = 0; q < NQ; q++) {
        float *x = f->qx + q * DIM;
        for (int d = 0; d < DIM; d++) x[d] = q == 0 ? (d == 0) : f->dbx[(6 + (q - 1) * 3 + (q == 3)) * DIM + d] + 0.3f * rng_normal(&r);
        f->qlab[q] = q == 2 ? -1 : q % 2;
    }
    uint8_t px[16 * 16 * 3];
    char *paths[NDB];
    for (int i = 0; i < NDB; i++) {
        for (int p = 0; p < 256; p++) { px[3 * p] = (uint8_t)(12 * i); px[3 * p + 1] = 120; px[3 * p + 2] = (uint8_t)(240 - 12 * i); }
        char name[600];
        snprintf(name, sizeof name, "%s/c%02d.png", f->dir, i);
        cr_assert_eq(png_save_u8(name, px, 3, 16, 16), ER_OK, "%s", er_msg());
        paths[i] = xstrdup(name); /* absolute, under /tmp: the pages must not show it */
    }
    emb_set e;
    emb_alloc(&e, NDB, DIM);
    memcpy(e.x, f->dbx, sizeof f->dbx);
    e.labels = xmalloc(NDB * sizeof(int64_t));
    for (int i = 0; i < NDB; i++) { e.ids[i] = f->dbid[i]; e.labels[i] = f->dblab[i]; }
    e.nlabel_names = 2;
    e.label_names = xmalloc(2 * sizeof(char *));
    for (int c = 0; c < 2; c++) e.label_names[c] = xstrdup(LAB[c]);
    cr_assert_eq(casedb_create(f->db, &e, paths, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 0), ER_OK, "%s", er_msg());
    emb_free(&e);
    for (int i = 0; i < NDB; i++) free(paths[i]);
    FILE *m = fopen(f->qman, "w");
    cr_assert(m);
    fprintf(m, "path,label\n");
    for (int q = 0; q < NQ; q++) {
        for (int p = 0; p < 256; p++) { px[3 * p] = 250; px[3 * p + 1] = (uint8_t)(50 * q); px[3 * p + 2] = 30; }
        char name[600];
        snprintf(name, sizeof name, "%s/q%d.png", f->dir, q);
        cr_assert_eq(png_save_u8(name, px, 3, 16, 16), ER_OK);
        fprintf(m, "q%d.png,%s\n", q, f->qlab[q] < 0 ? "" : LAB[f->qlab[q]]);
    }
    fclose(m);
    emb_alloc(&e, NQ, DIM);
    memcpy(e.x, f->qx, sizeof f->qx);
    cr_assert_eq(emb_save(f->qemb, &e), ER_OK, "%s", er_msg());
    emb_free(&e);
}

static double cosdist(const float *a, const float *b) {
    double dot = 0, na = 0, nb = 0;
    for (int d = 0; d < DIM; d++) { dot += a[d] * b[d]; na += a[d] * a[d]; nb += b[d] * b[d]; }
    return 1 - dot / sqrt(na * nb);
}

/* Independent majority vote of the K nearest cases by cosine (skipping case `self`, ties by id):
 * returns the label with most votes, -2 on a tie, -1 when no neighbour has a label; *first: the
 * nearest labelled neighbour's label (what the tie break gives). */
static int ref_vote(const page_fx *f, const float *q, int self, int *first) {
    int used[NDB] = {0}, cnt[2] = {0, 0};
    *first = -1;
    if (self >= 0) used[self] = 1;
    for (int j = 0; j < K; j++) {
        int best = -1;
        for (int c = 0; c < NDB; c++) {
            if (used[c]) continue;
            if (best < 0 || cosdist(q, f->dbx + c * DIM) < cosdist(q, f->dbx + best * DIM)) best = c;
        }
        used[best] = 1;
        if (f->dblab[best] >= 0) {
            cnt[f->dblab[best]]++;
            if (*first < 0) *first = f->dblab[best];
        }
    }
    if (cnt[0] + cnt[1] == 0) return -1;
    return cnt[0] > cnt[1] ? 0 : cnt[1] > cnt[0] ? 1 : -2;
}

/* "<b class="vacc">…</b> (95 % interval …" as the page writes it, from an independent leave-one-out
 * over the case base and the Wilson score interval */
static void ref_accuracy(const page_fx *f, char *out, size_t n) {
    int scored = 0, right = 0, first;
    for (int i = 0; i < NDB; i++) {
        if (f->dblab[i] < 0) continue;
        int v = ref_vote(f, f->dbx + i * DIM, i, &first);
        int pred = v == -2 ? first : v;
        scored++;
        right += pred == f->dblab[i];
    }
    double p = (double)right / scored, z = 1.959963984540054, nn = scored;
    double c = (p + z * z / (2 * nn)) / (1 + z * z / nn), h = z * sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / (1 + z * z / nn);
    cr_assert(right > 0 && right < scored, "the fixture's leave-one-out accuracy is trivial (%d of %d)", right, scored);
    snprintf(out, n, "<b class=\"vacc\">%.1f %%</b> (95 %% interval <span class=\"vci\">%.1f&ndash;%.1f %%</span>), leave-one-out over %d "
                     "labelled past cases, k = %d", 100 * p, 100 * (c - h), 100 * (c + h), scored, K);
}

/* Visible text of a page: tags (and their attributes) removed. */
static char *visible(const char *html) {
    char *t = xmalloc(strlen(html) + 1), *o = t;
    int in_tag = 0, in_style = 0;
    for (const char *s = html; *s; s++) {
        if (!strncmp(s, "<style>", 7)) in_style = 1;
        if (!strncmp(s, "</style>", 8)) in_style = 0;
        if (*s == '<') in_tag = 1;
        else if (*s == '>') { in_tag = 0; *o++ = ' '; }
        else if (!in_tag && !in_style) *o++ = *s;
    }
    *o = 0;
    return t;
}

/* No path, temp folder, upload folder or internal id on the page. */
static void check_no_internals(const char *what, const char *html, const char *dir, const int64_t *ids, int nid) {
    cr_expect_null(strstr(html, dir), "%s shows the server folder %s", what, dir);
    cr_expect_null(strstr(html, "/tmp"), "%s shows /tmp", what);
    cr_expect_null(strstr(html, "endoret_case_"), "%s shows an upload folder", what);
    char *t = visible(html);
    for (const char *s = t; (s = strchr(s, '/')); s++)
        cr_expect(!((s[1] >= 'a' && s[1] <= 'z') || (s[1] >= 'A' && s[1] <= 'Z') || s[1] == '_' || s[1] == '.'),
                  "%s shows a path: '%.40s'", what, s > t + 20 ? s - 20 : t);
    for (int i = 0; i < nid; i++) {
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)ids[i]);
        size_t l = strlen(id);
        for (const char *s = t; (s = strstr(s, id)); s++) {
            int word = (s == t || s[-1] < '0' || s[-1] > '9') && (s[l] < '0' || s[l] > '9');
            cr_expect(!word, "%s shows the internal case id %s: '%.40s'", what, id, s > t + 20 ? s - 20 : t);
        }
    }
    cr_expect_null(strstr(t, "Query 0"), "%s shows a row number as a title", what);
    free(t);
}

/* The card of query row i: its two labelled answers and the notices. */
static void check_card(const page_fx *f, const char *html, int i, const char *acc) {
    char tag[32];
    snprintf(tag, sizeof tag, "id=\"q%d\"", i);
    const char *a = strstr(html, tag);
    cr_assert(a, "query row %d missing", i);
    const char *end = strstr(a, "</section>");
    cr_assert(end);
    char *sec = strndup(a, end - a);
    int first, v = ref_vote(f, f->qx + i * DIM, -1, &first);
    char want[256];
    snprintf(want, sizeof want, "<div class=\"k\">Recorded diagnosis (ground truth)</div><div class=\"v truth\">%s</div>",
             f->qlab[i] < 0 ? "<span class=\"nomaj\">not recorded</span>" : LAB[f->qlab[i]]);
    cr_expect(strstr(sec, want), "query %d: recorded diagnosis element '%s' missing", i, want);
    if (v == -2) snprintf(want, sizeof want, "<div class=\"k\">System's suggestion</div><div class=\"v nomaj\">no majority</div>");
    else snprintf(want, sizeof want, "<div class=\"k\">System's suggestion</div><div class=\"v pred\">%s</div>", LAB[v]);
    cr_expect(strstr(sec, want), "query %d: suggestion element '%s' missing", i, want);
    if (v == -2) {
        cr_expect_null(strstr(sec, "class=\"v pred\""), "query %d: a tie shows a bold prediction", i);
        cr_expect(strstr(sec, "(a tie: no majority)"), "query %d: the vote sentence hides the tie", i);
    }
    cr_expect(strstr(sec, "Research use only &mdash; not a medical device; the suggestion is the vote of the retrieved past cases, "
                          "not a diagnosis."), "query %d: research notice missing", i);
    cr_expect(strstr(sec, "class=\"legend\">Frames: <span class=\"sw same\"></span>past case's recorded diagnosis is the suggested one"),
              "query %d: frame legend missing", i);
    cr_expect(strstr(sec, acc), "query %d: accuracy line '%s' missing", i, acc);
    cr_expect(strstr(sec, "<span class=\"sim\">similarity "), "query %d: no similarity", i);
    free(sec);
}

Test(report_page, report_html_says_what_is_what) {
    page_fx f;
    make_page_fx(&f);
    int first;
    cr_assert_eq(ref_vote(&f, f.qx, -1, &first), -2, "the fixture's query 0 is not a tie");
    char acc[400], out[600];
    ref_accuracy(&f, acc, sizeof acc);
    snprintf(out, sizeof out, "%s/report.html", f.dir);
    char kk[8];
    snprintf(kk, sizeof kk, "%d", K);
    char *argv[] = {"report", "--index", f.db, "--query", f.qemb, "--manifest", f.qman, "--k", kk, "--float", "--out", out};
    cr_assert_eq(cmd_report(12, argv), ER_OK, "%s", er_msg());
    char *html;
    size_t len;
    cr_assert_eq(read_file(out, &html, &len), ER_OK);
    int nonties = 0;
    for (int i = 0; i < NQ; i++) {
        check_card(&f, html, i, acc);
        nonties += ref_vote(&f, f.qx + i * DIM, -1, &first) >= 0;
    }
    cr_expect_gt(nonties, 0, "no query with a majority");
    check_no_internals("report.html", html, f.dir, f.dbid, NDB);
    free(html);
}

/* Without --query every case is a query against the others: the report's own accuracy is then
 * the validated accuracy, computed by a second path (report_build's cards vs report_validate). */
Test(report_page, validated_accuracy_is_the_leave_one_out_report) {
    page_fx f;
    make_page_fx(&f);
    casedb db;
    cr_assert_eq(casedb_open(f.db, &db), ER_OK, "%s", er_msg());
    for (int use_float = 0; use_float < 2; use_float++) {
        report_cfg cfg = {K, 0, 0.1, use_float, 0};
        report_data r;
        cr_assert_eq(report_build(&db, f.db, NULL, NULL, NULL, &cfg, &r), ER_OK, "%s", er_msg());
        cr_expect_eq(r.valid.n, r.scored, "float %d: %d cases validated, %d scored", use_float, r.valid.n, r.scored);
        cr_expect_eq(r.valid.correct, r.correct, "float %d: %d right in the validation, %d in the report", use_float, r.valid.correct, r.correct);
        cr_expect_eq(r.valid.k, K);
        cr_expect(r.valid.lo < r.valid.acc && r.valid.acc < r.valid.hi, "float %d: interval %g..%g around %g", use_float, r.valid.lo,
                  r.valid.hi, r.valid.acc);
        report_free(&r);
    }
    casedb_close(&db);
}

Test(report_page, serve_pages_say_what_is_what) { /* bounded by socket timeouts: a Criterion .timeout leaks in libcriterion under make asan */
    page_fx f;
    make_page_fx(&f);
    char acc[400];
    ref_accuracy(&f, acc, sizeof acc);
    retrieval_server_cfg cfg = {f.db, f.qemb, f.qman, "127.0.0.1", 0, {K, 0, 0.1, 1, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    retrieval_server *s;
    int port;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    const char *body;
    size_t len;
    cr_assert_eq(test_http(port, "GET", "/", NULL, NULL, &body, &len), 200);
    char *page = strndup(body, len);
    cr_expect(strstr(page, "<th>recorded diagnosis (ground truth)</th><th>system's suggestion</th>"), "query list headings");
    cr_expect(strstr(page, "<td><i>no majority</i></td>"), "the tie in the query list");
    cr_expect(strstr(page, acc), "index page: accuracy '%s' missing", acc);
    cr_expect(strstr(page, "class=\"notice\">Research use only"), "index page: research notice missing");
    check_no_internals("serve /", page, f.dir, f.dbid, NDB);
    free(page);
    for (int i = 0; i < NQ; i++) {
        char url[64];
        snprintf(url, sizeof url, "/query/%d", i);
        cr_assert_eq(test_http(port, "GET", url, NULL, NULL, &body, &len), 200);
        page = strndup(body, len);
        check_card(&f, page, i, acc);
        /* the full-size image: a link to its page (the image, and the lesion outline where one is recorded) */
        cr_expect(strstr(page, "<a href=\"/view/case/"), "query %d: neighbours do not link their full-size image", i);
        snprintf(url, sizeof url, "<a href=\"/view/query/%d\"", i);
        cr_expect(strstr(page, url), "query %d: the query image does not link its full size", i);
        check_no_internals(url, page, f.dir, f.dbid, NDB);
        free(page);
    }
    retrieval_server_stop(s);
}

/* An uploaded case: titled "Uploaded case", the client's file name without its folder, no upload
 * folder, the same accuracy line as the server's index page. */
Test(report_page, upload_page_says_what_is_what) { /* bounded by socket timeouts (no .timeout: see above) */
    online_fx f;
    make_online(&f);
    retrieval_server_cfg cfg = {f.db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 0, 0}, f.scene, NULL, 2, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    retrieval_server *s;
    int port;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    const char *body;
    size_t len;
    cr_assert_eq(test_http(port, "GET", "/", NULL, NULL, &body, &len), 200);
    const char *a = strstr(body, "<p class=\"valid\">"), *b = a ? strstr(a, "</p>") : NULL;
    cr_assert(a && b, "index page: no accuracy line");
    char *acc = strndup(a, b - a);
    cr_expect(strstr(acc, "class=\"vacc\""), "the case base's accuracy is not shown: %s", acc);
    char *img = path_join(f.dir, "images/s00002_v00.png"), *data;
    size_t dl, bl;
    cr_assert_eq(read_file(img, &data, &dl), 0);
    char *names[1] = {"/tmp/endoret_case_Ab12Cd/left colon.png"}; /* a client may send a path as its file name */
    char *mp = multipart(1, names, &data, &dl, &bl);
    cr_assert_eq(test_http_bin(port, "POST", "/case", "multipart/form-data; boundary=XyZ", mp, bl, &body, &len), 200, "%.*s", (int)len, body);
    char *page = strndup(body, len);
    cr_expect(strstr(page, "<h2>Uploaded case</h2>"), "the upload is not titled as one");
    cr_expect(strstr(page, "left colon.png"), "the uploaded file's name is missing");
    cr_expect(strstr(page, acc), "the upload page's accuracy differs from the index page's: %s", acc);
    cr_expect(strstr(page, "<div class=\"k\">System's suggestion</div>"), "no suggestion element");
    cr_expect(strstr(page, "class=\"notice\">Research use only"), "research notice missing");
    cr_expect(strstr(page, "class=\"legend\">Frames:"), "legend missing");
    int64_t none = -1;
    check_no_internals("upload page", page, f.dir, &none, 0);
    if (getenv("ENDORET_SCREENSHOT_DIR")) { /* keep it, to look at */
        char *keep = path_join(getenv("ENDORET_SCREENSHOT_DIR"), "upload.html");
        cr_expect_eq(write_file_atomic(keep, page, strlen(page)), ER_OK);
        free(keep);
    }
    free(page);
    free(mp);
    free(data);
    free(img);
    free(acc);
    retrieval_server_stop(s);
    free_online(&f);
}

/* ---- screenshot (issue #32 item 4): the pages as a browser draws them ---- */

/* Renders url into png (1280 x 2000) and checks what a reader sees: the header band, the research
 * notice's box, the suggestion's box and the legend's frame swatches are drawn. */
static void check_screenshot(const char *browser, const char *url, const char *png) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout 90 %s --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot=%s "
                              "--window-size=1280,2000 '%s' >/dev/null 2>&1", browser, png, url);
    cr_assert_eq(system(cmd), 0, "%s failed: %s", browser, cmd);
    image im = {0};
    cr_assert_eq(image_load(png, 3, &im), ER_OK, "%s", er_msg());
    cr_expect(im.w == 1280 && im.h == 2000, "%s: %dx%d screenshot", url, im.w, im.h);
    cr_expect_gt(count_colour(&im, 0x22, 0x32, 0x4d), 1280 * 40, "%s: the header is not drawn", url);
    cr_expect_gt(count_colour(&im, 0xff, 0xf6, 0xe0), 4000, "%s: the research notice is not drawn", url);
    cr_expect_gt(count_colour(&im, 0xee, 0xf3, 0xfb), 4000, "%s: the suggestion box is not drawn", url);
    cr_expect_gt(count_colour(&im, 0x9f, 0xd0, 0xae), 20, "%s: the legend's frame swatch is not drawn", url);
    image_free(&im);
    if (getenv("ENDORET_SCREENSHOT_DIR")) { /* keep it, to look at */
        snprintf(cmd, sizeof cmd, "cp %s '%s'/", png, getenv("ENDORET_SCREENSHOT_DIR"));
        cr_expect_eq(system(cmd), 0);
    }
}

Test(report_page, screenshot_report_and_serve) { /* each browser run under timeout(1) */
    const char *browser = find_chromium();
    if (!browser) cr_skip_test("chromium not installed: screenshot test skipped (apt-get install chromium)");
    page_fx f;
    make_page_fx(&f);
    char out[600], url[700], png[600];
    snprintf(out, sizeof out, "%s/report.html", f.dir);
    char kk[8];
    snprintf(kk, sizeof kk, "%d", K);
    char *argv[] = {"report", "--index", f.db, "--query", f.qemb, "--manifest", f.qman, "--k", kk, "--float", "--out", out};
    cr_assert_eq(cmd_report(12, argv), ER_OK, "%s", er_msg());
    snprintf(url, sizeof url, "file://%s", out);
    snprintf(png, sizeof png, "%s/report.png", f.dir);
    check_screenshot(browser, url, png);
    retrieval_server_cfg cfg = {f.db, f.qemb, f.qman, "127.0.0.1", 0, {K, 0, 0.1, 1, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    retrieval_server *s;
    int port;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    snprintf(url, sizeof url, "http://127.0.0.1:%d/query/0", port);
    snprintf(png, sizeof png, "%s/serve_query.png", f.dir);
    check_screenshot(browser, url, png);
    retrieval_server_stop(s);
}

/* One access-log line per answered request (issue 32 item 1): time, client, method, path, status
 * and ms; a decoded control byte in the path is written as '?', so a request cannot forge a line. */
Test(report_page, access_log_has_a_line_per_request) { /* bounded by socket timeouts (no .timeout: see above) */
    char line[512];
    access_log_format(line, sizeof line, "T", "127.0.0.1", "GET", "/query/1\nserve: forged", 404, 1.25);
    cr_expect_str_eq(line, "serve: T 127.0.0.1 GET /query/1?serve: forged 404 1.2 ms");
    char longp[400];
    memset(longp, 'a', sizeof longp - 1), longp[sizeof longp - 1] = 0;
    access_log_format(line, sizeof line, "T", "?", "GET", longp, 200, 0);
    cr_expect(strlen(line) < 260 && strstr(line, "a... 200"), "a long path is cut: %s", line);
    page_fx f;
    make_page_fx(&f);
    char *logp = path_join(f.dir, "access.log");
    FILE *log = fopen(logp, "w");
    cr_assert_not_null(log);
    retrieval_server_cfg cfg = {f.db, f.qemb, f.qman, "127.0.0.1", 0, {K, 0, 0.1, 1, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, log};
    retrieval_server *s;
    int port;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    const char *body;
    size_t len;
    cr_expect_eq(test_http(port, "GET", "/", NULL, NULL, &body, &len), 200);
    cr_expect_eq(test_http(port, "GET", "/query/0", NULL, NULL, &body, &len), 200);
    cr_expect_eq(test_http(port, "GET", "/nothing%0Aserve:%20forged", NULL, NULL, &body, &len), 404);
    cr_expect_eq(test_http(port, "POST", "/", NULL, "x", &body, &len), 405);
    retrieval_server_stop(s);
    fclose(log);
    size_t n = 0;
    char *text = NULL;
    cr_assert_eq(read_file(logp, &text, &n), ER_OK, "%s", er_msg());
    const char *want[] = {" GET / 200 ", " GET /query/0 200 ", " GET /nothing?serve: forged 404 ", " POST / 405 "};
    int lines = 0;
    for (char *p = text; (p = strchr(p, '\n')); p++) lines++;
    cr_expect_eq(lines, 4, "one line per request:\n%s", text);
    const char *at = text;
    for (int i = 0; i < 4; i++) {
        const char *hit = strstr(at, want[i]);
        cr_expect(hit, "line '%s' missing or out of order:\n%s", want[i], text);
        if (hit) at = hit;
    }
    cr_expect(!strncmp(text, "serve: 20", 9) && strstr(text, " 127.0.0.1 GET / 200 ") && strstr(text, " ms\n"), "%s", text);
    free(text);
    free(logp);
}
