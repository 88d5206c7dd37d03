/* casedb.c — SQLite case database with in-memory indexes rebuilt at open. */
#include "infer/retrieval/casedb.h"
#include "nn/base/base.h"
#include "nn/base/progress.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FORMAT "endoret-casedb-1"

/* A failure of the machine (disk full, I/O error, locked, out of memory, cannot create a file) is a
 * runtime error; a file that is not what it should be is bad input. */
static int sql_status(int sqlite_code) {
    switch (sqlite_code & 0xff) {
    case SQLITE_FULL: case SQLITE_IOERR: case SQLITE_BUSY: case SQLITE_LOCKED: case SQLITE_NOMEM:
    case SQLITE_READONLY: case SQLITE_CANTOPEN: case SQLITE_PERM: case SQLITE_INTERRUPT:
        return ER_RUNTIME;
    default:
        return ER_INPUT;
    }
}

static int sql_fail(sqlite3 *s, const char *path, const char *what) {
    return er_fail(s ? sql_status(sqlite3_errcode(s)) : ER_RUNTIME, "%s: %s: %s", path, what,
                   s ? sqlite3_errmsg(s) : "cannot open");
}

static int exec(sqlite3 *s, const char *path, const char *sql) {
    char *err = NULL;
    int code = sqlite3_exec(s, sql, NULL, NULL, &err);
    if (code != SQLITE_OK) {
        int rc = er_fail(sql_status(code), "%s: %s", path, err ? err : "SQL error");
        sqlite3_free(err);
        return rc;
    }
    return ER_OK;
}

static int put_meta(sqlite3 *s, const char *path, const char *key, const void *blob, int nblob, const char *text) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", -1, &st, NULL) != SQLITE_OK)
        return sql_fail(s, path, "meta");
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    if (blob) sqlite3_bind_blob(st, 2, blob, nblob, SQLITE_TRANSIENT);
    else if (text) sqlite3_bind_text(st, 2, text, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 2);
    int rc = sqlite3_step(st) == SQLITE_DONE ? ER_OK : sql_fail(s, path, "meta");
    sqlite3_finalize(st);
    return rc;
}

/* `what` names the progress line ("index build", "index add") */
static int insert_cases(sqlite3 *s, const char *path, const hasher *h, int dim, const case_rec *r, int n,
                        char *const *label_names, int nlabel_names, const char *what) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s, "INSERT INTO cases(id, code, embedding, label, label_name, image_paths, scene, view, patient, metadata, "
                              "mask_paths) VALUES(?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return sql_fail(s, path, "insert");
    int W = hash_words(h->bits), rc = ER_OK;
    uint64_t *code = xmalloc((size_t)W * 8);
    progress pr;
    progress_begin(&pr, what, "cases", n);
    for (int i = 0; i < n && !rc; i++) {
        progress_add(&pr, 1);
        hasher_encode(h, r[i].emb, 1, code);
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, r[i].id);
        sqlite3_bind_blob(st, 2, code, W * 8, SQLITE_TRANSIENT);
        sqlite3_bind_blob(st, 3, r[i].emb, dim * (int)sizeof(float), SQLITE_TRANSIENT);
        if (r[i].label >= 0) sqlite3_bind_int64(st, 4, r[i].label); else sqlite3_bind_null(st, 4);
        if (r[i].label >= 0 && r[i].label < nlabel_names) sqlite3_bind_text(st, 5, label_names[r[i].label], -1, SQLITE_TRANSIENT);
        else sqlite3_bind_null(st, 5);
        if (r[i].image_paths) sqlite3_bind_text(st, 6, r[i].image_paths, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(st, 6);
        if (r[i].scene >= 0) sqlite3_bind_int64(st, 7, r[i].scene); else sqlite3_bind_null(st, 7);
        if (r[i].view >= 0) sqlite3_bind_int64(st, 8, r[i].view); else sqlite3_bind_null(st, 8);
        if (r[i].patient) sqlite3_bind_text(st, 9, r[i].patient, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(st, 9);
        if (r[i].metadata) sqlite3_bind_text(st, 10, r[i].metadata, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(st, 10);
        if (r[i].mask_paths) sqlite3_bind_text(st, 11, r[i].mask_paths, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(st, 11);
        int sr = sqlite3_step(st);
        if (sr == SQLITE_CONSTRAINT) rc = er_fail(ER_INPUT, "%s: case id %lld is already in the database", path, (long long)r[i].id);
        else if (sr != SQLITE_DONE) rc = sql_fail(s, path, "insert");
    }
    progress_end(&pr);
    free(code);
    sqlite3_finalize(st);
    return rc;
}

int casedb_create(const char *path, const emb_set *e, char *const *image_paths, char *const *mask_paths, char *const *patient,
                  int bits, hash_kind hk, index_kind kind, uint64_t seed) {
    if (bits <= 0) bits = e->dim;
    if (hk == HASH_SIGN && bits != e->dim) hk = HASH_PCA;
    int rc = check_output_path(path); /* a directory: exit 2 now, not at the rename */
    if (rc) return rc;
    hasher h;
    if ((rc = hasher_fit(&h, hk, e->x, e->n, e->dim, bits, seed))) return rc;
    remove_stale_temps(path); /* a killed build's X.tmp.PID and its journal */
    char *tmp = xmalloc(strlen(path) + 32);
    sprintf(tmp, "%s.tmp.%d", path, (int)getpid());
    unlink(tmp);
    sqlite3 *s = NULL;
    if (sqlite3_open_v2(tmp, &s, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        rc = sql_fail(s, tmp, "cannot create the database");
        goto done;
    }
    rc = exec(s, path, "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL; BEGIN;"
                       "CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
                       "CREATE TABLE cases(id INTEGER PRIMARY KEY, code BLOB NOT NULL, embedding BLOB NOT NULL,"
                       " label INTEGER, label_name TEXT, image_paths TEXT, scene INTEGER, view INTEGER,"
                       " patient TEXT, metadata TEXT, mask_paths TEXT);");
    char num[32];
    if (!rc) rc = put_meta(s, path, "format", NULL, 0, FORMAT);
    snprintf(num, sizeof num, "%d", e->dim);
    if (!rc) rc = put_meta(s, path, "dim", NULL, 0, num);
    snprintf(num, sizeof num, "%d", bits);
    if (!rc) rc = put_meta(s, path, "bits", NULL, 0, num);
    if (!rc) rc = put_meta(s, path, "hash", NULL, 0, hash_kind_name(hk));
    if (!rc) rc = put_meta(s, path, "index", NULL, 0, index_kind_name(kind));
    if (!rc && e->model) rc = put_meta(s, path, "model", NULL, 0, e->model);
    if (!rc && e->nlabel_names) {
        size_t len = 1;
        for (int i = 0; i < e->nlabel_names; i++) len += strlen(e->label_names[i]) + 1;
        char *names = xcalloc(len, 1);
        for (int i = 0; i < e->nlabel_names; i++) { if (i) strcat(names, "\n"); strcat(names, e->label_names[i]); }
        rc = put_meta(s, path, "label_names", NULL, 0, names);
        free(names);
    }
    if (!rc && h.mean) rc = put_meta(s, path, "hash_mean", h.mean, e->dim * (int)sizeof(float), NULL);
    if (!rc && h.proj) rc = put_meta(s, path, "hash_proj", h.proj, bits * e->dim * (int)sizeof(float), NULL);
    if (!rc) {
        case_rec *r = xcalloc((size_t)(e->n > 0 ? e->n : 1), sizeof *r);
        for (int i = 0; i < e->n; i++) {
            r[i].id = e->ids[i];
            r[i].emb = e->x + (size_t)i * e->dim;
            r[i].label = e->labels ? e->labels[i] : -1;
            r[i].scene = e->scene ? e->scene[i] : -1;
            r[i].view = e->view ? e->view[i] : -1;
            r[i].image_paths = image_paths ? image_paths[i] : NULL;
            r[i].mask_paths = mask_paths ? mask_paths[i] : NULL;
            r[i].patient = patient ? patient[i] : NULL;
        }
        rc = insert_cases(s, path, &h, e->dim, r, e->n, e->label_names, e->nlabel_names, "index build");
        free(r);
    }
    if (!rc) rc = exec(s, path, "COMMIT;");
    if (sqlite3_close(s) != SQLITE_OK && !rc) rc = er_fail(ER_RUNTIME, "%s: close failed", tmp);
    s = NULL;
    if (!rc && rename(tmp, path) != 0) rc = er_fail(ER_RUNTIME, "%s: cannot rename the new database into place", path);
done:
    if (s) sqlite3_close(s);
    if (rc) unlink(tmp);
    free(tmp);
    hasher_free(&h);
    return rc;
}

/* ---- in-memory side ---- */
static uint64_t mix(int64_t id) {
    uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ULL;
    return x ^ (x >> 31);
}

static void map_rebuild(casedb *db) {
    free(db->map);
    db->mapcap = 16;
    while (db->mapcap < 2 * db->cap) db->mapcap *= 2;
    db->map = xcalloc((size_t)db->mapcap, sizeof *db->map);
    for (int64_t r = 0; r < db->n; r++) {
        uint64_t h = mix(db->ids[r]) & (db->mapcap - 1);
        while (db->map[h]) h = (h + 1) & (db->mapcap - 1);
        db->map[h] = r + 1;
    }
}

int64_t casedb_row(const casedb *db, int64_t id) {
    if (!db->map) return -1;
    for (uint64_t h = mix(id) & (db->mapcap - 1);; h = (h + 1) & (db->mapcap - 1)) {
        if (!db->map[h]) return -1;
        if (db->ids[db->map[h] - 1] == id) return db->map[h] - 1;
    }
}

static void mem_reserve(casedb *db, int64_t cap) {
    if (cap <= db->cap) return;
    int64_t nc = db->cap ? db->cap : 64;
    while (nc < cap) nc *= 2;
    db->ids = xrealloc(db->ids, (size_t)nc * 8);
    db->labels = xrealloc(db->labels, (size_t)nc * 8);
    db->scene = xrealloc(db->scene, (size_t)nc * 8);
    db->view = xrealloc(db->view, (size_t)nc * 8);
    db->paths = xrealloc(db->paths, (size_t)nc * sizeof(char *));
    db->patient = xrealloc(db->patient, (size_t)nc * sizeof(char *));
    db->masks = xrealloc(db->masks, (size_t)nc * sizeof(char *));
    db->cap = nc;
}

static void mem_append(casedb *db, const case_rec *r) {
    mem_reserve(db, db->n + 1);
    int64_t i = db->n++;
    db->ids[i] = r->id;
    db->labels[i] = r->label;
    db->scene[i] = r->scene;
    db->view[i] = r->view;
    db->paths[i] = r->image_paths ? xstrdup(r->image_paths) : NULL;
    db->patient[i] = r->patient ? xstrdup(r->patient) : NULL;
    db->masks[i] = r->mask_paths && *r->mask_paths ? xstrdup(r->mask_paths) : NULL;
}

/* n bytes of column col into dst: an empty BLOB or TEXT comes back as NULL from SQLite, and
 * memcpy from NULL is undefined even for 0 bytes (found by the casedb fuzz target). */
static void column_copy(void *dst, sqlite3_stmt *st, int col, size_t n) {
    const void *v = sqlite3_column_blob(st, col);
    if (n && v) memcpy(dst, v, n);
}

static const char *meta_text(sqlite3 *s, const char *key, char *buf, size_t nbuf) {
    sqlite3_stmt *st;
    const char *out = NULL;
    if (sqlite3_prepare_v2(s, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        int len = sqlite3_column_bytes(st, 0);
        if ((size_t)len < nbuf) { column_copy(buf, st, 0, (size_t)len); buf[len] = 0; out = buf; }
    }
    sqlite3_finalize(st);
    return out;
}

static float *meta_floats(sqlite3 *s, const char *key, int64_t count) {
    sqlite3_stmt *st;
    float *out = NULL;
    if (sqlite3_prepare_v2(s, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 0) == count * (int64_t)sizeof(float)) {
        out = xmalloc((size_t)(count > 0 ? count : 1) * sizeof(float));
        column_copy(out, st, 0, (size_t)count * sizeof(float));
    }
    sqlite3_finalize(st);
    return out;
}

void casedb_close(casedb *db) {
    if (db->sql) sqlite3_close(db->sql);
    for (int64_t i = 0; i < db->n; i++) { free(db->paths[i]); free(db->patient[i]); free(db->masks[i]); }
    free(db->ids); free(db->labels); free(db->scene); free(db->view); free(db->paths); free(db->patient); free(db->masks);
    free(db->map);
    for (int i = 0; i < db->nlabel_names; i++) free(db->label_names[i]);
    free(db->label_names);
    free(db->model);
    free(db->path);
    hasher_free(&db->hash);
    bindex_free(&db->ix);
    findex_free(&db->fx);
    memset(db, 0, sizeof *db);
}

/* A label is NULL (unknown) or an integer naming one of the label names (any integer >= 0 when the
 * database has none): anything else would index past the names or vote for a class that is not. */
static int check_label(sqlite3_stmt *st, int col, const casedb *db, const char *path, int64_t id) {
    int type = sqlite3_column_type(st, col);
    if (type == SQLITE_NULL) return ER_OK;
    int64_t v = sqlite3_column_int64(st, col);
    if (type == SQLITE_INTEGER && v >= 0 && (db->nlabel_names == 0 || v < db->nlabel_names)) return ER_OK;
    const char *text = (const char *)sqlite3_column_text(st, col);
    return er_fail(ER_INPUT, "%s: case %lld: label '%.40s' is not one of the %d label numbers (0..%d) nor NULL", path,
                   (long long)id, text ? text : "", db->nlabel_names, db->nlabel_names - 1);
}

int casedb_open(const char *path, casedb *db) {
    memset(db, 0, sizeof *db);
    if (access(path, R_OK) != 0) return er_fail(ER_INPUT, "%s: cannot open the case database (no such file)", path);
    int fd, rc0 = open_regular(path, &fd); /* a directory or a FIFO is bad input, not a SQLite error */
    if (rc0) return rc0;
    close(fd);
    sqlite3 *s = NULL;
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        int rc = sql_fail(s, path, "cannot open the case database");
        sqlite3_close(s);
        return rc;
    }
    db->sql = s;
    db->path = xstrdup(path);
    char *buf = xmalloc(1 << 20), buf2[64]; /* label names can be long */
    int rc = ER_OK;
    const size_t BUFSZ = 1 << 20;
    if (exec(s, path, "PRAGMA synchronous=FULL;")) { rc = er_fail(ER_INPUT, "%s: not a case database (%s)", path, sqlite3_errmsg(s)); goto fail; }
    const char *fmt = meta_text(s, "format", buf, BUFSZ);
    if (!fmt || strcmp(fmt, FORMAT)) {
        rc = er_fail(ER_INPUT, "%s: not an endoret case database (%s)", path,
                     sqlite3_errcode(s) != SQLITE_OK && sqlite3_errcode(s) != SQLITE_DONE && sqlite3_errcode(s) != SQLITE_ROW
                         ? sqlite3_errmsg(s) : "no format entry " FORMAT);
        goto fail;
    }
    const char *v;
    db->dim = (v = meta_text(s, "dim", buf2, sizeof buf2)) ? atoi(v) : 0;
    db->bits = (v = meta_text(s, "bits", buf2, sizeof buf2)) ? atoi(v) : 0;
    hash_kind hk;
    if (db->dim < 1 || db->dim > 1 << 20 || db->bits < 1 || db->bits > 4096) {
        rc = er_fail(ER_INPUT, "%s: corrupt meta (dim %d, bits %d)", path, db->dim, db->bits);
        goto fail;
    }
    if (!(v = meta_text(s, "hash", buf2, sizeof buf2)) || hash_kind_parse(v, &hk)) { rc = er_fail(ER_INPUT, "%s: corrupt meta: hash", path); goto fail; }
    if (!(v = meta_text(s, "index", buf2, sizeof buf2)) || index_kind_parse(v, &db->kind)) { rc = er_fail(ER_INPUT, "%s: corrupt meta: index", path); goto fail; }
    if ((v = meta_text(s, "model", buf, BUFSZ))) db->model = xstrdup(v);
    if ((v = meta_text(s, "label_names", buf, BUFSZ)) && *v) {
        char *names = xstrdup(v), *save = NULL;
        for (char *t = strtok_r(names, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
            db->label_names = xrealloc(db->label_names, (size_t)(db->nlabel_names + 1) * sizeof(char *));
            db->label_names[db->nlabel_names++] = xstrdup(t);
        }
        free(names);
    }
    float *mean = NULL, *proj = NULL;
    if (hk != HASH_SIGN) {
        mean = meta_floats(s, "hash_mean", db->dim);
        proj = meta_floats(s, "hash_proj", (int64_t)db->bits * db->dim);
        if (!mean || !proj) { free(mean); free(proj); rc = er_fail(ER_INPUT, "%s: the %s projection is missing or has the wrong size", path, hash_kind_name(hk)); goto fail; }
    }
    rc = hasher_set(&db->hash, hk, db->dim, db->bits, mean, proj);
    free(mean); free(proj);
    if (rc) goto fail;
    /* rows */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s, "SELECT mask_paths FROM cases LIMIT 0", -1, &st, NULL) == SQLITE_OK) db->mask_col = 1;
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(s, db->mask_col ? "SELECT id, code, embedding, label, image_paths, scene, view, patient, mask_paths FROM cases ORDER BY id"
                                           : "SELECT id, code, embedding, label, image_paths, scene, view, patient, NULL FROM cases ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = er_fail(ER_INPUT, "%s: not a case database (%s)", path, sqlite3_errmsg(s));
        goto fail;
    }
    int W = hash_words(db->bits);
    int64_t cap = 0, n = 0;
    uint64_t *codes = NULL;
    float *emb = NULL;
    int sr;
    while ((sr = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        if (sqlite3_column_bytes(st, 1) != W * 8 || sqlite3_column_bytes(st, 2) != db->dim * (int)sizeof(float)) {
            rc = er_fail(ER_INPUT, "%s: case %lld: code has %d bytes (expected %d), embedding %d bytes (expected %d)", path,
                         (long long)id, sqlite3_column_bytes(st, 1), W * 8, sqlite3_column_bytes(st, 2), db->dim * 4);
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            codes = xrealloc(codes, (size_t)cap * W * 8);
            emb = xrealloc(emb, (size_t)cap * db->dim * sizeof(float));
        }
        if ((rc = check_label(st, 3, db, path, id))) break;
        column_copy(codes + n * W, st, 1, (size_t)W * 8);
        column_copy(emb + n * db->dim, st, 2, (size_t)db->dim * sizeof(float));
        case_rec r = {id, NULL, sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 3),
                      (const char *)sqlite3_column_text(st, 4),
                      sqlite3_column_type(st, 5) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 5),
                      sqlite3_column_type(st, 6) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 6),
                      (const char *)sqlite3_column_text(st, 7), NULL, (const char *)sqlite3_column_text(st, 8)};
        mem_append(db, &r);
        n++;
    }
    if (!rc && sr != SQLITE_DONE) rc = er_fail(ER_INPUT, "%s: reading cases: %s", path, sqlite3_errmsg(s));
    sqlite3_finalize(st);
    if (!rc) rc = bindex_build(&db->ix, db->kind, db->bits, codes, db->ids, n, 0);
    if (!rc) rc = findex_build(&db->fx, db->dim, emb, db->ids, n);
    free(codes);
    free(emb);
    if (rc) goto fail;
    mem_reserve(db, 1);
    map_rebuild(db);
    free(buf);
    return ER_OK;
fail:;
    free(buf);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", er_msg());
    casedb_close(db);
    /* the hasher and index builders do not know the file: name it */
    if (strncmp(msg, path, strlen(path))) return er_fail(rc ? rc : ER_INPUT, "%s: %s", path, msg);
    return er_fail(rc ? rc : ER_INPUT, "%s", msg);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int casedb_add(casedb *db, const case_rec *recs, int n) {
    sqlite3 *s = db->sql;
    for (int i = 0; i < n; i++)
        if (casedb_row(db, recs[i].id) >= 0) return er_fail(ER_INPUT, "%s: case id %lld is already in the database", db->path, (long long)recs[i].id);
    /* an id twice in the batch: sorted copy, O(n log n) (the pairwise check took 27 s for 200,000) */
    int64_t *sorted = xmalloc(sizeof *sorted * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) sorted[i] = recs[i].id;
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i64);
    for (int i = 1; i < n; i++)
        if (sorted[i] == sorted[i - 1]) {
            int64_t d = sorted[i];
            free(sorted);
            return er_fail(ER_INPUT, "add: case id %lld given twice", (long long)d);
        }
    free(sorted);
    int rc = exec(s, db->path, "BEGIN IMMEDIATE;");
    /* a database from before the mask column gets it with its first write, in the same transaction */
    if (!rc && !db->mask_col) rc = exec(s, db->path, "ALTER TABLE cases ADD COLUMN mask_paths TEXT;");
    if (!rc) rc = insert_cases(s, db->path, &db->hash, db->dim, recs, n, db->label_names, db->nlabel_names, "index add");
    if (!rc && db->before_commit) db->before_commit(db->before_commit_ctx);
    if (!rc) rc = exec(s, db->path, "COMMIT;");
    if (rc) { sqlite3_exec(s, "ROLLBACK;", NULL, NULL, NULL); return rc; }
    db->mask_col = 1;
    /* the file has them: now the memory side (cannot fail) */
    int W = hash_words(db->bits);
    uint64_t *code = xmalloc((size_t)W * 8);
    for (int i = 0; i < n; i++) {
        hasher_encode(&db->hash, recs[i].emb, 1, code);
        mem_append(db, &recs[i]);
        bindex_add(&db->ix, code, recs[i].id);
        findex_add(&db->fx, recs[i].emb, recs[i].id);
    }
    free(code);
    map_rebuild(db);
    return ER_OK;
}

int casedb_delete(casedb *db, const int64_t *ids, int n) {
    for (int i = 0; i < n; i++)
        if (casedb_row(db, ids[i]) < 0) return er_fail(ER_INPUT, "%s: case id %lld is not in the database", db->path, (long long)ids[i]);
    sqlite3 *s = db->sql;
    sqlite3_stmt *st;
    int rc = exec(s, db->path, "BEGIN IMMEDIATE;");
    if (rc) return rc;
    if (sqlite3_prepare_v2(s, "DELETE FROM cases WHERE id = ?", -1, &st, NULL) != SQLITE_OK) {
        rc = sql_fail(s, db->path, "delete");
        sqlite3_exec(s, "ROLLBACK;", NULL, NULL, NULL);
        return rc;
    }
    for (int i = 0; i < n && !rc; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, ids[i]);
        if (sqlite3_step(st) != SQLITE_DONE) rc = sql_fail(s, db->path, "delete");
    }
    sqlite3_finalize(st);
    if (!rc && db->before_commit) db->before_commit(db->before_commit_ctx);
    if (!rc) rc = exec(s, db->path, "COMMIT;");
    if (rc) { sqlite3_exec(s, "ROLLBACK;", NULL, NULL, NULL); return rc; }
    /* memory side: drop the rows in one compaction pass, then one map rebuild (O(n + deletions)) */
    uint8_t *gone = xcalloc((size_t)(db->n > 0 ? db->n : 1), 1);
    for (int i = 0; i < n; i++) {
        int64_t r = casedb_row(db, ids[i]);
        if (r < 0 || gone[r]) continue; /* the same id twice in the list */
        gone[r] = 1;
        bindex_delete(&db->ix, ids[i]);
        findex_delete(&db->fx, ids[i]);
    }
    int64_t w = 0;
    for (int64_t r = 0; r < db->n; r++) {
        if (gone[r]) { free(db->paths[r]); free(db->patient[r]); free(db->masks[r]); continue; }
        db->ids[w] = db->ids[r]; db->labels[w] = db->labels[r]; db->scene[w] = db->scene[r];
        db->view[w] = db->view[r]; db->paths[w] = db->paths[r]; db->patient[w] = db->patient[r];
        db->masks[w] = db->masks[r];
        w++;
    }
    db->n = w;
    free(gone);
    map_rebuild(db);
    return ER_OK;
}

int casedb_search(const casedb *db, const float *q, int nq, int k, int use_float, int64_t *ids,
                  int32_t *hdist, float *fdist, int *count) {
    for (int64_t i = 0; i < (int64_t)nq * db->dim; i++)
        if (!(q[i] == q[i]) || q[i] > 3.4e38f || q[i] < -3.4e38f) return er_fail(ER_INPUT, "search: query %lld has a non-finite value", (long long)(i / db->dim));
    if (use_float) { findex_search(&db->fx, q, nq, k, ids, fdist, count); return ER_OK; }
    int W = hash_words(db->bits);
    uint64_t *c = xmalloc((size_t)(nq > 0 ? nq : 1) * W * 8);
    hasher_encode(&db->hash, q, nq, c);
    bindex_search(&db->ix, c, nq, k, ids, hdist, count);
    free(c);
    return ER_OK;
}

const char *casedb_label_name(const casedb *db, int64_t label) {
    if (label >= 0 && label < db->nlabel_names) return db->label_names[label];
    return NULL;
}
