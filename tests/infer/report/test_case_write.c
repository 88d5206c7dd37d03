/* `serve --write-token`: a case base that grows (issue #32 item 3). A filed case (views + confirmed
 * diagnosis) gets a fresh id, is in the SQLite file and in the index the next query searches, survives
 * a restart and can be deleted; writes without the token, with a wrong one, or on a server started
 * without one are 403 and change nothing; an unknown diagnosis is 400; each write is logged without
 * the token. Bounded by socket and select timeouts, with no Criterion .timeout (with it, `make asan`
 * --jobs 2 reports a 48-byte leak inside libcriterion, as test_serve_load.c says: seen here too). */
#include <fcntl.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "infer/report/case_write.h"
#include "infer/report/retrieval_server.h"
#include "nn/base/base.h"
#include "tests/test_http.h"
#include "tests/test_util.h"
#include "tests/infer/report/online_fixture.h"

#define TOKEN "test-token-0123456789abcdef"
#define AUTH "Authorization: Bearer " TOKEN

/* SELECT COUNT(*) FROM cases, on a connection of its own (the server keeps the file open). */
static int64_t count_rows(const char *db) {
    sqlite3 *s;
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(s, "SELECT COUNT(*) FROM cases", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(s);
    return n;
}

/* The first neighbour's case id in a /case.json answer. */
static int64_t first_neighbour(const char *body) {
    const char *p = strstr(body, "\"neighbours\": [{\"case\": ");
    cr_assert(p, "%s", body);
    return strtoll(p + 24, NULL, 10);
}

static retrieval_server *start(online_fx *f, const char *images, const char *token, int *port) {
    retrieval_server_cfg cfg = {f->db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 1, 0}, f->scene, images, 4, 0, 0, 0, 0, token, NULL, NULL, NULL};
    retrieval_server *s;
    cr_assert_eq(retrieval_server_start(&cfg, &s, port), ER_OK, "%s", er_msg());
    return s;
}

Test(case_write, file_query_restart_delete_and_refusals) {
    online_fx f;
    make_online(&f);
    char *images = path_join(f.dir, "images"), *logpath = path_join(f.dir, "serve.log");
    casedb db;
    cr_assert_eq(casedb_open(f.db, &db), ER_OK, "%s", er_msg());
    cr_assert(db.nlabel_names >= 2, "the fixture's database has label names");
    int64_t top = db.ids[db.n - 1], n0 = db.n;
    casedb_close(&db);
    /* the write log goes to stderr: to a file for the test */
    fflush(stderr);
    int saved = dup(2), lf = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(lf >= 0 && saved >= 0);
    dup2(lf, 2);
    close(lf);
    int port;
    retrieval_server *s = start(&f, images, TOKEN, &port);
    const char *body;
    size_t len;
    char js[800];
    snprintf(js, sizeof js, "{\"paths\": [\"%s/s00001_v00.png\", \"%s/s00001_v02.png\"], \"diagnosis\": \"%s\"}", images,
             images, "malignant");
    const char *ct = "application/json";
    /* refused: no token, a wrong one, the token with one more character, another scheme */
    cr_expect_eq(test_http(port, "POST", "/case/file.json", ct, js, &body, &len), 403);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/file.json", "Authorization: Bearer wrong-token-0123456789abcd", ct, js,
                               strlen(js), &body, &len), 403);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/file.json", AUTH "x", ct, js, strlen(js), &body, &len), 403);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/file.json", "Authorization: Basic " TOKEN, ct, js, strlen(js), &body, &len), 403);
    cr_expect_eq(test_http(port, "POST", "/case/delete.json", ct, "{\"id\": 0}", &body, &len), 403);
    cr_expect_eq(count_rows(f.db), n0, "a refused write changes nothing");
    /* an unknown diagnosis, or none: 400, nothing written */
    char bad[800];
    snprintf(bad, sizeof bad, "{\"paths\": [\"%s/s00001_v00.png\"], \"diagnosis\": \"unicorn\"}", images);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/file.json", AUTH, ct, bad, strlen(bad), &body, &len), 400);
    cr_expect(strstr(body, "benign") && strstr(body, "malignant"), "names the labels: %.*s", (int)len, body);
    snprintf(bad, sizeof bad, "{\"paths\": [\"%s/s00001_v00.png\"]}", images);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/file.json", AUTH, ct, bad, strlen(bad), &body, &len), 400);
    cr_expect_eq(count_rows(f.db), n0);
    /* filed: a fresh id, in the file, the next query's nearest case (the same views: distance 0) */
    cr_assert_eq(test_http_hdr(port, "POST", "/case/file.json", AUTH, ct, js, strlen(js), &body, &len), 200, "%.*s", (int)len, body);
    int64_t id = top + 1;
    char want[64];
    snprintf(want, sizeof want, "{\"filed\": %lld, \"diagnosis\": \"malignant\"", (long long)id);
    cr_expect(!strncmp(body, want, strlen(want)), "%.*s", (int)len, body);
    cr_expect(strstr(body, "\"images_kept\": true"), "%.*s", (int)len, body);
    cr_expect_eq(count_rows(f.db), n0 + 1);
    snprintf(bad, sizeof bad, "{\"paths\": [\"%s/s00001_v00.png\", \"%s/s00001_v02.png\"]}", images, images);
    cr_assert_eq(test_http(port, "POST", "/case.json", ct, bad, &body, &len), 200, "%.*s", (int)len, body);
    cr_expect_eq(first_neighbour(body), id, "%s", body);
    char url[64];
    snprintf(url, sizeof url, "/image/case/%lld/1", (long long)id);
    cr_expect_eq(test_http(port, "GET", url, NULL, NULL, &body, &len), 200, "the filed case's second view");
    /* an upload with the diagnosis as a form field: filed, its images not kept */
    char *data, *mp;
    size_t dl, bl;
    char p[600];
    snprintf(p, sizeof p, "%s/s00002_v00.png", images);
    cr_assert_eq(read_file(p, &data, &dl), 0);
    char *names[1] = {"a.png"};
    size_t mpl;
    char *part = multipart(1, names, &data, &dl, &mpl);
    const char *field = "--XyZ\r\nContent-Disposition: form-data; name=\"diagnosis\"\r\n\r\nbenign\r\n";
    mp = malloc(mpl + strlen(field));
    memcpy(mp, field, strlen(field));
    memcpy(mp + strlen(field), part, mpl);
    bl = mpl + strlen(field);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/file.json", AUTH, "multipart/form-data; boundary=XyZ", mp, bl, &body, &len), 200,
                 "%.*s", (int)len, body);
    snprintf(want, sizeof want, "{\"filed\": %lld, \"diagnosis\": \"benign\"", (long long)id + 1);
    cr_expect(!strncmp(body, want, strlen(want)) && strstr(body, "\"images_kept\": false"), "%.*s", (int)len, body);
    free(mp); free(part); free(data);
    cr_expect_eq(count_rows(f.db), n0 + 2);
    retrieval_server_stop(s);
    /* a restart: both are still there, and the first is still the nearest */
    s = start(&f, images, TOKEN, &port);
    cr_assert_eq(test_http(port, "POST", "/case.json", ct, bad, &body, &len), 200);
    cr_expect_eq(first_neighbour(body), id, "%s", body);
    /* deleted: gone from the file and from the next query; again: 404 */
    snprintf(js, sizeof js, "{\"id\": %lld}", (long long)id);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/delete.json", AUTH, ct, js, strlen(js), &body, &len), 200, "%.*s", (int)len, body);
    cr_expect_eq(count_rows(f.db), n0 + 1);
    cr_assert_eq(test_http(port, "POST", "/case.json", ct, bad, &body, &len), 200);
    cr_expect_neq(first_neighbour(body), id, "%s", body);
    cr_expect_eq(test_http(port, "GET", url, NULL, NULL, &body, &len), 404);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/delete.json", AUTH, ct, js, strlen(js), &body, &len), 404);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/delete.json", AUTH, ct, "{\"id\": \"x\"}", 11, &body, &len), 400);
    retrieval_server_stop(s);
    /* read-only is the default: without a token every write is 403 */
    s = start(&f, images, NULL, &port);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/file.json", AUTH, ct, bad, strlen(bad), &body, &len), 403);
    cr_expect(strstr(body, "read-only"), "%.*s", (int)len, body);
    cr_expect_eq(test_http_hdr(port, "POST", "/case/delete.json", AUTH, ct, "{\"id\": 0}", 9, &body, &len), 403);
    cr_expect_eq(count_rows(f.db), n0 + 1);
    retrieval_server_stop(s);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    /* the log: who, what, which case, which label; never the token */
    char *log;
    size_t ll;
    cr_assert_eq(read_file(logpath, &log, &ll), 0);
    snprintf(want, sizeof want, " 127.0.0.1 file case %lld label malignant: ok", (long long)id);
    cr_expect(strstr(log, want), "%s", log);
    snprintf(want, sizeof want, " 127.0.0.1 delete case %lld label malignant: ok", (long long)id);
    cr_expect(strstr(log, want), "%s", log);
    cr_expect(strstr(log, "file: refused (no or wrong token)") && strstr(log, "refused (read-only server)"), "%s", log);
    cr_expect(!strstr(log, "0123456789abcdef"), "the token is never logged");
    free(log);
    free(images);
    free(logpath);
    free_online(&f);
}

Test(case_write, token_files_and_variables) {
    char *dir = xstrdup(test_tmpdir()), *file = path_join(dir, "token"), *tok;
    cr_assert_eq(write_file_atomic(file, TOKEN "\n", strlen(TOKEN) + 1), 0);
    chmod(file, 0644);
    cr_expect_eq(write_token_load(file, NULL, &tok), ER_INPUT, "a file others may read is refused");
    cr_expect(strstr(er_msg(), "chmod 600") && !strstr(er_msg(), TOKEN), "%s", er_msg());
    chmod(file, 0600);
    cr_assert_eq(write_token_load(file, NULL, &tok), ER_OK, "%s", er_msg());
    cr_expect_str_eq(tok, TOKEN, "the newline is not part of it");
    free(tok);
    cr_assert_eq(write_file_atomic(file, "short\n", 6), 0);
    chmod(file, 0600);
    cr_expect_eq(write_token_load(file, NULL, &tok), ER_INPUT, "too short");
    setenv("ENDORET_TEST_TOKEN", TOKEN, 1);
    cr_assert_eq(write_token_load(NULL, "ENDORET_TEST_TOKEN", &tok), ER_OK, "%s", er_msg());
    cr_expect_str_eq(tok, TOKEN);
    free(tok);
    cr_expect_eq(write_token_load(file, "ENDORET_TEST_TOKEN", &tok), ER_INPUT, "not both");
    cr_expect_eq(write_token_load(NULL, "ENDORET_TEST_UNSET_VAR", &tok), ER_INPUT);
    cr_expect_eq(write_token_load(NULL, NULL, &tok), ER_OK);
    cr_expect_null(tok, "neither: read-only");
    free(file);
    free(dir);
}

/* ---- a kill mid-write loses nothing ---- */

static int hook_fd = -1;
/* Inside the write's transaction: tell the test, then wait for its SIGKILL. */
static void stop_in_transaction(void *ctx) {
    (void)ctx;
    if (write(hook_fd, "w", 1) != 1) _exit(5);
    for (;;) pause();
}

/* "PRAGMA integrity_check" of the file, opened afresh: "ok" when sound. */
static void expect_integrity(const char *db) {
    sqlite3 *s;
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_open_v2(db, &s, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK); /* rolls a hot journal back */
    cr_assert_eq(sqlite3_prepare_v2(s, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_expect_str_eq((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
    sqlite3_close(s);
}

/* Every case row whole: its code and embedding blobs have the database's sizes. */
static int64_t whole_rows(const char *db, int dim, int bits) {
    sqlite3 *s;
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(s, "SELECT length(embedding), length(code) FROM cases", -1, &st, NULL), SQLITE_OK);
    int64_t n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        cr_expect_eq(sqlite3_column_int64(st, 0), (int64_t)dim * 4);
        cr_expect_eq(sqlite3_column_int64(st, 1), (int64_t)(bits + 63) / 64 * 8);
        n++;
    }
    sqlite3_finalize(st);
    sqlite3_close(s);
    return n;
}

/* A server in a child process, with the hook when hooked; its port comes back on a pipe. The request
 * is sent on a raw socket whose answer is never read (the child dies before it answers). */
static pid_t serve_child(online_fx *f, const char *images, int hooked, int *port, int *hook_rd) {
    int pp[2], hp[2];
    cr_assert(pipe(pp) == 0 && pipe(hp) == 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(pp[0]); close(hp[0]);
        hook_fd = hp[1];
        retrieval_server_cfg cfg = {f->db, NULL, NULL, "127.0.0.1", 0, {3, 0, 0.1, 1, 0}, f->scene, images, 4, 0, 0, 0, 0, TOKEN,
                                    hooked ? stop_in_transaction : NULL, NULL, NULL};
        retrieval_server *s;
        int p = -1;
        if (retrieval_server_start(&cfg, &s, &p)) p = -1;
        if (write(pp[1], &p, sizeof p) != sizeof p) _exit(6);
        for (;;) pause();
    }
    close(pp[1]); close(hp[1]);
    struct timeval tv = {60, 0}; /* bounded: the child builds its report first */
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(pp[0], &rs);
    cr_assert(select(pp[0] + 1, &rs, NULL, NULL, &tv) == 1 && read(pp[0], port, sizeof *port) == sizeof *port && *port > 0,
              "the child's server started");
    close(pp[0]);
    *hook_rd = hp[0];
    return pid;
}

static int send_write(int port, const char *path, const char *json) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    char req[2048];
    int n = snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: x\r\n" AUTH "\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %zu\r\n\r\n%s", path, strlen(json), json);
    cr_assert(write(fd, req, n) == n);
    return fd;
}

static void kill_child(pid_t pid) {
    kill(pid, SIGKILL);
    int st;
    cr_assert(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
}

/* SELECT COUNT(*) FROM cases WHERE id = ? */
static int has_case(const char *db, int64_t id) {
    sqlite3 *s;
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(s, "SELECT COUNT(*) FROM cases WHERE id = ?", -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_int64(st, 1, id);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    int n = (int)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(s);
    return n;
}

#define FX_CHECK(x) do { if (!(x)) { fprintf(stderr, "fixture: %s: %s\n", #x, er_msg()); _exit(9); } } while (0)

/* make_online (online_fixture.h) with _exit instead of cr_assert, for a forked child. */
static void make_online_quiet(online_fx *f) {
    f->dir = xstrdup(test_tmpdir());
    synth_config sc = {.scenes = 6, .views = 4, .size = 32, .seed = 5, .threads = 1};
    FX_CHECK(synth_write_dataset(f->dir, &sc) == 0);
    f->man = path_join(f->dir, "manifest.csv");
    f->enc = path_join(f->dir, "enc.safetensors");
    f->scene = path_join(f->dir, "scene.safetensors");
    f->db = path_join(f->dir, "cases.db");
    vit_config c;
    FX_CHECK(vit_config_preset("vit_tiny", &c) == 0);
    c.img = 16; c.patch = 4; c.dim = 32; c.depth = 1; c.heads = 2;
    model *v = vit_model_wrap(vit_new(&c, 7));
    FX_CHECK(model_save(v, f->enc, -1) == 0);
    model_free(v);
    scene_args a;
    scene_args_defaults(&a);
    cfg_set_str(&a.image_encoder, f->enc);
    a.heads = 2; a.dec_dim = 16; a.dec_heads = 2;
    model *m;
    FX_CHECK(scene_model_new(&a, 3, 0, &m) == 0);
    scene_args_free(&a);
    FX_CHECK(model_save(m, f->scene, -1) == 0);
    manifest man;
    FX_CHECK(manifest_load(f->man, &man) == 0);
    int *rows = malloc(man.n * sizeof(int)), sk;
    for (int i = 0; i < man.n; i++) rows[i] = i;
    emb_set e;
    embed_scene_opts so = {.fusion = "transformer", .groups = NULL, .max_views = 8};
    FX_CHECK(embed_scenes(m, &man, f->man, rows, man.n, &so, &e, &sk) == 0);
    FX_CHECK(casedb_create(f->db, &e, NULL, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 1) == 0);
    emb_free(&e);
    free(rows);
    manifest_free(&man);
    model_free(m);
}

/* The fixture, built in a child process: libgomp's thread pool does not survive fork, so the process
 * that forks the servers must not have run an OpenMP region (the fixture's embedding does). The
 * child leaves the folder (_exit: no cleanup) and sends its name; the test removes it. */
static void make_online_apart(online_fx *f, int64_t info[5]) {
    int pp[2];
    cr_assert(pipe(pp) == 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) { /* no cr_assert here: the child must not talk to Criterion's runner */
        close(pp[0]);
        online_fx g;
        make_online_quiet(&g);
        casedb db;
        char msg[128] = {0};
        if (casedb_open(g.db, &db)) _exit(7);
        int64_t out[5] = {db.ids[db.n - 1], db.n, db.ids[0], db.dim, db.bits};
        casedb_close(&db);
        snprintf(msg, sizeof msg, "%s", g.dir);
        if (write(pp[1], out, sizeof out) != sizeof out || write(pp[1], msg, sizeof msg) != sizeof msg) _exit(8);
        _exit(0);
    }
    close(pp[1]);
    char dir[128];
    int st;
    cr_assert(read(pp[0], info, 5 * sizeof(int64_t)) == 5 * sizeof(int64_t) && read(pp[0], dir, sizeof dir) == sizeof dir,
              "the fixture was built");
    close(pp[0]);
    cr_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    f->dir = xstrdup(dir);
    f->man = path_join(dir, "manifest.csv");
    f->enc = path_join(dir, "enc.safetensors");
    f->scene = path_join(dir, "scene.safetensors");
    f->db = path_join(dir, "cases.db");
}

Test(case_write, a_kill_mid_write_loses_nothing) {
    online_fx f;
    int64_t info[5];
    make_online_apart(&f, info);
    char *images = path_join(f.dir, "images");
    int64_t top = info[0], n0 = info[1], victim = info[2];
    int dim = (int)info[3], bits = (int)info[4];
    char js[800], del[64];
    snprintf(js, sizeof js, "{\"paths\": [\"%s/s00003_v00.png\", \"%s/s00003_v01.png\"], \"diagnosis\": \"benign\"}", images, images);
    snprintf(del, sizeof del, "{\"id\": %lld}", (long long)victim);
    /* killed inside the transaction of a filing, then of a deletion: the file is sound and as before */
    for (int t = 0; t < 2; t++) {
        int port, hook, fd;
        pid_t pid = serve_child(&f, images, 1, &port, &hook);
        fd = send_write(port, t ? "/case/delete.json" : "/case/file.json", t ? del : js);
        struct timeval tv = {60, 0};
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(hook, &rs);
        char c;
        cr_assert(select(hook + 1, &rs, NULL, NULL, &tv) == 1 && read(hook, &c, 1) == 1, "the write reached its transaction");
        kill_child(pid);
        close(fd);
        close(hook);
        expect_integrity(f.db);
        cr_expect_eq(whole_rows(f.db, dim, bits), n0, "the old case set (%s)", t ? "delete" : "file");
        cr_expect_eq(has_case(f.db, top + 1), 0);
        cr_expect_eq(has_case(f.db, victim), 1);
    }
    /* killed at random moments (before, during or after the transaction): the old set or the old set
     * plus the whole new case, never a part of one */
    uint64_t rng = 12345;
    int64_t n = n0;
    for (int t = 0; t < 6; t++) {
        int port, hook, fd;
        pid_t pid = serve_child(&f, images, 0, &port, &hook);
        fd = send_write(port, "/case/file.json", js);
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        usleep((useconds_t)((rng >> 33) % 6000)); /* 0..6 ms: before, during or after the write */
        kill_child(pid);
        close(fd);
        close(hook);
        expect_integrity(f.db);
        int64_t m = whole_rows(f.db, dim, bits);
        cr_expect(m == n || m == n + 1, "try %d: %lld cases, before %lld", t, (long long)m, (long long)n);
        if (m > n0) cr_expect_eq(has_case(f.db, top + (m - n0)), 1, "the filed cases are the ids after %lld", (long long)top);
        n = m;
    }
    /* and the server writes after all that */
    int port;
    retrieval_server *s = start(&f, images, TOKEN, &port);
    const char *body;
    size_t len;
    cr_expect_eq(test_http_hdr(port, "POST", "/case/file.json", AUTH, "application/json", js, strlen(js), &body, &len), 200,
                 "%.*s", (int)len, body);
    retrieval_server_stop(s);
    cr_expect_eq(whole_rows(f.db, dim, bits), n + 1);
    casedb db;
    cr_assert_eq(casedb_open(f.db, &db), ER_OK, "%s", er_msg());
    cr_expect_eq(db.n, n + 1);
    casedb_close(&db);
    remove_tree(f.dir);
    free(images);
    free_online(&f);
}
