/* Case database: build/open round trip, search equals brute force, add/delete persist and take
 * effect at once, deleted cases never returned, crash mid-transaction leaves the previous state,
 * corrupt / truncated / foreign files and mismatched dimensions rejected with a clear error. */
#include "tests/test_util.h"
#include "infer/retrieval/casedb.h"
#include "infer/eval/synth_emb.h"
#include "datasets/manifest.h"
#include "datasets/synth.h"
#include "nn/base/base.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int cmd_index(int argc, char **argv);

static void make_set(emb_set *db, emb_set *q, int n, int nq, int dim) {
    synth_emb_cfg c = {n, nq, dim, 10, 0.9, 0.5, 0.1, 5};
    synth_emb_make(&c, db, q, NULL);
}

/* brute force over the rows of the embedding set, hashed with the database's own hasher */
static void expect_search_brute(const casedb *db, const emb_set *q, int k, const uint8_t *gone, const emb_set *all) {
    int W = hash_words(db->bits);
    uint64_t *cq = malloc((size_t)q->n * W * 8), *ca = malloc((size_t)all->n * W * 8);
    hasher_encode(&db->hash, q->x, q->n, cq);
    hasher_encode(&db->hash, all->x, all->n, ca);
    bindex ref;
    int64_t *ids = malloc((size_t)all->n * 8);
    int m = 0;
    uint64_t *cc = malloc((size_t)all->n * W * 8);
    for (int i = 0; i < all->n; i++)
        if (!gone || !gone[i]) { ids[m] = all->ids[i]; memcpy(cc + (size_t)m * W, ca + (size_t)i * W, W * 8); m++; }
    cr_assert_eq(bindex_build(&ref, INDEX_SCAN, db->bits, cc, ids, m, 0), ER_OK);
    int64_t *ia = malloc((size_t)q->n * k * 8), *ib = malloc((size_t)q->n * k * 8);
    int32_t *da = malloc((size_t)q->n * k * 4), *dbb = malloc((size_t)q->n * k * 4);
    int *na = malloc(q->n * sizeof(int)), *nb = malloc(q->n * sizeof(int));
    cr_assert_eq(casedb_search(db, q->x, q->n, k, 0, ia, da, NULL, na), ER_OK);
    bindex_search_ref(&ref, cq, q->n, k, ib, dbb, nb);
    cr_expect_eq(memcmp(ia, ib, (size_t)q->n * k * 8), 0, "case database search differs from brute force");
    cr_expect_eq(memcmp(da, dbb, (size_t)q->n * k * 4), 0);
    bindex_free(&ref);
    free(cq); free(ca); free(ids); free(cc); free(ia); free(ib); free(da); free(dbb); free(na); free(nb);
}

Test(infer_casedb, build_open_search_add_delete) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "cases.db");
    emb_set all, q;
    make_set(&all, &q, 400, 20, 32);
    /* database = first 300 rows; rows 300..399 are added later */
    emb_set first = all;
    first.n = 300;
    char *paths[300];
    for (int i = 0; i < 300; i++) { paths[i] = malloc(32); snprintf(paths[i], 32, "img/%03d.png", i); }
    for (int kind = 0; kind < 3; kind++) {
        cr_assert_eq(casedb_create(path, &first, paths, NULL, NULL, 16, HASH_PCA, (index_kind)kind, 0), ER_OK, "%s", er_msg());
        casedb db;
        cr_assert_eq(casedb_open(path, &db), ER_OK, "%s", er_msg());
        cr_expect_eq(db.n, 300);
        cr_expect_eq(db.bits, 16);
        cr_expect_eq(db.kind, (index_kind)kind);
        cr_expect_str_eq(db.paths[casedb_row(&db, 17)], "img/017.png");
        cr_expect_str_eq(casedb_label_name(&db, 1), "neoplastic");
        uint8_t gone[400] = {0};
        for (int i = 300; i < 400; i++) gone[i] = 1;
        expect_search_brute(&db, &q, 8, gone, &all);
        /* add 100 cases, delete 30 (including one that a query sits on) */
        case_rec r[100];
        for (int i = 0; i < 100; i++)
            r[i] = (case_rec){all.ids[300 + i], all.x + (size_t)(300 + i) * 32, all.labels[300 + i], NULL, -1, -1, "p1", "{\"x\":1}", NULL};
        cr_assert_eq(casedb_add(&db, r, 100), ER_OK, "%s", er_msg());
        for (int i = 300; i < 400; i++) gone[i] = 0;
        int64_t del[30];
        for (int i = 0; i < 30; i++) { del[i] = all.ids[i * 13]; gone[i * 13] = 1; }
        cr_assert_eq(casedb_delete(&db, del, 30), ER_OK, "%s", er_msg());
        cr_expect_eq(db.n, 370);
        expect_search_brute(&db, &q, 8, gone, &all);
        /* a query equal to a deleted case does not find it */
        int64_t ids[5]; int32_t hd[5]; int cnt;
        cr_assert_eq(casedb_search(&db, all.x + 13 * 32, 1, 5, 1, ids, hd, (float[5]){0}, &cnt), ER_OK);
        for (int j = 0; j < cnt; j++) cr_expect_neq(ids[j], all.ids[13]);
        /* errors: deleting an absent case, adding an existing one */
        cr_expect_eq(casedb_delete(&db, del, 1), ER_INPUT);
        cr_expect(strstr(er_msg(), "not in the database") != NULL, "%s", er_msg());
        cr_expect_eq(casedb_add(&db, r, 1), ER_INPUT);
        casedb_close(&db);
        /* everything survived in the file */
        cr_assert_eq(casedb_open(path, &db), ER_OK);
        cr_expect_eq(db.n, 370);
        cr_expect_eq(casedb_row(&db, del[3]), -1);
        expect_search_brute(&db, &q, 8, gone, &all);
        casedb_close(&db);
    }
    for (int i = 0; i < 300; i++) free(paths[i]);
    emb_free(&all);
    emb_free(&q);
    free(path);
}

Test(infer_casedb, crash_mid_transaction_keeps_previous_state) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "cases.db");
    emb_set all, q;
    make_set(&all, &q, 50, 1, 8);
    cr_assert_eq(casedb_create(path, &all, NULL, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 0), ER_OK, "%s", er_msg());
    pid_t pid = fork();
    if (pid == 0) {
        /* child: starts a write transaction (delete 20 cases, insert one), then dies by SIGKILL
         * before committing: the rollback journal is left behind, as in a power cut */
        sqlite3 *s;
        if (sqlite3_open(path, &s) != SQLITE_OK) _exit(3);
        sqlite3_exec(s, "BEGIN; DELETE FROM cases WHERE id < 20;"
                        "INSERT INTO cases(id, code, embedding) VALUES(999, x'00', x'00');", NULL, NULL, NULL);
        kill(getpid(), SIGKILL);
        _exit(4);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFSIGNALED(st), "child should have been killed");
    casedb db;
    cr_assert_eq(casedb_open(path, &db), ER_OK, "%s", er_msg());
    cr_expect_eq(db.n, 50, "interrupted transaction must not be visible");
    cr_expect_geq(casedb_row(&db, 5), 0);
    cr_expect_eq(casedb_row(&db, 999), -1);
    casedb_close(&db);
    emb_free(&all);
    emb_free(&q);
    free(path);
}

Test(infer_casedb, corrupt_and_foreign_files_rejected) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "x.db");
    casedb db;
    cr_expect_eq(casedb_open(path, &db), ER_INPUT);
    cr_expect(strstr(er_msg(), "no such file") != NULL, "%s", er_msg());
    /* not SQLite at all */
    char junk[2048];
    memset(junk, 'z', sizeof junk); /* not SQLite at all */
    cr_assert_eq(write_file_atomic(path, junk, sizeof junk), ER_OK);
    cr_expect_eq(casedb_open(path, &db), ER_INPUT);
    cr_expect(strstr(er_msg(), path) != NULL && strstr(er_msg(), "database") != NULL, "%s", er_msg());
    /* SQLite, but some other schema */
    unlink(path);
    sqlite3 *s;
    sqlite3_open(path, &s);
    sqlite3_exec(s, "CREATE TABLE t(a); INSERT INTO t VALUES(1);", NULL, NULL, NULL);
    sqlite3_close(s);
    cr_expect_eq(casedb_open(path, &db), ER_INPUT);
    cr_expect(strstr(er_msg(), "not an endoret case database") != NULL, "%s", er_msg());
    /* a real case database, truncated */
    emb_set all, q;
    make_set(&all, &q, 300, 1, 64);
    cr_assert_eq(casedb_create(path, &all, NULL, NULL, NULL, 0, HASH_SIGN, INDEX_MIH, 0), ER_OK);
    char *data; size_t len;
    cr_assert_eq(read_file(path, &data, &len), ER_OK);
    cr_assert_eq(write_file_atomic(path, data, len / 2), ER_OK);
    cr_expect_eq(casedb_open(path, &db), ER_INPUT, "truncated database must be rejected");
    cr_expect(er_msg()[0] != 0);
    /* a blob of the wrong size (corrupt row) */
    cr_assert_eq(write_file_atomic(path, data, len), ER_OK);
    sqlite3_open(path, &s);
    sqlite3_exec(s, "UPDATE cases SET embedding = x'0102' WHERE id = 7;", NULL, NULL, NULL);
    sqlite3_close(s);
    cr_expect_eq(casedb_open(path, &db), ER_INPUT);
    cr_expect(strstr(er_msg(), "case 7") != NULL, "%s", er_msg());
    /* issue 17 #9: inconsistencies found by the index builders name the database file */
    cr_assert_eq(write_file_atomic(path, data, len), ER_OK);
    sqlite3_open(path, &s);
    sqlite3_exec(s, "UPDATE cases SET embedding = zeroblob(256) WHERE id = 7;" /* 64 floats */
                    "UPDATE cases SET embedding = CAST(x'0000c07f' || substr(embedding, 5) AS BLOB) WHERE id = 7;",
                 NULL, NULL, NULL); /* first float NaN */
    sqlite3_close(s);
    cr_expect_eq(casedb_open(path, &db), ER_INPUT);
    cr_expect(strstr(er_msg(), path) && strstr(er_msg(), "non-finite"), "%s", er_msg());
    cr_assert_eq(write_file_atomic(path, data, len), ER_OK);
    sqlite3_open(path, &s);
    sqlite3_exec(s, "UPDATE meta SET value = '32' WHERE key = 'bits';", NULL, NULL, NULL);
    sqlite3_close(s);
    cr_expect_eq(casedb_open(path, &db), ER_INPUT);
    cr_expect(strstr(er_msg(), path) && strstr(er_msg(), "bits"), "%s", er_msg());
    free(data);
    emb_free(&all);
    emb_free(&q);
    free(path);
}

/* issue 17 #11: labels outside the database's label names (99, -5) or not integers ('xx') were
 * accepted; each is refused naming the file, the case and the label. */
Test(infer_casedb, labels_outside_the_label_names_rejected) {
    char *path = path_join(test_tmpdir(), "l.db");
    emb_set all, q;
    make_set(&all, &q, 50, 1, 16);
    cr_assert_eq(all.nlabel_names, 2);
    const char *bad[] = {"99", "-5", "'xx'", "2.5"};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(casedb_create(path, &all, NULL, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 0), ER_OK, "%s", er_msg());
        sqlite3 *s;
        char sql[128];
        snprintf(sql, sizeof sql, "UPDATE cases SET label = %s WHERE id = 7;", bad[i]);
        sqlite3_open(path, &s);
        cr_assert_eq(sqlite3_exec(s, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(s);
        casedb db;
        cr_expect_eq(casedb_open(path, &db), ER_INPUT, "label %s accepted", bad[i]);
        cr_expect(strstr(er_msg(), path) && strstr(er_msg(), "case 7") && strstr(er_msg(), "label"), "%s", er_msg());
    }
    emb_free(&all);
    emb_free(&q);
    free(path);
}

/* Lower the file-size limit (soft only, so it can be raised back): writes past `bytes` then fail as
 * on a full disk (EFBIG, which SQLite reports like ENOSPC), with no root or small file system. */
static void limit_file_size(rlim_t bytes) {
    struct rlimit r;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &r), 0);
    r.rlim_cur = bytes;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &r), 0);
}

/* issue 17 #8: a disk full while writing the database is a runtime failure (exit 1), not bad input
 * (exit 2), in `index build` over an existing database, `index add` and `index delete`; the old
 * database stays as it was and no temporary file is left. */
Test(infer_casedb, disk_full_is_a_runtime_error_and_keeps_the_db) {
    const char *dir = test_tmpdir();
    char *path = path_join(dir, "cases.db"), *embp = path_join(dir, "all.safetensors");
    emb_set all, q;
    make_set(&all, &q, 400, 1, 64);
    cr_assert_eq(emb_save(embp, &all), ER_OK);
    emb_set first = all;
    first.n = 300;
    cr_assert_eq(casedb_create(path, &first, NULL, NULL, NULL, 0, HASH_SIGN, INDEX_MIH, 0), ER_OK, "%s", er_msg());
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit saved;
    getrlimit(RLIMIT_FSIZE, &saved);

    limit_file_size(1024);
    char *build[] = {"index", "build", "--emb", embp, "--out", path, NULL};
    cr_expect_eq(cmd_index(6, build), ER_RUNTIME, "index build: %s", er_msg());
    cr_expect(strstr(er_msg(), "cases.db"), "%s", er_msg());
    setrlimit(RLIMIT_FSIZE, &saved);

    casedb db;
    cr_assert_eq(casedb_open(path, &db), ER_OK, "%s", er_msg());
    cr_expect_eq(db.n, 300);
    case_rec r[100];
    for (int i = 0; i < 100; i++)
        r[i] = (case_rec){all.ids[300 + i], all.x + (size_t)(300 + i) * all.dim, -1, NULL, -1, -1, NULL, NULL, NULL};
    limit_file_size(1024);
    cr_expect_eq(casedb_add(&db, r, 100), ER_RUNTIME, "index add: %s", er_msg());
    setrlimit(RLIMIT_FSIZE, &saved);
    cr_expect_eq(db.n, 300);
    casedb_close(&db);

    limit_file_size(1024);
    char *del[] = {"index", "delete", "--index", path, "--id", "1,2,3", NULL};
    cr_expect_eq(cmd_index(6, del), ER_RUNTIME, "index delete: %s", er_msg());
    setrlimit(RLIMIT_FSIZE, &saved);

    cr_assert_eq(casedb_open(path, &db), ER_OK, "%s", er_msg());
    cr_expect_eq(db.n, 300, "the old database changed");
    casedb_close(&db);
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d))) cr_expect_null(strstr(e->d_name, ".tmp."), "left %s", e->d_name);
    closedir(d);
    emb_free(&all);
    emb_free(&q);
    free(path), free(embp);
}

/* issue 17 #10: each killed `index build` left X.db.tmp.PID and its journal; the next build removes
 * those whose process has ended. */
Test(infer_casedb, build_removes_temp_files_of_killed_builds) {
    char *path = path_join(test_tmpdir(), "cases.db");
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0); /* p has ended */
    char tmp[300], journal[320];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)p);
    snprintf(journal, sizeof journal, "%s-journal", tmp);
    cr_assert_eq(write_file_atomic(tmp, "half a database", 15), ER_OK);
    cr_assert_eq(write_file_atomic(journal, "journal", 7), ER_OK);
    emb_set all, q;
    make_set(&all, &q, 20, 1, 16);
    cr_assert_eq(casedb_create(path, &all, NULL, NULL, NULL, 0, HASH_SIGN, INDEX_SCAN, 0), ER_OK, "%s", er_msg());
    cr_expect_neq(access(tmp, F_OK), 0, "%s left", tmp);
    cr_expect_neq(access(journal, F_OK), 0, "%s left", journal);
    emb_free(&all);
    emb_free(&q);
    free(path);
}

Test(infer_casedb, cli_add_with_mismatched_dims_rejected) {
    const char *dir = test_tmpdir();
    char *e1 = path_join(dir, "a.safetensors"), *e2 = path_join(dir, "b.safetensors"), *db = path_join(dir, "c.db");
    emb_set a, b, q;
    make_set(&a, &q, 50, 1, 16);
    emb_free(&q);
    make_set(&b, &q, 10, 1, 24);
    cr_assert_eq(emb_save(e1, &a), ER_OK);
    cr_assert_eq(emb_save(e2, &b), ER_OK);
    char *build[] = {"index", "build", "--emb", e1, "--out", db, "--kind", "balltree", NULL};
    fflush(stdout);
    cr_assert_eq(cmd_index(8, build), ER_OK, "%s", er_msg());
    char *add[] = {"index", "add", "--index", db, "--emb", e2, NULL};
    cr_expect_eq(cmd_index(6, add), ER_INPUT);
    cr_expect(strstr(er_msg(), "24-d") != NULL && strstr(er_msg(), "16-d") != NULL, "%s", er_msg());
    char *del[] = {"index", "delete", "--index", db, "--id", "3,4", NULL};
    cr_expect_eq(cmd_index(6, del), ER_OK, "%s", er_msg());
    char *del2[] = {"index", "delete", "--index", db, "--id", "3", NULL};
    cr_expect_eq(cmd_index(6, del2), ER_INPUT);
    char *bad[] = {"index", "delete", "--index", db, "--id", "x1", NULL};
    cr_expect_eq(cmd_index(6, bad), ER_INPUT);
    emb_free(&a); emb_free(&b); emb_free(&q);
    free(e1); free(e2); free(db);
}

/* issue 33: `index build --manifest M` with an `embed --split` file of M follows the file's row ids
 * (each case gets the image of the manifest row it embedded); ids that name no row of M are refused
 * with M's real row count (the message used to read the count after freeing the manifest: "0 rows"). */
Test(casedb, index_build_follows_the_row_ids_of_a_split_embedding) {
    const char *dir = test_tmpdir();
    synth_config sc = {.scenes = 4, .views = 3, .size = 16, .seed = 3, .threads = 1};
    cr_assert_eq(synth_write_dataset(dir, &sc), 0, "%s", er_msg());
    char *man = path_join(dir, "manifest.csv"), *embp = path_join(dir, "split.safetensors");
    char *out = path_join(dir, "split.db"), *bad = path_join(dir, "bad.safetensors");
    manifest m;
    cr_assert_eq(manifest_load(man, &m), 0, "%s", er_msg());
    cr_assert_eq(m.n, 12);
    const int64_t rows[3] = {5, 0, 9};
    emb_set e;
    emb_alloc(&e, 3, 8);
    for (int i = 0; i < 3 * 8; i++) e.x[i] = (float)((i * 7) % 5) - 2.0f;
    for (int i = 0; i < 3; i++) e.ids[i] = rows[i];
    cr_assert_eq(emb_save(embp, &e), 0, "%s", er_msg());
    char *build[] = {"index", "build", "--emb", embp, "--manifest", man, "--out", out, NULL};
    cr_assert_eq(cmd_index(8, build), ER_OK, "%s", er_msg());
    casedb db;
    cr_assert_eq(casedb_open(out, &db), 0, "%s", er_msg());
    cr_assert_eq(db.n, 3);
    for (int r = 0; r < 3; r++) { /* the case ids are the row ids; the database keeps its own row order */
        cr_expect(db.ids[r] == 0 || db.ids[r] == 5 || db.ids[r] == 9, "case id %lld", (long long)db.ids[r]);
        char *want = manifest_image_path(&m, (int)db.ids[r]);
        cr_expect_str_eq(db.paths[r], want, "case id %lld", (long long)db.ids[r]);
        free(want);
    }
    casedb_close(&db);
    e.ids[2] = 12; /* past the manifest's last row */
    cr_assert_eq(emb_save(bad, &e), 0, "%s", er_msg());
    char *build_bad[] = {"index", "build", "--emb", bad, "--manifest", man, "--out", out, NULL};
    cr_assert_eq(cmd_index(8, build_bad), ER_INPUT);
    cr_expect(strstr(er_msg(), "has 12 rows but the embedding file has 3"), "%s", er_msg());
    emb_free(&e);
    manifest_free(&m);
    free(man); free(embp); free(out); free(bad);
}

/* issue 30 F5: `index add` stored the file's label numbers under the database's names (a file
 * whose names are in the other order was stored with every diagnosis inverted) and took a file
 * of another encoder. Labels are mapped by name, an unknown name or another model is refused. */
Test(infer_casedb, add_maps_labels_by_name_and_refuses_another_encoder) {
    const char *dir = test_tmpdir();
    char *e1 = path_join(dir, "a.safetensors"), *e2 = path_join(dir, "b.safetensors"), *db = path_join(dir, "c.db");
    emb_set a, b, q;
    make_set(&a, &q, 50, 1, 16); /* label names benign, neoplastic */
    emb_free(&q);
    make_set(&b, &q, 10, 1, 16);
    emb_free(&q);
    cr_assert_eq(emb_save(e1, &a), ER_OK);
    char *build[] = {"index", "build", "--emb", e1, "--out", db, NULL};
    fflush(stdout);
    cr_assert_eq(cmd_index(6, build), ER_OK, "%s", er_msg());
    /* b: new ids, its names in the other order */
    for (int i = 0; i < b.n; i++) b.ids[i] = 1000 + i;
    char *t = b.label_names[0];
    b.label_names[0] = b.label_names[1];
    b.label_names[1] = t;
    cr_assert_eq(emb_save(e2, &b), ER_OK);
    char *add[] = {"index", "add", "--index", db, "--emb", e2, NULL};
    cr_assert_eq(cmd_index(6, add), ER_OK, "%s", er_msg());
    casedb d;
    cr_assert_eq(casedb_open(db, &d), ER_OK, "%s", er_msg());
    for (int i = 0; i < b.n; i++) {
        int64_t r = casedb_row(&d, b.ids[i]);
        cr_assert_geq(r, 0);
        cr_expect_str_eq(casedb_label_name(&d, d.labels[r]), b.label_names[b.labels[i]], "case %lld", (long long)b.ids[i]);
    }
    casedb_close(&d);
    /* a name the database does not have */
    for (int i = 0; i < b.n; i++) b.ids[i] = 2000 + i;
    free(b.label_names[0]);
    b.label_names[0] = xstrdup("malignant");
    b.labels[0] = 0;
    cr_assert_eq(emb_save(e2, &b), ER_OK);
    cr_expect_eq(cmd_index(6, add), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "malignant") && strstr(er_msg(), e2), "%s", er_msg());
    /* another encoder of the same size */
    free(b.label_names[0]);
    b.label_names[0] = xstrdup("benign");
    free(b.model);
    b.model = xstrdup("vit_small (other.safetensors)");
    cr_assert_eq(emb_save(e2, &b), ER_OK);
    cr_expect_eq(cmd_index(6, add), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "vit_small (other.safetensors)") && strstr(er_msg(), a.model), "%s", er_msg());
    cr_assert_eq(casedb_open(db, &d), ER_OK, "%s", er_msg());
    cr_expect_eq(d.n, 60, "refused adds left the database as it was");
    casedb_close(&d);
    emb_free(&a); emb_free(&b);
    free(e1); free(e2); free(db);
}

/* issue 30 F15: --metadata must be JSON (it is served as such); --id is integers separated by
 * commas, nothing else (" 1" and "+5" were taken, "1 ,2" refused). */
Test(infer_casedb, add_metadata_is_json_and_ids_are_plain_integers) {
    const char *dir = test_tmpdir();
    char *e1 = path_join(dir, "a.safetensors"), *e2 = path_join(dir, "b.safetensors"), *db = path_join(dir, "c.db");
    emb_set a, b, q;
    make_set(&a, &q, 50, 1, 16);
    emb_free(&q);
    make_set(&b, &q, 10, 1, 16);
    emb_free(&q);
    for (int i = 0; i < b.n; i++) b.ids[i] = 1000 + i;
    cr_assert_eq(emb_save(e1, &a), ER_OK);
    cr_assert_eq(emb_save(e2, &b), ER_OK);
    char *build[] = {"index", "build", "--emb", e1, "--out", db, NULL};
    fflush(stdout);
    cr_assert_eq(cmd_index(6, build), ER_OK, "%s", er_msg());
    char *add[] = {"index", "add", "--index", db, "--emb", e2, "--metadata", "{bad", NULL};
    cr_expect_eq(cmd_index(8, add), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "--metadata"), "%s", er_msg());
    char *add_ok[] = {"index", "add", "--index", db, "--emb", e2, "--metadata", "{\"site\": \"A\"}", NULL};
    cr_expect_eq(cmd_index(8, add_ok), ER_OK, "%s", er_msg());
    const char *bad[] = {" 1", "+5", "1 ,2", "1,", ",1", "1,,2", "0x10", "1e3"};
    for (int i = 0; i < 8; i++) {
        char *del[] = {"index", "delete", "--index", db, "--id", (char *)bad[i], NULL};
        cr_expect_eq(cmd_index(6, del), ER_INPUT, "--id '%s': %s", bad[i], er_msg());
        cr_expect(strstr(er_msg(), "--id"), "--id '%s': %s", bad[i], er_msg());
    }
    char *del[] = {"index", "delete", "--index", db, "--id", "1,2", NULL};
    cr_expect_eq(cmd_index(6, del), ER_OK, "%s", er_msg());
    emb_free(&a); emb_free(&b);
    free(e1); free(e2); free(db);
}
