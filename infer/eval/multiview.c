/* multiview.c — EndoFinder table 3: every combination of query views and reference views, each a
 * reid_eval_views setting (fused views, the file's distance). */
#include "infer/eval/multiview.h"
#include "infer/eval/reid_views.h"
#include "nn/base/base.h"

#include <stdio.h>
#include <string.h>

/* the paper's rows go from one view on each side to two on each side */
static const int ORDER[9][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {3, 1}, {1, 3}, {3, 2}, {2, 3}, {3, 3}};

static int views_of(int mask, int64_t first, int64_t *v) {
    int n = 0;
    for (int b = 0; b < 2; b++) if (mask >> b & 1) v[n++] = first + b;
    return n;
}

int multiview_eval_keep(const emb_set *e, int k, int bits, uint64_t seed, mv_row rows[9], reid_view_result *keep) {
    if (!e->scene || !e->view) return er_fail(ER_INPUT, "multi-view evaluation needs `scene` and `view` in the embedding file");
    if (e->nview_names) return er_fail(ER_INPUT, "multi-view evaluation: the views must be 0,1,2,3 (Q1,Q2,R1,R2), the file's views are names");
    int have[4] = {0};
    for (int i = 0; i < e->n; i++) if (e->view[i] >= 0 && e->view[i] < 4) have[e->view[i]] = 1;
    if (!have[0] || !have[1] || !have[2] || !have[3]) {
        static const char *const NAME[4] = {"0 (Q1)", "1 (Q2)", "2 (R1)", "3 (R2)"};
        char miss[64] = "";
        for (int v = 0, o = 0; v < 4; v++)
            if (!have[v]) o += snprintf(miss + o, sizeof miss - (size_t)o, "%s%s", o ? ", " : "", NAME[v]);
        return er_fail(ER_INPUT, "multi-view evaluation needs views 0,1,2,3 = Q1,Q2,R1,R2; no row has view %s", miss);
    }
    int rc = ER_OK;
    for (int o = 0; o < 9 && !rc; o++) {
        int64_t qv[2], rv[2];
        reid_views_cfg c = {.qviews = qv, .rviews = rv, .k = k, .bits = bits, .hash = HASH_PCA, .seed = seed};
        c.nqviews = views_of(ORDER[o][0], 0, qv);
        c.nrviews = views_of(ORDER[o][1], 2, rv);
        reid_view_result res;
        rc = reid_eval_views(e, &c, &res);
        if (rc) break;
        rows[o].qmask = ORDER[o][0];
        rows[o].rmask = ORDER[o][1];
        rows[o].nscenes = res.nscenes;
        rows[o].r = res.r;
        if (keep) keep[o] = res;
        else reid_view_result_free(&res);
    }
    if (rc && keep)
        for (int o = 0; o < 9; o++) if (keep[o].pred || keep[o].gt) reid_view_result_free(&keep[o]);
    return rc;
}

int multiview_eval(const emb_set *e, int k, int bits, uint64_t seed, mv_row rows[9]) {
    return multiview_eval_keep(e, k, bits, seed, rows, NULL);
}
