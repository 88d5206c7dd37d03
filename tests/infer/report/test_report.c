/* Report and retrieval server on a tiny generated case set (small PNGs in a temp folder, random
 * embeddings, a case database built through the infer API): the static page holds every query,
 * its neighbours in the order of an independent brute-force cosine ranking, the vote sentence of
 * an independent majority count, escaped labels, embedded thumbnails; the server serves the same
 * views and only registered images (no path traversal), answers malformed requests with 400/404. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "datasets/image.h"
#include "infer/retrieval/casedb.h"
#include "infer/report/report.h"
#include "infer/report/report_html.h"
#include "infer/report/retrieval_server.h"
#include "infer/report/thumbnail.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_http.h"
#include "tests/test_util.h"

int cmd_report(int argc, char **argv);

#define NDB 24
#define NQ 5
#define DIM 8
#define K 5

static const char *EVIL = "<script>alert('x')</script>";
static const char *EVIL_ESC = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;";

typedef struct {
    char dir[256], db[512], qemb[512], qman[512];
    float dbx[NDB * DIM], qx[NQ * DIM];
    int dblab[NDB], qlab[NQ];
    int64_t dbid[NDB];
} fixture;

static void gauss_fill(rng_t *r, float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = rng_normal(r);
}

/* images: a flat colour per item; labels: 0 "benign", 1 EVIL (sorted order: '<' < 'b') */
static void make_fixture(fixture *f) {
    snprintf(f->dir, sizeof f->dir, "%s", test_tmpdir());
    snprintf(f->db, sizeof f->db, "%s/cases.db", f->dir);
    snprintf(f->qemb, sizeof f->qemb, "%s/q.safetensors", f->dir);
    snprintf(f->qman, sizeof f->qman, "%s/q.csv", f->dir);
    rng_t r = rng_make(11, rng_stream(1, 0, 0));
    gauss_fill(&r, f->dbx, NDB * DIM);
    /* queries near chosen cases so the neighbours are far from ties */
    for (int i = 0; i < NQ; i++) {
        gauss_fill(&r, f->qx + i * DIM, DIM);
        for (int d = 0; d < DIM; d++) f->qx[i * DIM + d] = f->dbx[(3 * i + 1) * DIM + d] + 0.3f * f->qx[i * DIM + d];
    }
    uint8_t px[12 * 10 * 3];
    char *paths[NDB];
    for (int i = 0; i < NDB; i++) {
        f->dbid[i] = 100 + 7 * i;
        f->dblab[i] = (i * 5 / 3) % 2;
        for (int p = 0; p < 12 * 10; p++) { px[3 * p] = (uint8_t)(10 * i); px[3 * p + 1] = 200; px[3 * p + 2] = (uint8_t)(255 - 10 * i); }
        char name[600];
        snprintf(name, sizeof name, "%s/c%02d.png", f->dir, i);
        cr_assert_eq(png_save_u8(name, px, 3, 10, 12), ER_OK, "%s", er_msg());
        paths[i] = xstrdup(name);
    }
    emb_set e;
    emb_alloc(&e, NDB, DIM);
    memcpy(e.x, f->dbx, sizeof f->dbx);
    e.labels = xmalloc(NDB * sizeof(int64_t));
    for (int i = 0; i < NDB; i++) { e.ids[i] = f->dbid[i]; e.labels[i] = f->dblab[i]; }
    e.nlabel_names = 2;
    e.label_names = xmalloc(2 * sizeof(char *));
    e.label_names[0] = xstrdup(EVIL); /* sorted label order, as manifest_label_ids gives */
    e.label_names[1] = xstrdup("benign");
    cr_assert_eq(casedb_create(f->db, &e, paths, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 0), ER_OK, "%s", er_msg());
    emb_free(&e);
    for (int i = 0; i < NDB; i++) free(paths[i]);
    /* queries: embedding file + manifest with images and labels (query 4 has no label) */
    FILE *m = fopen(f->qman, "w");
    cr_assert(m);
    fprintf(m, "path,label,scene,view,patient\n");
    for (int i = 0; i < NQ; i++) {
        for (int p = 0; p < 12 * 10; p++) { px[3 * p] = 250; px[3 * p + 1] = (uint8_t)(40 * i); px[3 * p + 2] = 0; }
        char name[600];
        snprintf(name, sizeof name, "%s/q%d.png", f->dir, i);
        cr_assert_eq(png_save_u8(name, px, 3, 10, 12), ER_OK);
        f->qlab[i] = i == NQ - 1 ? -1 : i % 2;
        fprintf(m, "q%d.png,%s,s%d,%d,p%d\n", i, f->qlab[i] < 0 ? "" : f->qlab[i] ? "benign" : "\"<script>alert('x')</script>\"", i, i, i);
    }
    fclose(m);
    emb_alloc(&e, NQ, DIM);
    memcpy(e.x, f->qx, sizeof f->qx);
    cr_assert_eq(emb_save(f->qemb, &e), ER_OK, "%s", er_msg());
    emb_free(&e);
}

/* independent reference: top-K by cosine distance (ties by id), majority with nearest tie break */
static void reference(const fixture *f, int qi, int64_t *ids, int *pred, int *agree) {
    double d[NDB];
    int order[NDB];
    const float *q = f->qx + qi * DIM;
    for (int i = 0; i < NDB; i++) {
        double dot = 0, na = 0, nb = 0;
        for (int k = 0; k < DIM; k++) { dot += q[k] * f->dbx[i * DIM + k]; na += q[k] * q[k]; nb += f->dbx[i * DIM + k] * f->dbx[i * DIM + k]; }
        d[i] = 1 - dot / sqrt(na * nb);
        order[i] = i;
    }
    for (int a = 0; a < NDB; a++)
        for (int b = a + 1; b < NDB; b++)
            if (d[order[b]] < d[order[a]] || (d[order[b]] == d[order[a]] && f->dbid[order[b]] < f->dbid[order[a]])) {
                int t = order[a]; order[a] = order[b]; order[b] = t;
            }
    int cnt[2] = {0, 0};
    for (int j = 0; j < K; j++) { ids[j] = f->dbid[order[j]]; cnt[f->dblab[order[j]]]++; }
    *pred = cnt[0] > cnt[1] ? 0 : cnt[1] > cnt[0] ? 1 : f->dblab[order[0]];
    *agree = cnt[*pred];
}

static char *read_text(const char *path) {
    char *t;
    size_t n;
    cr_assert_eq(read_file(path, &t, &n), ER_OK, "%s", er_msg());
    return t;
}

/* the section of query row i: from its opening tag to the next section */
static char *query_section(const char *html, int i) {
    char tag[64];
    snprintf(tag, sizeof tag, "id=\"q%d\"", i);
    const char *a = strstr(html, tag);
    cr_assert(a, "query row %d missing", i);
    const char *b = strstr(a, "</section>");
    cr_assert(b);
    char *s = xmalloc(b - a + 1);
    memcpy(s, a, b - a);
    s[b - a] = 0;
    return s;
}

static void check_query_html(const fixture *f, const char *sec, int i, int expect_images) {
    int64_t ids[K];
    int pred, agree;
    reference(f, i, ids, &pred, &agree);
    char want[128];
    snprintf(want, sizeof want, "data-query=\"%d\"", i);
    cr_expect(strstr(sec, want), "query %d: %s", i, want);
    /* neighbour ids, in order */
    const char *p = sec;
    for (int j = 0; j < K; j++) {
        p = strstr(p, "data-case=\"");
        cr_assert(p, "query %d: only %d neighbours", i, j);
        p += 11;
        cr_expect_eq(strtoll(p, NULL, 10), ids[j], "query %d rank %d: case %lld, expected %lld", i, j, strtoll(p, NULL, 10), (long long)ids[j]);
    }
    cr_expect_null(strstr(p, "data-case=\""), "query %d: more than %d neighbours", i, K);
    /* vote sentence (label escaped) */
    char vote[256];
    snprintf(vote, sizeof vote, "%d of %d similar past cases were %s", agree, K, pred == 0 ? EVIL_ESC : "benign");
    cr_expect(strstr(sec, vote), "query %d: vote text '%s' missing", i, vote);
    const char *mark = f->qlab[i] < 0 ? "<span class=\"nomaj\">not recorded</span>" : pred == f->qlab[i] ? "correct" : "incorrect";
    cr_expect(strstr(sec, mark), "query %d: marker '%s' missing", i, mark);
    if (expect_images) {
        int n = 0;
        for (const char *s = sec; (s = strstr(s, "src=\"data:image/jpeg;base64,")); s++) n++;
        cr_expect_eq(n, K + 1, "query %d: %d embedded images, expected %d", i, n, K + 1);
    }
}

Test(report, static_page_neighbours_vote_escaping) {
    fixture f;
    make_fixture(&f);
    char out[600];
    snprintf(out, sizeof out, "%s/report.html", f.dir);
    char *argv[] = {"report", "--index", f.db, "--query", f.qemb, "--manifest", f.qman, "--k", "5", "--float", "--out", out};
    cr_assert_eq(cmd_report(12, argv), ER_OK, "%s", er_msg());
    char *html = read_text(out);
    cr_expect_null(strstr(html, "<script"), "an unescaped label reached the page");
    cr_expect(strstr(html, EVIL_ESC), "escaped label missing");
    int correct = 0, scored = 0;
    for (int i = 0; i < NQ; i++) {
        char *sec = query_section(html, i);
        check_query_html(&f, sec, i, 1);
        free(sec);
        int64_t ids[K];
        int pred, agree;
        reference(&f, i, ids, &pred, &agree);
        if (f.qlab[i] >= 0) { scored++; correct += pred == f.qlab[i]; }
    }
    char acc[128];
    snprintf(acc, sizeof acc, "%.1f%%</div><div class=\"mute\">vote accuracy: %d of %d", 100.0 * correct / scored, correct, scored);
    cr_expect(strstr(html, acc), "summary '%s' missing", acc);
    cr_expect(strstr(html, "<table class=\"conf\">"), "confusion matrix missing");
    cr_expect_null(strstr(html, "http://"), "the page must not load external assets");
    free(html);
}

Test(report, limit_leave_one_out_and_errors) {
    fixture f;
    make_fixture(&f);
    casedb db;
    cr_assert_eq(casedb_open(f.db, &db), ER_OK, "%s", er_msg());
    report_cfg cfg = {K, 0, 0.1, 0, 0};
    report_data r;
    cr_assert_eq(report_build(&db, f.db, NULL, NULL, NULL, &cfg, &r), ER_OK, "%s", er_msg());
    cr_expect_eq(r.nq, NDB);
    for (int i = 0; i < r.nq; i++) {
        cr_expect_eq(r.q[i].id, f.dbid[i]);
        cr_expect_eq(r.q[i].nnb, K);
        cr_expect_eq(r.q[i].truth, f.dblab[i]);
        for (int j = 0; j < r.q[i].nnb; j++) {
            cr_expect_neq(r.q[i].nb[j].id, r.q[i].id, "case %lld is its own neighbour", (long long)r.q[i].id);
            if (j) cr_expect_geq(r.q[i].nb[j].hamming, r.q[i].nb[j - 1].hamming, "ranks not ascending");
        }
    }
    report_free(&r);
    casedb_close(&db);
    char out[600];
    snprintf(out, sizeof out, "%s/r.html", f.dir);
    char *lim[] = {"report", "--index", f.db, "--query", f.qemb, "--limit", "2", "--out", out};
    cr_assert_eq(cmd_report(9, lim), ER_OK, "%s", er_msg());
    char *html = read_text(out);
    cr_expect(strstr(html, "id=\"q1\""));
    cr_expect_null(strstr(html, "id=\"q2\""), "--limit 2 showed a third query");
    free(html);
    char *badvote[] = {"report", "--index", f.db, "--query", f.qemb, "--vote", "mean", "--out", out};
    cr_expect_eq(cmd_report(9, badvote), ER_INPUT);
    char *noout[] = {"report", "--index", f.db, "--query", f.qemb};
    cr_expect_eq(cmd_report(5, noout), ER_INPUT);
    char *badman[] = {"report", "--index", f.db, "--query", f.qemb, "--manifest", f.db, "--out", out};
    cr_expect_neq(cmd_report(9, badman), ER_OK, "a database given as manifest must be refused");
    /* wrong dimension */
    emb_set e;
    emb_alloc(&e, 2, DIM + 1);
    char q2[600];
    snprintf(q2, sizeof q2, "%s/q2.safetensors", f.dir);
    cr_assert_eq(emb_save(q2, &e), ER_OK);
    emb_free(&e);
    char *baddim[] = {"report", "--index", f.db, "--query", q2, "--out", out};
    cr_expect_eq(cmd_report(7, baddim), ER_INPUT);
    cr_expect(strstr(er_msg(), "9-d"), "message names the dimensions: %s", er_msg());
}

Test(report, base64_and_jpeg_thumbnail) {
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *s = base64_encode((const uint8_t *)in[i], strlen(in[i]));
        cr_expect_str_eq(s, want[i]);
        free(s);
    }
    image im = {0}, back = {0};
    image_ensure(&im, 3, 20, 30);
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 600; p++) im.data[c * 600 + p] = c == 0 ? 0.8f : c == 1 ? 0.3f : 0.1f;
    uint8_t *jpg;
    size_t len;
    cr_assert_eq(image_encode_jpeg(&im, 90, &jpg, &len), ER_OK, "%s", er_msg());
    cr_expect_str_eq(image_mime_type(jpg, len), "image/jpeg");
    cr_assert_eq(image_decode_jpeg(jpg, len, "mem", 3, &back), ER_OK, "%s", er_msg());
    cr_expect_eq(back.w, 30);
    cr_expect_eq(back.h, 20);
    for (int c = 0; c < 3; c++) cr_expect(fabsf(back.data[c * 600 + 215] - im.data[c * 600 + 215]) < 0.03f, "channel %d", c);
    free(jpg);
    image_free(&back);
    /* thumbnail of a missing file: a clear error */
    char *uri;
    cr_expect_eq(thumbnail_data_uri("/nonexistent/x.png", 64, 80, &uri), ER_INPUT);
    image_free(&im);
}

/* ---- server ---- */
/* One request without a body; returns the status code; body/len point into a static buffer. */
static int http(int port, const char *method, const char *path, const char **body, size_t *blen) {
    return test_http(port, method, path, NULL, NULL, body, blen);
}

Test(report, server_pages_images_traversal) { /* bounded by socket timeouts: no Criterion .timeout (it leaks in libcriterion under make asan) */
    fixture f;
    make_fixture(&f);
    retrieval_server_cfg cfg = {f.db, f.qemb, f.qman, "127.0.0.1", 0, {K, 0, 0.1, 1, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    retrieval_server *s;
    int port;
    cr_assert_eq(retrieval_server_start(&cfg, &s, &port), ER_OK, "%s", er_msg());
    cr_assert_gt(port, 0);
    const char *body;
    size_t len;
    cr_expect_eq(http(port, "GET", "/", &body, &len), 200);
    cr_expect_null(strstr(body, "<script"), "unescaped label on the index page");
    for (int i = 0; i < NQ; i++) {
        char want[64];
        snprintf(want, sizeof want, "href=\"/query/%d\"", i);
        cr_expect(strstr(body, want), "index page lacks %s", want);
    }
    for (int i = 0; i < NQ; i++) {
        char url[64];
        snprintf(url, sizeof url, "/query/%d", i);
        cr_assert_eq(http(port, "GET", url, &body, &len), 200);
        char *sec = query_section(body, i);
        check_query_html(&f, sec, i, 0);
        char img[64];
        snprintf(img, sizeof img, "src=\"/image/query/%d\"", i);
        cr_expect(strstr(sec, img), "query %d: image link missing", i);
        free(sec);
    }
    /* images: exactly the registered files' bytes */
    char *want;
    size_t wl;
    char path[600];
    snprintf(path, sizeof path, "%s/c03.png", f.dir);
    cr_assert_eq(read_file(path, &want, &wl), ER_OK);
    char url[64];
    snprintf(url, sizeof url, "/image/case/%lld", (long long)f.dbid[3]);
    cr_expect_eq(http(port, "GET", url, &body, &len), 200);
    cr_expect(len == wl && !memcmp(body, want, wl), "case image bytes differ");
    free(want);
    snprintf(path, sizeof path, "%s/q2.png", f.dir);
    cr_assert_eq(read_file(path, &want, &wl), ER_OK);
    cr_expect_eq(http(port, "GET", "/image/query/2", &body, &len), 200);
    cr_expect(len == wl && !memcmp(body, want, wl), "query image bytes differ");
    free(want);
    /* refused */
    struct { const char *m, *u; int lo, hi; } bad[] = {
        {"GET", "/image?path=../../etc/passwd", 400, 404},
        {"GET", "/image/../../etc/passwd", 400, 404},
        {"GET", "/image/case/../../../etc/passwd", 400, 404},
        {"GET", "/image/case/..%2F..%2Fetc%2Fpasswd", 400, 404},
        {"GET", "/image/query/%2e%2e", 400, 404},
        {"GET", "/image/case/1", 404, 404},      /* not a case id */
        {"GET", "/image/case/99999999999999999999", 400, 400},
        {"GET", "/image/query/-1", 400, 400},
        {"GET", "/query/abc", 400, 400},
        {"GET", "/query/5", 404, 404},
        {"GET", "/query/", 400, 400},
        {"GET", "/etc/passwd", 404, 404},
        {"GET", "/query/0%00", 400, 400}, /* issue 17 #3: read as /query/0 before */
        {"GET", "/%00", 400, 400},
        {"POST", "/", 405, 405},
        {"DELETE", "/query/0", 405, 405},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = http(port, bad[i].m, bad[i].u, &body, &len);
        cr_expect(st >= bad[i].lo && st <= bad[i].hi, "%s %s: status %d", bad[i].m, bad[i].u, st);
        cr_expect_null(strstr(body, "root:"), "%s leaked /etc/passwd", bad[i].u);
    }
    /* issue 17 #3: a GET with a body is refused (it got 200) */
    cr_expect_eq(test_http(port, "GET", "/query/0", "text/plain", "a body", &body, &len), 400);
    retrieval_server_stop(s);
    /* stopped: the port no longer answers */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_expect_neq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "server still listening after stop");
    close(fd);
}

Test(report, server_refuses_bad_config) {
    fixture f;
    make_fixture(&f);
    retrieval_server *s;
    int port;
    retrieval_server_cfg badbind = {f.db, f.qemb, NULL, "localhost:80", 0, {K, 0, 0.1, 0, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    cr_expect_eq(retrieval_server_start(&badbind, &s, &port), ER_INPUT);
    retrieval_server_cfg badport = {f.db, f.qemb, NULL, NULL, 70000, {K, 0, 0.1, 0, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    cr_expect_eq(retrieval_server_start(&badport, &s, &port), ER_INPUT);
    retrieval_server_cfg nodb = {"/nonexistent.db", NULL, NULL, NULL, 0, {K, 0, 0.1, 0, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    cr_expect_neq(retrieval_server_start(&nodb, &s, &port), ER_OK);
    retrieval_server_cfg badk = {f.db, NULL, NULL, NULL, 0, {0, 0, 0.1, 0, 0}, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL};
    cr_expect_eq(retrieval_server_start(&badk, &s, &port), ER_INPUT);
}

/* the vote sentence on hand-built votes: agreement count, unlabelled neighbours, the tie note */
Test(report, vote_sentence) {
    report_data r = {0};
    char *names[2] = {"a", "b"};
    r.nclass = 2;
    r.label_names = names;
    report_neighbour nb[4] = {{.label = 1}, {.label = 0}, {.label = 0}, {.label = 1}};
    report_query q = {.nnb = 4, .nb = nb, .pred = 1, .agree = 2, .voters = 4};
    r.nq = 1;
    r.q = &q;
    char t[256];
    report_vote_text(&r, 0, t, sizeof t);
    cr_expect_str_eq(t, "2 of 4 similar past cases were b, as many as were a (a tie: no majority)");
    r.weighted = 1; /* a weighted vote has no tie to explain */
    report_vote_text(&r, 0, t, sizeof t);
    cr_expect_str_eq(t, "2 of 4 similar past cases were b");
    r.weighted = 0;
    nb[0].label = -1;
    q.pred = 0;
    q.voters = 3;
    report_vote_text(&r, 0, t, sizeof t);
    cr_expect_str_eq(t, "2 of 3 similar past cases with a known diagnosis were a");
    for (int j = 0; j < 4; j++) nb[j].label = -1;
    q.pred = -1;
    q.agree = q.voters = 0;
    report_vote_text(&r, 0, t, sizeof t);
    cr_expect_str_eq(t, "none of the 4 similar past cases has a known diagnosis");
}

/* --vote weighted: each card's prediction is the label with the largest sum of exp(sim / tau) */
Test(report, weighted_vote_prediction) {
    fixture f;
    make_fixture(&f);
    char out[600];
    snprintf(out, sizeof out, "%s/w.html", f.dir);
    char *argv[] = {"report", "--index", f.db, "--query", f.qemb, "--k", "7", "--vote", "weighted", "--tau", "0.5", "--float", "--out", out};
    cr_assert_eq(cmd_report(14, argv), ER_OK, "%s", er_msg());
    char *html = read_text(out);
    int differs = 0; /* queries where the weighted vote and a majority vote disagree */
    for (int i = 0; i < NQ; i++) {
        /* independent ranking and scores */
        double d[NDB];
        int used[NDB] = {0};
        const float *q = f.qx + i * DIM;
        for (int c = 0; c < NDB; c++) {
            double dot = 0, na = 0, nb = 0;
            for (int k = 0; k < DIM; k++) { dot += q[k] * f.dbx[c * DIM + k]; na += q[k] * q[k]; nb += f.dbx[c * DIM + k] * f.dbx[c * DIM + k]; }
            d[c] = 1 - dot / sqrt(na * nb);
        }
        double score[2] = {0, 0};
        int first = -1, votes[2] = {0, 0};
        for (int j = 0; j < 7; j++) {
            int best = -1;
            for (int c = 0; c < NDB; c++) if (!used[c] && (best < 0 || d[c] < d[best])) best = c;
            used[best] = 1;
            if (first < 0) first = f.dblab[best];
            score[f.dblab[best]] += exp((1 - d[best]) / 0.5);
            votes[f.dblab[best]]++;
        }
        int pred = score[0] > score[1] ? 0 : score[1] > score[0] ? 1 : first;
        differs += pred != (votes[0] > votes[1] ? 0 : 1); /* 7 votes, 2 labels: no tie */
        char *sec = query_section(html, i);
        char want[200];
        snprintf(want, sizeof want, "<div class=\"v pred\">%s</div>", pred == 0 ? EVIL_ESC : "benign");
        cr_expect(strstr(sec, want), "query %d: expected '%s'", i, want);
        cr_expect_null(strstr(sec, "a tie"), "weighted vote with a tie note");
        free(sec);
    }
    cr_expect(strstr(html, "similarity-weighted"), "parameters do not name the weighted vote");
    cr_expect_gt(differs, 0, "the fixture does not tell a weighted vote from a majority vote");
    free(html);
}
