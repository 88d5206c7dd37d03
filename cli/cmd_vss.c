/* cmd_vss.c — `endoret vss draw|serve`: build a perceived-similarity ground truth (paper §3).
 *
 *   endoret vss draw --emb E.safetensors --n 300 --seed 1 --out sheet.csv [--manifest M.csv]
 *                    [--group auto|patient|scene|none] [--per-process 3] [--distance chi2] [--bins 30]
 *   endoret vss serve --sheet sheet.csv --scores pairs.csv --observer alice [--port 8090] [--bind 127.0.0.1]
 *
 * draw: couples ∝ 1/density of the prior distance, candidates from other patients (perceived_draw.h).
 * Images come from the manifest (row i of the embedding file = data row i of the manifest); the
 * manifest defaults to the embedding file's "manifest" metadata. Patients: the manifest's patient
 * column (--group patient), else the file's scene ids (--group scene). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/manifest.h"
#include "infer/retrieval/embeddings.h"
#include "infer/perceived/perceived_draw.h"
#include "infer/perceived/perceived_eval.h"
#include "infer/perceived/vss_server.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"

static int cmd_vss_draw(int argc, char **argv) {
    const char *emb_path = NULL, *out = NULL, *manifest_path = NULL, *group_arg = "auto", *dist_arg = NULL;
    int n = 0, seed = 1, per = 3, bins = 30;
    arg_spec specs[] = {
        OPT_EMB(&emb_path, "embedding file of the prior descriptor", .required = 1),
        /* room for n couples is allocated up front (2e9 aborted): a scoring study is far smaller */
        {"n", ARG_INT, &n, "number of couples to draw", "[1, 10000000]"},
        OPT_SEED(&seed),
        OPT_OUT(&out, "scoring sheet to write (CSV)", .required = 1),
        OPT_MANIFEST(&manifest_path, "manifest for image paths and patients"),
        {"group", ARG_STR, &group_arg, "who counts as the same patient", "auto|patient|scene|none"},
        {"per-process", ARG_INT, &per, "candidates per reference item (paper: 3)", "[1, 10000]"},
        {"distance", ARG_STR, &dist_arg, "distance of the prior descriptor", "cosine|hamming|chi2", .def = "the embedding file's"},
        {"bins", ARG_INT, &bins, "histogram bins of the prior-distance density", "[1, 10000]"},
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, "endoret vss draw --emb E --n N --seed K --out sheet.csv", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    emb_set e;
    if ((rc = emb_load(emb_path, &e))) return rc;
    manifest m;
    int have_m = 0;
    char *mpath = NULL;
    if (manifest_path) mpath = xstrdup(manifest_path);
    else if (e.manifest && *e.manifest) {
        char *dir = path_dirname(emb_path);
        mpath = path_join(dir, e.manifest);
        free(dir);
        if (access(mpath, R_OK) != 0) { free(mpath); mpath = xstrdup(e.manifest); }
    }
    if (mpath) {
        if ((rc = manifest_load(mpath, &m))) goto done;
        have_m = 1;
        if (m.n != e.n) { rc = er_fail(ER_INPUT, "%s: %d rows but %s has %d items", mpath, m.n, emb_path, e.n); goto done; }
    }
    int64_t *group = NULL;
    int *pids = NULL, npat = 0;
    char **pnames = NULL;
    int want_patient = !strcmp(group_arg, "patient") || (!strcmp(group_arg, "auto") && have_m);
    if (want_patient && have_m) {
        manifest_field_ids(&m, MF_PATIENT, &pids, &pnames, &npat);
        if (npat > 0) {
            group = xmalloc(e.n * sizeof *group);
            for (int i = 0; i < e.n; i++) group[i] = pids[i];
        }
    }
    if (!strcmp(group_arg, "patient") && !group) { rc = er_fail(ER_INPUT, "--group patient: no manifest with a patient column"); goto done2; }
    if (!group && strcmp(group_arg, "none") && strcmp(group_arg, "patient")) {
        if (e.scene) { group = xmalloc(e.n * sizeof *group); memcpy(group, e.scene, e.n * sizeof *group); }
        else if (!strcmp(group_arg, "scene")) { rc = er_fail(ER_INPUT, "--group scene: %s has no scene ids", emb_path); goto done2; }
    }
    {
        pdist_kind kind;
        if ((rc = pdist_parse(dist_arg ? dist_arg : e.distance ? e.distance : "cosine", &kind))) goto done2;
        pdist_set p;
        if ((rc = pdist_prepare(&p, e.x, e.n, e.dim, kind))) goto done2;
        vss_draw_pair *dp = xmalloc(n * sizeof *dp);
        int got = vss_draw(&p, group, n, per, bins, (uint64_t)seed, dp);
        vss_sheet sh = {0};
        sh.n = got;
        sh.rows = xcalloc(got ? got : 1, sizeof *sh.rows);
        char *outdir = path_dirname(out);
        for (int i = 0; i < got; i++) {
            vss_sheet_row *w = &sh.rows[i];
            w->a = e.ids[dp[i].a]; w->b = e.ids[dp[i].b]; w->process = dp[i].process; w->prior = dp[i].prior;
            w->image_a = have_m ? manifest_image_path(&m, dp[i].a) : xstrdup("");
            w->image_b = have_m ? manifest_image_path(&m, dp[i].b) : xstrdup("");
            /* sheet paths: absolute, so the sheet can be moved independently of the data */
            for (int side = 0; side < 2 && have_m; side++) {
                char **pp = side ? &w->image_b : &w->image_a;
                if ((*pp)[0] != '/') {
                    char *abs = realpath(*pp, NULL);
                    if (abs) { free(*pp); *pp = abs; }
                }
            }
        }
        free(outdir);
        rc = vss_sheet_save(out, &sh);
        if (!rc) {
            double mean = 0;
            for (int i = 0; i < got; i++) mean += dp[i].prior / got;
            printf("vss draw: %d couples in %d scoring processes (%s distance, mean prior distance %.4g%s) -> %s\n", got,
                   got ? dp[got - 1].process + 1 : 0, pdist_name(kind), mean,
                   group ? ", candidates from other patients" : ", no patient grouping", out);
            if (got < n) printf("vss draw: only %d of the %d requested couples could be drawn\n", got, n);
        }
        vss_sheet_free(&sh);
        free(dp);
        pdist_free(&p);
    }
done2:
    free(group);
    if (pids) manifest_free_labels(pids, pnames, npat);
done:
    if (have_m) manifest_free(&m);
    free(mpath);
    emb_free(&e);
    return rc;
}

static volatile sig_atomic_t stop_flag = 0;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

static int cmd_vss_serve(int argc, char **argv) {
    vss_server_cfg cfg = {0};
    cfg.bind = "127.0.0.1";
    cfg.port = 8090;
    cfg.observer = NULL;
    arg_spec specs[] = {
        {"sheet", ARG_STR, &cfg.sheet, "scoring sheet from `vss draw`", .required = 1},
        {"scores", ARG_STR, &cfg.scores, "scores CSV to append to (a,b,score,observer; created if absent)", .required = 1},
        {"observer", ARG_STR, &cfg.observer, "observer name", .required = 1},
        {"port", ARG_INT, &cfg.port, "TCP port (0 = any free port)"},
        {"bind", ARG_STR, &cfg.bind, "IPv4 address to listen on (127.0.0.1 = this machine only)"},
        OPT_MANIFEST(&cfg.manifest, "manifest the sheet was drawn from: images under its folder may be shown "
                                    "(always: those under the sheet's folder)"),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret vss serve --sheet sheet.csv --scores pairs.csv --observer NAME [--manifest M.csv] [--port P]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    vss_server *s;
    int port;
    if ((rc = vss_server_start(&cfg, &s, &port))) return rc;
    int n, done;
    vss_server_progress(s, &n, &done);
    printf("vss serve: http://%s:%d/  observer %s, %d couples, %d already scored; scores -> %s (Ctrl-C to stop)\n", cfg.bind, port,
           cfg.observer, n, done, cfg.scores);
    if (strcmp(cfg.bind, "127.0.0.1")) fprintf(stderr, "vss serve: warning: listening on %s, reachable from other machines\n", cfg.bind);
    fflush(stdout);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stop_flag) usleep(200000);
    vss_server_progress(s, &n, &done);
    vss_server_stop(s);
    printf("vss serve: stopped; %d of %d couples scored by %s\n", done, n, cfg.observer);
    return ER_OK;
}

int cmd_vss(int argc, char **argv) {
    static const arg_sub subs[] = {
        {"draw", cmd_vss_draw, "draw couples to score (∝ 1/density of a prior distance, other patients)"},
        {"serve", cmd_vss_serve, "local scoring web page recording Likert scores"},
    };
    return args_dispatch(argc, argv, "endoret vss draw|serve [options]   (--help on each)", subs, 2);
}
