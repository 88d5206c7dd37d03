/* The scoring web tool with a real HTTP client (tests/test_http.h: a minimal HTTP/1.1 client over a
 * loopback socket, so the test needs no extra library): load the page, fetch an image, submit scores,
 * reject malformed POSTs with 400, restart the server and resume. Also: couple drawing. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "datasets/image.h"
#include "infer/perceived/perceived_draw.h"
#include "infer/perceived/perceived_likert.h"
#include "infer/perceived/vss_server.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_http.h"
#include "tests/test_util.h"

/* One request; returns the status code, body copied into body (NUL-terminated, truncated). */
static int http(int port, const char *method, const char *path, const char *ctype, const char *payload, char *body, size_t cap) {
    const char *b;
    size_t bl;
    int status = test_http(port, method, path, ctype, payload, &b, &bl);
    if (bl > cap - 1) bl = cap - 1;
    memcpy(body, b, bl);
    body[bl] = 0;
    return status;
}

static const char *FORM = "application/x-www-form-urlencoded";

Test(perceived_vss, serve_score_restart_resume, .timeout = 30) {
    const char *dir = test_tmpdir();
    char sheet[256], scores[256], img[256];
    snprintf(sheet, sizeof sheet, "%s/sheet.csv", dir);
    snprintf(scores, sizeof scores, "%s/pairs.csv", dir);
    snprintf(img, sizeof img, "%s/a.png", dir);
    const uint8_t px[2 * 2 * 3] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9};
    cr_assert_eq(png_save_u8(img, px, 3, 2, 2), ER_OK, "%s", er_msg());
    char *png;
    size_t png_len;
    cr_assert_eq(read_file(img, &png, &png_len), ER_OK);
    vss_sheet sh = {0};
    sh.n = 3;
    sh.rows = xcalloc(3, sizeof *sh.rows);
    for (int i = 0; i < 3; i++) sh.rows[i] = (vss_sheet_row){10 + i, 20 + i, 0, 0.5, xstrdup("a.png"), xstrdup("")};
    cr_assert_eq(vss_sheet_save(sheet, &sh), ER_OK);
    vss_sheet_free(&sh);

    vss_server_cfg cfg = {sheet, scores, "alice", "127.0.0.1", 0, NULL};
    vss_server *s;
    int port;
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    cr_assert(port > 0);
    static char body[1 << 20];
    cr_assert_eq(http(port, "GET", "/", NULL, NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "couple 1 of 3") && strstr(body, "name=\"pair\" value=\"0\""), "%s", body);
    cr_assert_eq(http(port, "GET", "/image/0/a", NULL, NULL, body, sizeof body), 200);
    cr_assert(!memcmp(body, png, png_len));
    free(png);
    cr_assert_eq(http(port, "GET", "/image/0/b", NULL, NULL, body, sizeof body), 404);
    cr_assert_eq(http(port, "GET", "/image/7/a", NULL, NULL, body, sizeof body), 404);
    cr_assert_eq(http(port, "POST", "/score", FORM, "pair=0&score=2", body, sizeof body), 303);
    /* malformed POSTs: nothing recorded */
    const char *bad[] = {"pair=1&score=3", "pair=1&score=0", "pair=x&score=1", "pair=1", "score=1", "pair=9&score=1",
                         "pair=1&score=1&evil=1", "pair=-1&score=1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_eq(http(port, "POST", "/score", FORM, bad[i], body, sizeof body), 400, "accepted '%s'", bad[i]);
    cr_assert_eq(http(port, "POST", "/score", "text/plain", "pair=1&score=1", body, sizeof body), 400);
    cr_assert_eq(http(port, "POST", "/score", FORM, "pair=0&score=-1", body, sizeof body), 409); /* scored already */
    cr_assert_eq(http(port, "GET", "/", NULL, NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "couple 2 of 3"), "%s", body);
    vss_server_stop(s);

    /* the file holds exactly one judgement, in the ground-truth format */
    likert_gt g;
    cr_assert_eq(likert_load(scores, &g), ER_OK, "%s", er_msg());
    cr_assert(g.nrec == 1 && g.rec[0].a == 10 && g.rec[0].b == 20 && g.rec[0].score == 2);
    cr_assert_str_eq(g.rec[0].observer, "alice");
    likert_free(&g);

    /* restart: resumes at couple 2; another observer starts at couple 1 */
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    int n, done;
    vss_server_progress(s, &n, &done);
    cr_assert(n == 3 && done == 1);
    cr_assert_eq(http(port, "GET", "/", NULL, NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "couple 2 of 3"), "%s", body);
    cr_assert_eq(http(port, "POST", "/score", FORM, "pair=1&score=-2", body, sizeof body), 303);
    cr_assert_eq(http(port, "POST", "/score", FORM, "pair=2&score=1", body, sizeof body), 303);
    cr_assert_eq(http(port, "GET", "/", NULL, NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "id=\"done\""), "%s", body);
    vss_server_stop(s);
    vss_server_cfg cfg2 = {sheet, scores, "bob", NULL, 0, NULL};
    cr_assert_eq(vss_server_start(&cfg2, &s, &port), ER_OK);
    cr_assert_eq(http(port, "GET", "/", NULL, NULL, body, sizeof body), 200);
    cr_assert(strstr(body, "couple 1 of 3"));
    cr_assert_eq(http(port, "POST", "/score", FORM, "pair=0&score=1", body, sizeof body), 303);
    vss_server_stop(s);
    cr_assert_eq(likert_load(scores, &g), ER_OK);
    cr_assert(g.nrec == 4 && g.npairs == 3 && g.pairs[0].score == 1.5, "nrec %d npairs %d", g.nrec, g.npairs);
    likert_free(&g);
}

/* Two observers' servers running at once on one scores file: interleaved answers are all kept. */
Test(perceived_vss, two_servers_one_file, .timeout = 30) {
    const char *dir = test_tmpdir();
    char sheet[256], scores[256];
    snprintf(sheet, sizeof sheet, "%s/sheet.csv", dir);
    snprintf(scores, sizeof scores, "%s/pairs.csv", dir);
    write_file_atomic(sheet, "pair,a,b,process,prior_distance,image_a,image_b\n0,1,2,0,0.5,,\n1,3,4,0,0.7,,\n", 76);
    vss_server_cfg ca = {sheet, scores, "alice", NULL, 0, NULL}, cb = {sheet, scores, "bob", NULL, 0, NULL};
    vss_server *sa, *sb;
    int pa, pb;
    cr_assert_eq(vss_server_start(&ca, &sa, &pa), ER_OK, "%s", er_msg());
    cr_assert_eq(vss_server_start(&cb, &sb, &pb), ER_OK, "%s", er_msg());
    static char body[4096];
    cr_assert_eq(http(pa, "POST", "/score", FORM, "pair=0&score=2", body, sizeof body), 303);
    cr_assert_eq(http(pb, "POST", "/score", FORM, "pair=0&score=1", body, sizeof body), 303);
    cr_assert_eq(http(pa, "POST", "/score", FORM, "pair=1&score=-1", body, sizeof body), 303);
    cr_assert_eq(http(pb, "POST", "/score", FORM, "pair=1&score=-2", body, sizeof body), 303);
    vss_server_stop(sa);
    vss_server_stop(sb);
    likert_gt g;
    cr_assert_eq(likert_load(scores, &g), ER_OK, "%s", er_msg());
    cr_assert(g.nrec == 4 && g.npairs == 2 && g.pairs[0].score == 1.5 && g.pairs[1].score == -1.5, "nrec %d", g.nrec);
    likert_free(&g);
}

Test(perceived_vss, start_errors) {
    const char *dir = test_tmpdir();
    char sheet[256], scores[256];
    snprintf(sheet, sizeof sheet, "%s/sheet.csv", dir);
    snprintf(scores, sizeof scores, "%s/pairs.csv", dir);
    vss_server *s;
    int port;
    vss_server_cfg cfg = {sheet, scores, "alice", NULL, 0, NULL};
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_INPUT); /* no sheet */
    write_file_atomic(sheet, "pair,a,b,process,prior_distance,image_a,image_b\n0,1,2,0,0.5,,\n1,3,x,0,1,,\n", 72);
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_INPUT);
    cr_assert(strstr(er_msg(), "line 3"), "%s", er_msg());
    write_file_atomic(sheet, "pair,a,b,process,prior_distance,image_a,image_b\n0,1,2,0,0.5,,\n", 62);
    write_file_atomic(scores, "a,b,score,observer\n1,2,5,alice\n", 31);
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_INPUT); /* corrupt scores file */
    cr_assert(strstr(er_msg(), "pairs.csv: line 2"), "%s", er_msg());
    vss_server_cfg bad = {sheet, scores, "a,b", NULL, 0, NULL};
    cr_assert_eq(vss_server_start(&bad, &s, &port), ER_INPUT);
}

/* issue 17 #1: a sheet naming files outside the sheet's (and manifest's) folder, or files that are
 * not images, gets 404 for them; a real image under the manifest's folder is served only when the
 * manifest is given. */
Test(perceived_vss, serves_only_images_under_allowed_folders, .timeout = 30) {
    char dir[64], other[64];
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(other, sizeof other, "%s", test_tmpdir());
    char *sheet = path_join(dir, "sheet.csv"), *scores = path_join(dir, "pairs.csv"), *inside = path_join(dir, "in.png");
    char *fake = path_join(dir, "fake.png"), *link = path_join(dir, "link.png");
    char *outside = path_join(other, "out.png"), *man = path_join(other, "manifest.csv");
    const uint8_t px[3] = {1, 2, 3};
    cr_assert_eq(png_save_u8(inside, px, 3, 1, 1), ER_OK);
    cr_assert_eq(png_save_u8(outside, px, 3, 1, 1), ER_OK);
    cr_assert_eq(write_file_atomic(fake, "\x89PNG\r\n\x1a\nroot:x:0:0", 18), ER_OK);
    cr_assert_eq(write_file_atomic(man, "path\nout.png\n", 13), ER_OK);
    cr_assert_eq(symlink("/etc/passwd", link), 0);
    char text[2048];
    snprintf(text, sizeof text, "pair,a,b,process,prior_distance,image_a,image_b\n"
             "0,1,2,0,0.5,/etc/passwd,../../../../../../../etc/passwd\n1,3,4,0,0.5,fake.png,link.png\n"
             "2,5,6,0,0.5,in.png,%s\n", outside);
    cr_assert_eq(write_file_atomic(sheet, text, strlen(text)), ER_OK);
    vss_server_cfg cfg = {sheet, scores, "alice", NULL, 0, NULL};
    vss_server *s;
    int port;
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    static char body[1 << 16];
    const char *refused[] = {"/image/0/a", "/image/0/b", "/image/1/a", "/image/1/b", "/image/2/b"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        cr_expect_eq(http(port, "GET", refused[i], NULL, NULL, body, sizeof body), 404, "%s served", refused[i]);
        cr_expect_null(strstr(body, "root:"), "%s leaked a system file", refused[i]);
    }
    cr_expect_eq(http(port, "GET", "/image/2/a", NULL, NULL, body, sizeof body), 200);
    vss_server_stop(s);
    cfg.manifest = man; /* the manifest's folder is now allowed too */
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    cr_expect_eq(http(port, "GET", "/image/2/b", NULL, NULL, body, sizeof body), 200);
    cr_expect_eq(http(port, "GET", "/image/0/a", NULL, NULL, body, sizeof body), 404);
    vss_server_stop(s);
    free(sheet), free(scores), free(inside), free(fake), free(link), free(outside), free(man);
}

/* issue 17 #2, #3, #11: an observer name of 9000 characters (it overflowed the page buffer), a sheet
 * with no couples, a GET with a body, a NUL in the URL or in a form value: each refused. */
Test(perceived_vss, refuses_long_observer_empty_sheet_bodies_and_nul, .timeout = 30) {
    const char *dir = test_tmpdir();
    char sheet[256], scores[256];
    snprintf(sheet, sizeof sheet, "%s/sheet.csv", dir);
    snprintf(scores, sizeof scores, "%s/pairs.csv", dir);
    const char *header = "pair,a,b,process,prior_distance,image_a,image_b\n";
    cr_assert_eq(write_file_atomic(sheet, header, strlen(header)), ER_OK);
    vss_server *s;
    int port;
    vss_server_cfg cfg = {sheet, scores, "alice", NULL, 0, NULL};
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_INPUT, "a sheet with no couples started");
    cr_expect(strstr(er_msg(), "sheet.csv") && strstr(er_msg(), "no couples"), "%s", er_msg());
    char text[256];
    snprintf(text, sizeof text, "%s0,1,2,0,0.5,,\n", header);
    cr_assert_eq(write_file_atomic(sheet, text, strlen(text)), ER_OK);
    static char name[9001], body[1 << 16];
    memset(name, 'o', 9000);
    cfg.observer = name;
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_INPUT, "a 9000-character observer name was accepted");
    cr_expect(strstr(er_msg(), "--observer"), "%s", er_msg());
    name[VSS_MAX_OBSERVER] = 0; /* the longest name allowed: the page shows it */
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    cr_expect_eq(http(port, "GET", "/", NULL, NULL, body, sizeof body), 200);
    cr_expect(strstr(body, name) && strstr(body, "</html>"), "%s", body);
    cr_expect_eq(http(port, "GET", "/", "text/plain", "a body", body, sizeof body), 400);
    cr_expect_eq(http(port, "GET", "/%00", NULL, NULL, body, sizeof body), 400);
    cr_expect_eq(http(port, "GET", "/image/0/a%00", NULL, NULL, body, sizeof body), 400);
    cr_expect_eq(http(port, "POST", "/score", FORM, "pair=0%00x&score=1", body, sizeof body), 400);
    cr_expect_eq(http(port, "POST", "/score", FORM, "pair=0&score=1%00", body, sizeof body), 400);
    int n, done;
    vss_server_progress(s, &n, &done);
    cr_expect_eq(done, 0, "a form value with a NUL was recorded");
    vss_server_stop(s);
}

/* Drawing ∝ 1/density of the prior distance must flatten the distribution of drawn distances
 * compared with the distribution over all cross-patient couples (the densest bin loses share, the
 * sparsest gains), never pair a patient with itself, never repeat a couple, be reproducible. */
Test(perceived_vss, draw_inverse_density) {
    const int n = 120, B = 10;
    float x[2 * 120];
    int64_t group[120];
    rng_t r = rng_make(4, 4);
    for (int i = 0; i < n; i++) {
        double t = M_PI * rng_uniform_double(&r);
        x[2 * i] = cos(t); x[2 * i + 1] = sin(t);
        group[i] = i / 2; /* two items per patient */
    }
    pdist_set p;
    pdist_prepare(&p, x, n, 2, PD_COSINE);
    vss_draw_pair d1[300], d2[300];
    int got = vss_draw(&p, group, 300, 3, 20, 42, d1);
    cr_assert_eq(got, 300);
    cr_assert_eq(vss_draw(&p, group, 300, 3, 20, 42, d2), 300);
    for (int k = 0; k < got; k++) cr_assert(d1[k].a == d2[k].a && d1[k].b == d2[k].b && d1[k].process == d2[k].process);
    double lo = 1e9, hi = -1e9, base[10] = {0}, drawn[10] = {0}, all = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (group[i] != group[j]) { double d = pdist_ij(&p, i, j); if (d < lo) lo = d; if (d > hi) hi = d; }
#define BIN(d) ((int)(((d) - lo) / (hi - lo) * B) >= B ? B - 1 : (int)(((d) - lo) / (hi - lo) * B))
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (group[i] != group[j]) { base[BIN(pdist_ij(&p, i, j))]++; all++; }
    for (int k = 0; k < got; k++) {
        cr_assert(group[d1[k].a] != group[d1[k].b]);
        cr_assert_float_eq(d1[k].prior, pdist_ij(&p, d1[k].a, d1[k].b), 1e-12);
        drawn[BIN(d1[k].prior)]++;
        for (int l = 0; l < k; l++)
            cr_assert(!((d1[l].a == d1[k].a && d1[l].b == d1[k].b) || (d1[l].a == d1[k].b && d1[l].b == d1[k].a)), "couple repeated");
        if (k % 3) cr_assert_eq(d1[k].a, d1[k - 1].a); /* processes of 3 around one reference */
    }
#undef BIN
    int dense = 0, sparse = -1;
    for (int b = 0; b < B; b++) {
        if (base[b] > base[dense]) dense = b;
        if (base[b] >= 20 && (sparse < 0 || base[b] < base[sparse])) sparse = b;
    }
    cr_assert(sparse >= 0 && sparse != dense);
    cr_log_info("densest bin: drawn %.3f vs base %.3f; sparsest: drawn %.3f vs base %.3f", drawn[dense] / got, base[dense] / all, drawn[sparse] / got, base[sparse] / all);
    cr_assert(drawn[dense] / got < 0.8 * base[dense] / all, "densest bin: drawn %.3f vs base %.3f", drawn[dense] / got, base[dense] / all);
    cr_assert(drawn[sparse] / got > 1.5 * base[sparse] / all, "sparsest bin: drawn %.3f vs base %.3f", drawn[sparse] / got, base[sparse] / all);
    pdist_free(&p);
}

/* A multipart POST /score (the HTTP fuzz target's input tests/fuzz/corpus/http/vss_multipart_null_field)
 * made libmicrohttpd hand post_field a field with no data (NULL, 0 bytes), which it passed to memchr:
 * undefined behaviour (UBSan aborts under `make asan`). Found once the fuzz target sent endoret
 * serve's multipart seeds to vss serve too. The server must answer and record nothing. */
Test(perceived_vss, a_field_with_no_data_is_not_read) {
    const char *dir = test_tmpdir();
    char sheet[256], scores[256];
    snprintf(sheet, sizeof sheet, "%s/sheet.csv", dir);
    snprintf(scores, sizeof scores, "%s/pairs.csv", dir);
    const char *text = "pair,a,b,process,prior_distance,image_a,image_b\n0,1,2,0,0.5,,\n";
    cr_assert_eq(write_file_atomic(sheet, text, strlen(text)), ER_OK);
    vss_server *s;
    int port;
    vss_server_cfg cfg = {sheet, scores, "alice", NULL, 0, NULL};
    cr_assert_eq(vss_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    char *raw;
    size_t rl;
    cr_assert_eq(read_file("tests/fuzz/corpus/http/vss_multipart_null_field", &raw, &rl), ER_OK, "%s", er_msg());
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(write(fd, raw, rl), (ssize_t)rl);
    shutdown(fd, SHUT_WR);
    char buf[4096];
    for (int i = 0; i < 100 && read(fd, buf, sizeof buf) > 0; i++) {}
    close(fd);
    free(raw);
    static char body[1 << 16];
    cr_expect_eq(http(port, "GET", "/", NULL, NULL, body, sizeof body), 200, "the server still answers");
    int n, done;
    vss_server_progress(s, &n, &done);
    cr_expect_eq(done, 0);
    vss_server_stop(s);
}
