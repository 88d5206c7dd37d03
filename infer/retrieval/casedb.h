/* casedb.h — the database of historical cases: an SQLite file holding, per case, its hash code,
 * float embedding, label (diagnosis), image paths, scene / view / patient ids and free metadata
 * (JSON text), plus the hashing projection and index settings. At open, the in-memory index (the
 * kind stored in the database) and a float index are rebuilt from the rows. Adding and deleting
 * cases are SQLite transactions: either the whole batch is in the file or none of it (a crash
 * mid-write leaves the previous state), and the in-memory indexes are updated in place, no
 * retraining or rebuild.
 *
 * Schema (format "endoret-casedb-1"):
 *   meta(key TEXT PRIMARY KEY, value)   format, dim, bits, hash, index, model, label_names,
 *                                       hash_mean (F32 blob), hash_proj (F32 blob)
 *   cases(id INTEGER PRIMARY KEY, code BLOB, embedding BLOB, label INTEGER, label_name TEXT,
 *         image_paths TEXT, scene INTEGER, view INTEGER, patient TEXT, metadata TEXT,
 *         mask_paths TEXT)
 * mask_paths (the annotators' lesion masks, a view list aligned with image_paths; an empty entry is
 * a view without one) came after the first databases: a file without the column opens with no
 * masks, and the first write adds the column in the write's own transaction. */
#ifndef ENDORET_CASEDB_H
#define ENDORET_CASEDB_H

#include <stdint.h>

#include "infer/retrieval/embeddings.h"
#include "infer/retrieval/hash.h"
#include "infer/retrieval/index.h"

typedef struct {
    int64_t id;
    const float *emb;        /* dim floats */
    int64_t label;           /* -1 unknown */
    const char *image_paths; /* may be NULL; a view list (datasets/view_list.h): paths joined by ';', escaped */
    int64_t scene, view;     /* -1 unknown */
    const char *patient;     /* may be NULL */
    const char *metadata;    /* JSON text or NULL */
    const char *mask_paths;  /* may be NULL; a view list aligned with image_paths ("" = no mask for that view) */
} case_rec;

typedef struct casedb {
    void *sql;               /* sqlite3* */
    char *path;
    int dim, bits;
    index_kind kind;
    hasher hash;
    char *model;
    int nlabel_names;
    char **label_names;
    /* cases in memory (row r), kept in step with the file */
    int64_t n, cap;
    int64_t *ids, *labels, *scene, *view;
    char **paths, **patient, **masks; /* masks[r]: mask_paths or NULL */
    int mask_col;            /* the file has the mask_paths column (older databases do not) */
    int64_t *map;            /* open addressing id -> row (+1; 0 empty) */
    int64_t mapcap;
    bindex ix;
    findex fx;
    /* Test hook: called inside the write transaction of casedb_add / casedb_delete, after the rows
     * are written and before COMMIT (the kill-mid-write tests stop the process there). NULL: none. */
    void (*before_commit)(void *ctx);
    void *before_commit_ctx;
} casedb;

/* Build a new database at `path` (atomically replacing an existing file) from an embedding file.
 * image_paths / mask_paths / patient (n strings or NULL) come from the manifest when the caller has
 * one. bits = 0 means the embedding size (sign hashing). */
int casedb_create(const char *path, const emb_set *e, char *const *image_paths, char *const *mask_paths, char *const *patient,
                  int bits, hash_kind hk, index_kind kind, uint64_t seed);
int casedb_open(const char *path, casedb *db);
void casedb_close(casedb *db);
int casedb_add(casedb *db, const case_rec *recs, int n);
int casedb_delete(casedb *db, const int64_t *ids, int n);
int64_t casedb_row(const casedb *db, int64_t id); /* -1 if absent */
/* Hash the queries and search the binary index (Hamming distances), or the float index
 * (use_float: cosine distance 1 - cos, written to fdist). */
int casedb_search(const casedb *db, const float *q, int nq, int k, int use_float, int64_t *ids,
                  int32_t *hdist, float *fdist, int *count);
const char *casedb_label_name(const casedb *db, int64_t label);

#endif
