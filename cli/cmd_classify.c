/* cmd_classify.c — `endoret classify`: kNN diagnosis of query embeddings from the case database. */
#include "infer/retrieval/casedb.h"
#include "cli/cli_util.h"
#include "infer/retrieval/knn.h"
#include "infer/eval/metrics.h"
#include "cli/common_opts.h"
#include "infer/retrieval/distance.h"
#include "nn/base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cmd_classify(int argc, char **argv) {
    const char *index = NULL, *query = NULL, *vote = "majority";
    int k = 0, json = 0, use_float = 0;
    double tau = 0.1;
    arg_spec specs[] = {
        {"index", ARG_STR, &index, "case database (endoret index build)", .required = 1},
        {"query", ARG_STR, &query, "embedding file of the queries (labels, if present, are scored)", .required = 1},
        OPT_K_BY_VOTE(&k),
        OPT_VOTE(&vote),
        OPT_TAU(&tau),
        {"float", ARG_FLAG, &use_float, "neighbours by float cosine instead of Hamming"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, 7, "endoret classify --index DB --query Q.safetensors [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    int weighted;
    if ((rc = knn_parse_vote(vote, &weighted))) return rc;
    if (k == 0) k = knn_default_k(weighted); /* the same k as report and serve */
    casedb db;
    if ((rc = casedb_open(index, &db))) return rc;
    if (!db.nlabel_names) { casedb_close(&db); return er_fail(ER_INPUT, "%s: the cases have no labels to vote with", index); }
    if (db.n == 0) { casedb_close(&db); return er_fail(ER_INPUT, "%s: the database holds no cases to vote with", index); }
    if (k > db.n) k = db.n > 0 ? (int)db.n : 1; /* no more neighbours than cases */
    emb_set q;
    if ((rc = emb_load_arg(query, "--query", &q))) { casedb_close(&db); return rc; }
    if ((rc = emb_require_cosine(&q, "--query"))) { emb_free(&q); casedb_close(&db); return rc; }
    if (q.dim != db.dim) {
        rc = er_fail(ER_INPUT, "--query: %d-d embeddings but the database holds %d-d ones", q.dim, db.dim);
        emb_free(&q); casedb_close(&db);
        return rc;
    }
    int C = db.nlabel_names;
    int64_t *ids = xmalloc((size_t)q.n * k * 8), *lab = xmalloc((size_t)k * 8);
    int32_t *hd = xmalloc((size_t)q.n * k * 4);
    float *fd = xmalloc((size_t)q.n * k * 4);
    double *sim = xmalloc((size_t)k * 8), *score = xmalloc((size_t)C * 8), *pos_score = xmalloc((size_t)q.n * 8);
    int *cnt = xmalloc((size_t)q.n * sizeof(int)), *pred = xmalloc((size_t)q.n * sizeof(int)), *truth = xmalloc((size_t)q.n * sizeof(int));
    rc = casedb_search(&db, q.x, q.n, k, use_float, ids, hd, fd, cnt);
    int scored = 0;
    for (int i = 0; i < q.n && !rc; i++) {
        for (int j = 0; j < cnt[i]; j++) {
            int64_t r = casedb_row(&db, ids[(size_t)i * k + j]);
            lab[j] = r >= 0 ? db.labels[r] : -1;
            sim[j] = use_float ? 1.0 - fd[(size_t)i * k + j] : hamming_similarity(hd[(size_t)i * k + j], db.bits);
        }
        pred[i] = weighted ? knn_weighted(lab, sim, cnt[i], C, tau, score) : knn_majority(lab, cnt[i], C, score);
        pos_score[i] = C == 2 ? score[1] : 0;
        /* query labels are matched to the database's by name */
        truth[i] = -1;
        if (q.labels && q.labels[i] >= 0 && q.labels[i] < q.nlabel_names)
            for (int c = 0; c < C; c++) if (!strcmp(db.label_names[c], q.label_names[q.labels[i]])) truth[i] = c;
        scored += truth[i] >= 0;
        const char *pn = pred[i] >= 0 ? db.label_names[pred[i]] : "unknown";
        if (json) {
            printf("{\"query\": %lld, \"label\": ", (long long)q.ids[i]);
            json_put_str(stdout, pn);
            printf(", \"scores\": [");
            for (int c = 0; c < C; c++) printf("%s%.6g", c ? ", " : "", score[c]);
            printf("], \"neighbours\": [");
            for (int j = 0; j < cnt[i]; j++) printf("%s%lld", j ? ", " : "", (long long)ids[(size_t)i * k + j]);
            printf("]}\n");
        } else {
            printf("query %lld: %s (", (long long)q.ids[i], pn);
            for (int c = 0; c < C; c++) printf("%s%s %.2f", c ? ", " : "", db.label_names[c], score[c]);
            printf(")%s%s\n", truth[i] >= 0 ? "  truth " : "", truth[i] >= 0 ? db.label_names[truth[i]] : "");
        }
    }
    if (!rc && scored) {
        int64_t *conf = xmalloc((size_t)C * C * 8);
        confusion_matrix(truth, pred, q.n, C, conf);
        double acc = accuracy_from_confusion(conf, C), f1 = f1_from_confusion(conf, C, C == 2 ? 1 : -1);
        double auc = C == 2 ? roc_auc(pos_score, truth, q.n) : NAN;
        if (json) printf("{\"summary\": true, \"n\": %d, \"accuracy\": %.6f, \"f1\": %.6f, \"auc\": %.6f}\n", scored, acc, f1, auc);
        else printf("%d labelled queries: accuracy %.4f, F1 %.4f%s, AUC %.4f (%s vote, k = %d)\n", scored, acc, f1,
                    C == 2 ? "" : " (macro)", auc, vote, k);
        free(conf);
    }
    free(ids); free(lab); free(hd); free(fd); free(sim); free(score); free(pos_score); free(cnt); free(pred); free(truth);
    emb_free(&q);
    casedb_close(&db);
    return rc;
}
