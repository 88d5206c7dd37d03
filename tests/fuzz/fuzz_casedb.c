/* Fuzz target: the case database loader (an SQLite file from anyone): open, which checks the meta
 * entries, every row and rebuilds the indexes, then one search. */
#include "infer/retrieval/casedb.h"
#include "nn/base/base.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    casedb db;
    if (casedb_open(fuzz_file("cases.db", data, size), &db)) return 0;
    if (db.dim > 0 && db.dim <= 4096 && db.n > 0) {
        float *q = xcalloc((size_t)db.dim, sizeof(float));
        q[0] = 1;
        int64_t ids[3];
        int32_t hd[3];
        float fd[3];
        int cnt;
        casedb_search(&db, q, 1, 3, 0, ids, hd, NULL, &cnt);
        casedb_search(&db, q, 1, 3, 1, ids, NULL, fd, &cnt);
        free(q);
    }
    casedb_close(&db);
    return 0;
}
