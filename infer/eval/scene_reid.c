/* scene_reid.c — scene re-ID on pairs of views (scene_reid.h). */
#include "infer/eval/scene_reid.h"

#include <stdlib.h>
#include <string.h>

#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"

int scene_pairs_reid(model *m, const float *x, const int64_t *scene, const int64_t *view, int n, const char *source,
                     reid_view_result *r) {
    int D = m->dim, rc = ER_OK;
    size_t img = (size_t)3 * m->img * m->img;
    int64_t maxs = -1;
    for (int i = 0; i < n; i++) if (scene[i] > maxs) maxs = scene[i];
    int *at = xmalloc((size_t)(maxs + 1) * 4 * sizeof(int)); /* the row of (scene, view 0-3), -1 = none */
    for (int64_t i = 0; i < (maxs + 1) * 4; i++) at[i] = -1;
    for (int i = 0; i < n; i++)
        if (scene[i] >= 0 && view[i] >= 0 && view[i] < 4) at[scene[i] * 4 + view[i]] = i;
    emb_set e;
    emb_alloc(&e, 2 * (int)(maxs + 1), D);
    e.scene = xmalloc(e.n * sizeof(int64_t));
    e.view = xmalloc(e.n * sizeof(int64_t));
    float *pair = xmalloc(2 * img * sizeof(float));
    int rows = 0;
    for (int64_t s = 0; s <= maxs && !rc; s++) {
        const int *a = at + s * 4;
        if (a[0] < 0 || a[1] < 0 || a[2] < 0 || a[3] < 0) continue;
        for (int side = 0; side < 2 && !rc; side++) {
            memcpy(pair, x + (size_t)a[2 * side] * img, img * sizeof(float));
            memcpy(pair + img, x + (size_t)a[2 * side + 1] * img, img * sizeof(float));
            rc = model_embed_scene(m, pair, 2, e.x + (size_t)rows * D);
            e.scene[rows] = s;
            e.view[rows] = 2 * side; /* 0 = the query pair, 2 = the reference pair */
            rows++;
        }
    }
    free(pair);
    free(at);
    e.n = rows;
    if (!rc && rows < 4) rc = er_fail(ER_INPUT, "%s: fewer than 2 eval scenes with views 0-3", source);
    int64_t ref = 2, qv = 0;
    reid_views_cfg vc = {.qviews = &qv, .nqviews = 1, .rviews = &ref, .nrviews = 1, .k = REID_DEFAULT_K};
    if (!rc) rc = reid_eval_views(&e, &vc, r);
    emb_free(&e);
    return rc;
}
