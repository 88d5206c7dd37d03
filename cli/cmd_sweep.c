/* cmd_sweep.c — `endoret sweep`: hash length x k over a database + query set (or synthetic
 * clustered embeddings), printed as a table and written as CSV + SVG. */
#include "cli/cli_util.h"
#include "infer/eval/bootstrap.h"
#include "infer/eval/sweep.h"
#include "infer/eval/synth_emb.h"
#include "cli/common_opts.h"
#include "infer/retrieval/distance.h"
#include "nn/base/base.h"
#include "nn/base/memory.h"

#include <stdlib.h>
#include <string.h>

static int read_gt_csv(const char *path, reid_gt **gt, int64_t *n) {
    char *data;
    size_t len;
    int rc = read_file(path, &data, &len);
    if (rc) return rc;
    *gt = NULL;
    *n = 0;
    int64_t cap = 0;
    int line = 0;
    char *save = NULL;
    for (char *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (++line == 1) {
            if (strncmp(l, "query_id,reference_id", 21)) { free(data); return er_fail(ER_INPUT, "%s: line 1: expected header query_id,reference_id", path); }
            continue;
        }
        long long q, r;
        if (sscanf(l, "%lld,%lld", &q, &r) != 2) { free(data); free(*gt); *gt = NULL; return er_fail(ER_INPUT, "%s: line %d: expected two integer ids", path, line); }
        if (*n == cap) { cap = cap ? 2 * cap : 256; *gt = xrealloc(*gt, (size_t)cap * sizeof **gt); }
        (*gt)[(*n)++] = (reid_gt){q, r};
    }
    free(data);
    return ER_OK;
}

/* The default code lengths for a dim-d descriptor: those of the list that fit, then dim itself (its
 * sign code), so a 192-d encoder sweeps 16..128 and 192 instead of failing on 256. */
static int default_bits(int *bits, int nb, int dim, int **out) {
    int *b = xmalloc((size_t)(nb + 1) * sizeof *b), n = 0;
    for (int i = 0; i < nb; i++)
        if (bits[i] <= dim) b[n++] = bits[i];
    if (n == 0 || b[n - 1] != dim) b[n++] = dim;
    free(bits);
    *out = b;
    return n;
}

int cmd_sweep(int argc, char **argv) {
    const char *dbp = NULL, *qp = NULL, *gtp = NULL, *bits_s = NULL, *ks_s = "1,3,5,6,10,20";
    const char *hash_s = "pca", *kind_s = "mih", *out = NULL, *svg = NULL, *save = NULL;
    int synthetic = 0, n = 20000, nq = 1000, dim = 256, clusters = 200, seed = 1, json = 0, markdown = 0;
    int B = BOOTSTRAP_DEFAULT_N;
    double spread = 0.9, qnoise = 0.6, label_noise = 0.15;
    arg_spec specs[] = {
        {"db", ARG_STR, &dbp, "database embeddings (labels used for the kNN vote)"},
        {"query", ARG_STR, &qp, "query embeddings"},
        {"gt", ARG_STR, &gtp, "query_id,reference_id pairs for re-identification uAP / Acc@1"},
        {"synthetic", ARG_FLAG, &synthetic, "use synthetic clustered embeddings instead of files"},
        {"n", ARG_INT, &n, "synthetic: database size", "[10, 100000000]"},
        {"queries", ARG_INT, &nq, "synthetic: queries", "[1, 10000000]"},
        {"dim", ARG_INT, &dim, "synthetic: embedding size", "[2, 65536]"},
        {"clusters", ARG_INT, &clusters, "synthetic: clusters", "[1, 1000000]"},
        {"spread", ARG_DOUBLE, &spread, "synthetic: within-cluster spread", "[0, inf)"},
        {"qnoise", ARG_DOUBLE, &qnoise, "synthetic: query noise around its source item", "[0, inf)"},
        {"label-noise", ARG_DOUBLE, &label_noise, "synthetic: label flip probability", "[0, 1]"},
        {"save", ARG_STR, &save, "synthetic: also write db.safetensors, query.safetensors, gt.csv here"},
        {"bits", ARG_STR, &bits_s, "code lengths, comma-separated",
         .def = "16,32,64,128,256 up to the embedding size, and the size itself"},
        OPT_KS(&ks_s),
        OPT_HASH(&hash_s, .def = "pca below the embedding size"),
        OPT_INDEX_KIND(&kind_s),
        OPT_OUT(&out, "folder for sweep.csv and sweep.svg"),
        {"svg", ARG_STR, &svg, "SVG path", .def = "<out>/sweep.svg"},
        OPT_SEED(&seed),
        {"markdown", ARG_FLAG, &markdown, "print the table as markdown"},
        OPT_JSON(&json),
        OPT_BOOTSTRAP(&B),
    };
    int rc = args_parse(argc, argv, specs, 22, "endoret sweep (--db E --query Q [--gt GT.csv] | --synthetic) [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    int *bits, nb, *ks, nk;
    const int bits_given = bits_s != NULL, ks_given = strcmp(ks_s, "1,3,5,6,10,20") != 0;
    if ((rc = args_int_list(bits_given ? bits_s : "16,32,64,128,256", "--bits", &bits, &nb))) return rc;
    if ((rc = args_int_list(ks_s, "--k", &ks, &nk))) { free(bits); return rc; }
    hash_kind hk;
    index_kind kind;
    emb_set db, q;
    memset(&db, 0, sizeof db);
    memset(&q, 0, sizeof q);
    reid_gt *gt = NULL;
    int64_t ngt = 0;
    sweep_row *rows = NULL;
    if ((rc = hash_kind_parse(hash_s, &hk)) || (rc = index_kind_parse(kind_s, &kind))) goto out;
    if (synthetic) {
        mem_estimate e = {0}; /* the two sets, their codes and the indexes, before they are drawn */
        e.data = ((double)n + nq) * dim * 4.0 * 3;
        if ((rc = mem_check(&e, "sweep --synthetic", "--n, --queries or --dim"))) goto out;
        synth_emb_cfg c = {n, nq, dim, clusters, spread, qnoise, label_noise, (uint64_t)seed};
        int64_t *match = xmalloc((size_t)nq * 8);
        synth_emb_make(&c, &db, &q, match);
        gt = xmalloc((size_t)nq * sizeof *gt);
        for (int i = 0; i < nq; i++) gt[i] = (reid_gt){q.ids[i], match[i]};
        ngt = nq;
        free(match);
        if (save) {
            if ((rc = make_dirs(save))) goto out;
            char *p1 = path_join(save, "db.safetensors"), *p2 = path_join(save, "query.safetensors"), *p3 = path_join(save, "gt.csv");
            rc = emb_save(p1, &db);
            if (!rc) rc = emb_save(p2, &q);
            if (!rc) {
                size_t cap = 32 + (size_t)ngt * 44;
                char *txt = xmalloc(cap);
                size_t len = (size_t)sprintf(txt, "query_id,reference_id\n");
                for (int64_t i = 0; i < ngt; i++) len += (size_t)sprintf(txt + len, "%lld,%lld\n", (long long)gt[i].q, (long long)gt[i].r);
                rc = write_file_atomic(p3, txt, len);
                free(txt);
            }
            if (!rc && !json) printf("wrote %s, %s, %s\n", p1, p2, p3);
            free(p1); free(p2); free(p3);
            if (rc) goto out;
        }
    } else {
        if ((rc = emb_load_arg(dbp, "--db", &db))) goto out;
        if ((rc = emb_load_arg(qp, "--query", &q))) goto out;
        if ((rc = emb_require_cosine(&db, "--db")) || (rc = emb_require_cosine(&q, "--query"))) goto out;
        if (gtp && (rc = read_gt_csv(gtp, &gt, &ngt))) goto out;
    }
    if (!bits_given) nb = default_bits(bits, nb, db.dim, &bits);
    if (!ks_given) { /* the default neighbour counts that a small database has room for */
        int w = 0;
        for (int i = 0; i < nk; i++) if (ks[i] <= db.n) ks[w++] = ks[i];
        if (!w) ks[w++] = db.n;
        nk = w;
    }
    rows = xcalloc((size_t)(nb + 1) * nk, sizeof *rows);
    if ((rc = sweep_run(&db, &q, gt, ngt, bits, nb, ks, nk, hk, kind, (uint64_t)seed, B, rows))) {
        char msg[1024]; /* the hasher and index builders do not know the file: name it */
        snprintf(msg, sizeof msg, "%s", er_msg());
        if (!synthetic) rc = er_fail(rc, "--db %s: %s", dbp, msg);
        goto out;
    }
    int nrows = (nb + 1) * nk;
    if (json) {
        for (int i = 0; i < nrows; i++) {
            double v[SWEEP_NCOLS]; /* the CSV's columns (infer/eval/sweep.h) */
            sweep_row_values(&rows[i], v);
            printf("{\"bits\": %d, \"k\": %d", rows[i].bits, rows[i].k);
            for (int c = 0; c < SWEEP_NCOLS; c++) json_put_field(stdout, SWEEP_COLUMNS[c], v[c]);
            if (B > 0) printf(", \"bootstrap\": %d", B);
            printf("}\n");
        }
    } else {
        printf("sweep: %d database items, %d queries, %d-d, hash %s below %d bits, %s index (bits 0 = float cosine)",
               db.n, q.n, db.dim, hash_kind_name(hk), db.dim, kind_s);
        if (B > 0) printf("; 95%% intervals: bootstrap over queries, %d replicates", B);
        printf("\n");
        sweep_print_table(rows, nrows, markdown);
    }
    if (out) {
        if ((rc = make_dirs(out))) goto out;
        char *csv = path_join(out, "sweep.csv");
        rc = sweep_write_csv(csv, rows, nrows);
        if (!rc && !json) printf("wrote %s\n", csv);
        free(csv);
        if (rc) goto out;
    }
    if (svg || out) {
        char *sp = svg ? xstrdup(svg) : path_join(out, "sweep.svg");
        char title[160];
        snprintf(title, sizeof title, "kNN diagnosis and re-identification vs code length (%d items, %d-d)", db.n, db.dim);
        rc = sweep_write_svg(sp, rows, nrows, ks, nk, title);
        if (!rc && !json) printf("wrote %s\n", sp);
        free(sp);
    }
out:
    free(bits); free(ks); free(gt); free(rows);
    emb_free(&db);
    emb_free(&q);
    return rc;
}
