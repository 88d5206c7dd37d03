/* cmd_index.c — `endoret index build | add | delete | info`: the case database. */
#include "datasets/manifest.h"
#include "infer/retrieval/casedb.h"
#include "cli/cli_util.h"
#include "cli/common_opts.h"
#include "infer/retrieval/distance.h"
#include "nn/base/base.h"
#include "nn/base/json.h"
#include "nn/base/progress.h"

#include <stdlib.h>
#include <string.h>

/* A case per scene (`embed --scene` without --groups: scene ids, no views, ids = the scene's first
 * manifest row): its image paths are every manifest row of that scene, joined by ';'. */
static int scene_columns(const emb_set *e, const manifest *m, char **paths, char **masks, char **patient) {
    for (int i = 0; i < e->n; i++) {
        int64_t r0 = e->ids[i];
        if (r0 < 0 || r0 >= m->n || !m->rows[r0].scene) return 0;
    }
    int *scene_of, *mscene, n, nm;
    char **joined, **mjoined;
    manifest_scene_paths(m, &scene_of, &joined, &n);
    manifest_scene_masks(m, &mscene, &mjoined, &nm);
    for (int i = 0; i < e->n; i++) {
        int k = scene_of[e->ids[i]];
        paths[i] = xstrdup(joined[k]);
        masks[i] = mjoined[k] ? xstrdup(mjoined[k]) : NULL;
        patient[i] = m->rows[e->ids[i]].patient;
    }
    manifest_free_labels(scene_of, joined, n);
    manifest_free_labels(mscene, mjoined, nm);
    return 1;
}

/* Whether every row id of the embedding file names a manifest row (an `embed --split` file of that
 * manifest: its ids are the rows it embedded). */
static int ids_are_rows(const emb_set *e, const manifest *m) {
    for (int i = 0; i < e->n; i++)
        if (e->ids[i] < 0 || e->ids[i] >= m->n) return 0;
    return 1;
}

/* image paths / mask paths / patients (and labels, when the embedding file has none) from a manifest whose
 * rows match the embedding rows, whose rows the embedding's row ids name (an `embed --split` file
 * with the full manifest), or whose scenes are the embedding's cases (scene_columns) */
static int manifest_columns(const char *mpath, const emb_set *e, char ***paths, char ***masks, char ***patient, manifest *m) {
    *paths = *masks = *patient = NULL;
    if (!mpath || !*mpath) return ER_OK;
    int rc = manifest_load(mpath, m);
    if (rc) return rc;
    if (m->n != e->n && e->scene && !e->view) {
        *paths = xcalloc((size_t)e->n, sizeof(char *));
        *masks = xcalloc((size_t)e->n, sizeof(char *));
        *patient = xcalloc((size_t)e->n, sizeof(char *));
        if (scene_columns(e, m, *paths, *masks, *patient)) return ER_OK;
        for (int i = 0; i < e->n; i++) { free((*paths)[i]); free((*masks)[i]); }
        free(*paths); free(*masks); free(*patient);
        *paths = *masks = *patient = NULL;
    }
    /* row i of the embedding file is manifest row row_of[i]: the same row, or the one its id names */
    const int by_id = m->n != e->n;
    if (by_id && !ids_are_rows(e, m)) {
        int mn = m->n;
        manifest_free(m);
        return er_fail(ER_INPUT, "--manifest: %s has %d rows but the embedding file has %d whose row ids are not all "
                                 "rows of it (embed it from this manifest, or give the manifest it was embedded from)",
                       mpath, mn, e->n);
    }
#define ROW(i) (by_id ? (int)e->ids[i] : (i))
    if (!e->labels) { /* labels from the manifest when the embedding file has none */
        emb_set *w = (emb_set *)e;
        int *lab, nl;
        char **names;
        manifest_label_ids(m, &lab, &names, &nl);
        if (nl > 0) {
            w->labels = xmalloc((size_t)e->n * sizeof(int64_t));
            for (int i = 0; i < e->n; i++) w->labels[i] = lab[ROW(i)];
            w->nlabel_names = nl;
            w->label_names = xmalloc((size_t)nl * sizeof(char *));
            for (int i = 0; i < nl; i++) w->label_names[i] = xstrdup(names[i]);
        }
        manifest_free_labels(lab, names, nl);
    }
    *paths = xcalloc((size_t)e->n, sizeof(char *));
    *masks = xcalloc((size_t)e->n, sizeof(char *));
    *patient = xcalloc((size_t)e->n, sizeof(char *));
    for (int i = 0; i < e->n; i++) {
        (*paths)[i] = manifest_image_list(m, ROW(i)); /* a one-view list: a ';' in the path stays in it */
        (*masks)[i] = manifest_mask_list(m, ROW(i));
        (*patient)[i] = m->rows[ROW(i)].patient;
    }
#undef ROW
    return ER_OK;
}

/* The same encoder: a file of another model (same size or not) gives descriptors that mean
 * something else; a model that is not named cannot be checked, so it counts as another. */
static int same_encoder(const casedb *db, const emb_set *e, const char *emb) {
    if (db->model && e->model && !strcmp(db->model, e->model)) return ER_OK;
    if (!db->model && !e->model) return ER_OK;
    return er_fail(ER_INPUT, "--emb: %s was made by '%s' but the database %s holds embeddings of '%s' (embed the new "
                             "cases with the database's encoder)", emb, e->model ? e->model : "(no model named)",
                   db->path, db->model ? db->model : "(no model named)");
}

/* The file's label numbers rewritten as the database's numbers of the same names (the numbers of
 * two files need not agree: each numbers its own names). */
static int labels_by_name(const casedb *db, emb_set *e, const char *emb) {
    if (!e->labels) return ER_OK;
    if (!e->nlabel_names && !db->nlabel_names) return ER_OK; /* numbers on both sides */
    if (!e->nlabel_names || !db->nlabel_names)
        return er_fail(ER_INPUT, "--emb: %s has labels %s names but the database %s has %s: labels cannot be matched "
                                 "by name", emb, e->nlabel_names ? "with" : "without", db->path,
                       db->nlabel_names ? "named labels" : "no label names");
    int *to = xmalloc((size_t)e->nlabel_names * sizeof *to);
    for (int l = 0; l < e->nlabel_names; l++) {
        to[l] = -1;
        for (int c = 0; c < db->nlabel_names; c++)
            if (!strcmp(e->label_names[l], db->label_names[c])) to[l] = c;
    }
    for (int i = 0; i < e->n; i++) {
        int64_t l = e->labels[i];
        if (l < 0) continue;
        if (l >= e->nlabel_names || to[l] < 0) {
            char names[512] = "";
            for (int c = 0; c < db->nlabel_names && strlen(names) < 400; c++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", c ? ", " : "", db->label_names[c]);
            int rc = er_fail(ER_INPUT, "--emb: %s: case %lld has label '%s', which the database %s does not have (its "
                                       "labels: %s)", emb, (long long)e->ids[i],
                             l < e->nlabel_names ? e->label_names[l] : "(unnamed)", db->path, names);
            free(to);
            return rc;
        }
    }
    for (int i = 0; i < e->n; i++)
        if (e->labels[i] >= 0) e->labels[i] = to[e->labels[i]];
    free(to);
    return ER_OK;
}

static void free_columns(char **paths, char **masks, char **patient, int n, manifest *m) {
    if (!paths) return;
    for (int i = 0; i < n; i++) { free(paths[i]); free(masks[i]); }
    free(paths); free(masks); free(patient);
    manifest_free(m);
}

static void print_info(const casedb *db, int json) {
    int depth = 0;
    int64_t leaves = 0;
    if (db->kind == INDEX_BALLTREE) balltree_stats(&db->ix, &depth, &leaves);
    if (json) {
        printf("{\"cases\": %lld, \"dim\": %d, \"bits\": %d, \"hash\": \"%s\", \"index\": \"%s\", \"labels\": %d",
               (long long)db->n, db->dim, db->bits, hash_kind_name(db->hash.kind), index_kind_name(db->kind), db->nlabel_names);
        if (db->kind == INDEX_MIH) printf(", \"mih_substrings\": %d", mih_substrings(&db->ix));
        if (db->kind == INDEX_BALLTREE) printf(", \"balltree_depth\": %d, \"balltree_leaves\": %lld", depth, (long long)leaves);
        printf("}\n");
        return;
    }
    printf("%s: %lld cases, %d-d embeddings, %d-bit %s codes, %s index", db->path, (long long)db->n, db->dim, db->bits,
           hash_kind_name(db->hash.kind), index_kind_name(db->kind));
    if (db->kind == INDEX_MIH) printf(" (%d substrings)", mih_substrings(&db->ix));
    if (db->kind == INDEX_BALLTREE) printf(" (depth %d, %lld leaves)", depth, (long long)leaves);
    printf("\n");
    if (db->model) printf("model: %s\n", db->model);
    if (db->nlabel_names) {
        printf("labels:");
        for (int l = 0; l < db->nlabel_names; l++) {
            int64_t c = 0;
            for (int64_t i = 0; i < db->n; i++) c += db->labels[i] == l;
            printf(" %s=%lld", db->label_names[l], (long long)c);
        }
        printf("\n");
    }
}

static int do_build(int argc, char **argv) {
    const char *emb = NULL, *out = NULL, *kind_s = "mih", *hash_s = NULL, *mpath = NULL;
    int bits = 0, json = 0, seed = 0;
    arg_spec specs[] = {
        OPT_EMB(&emb, "embedding file (.safetensors) of the cases", .required = 1),
        OPT_OUT(&out, "case database to write (SQLite)", .required = 1),
        {"bits", ARG_INT, &bits, "code length", "[0, inf)", .def = "embedding size, sign hashing"},
        OPT_INDEX_KIND(&kind_s),
        OPT_HASH(&hash_s, .def = "sign when bits = embedding size, else pca"),
        OPT_MANIFEST(&mpath, "manifest of the embedded images (image paths, patients)"),
        OPT_SEED(&seed),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, 8, "endoret index build --emb E.safetensors --out DB [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    progress_quiet(json);
    index_kind kind;
    if ((rc = index_kind_parse(kind_s, &kind))) return rc;
    emb_set e;
    if ((rc = emb_load_arg(emb, "--emb", &e))) return rc;
    if ((rc = emb_require_cosine(&e, "--emb"))) { emb_free(&e); return rc; }
    hash_kind hk = HASH_SIGN;
    if (hash_s) { if ((rc = hash_kind_parse(hash_s, &hk))) { emb_free(&e); return rc; } }
    else if (bits && bits != e.dim) hk = HASH_PCA;
    manifest m;
    char **paths, **masks, **patient;
    if ((rc = manifest_columns(mpath, &e, &paths, &masks, &patient, &m))) { emb_free(&e); return rc; }
    double t0 = now_seconds();
    rc = casedb_create(out, &e, paths, masks, patient, bits, hk, kind, (uint64_t)seed);
    double t1 = now_seconds();
    free_columns(paths, masks, patient, e.n, &m);
    emb_free(&e);
    if (rc) return rc;
    casedb db;
    if ((rc = casedb_open(out, &db))) return rc;
    double t2 = now_seconds();
    if (!json) printf("wrote %s in %.2f s; reopened (index rebuilt) in %.2f s\n", out, t1 - t0, t2 - t1);
    print_info(&db, json);
    casedb_close(&db);
    return ER_OK;
}

static int do_add(int argc, char **argv) {
    const char *emb = NULL, *index = NULL, *mpath = NULL, *meta = NULL;
    int json = 0;
    arg_spec specs[] = {
        {"index", ARG_STR, &index, "case database", .required = 1},
        OPT_EMB(&emb, "embedding file of the new cases (ids must be new)", .required = 1),
        OPT_MANIFEST(&mpath, "manifest of the new cases' images"),
        {"metadata", ARG_STR, &meta, "JSON text stored with every new case"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, 5, "endoret index add --index DB --emb E.safetensors", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    progress_quiet(json);
    casedb db;
    if ((rc = casedb_open(index, &db))) return rc;
    emb_set e;
    if ((rc = emb_load_arg(emb, "--emb", &e))) { casedb_close(&db); return rc; }
    if ((rc = emb_require_cosine(&e, "--emb"))) { emb_free(&e); casedb_close(&db); return rc; }
    if (e.dim != db.dim) {
        rc = er_fail(ER_INPUT, "--emb: %s has %d-d embeddings but the database holds %d-d ones", emb, e.dim, db.dim);
        emb_free(&e); casedb_close(&db);
        return rc;
    }
    if (!rc) rc = same_encoder(&db, &e, emb);
    if (!rc && meta) {
        json_value v; /* stored as is and served as JSON: refuse what is not */
        if ((rc = json_parse(meta, strlen(meta), "--metadata", &v)) == ER_OK) json_free(&v);
    }
    if (rc) { emb_free(&e); casedb_close(&db); return rc; }
    manifest m;
    char **paths, **masks, **patient;
    if ((rc = manifest_columns(mpath, &e, &paths, &masks, &patient, &m))) { emb_free(&e); casedb_close(&db); return rc; }
    if ((rc = labels_by_name(&db, &e, emb))) { /* after the manifest, which may have given the labels */
        free_columns(paths, masks, patient, e.n, &m);
        emb_free(&e); casedb_close(&db);
        return rc;
    }
    case_rec *r = xcalloc((size_t)e.n, sizeof *r);
    for (int i = 0; i < e.n; i++) {
        r[i] = (case_rec){e.ids[i], e.x + (size_t)i * e.dim, e.labels ? e.labels[i] : -1, paths ? paths[i] : NULL,
                          e.scene ? e.scene[i] : -1, e.view ? e.view[i] : -1, patient ? patient[i] : NULL, meta,
                          masks ? masks[i] : NULL};
    }
    rc = casedb_add(&db, r, e.n);
    if (!rc) {
        if (json) printf("{\"added\": %d, \"cases\": %lld}\n", e.n, (long long)db.n);
        else printf("added %d cases to %s: %lld cases now\n", e.n, index, (long long)db.n);
    }
    free(r);
    free_columns(paths, masks, patient, e.n, &m);
    emb_free(&e);
    casedb_close(&db);
    return rc;
}

static int do_delete(int argc, char **argv) {
    const char *index = NULL, *ids_s = NULL;
    int json = 0;
    arg_spec specs[] = {
        {"index", ARG_STR, &index, "case database", .required = 1},
        {"id", ARG_STR, &ids_s, "case ids to delete, comma-separated", .required = 1},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, 3, "endoret index delete --index DB --id 12[,13...]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    int64_t *ids;
    int n;
    if ((rc = parse_id_list(ids_s, "--id", &ids, &n))) return rc;
    casedb db;
    if ((rc = casedb_open(index, &db))) { free(ids); return rc; }
    rc = casedb_delete(&db, ids, n);
    if (!rc) {
        if (json) printf("{\"deleted\": %d, \"cases\": %lld}\n", n, (long long)db.n);
        else printf("deleted %d case%s from %s: %lld cases now\n", n, n == 1 ? "" : "s", index, (long long)db.n);
    }
    free(ids);
    casedb_close(&db);
    return rc;
}

static int do_info(int argc, char **argv) {
    const char *index = NULL;
    int json = 0;
    arg_spec specs[] = {
        {"index", ARG_STR, &index, "case database (or as the one positional argument)"},
        OPT_JSON(&json),
    };
    char **pos = NULL;
    int npos = 0;
    int rc = args_parse(argc, argv, specs, 2, "endoret index info --index DB", &pos, &npos);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (!index && npos) index = pos[0];
    free(pos);
    if (!index) return er_fail(ER_INPUT, "--index is required");
    casedb db;
    if ((rc = casedb_open(index, &db))) return rc;
    print_info(&db, json);
    casedb_close(&db);
    return ER_OK;
}

int cmd_index(int argc, char **argv) {
    static const arg_sub subs[] = {
        {"build", do_build, "create a case database from an embedding file (hash codes + in-memory index)"},
        {"add", do_add, "add cases from an embedding file (no retraining, no rebuild)"},
        {"delete", do_delete, "delete cases by id"},
        {"info", do_info, "describe a case database"},
    };
    return args_dispatch(argc, argv, "endoret index build|add|delete|info [options]   (endoret index build --help)",
                         subs, 4);
}
