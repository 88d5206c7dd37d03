/* cmd_search.c — `endoret search`: top-k cases for each query embedding, nearest first. */
#include "infer/retrieval/casedb.h"
#include "cli/cli_util.h"
#include "cli/common_opts.h"
#include "infer/retrieval/distance.h"
#include "nn/base/base.h"

#include <stdlib.h>
#include <string.h>

int cmd_search(int argc, char **argv) {
    const char *index = NULL, *query = NULL;
    int k = 10, json = 0, use_float = 0;
    arg_spec specs[] = {
        {"index", ARG_STR, &index, "case database (endoret index build)", .required = 1},
        {"query", ARG_STR, &query, "embedding file of the queries", .required = 1},
        OPT_K(&k),
        {"float", ARG_FLAG, &use_float, "search the float embeddings by cosine instead of the codes"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, 5, "endoret search --index DB --query Q.safetensors [--k K] [--json]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    casedb db;
    if ((rc = casedb_open(index, &db))) return rc;
    if (k > db.n) k = db.n > 0 ? (int)db.n : 1; /* no more neighbours than cases */
    emb_set q;
    if ((rc = emb_load_arg(query, "--query", &q))) { casedb_close(&db); return rc; }
    if ((rc = emb_require_cosine(&q, "--query"))) { emb_free(&q); casedb_close(&db); return rc; }
    if (q.dim != db.dim) {
        rc = er_fail(ER_INPUT, "--query: %s has %d-d embeddings but %s holds %d-d ones", query, q.dim, index, db.dim);
        emb_free(&q); casedb_close(&db);
        return rc;
    }
    int64_t *ids = xmalloc((size_t)q.n * k * sizeof *ids);
    int32_t *hd = xmalloc((size_t)q.n * k * sizeof *hd);
    float *fd = xmalloc((size_t)q.n * k * sizeof *fd);
    int *cnt = xmalloc((size_t)q.n * sizeof *cnt);
    double t0 = now_seconds();
    rc = casedb_search(&db, q.x, q.n, k, use_float, ids, hd, fd, cnt);
    double dt = now_seconds() - t0;
    for (int i = 0; i < q.n && !rc; i++) {
        const int64_t *id = ids + (size_t)i * k;
        if (json) {
            printf("{\"query\": %lld, \"ids\": [", (long long)q.ids[i]);
            for (int j = 0; j < cnt[i]; j++) printf("%s%lld", j ? ", " : "", (long long)id[j]);
            printf("], \"distances\": [");
            for (int j = 0; j < cnt[i]; j++) {
                if (use_float) printf("%s%.6g", j ? ", " : "", fd[(size_t)i * k + j]);
                else printf("%s%d", j ? ", " : "", hd[(size_t)i * k + j]);
            }
            printf("]}\n");
            continue;
        }
        const char *ql = q.labels && q.labels[i] >= 0 && q.labels[i] < q.nlabel_names ? q.label_names[q.labels[i]] : NULL;
        printf("query %lld%s%s%s\n", (long long)q.ids[i], ql ? " (label " : "", ql ? ql : "", ql ? ")" : "");
        for (int j = 0; j < cnt[i]; j++) {
            int64_t r = casedb_row(&db, id[j]);
            const char *lab = r >= 0 ? casedb_label_name(&db, db.labels[r]) : NULL;
            if (use_float) printf("  %2d. case %-8lld cosine distance %.4f", j + 1, (long long)id[j], fd[(size_t)i * k + j]);
            else printf("  %2d. case %-8lld Hamming %4d", j + 1, (long long)id[j], hd[(size_t)i * k + j]);
            printf("  label %-12s %s\n", lab ? lab : "-", r >= 0 && db.paths[r] ? db.paths[r] : "");
        }
    }
    if (!rc && !json)
        printf("%d queries, %lld cases, %s, %.3f ms per query\n", q.n, (long long)db.n,
               use_float ? "float cosine" : index_kind_name(db.kind), 1e3 * dt / q.n);
    free(ids); free(hd); free(fd); free(cnt);
    emb_free(&q);
    casedb_close(&db);
    return rc;
}
