/* embed_scene.c — one descriptor per case from its views (embed_scene.h). */
#include "cli/embed_scene.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "nn/base/base.h"
#include "nn/base/progress.h"

typedef struct {
    int n;
    char **name;     /* "0+1" */
    char ***views;   /* view strings of each group */
    int *nviews;
} group_list;

static void groups_free(group_list *g) {
    for (int i = 0; i < g->n; i++) {
        for (int k = 0; k < g->nviews[i]; k++) free(g->views[i][k]);
        free(g->views[i]);
        free(g->name[i]);
    }
    free(g->name); free(g->views); free(g->nviews);
    memset(g, 0, sizeof *g);
}

/* "0,1;2,3" -> two groups; NULL -> one group of every view (nviews 0). */
static int groups_parse(const char *s, group_list *g) {
    memset(g, 0, sizeof *g);
    if (!s) {
        g->n = 1;
        g->name = xcalloc(1, sizeof(char *));
        g->views = xcalloc(1, sizeof(char **));
        g->nviews = xcalloc(1, sizeof(int));
        return ER_OK;
    }
    size_t len = strlen(s);
    g->name = xcalloc(len + 1, sizeof(char *));
    g->views = xcalloc(len + 1, sizeof(char **));
    g->nviews = xcalloc(len + 1, sizeof(int));
    char *copy = xstrdup(s), *save = NULL;
    for (char *grp = strtok_r(copy, ";", &save); grp; grp = strtok_r(NULL, ";", &save)) {
        int i = g->n++;
        g->views[i] = xcalloc(strlen(grp) + 1, sizeof(char *));
        g->name[i] = xcalloc(strlen(grp) + 1, 1);
        char *save2 = NULL;
        for (char *v = strtok_r(grp, ",", &save2); v; v = strtok_r(NULL, ",", &save2)) {
            while (*v == ' ') v++;
            if (!*v) continue;
            if (g->nviews[i]) strcat(g->name[i], "+");
            strcat(g->name[i], v);
            g->views[i][g->nviews[i]++] = xstrdup(v);
        }
        if (!g->nviews[i]) { free(copy); groups_free(g); return er_fail(ER_INPUT, "--groups '%s': an empty group", s); }
    }
    free(copy);
    if (!g->n) { groups_free(g); return er_fail(ER_INPUT, "--groups '%s': no group", s); }
    return ER_OK;
}

static int in_group(const group_list *g, int i, const char *view) {
    if (!g->nviews[i]) return 1;
    for (int k = 0; view && k < g->nviews[i]; k++)
        if (!strcmp(g->views[i][k], view)) return 1;
    return 0;
}

/* qsort has no context argument: one sort at a time (the CLI is single-threaded here) */
static struct { const manifest *m; const int *rows; } sort_ctx;
static const int *sort_run0, *sort_ord;

static int by_scene(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    int c = strcmp(sort_ctx.m->rows[sort_ctx.rows[a]].scene, sort_ctx.m->rows[sort_ctx.rows[b]].scene);
    return c ? c : (a > b) - (a < b);
}

static int by_first_row(const void *pa, const void *pb) {
    int a = sort_ord[sort_run0[*(const int *)pa]], b = sort_ord[sort_run0[*(const int *)pb]];
    return (a > b) - (a < b);
}

int embed_scenes(model *net, const manifest *m, const char *man_path, const int *rows, int n, const embed_scene_opts *o,
                 emb_set *e, int *skipped) {
    memset(e, 0, sizeof *e);
    *skipped = 0;
    int mean = !strcmp(o->fusion, "mean");
    if (!mean && strcmp(o->fusion, "transformer"))
        return er_fail(ER_INPUT, "--fusion '%s': transformer | mean", o->fusion);
    if (!mean && !net->arch->scene_descriptor)
        return er_fail(ER_INPUT, "--fusion transformer: model %s has no scene encoder (train one with `endoret train "
                                 "scene`), or use --fusion mean", net->arch->name);
    for (int k = 0; k < n; k++)
        if (!m->rows[rows[k]].scene)
            return er_fail(ER_INPUT, "%s: row %d has no scene value (embed --scene groups rows by scene)", man_path, rows[k] + 2);
    group_list g;
    int rc = groups_parse(o->groups, &g);
    if (rc) return rc;
    /* the rows sorted by scene (then order): each scene's rows are one run; runs in order of first row */
    int *ord = xmalloc(n * sizeof(int));
    for (int k = 0; k < n; k++) ord[k] = k;
    sort_ctx.m = m; sort_ctx.rows = rows;
    qsort(ord, n, sizeof(int), by_scene);
    int *run0 = xmalloc((n + 1) * sizeof(int)), nruns = 0;
    for (int k = 0; k < n; k++)
        if (!k || strcmp(m->rows[rows[ord[k]]].scene, m->rows[rows[ord[k - 1]]].scene)) run0[nruns++] = k;
    run0[nruns] = n;
    int *first = xmalloc(nruns * sizeof(int)), ns = nruns; /* first[s]: run index, by first row */
    for (int s2 = 0; s2 < nruns; s2++) first[s2] = s2;
    sort_run0 = run0; sort_ord = ord;
    qsort(first, nruns, sizeof(int), by_first_row);
    int S = net->img, D = net->dim, cap = o->max_views, most = 1;
    for (int s2 = 0; s2 < nruns; s2++)
        if (run0[s2 + 1] - run0[s2] > most) most = run0[s2 + 1] - run0[s2];
    /* a case's views are encoded together: room for the largest scene, not for --max-views (1e9 of
     * them aborted in the allocator), and that forward must fit */
    int nx = most < cap ? most : cap;
    if ((rc = model_forward_check(net, nx, "embed --scene", "--img, or the views per case (--max-views)"))) {
        free(first); free(ord); free(run0);
        groups_free(&g);
        return rc;
    }
    size_t img = (size_t)3 * S * S;
    float *x = xmalloc((size_t)nx * img * sizeof(float));
    int *out_row = xmalloc((size_t)ns * g.n * sizeof(int)), *out_grp = xmalloc((size_t)ns * g.n * sizeof(int));
    float *desc = xmalloc((size_t)ns * g.n * D * sizeof(float));
    int nout = 0;
    image src = {0}, dst = {0};
    aug_workspace ws = {0};
    model_input in = model_input_of(net);
    progress pr;
    progress_begin(&pr, "embed --scene", "cases", ns);
    for (int s = 0; s < ns && !rc; s++) {
        int a = run0[first[s]], b = run0[first[s] + 1];
        const char *scene = m->rows[rows[ord[a]]].scene;
        for (int gi = 0; gi < g.n && !rc; gi++) {
            int V = 0, missing = 0;
            for (int v = 0; g.nviews[gi] && v < g.nviews[gi]; v++) { /* every view of the group must be there */
                int found = 0;
                for (int k = a; k < b && !found; k++)
                    found = m->rows[rows[ord[k]]].view && !strcmp(m->rows[rows[ord[k]]].view, g.views[gi][v]);
                missing |= !found;
            }
            if (missing) { (*skipped)++; continue; }
            for (int k = a; k < b && !rc; k++) {
                const manifest_row *r = &m->rows[rows[ord[k]]];
                if (!in_group(&g, gi, r->view)) continue;
                if (V == cap) {
                    rc = er_fail(ER_INPUT, "%s: scene '%s' has more than %d views (--max-views)", man_path, scene, cap);
                    break;
                }
                char *p = manifest_image_path(m, rows[ord[k]]);
                rc = image_load(p, 3, &src);
                free(p);
                if (!rc) rc = aug_eval_input(&src, S, in.crop, in.mean, in.std, &ws, &dst);
                if (!rc) memcpy(x + (size_t)V++ * img, dst.data, img * sizeof(float));
            }
            if (rc) break;
            float *d = desc + (size_t)nout * D;
            rc = mean ? model_embed_mean(net, x, V, d) : model_embed_scene(net, x, V, d);
            out_row[nout] = rows[ord[a]];
            out_grp[nout] = gi;
            nout++;
        }
        progress_add(&pr, 1);
    }
    progress_end(&pr);
    image_free(&src);
    image_free(&dst);
    aug_workspace_free(&ws);
    if (!rc && nout == 0) rc = er_fail(ER_INPUT, "%s: no scene has every view of a group", man_path);
    if (!rc) {
        emb_alloc(e, nout, D);
        memcpy(e->x, desc, (size_t)nout * D * sizeof(float));
        emb_fill_from_manifest(e, m, out_row, 1);
        /* the row's view: the group's name, or none (a case of all its views) */
        for (int i = 0; e->view_names && i < e->nview_names; i++) free(e->view_names[i]);
        free(e->view_names);
        e->view_names = NULL;
        e->nview_names = 0;
        if (o->groups) {
            e->nview_names = g.n;
            e->view_names = xcalloc(g.n, sizeof(char *));
            for (int i = 0; i < g.n; i++) e->view_names[i] = xstrdup(g.name[i]);
            for (int i = 0; i < nout; i++) e->view[i] = out_grp[i];
        } else {
            free(e->view);
            e->view = NULL;
        }
    }
    free(x); free(out_row); free(out_grp); free(desc); free(first); free(ord); free(run0);
    groups_free(&g);
    return rc;
}
