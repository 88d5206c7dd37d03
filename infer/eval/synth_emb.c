/* synth_emb.c — clustered synthetic embeddings (see synth_emb.h). */
#include "infer/eval/synth_emb.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void set_names(emb_set *e) {
    e->nlabel_names = 2;
    e->label_names = xmalloc(2 * sizeof(char *));
    e->label_names[0] = xstrdup("benign");
    e->label_names[1] = xstrdup("neoplastic");
    e->model = xstrdup("synthetic clustered embeddings");
}

void synth_emb_make(const synth_emb_cfg *c, emb_set *db, emb_set *query, int64_t *match) {
    const int D = c->dim, G = c->clusters;
    float *cent = xmalloc((size_t)G * D * sizeof *cent), *w = xmalloc((size_t)D * sizeof *w);
    int *clab = xmalloc((size_t)G * sizeof *clab);
    rng_t r = rng_make(c->seed, rng_stream(RNG_SYNTH, 0xe5b, 0));
    for (int j = 0; j < D; j++) w[j] = rng_normal(&r);
    for (int g = 0; g < G; g++) {
        double s = 0, dot = 0;
        for (int j = 0; j < D; j++) { cent[g * D + j] = rng_normal(&r); s += cent[g * D + j] * cent[g * D + j]; }
        for (int j = 0; j < D; j++) { cent[g * D + j] /= (float)sqrt(s); dot += cent[g * D + j] * w[j]; }
        clab[g] = (dot > 0) ^ (rng_uniform(&r) < 0.1f);
    }
    emb_alloc(db, c->n_db, D);
    db->labels = xmalloc((size_t)c->n_db * 8);
    db->scene = xmalloc((size_t)c->n_db * 8);
    set_names(db);
    float sd = (float)(c->spread / sqrt(D)), qd = (float)(c->qnoise / sqrt(D));
    for (int i = 0; i < c->n_db; i++) {
        int g = (int)rng_below(&r, (uint32_t)G);
        for (int j = 0; j < D; j++) db->x[(size_t)i * D + j] = cent[g * D + j] + sd * rng_normal(&r);
        db->labels[i] = clab[g] ^ (rng_uniform(&r) < c->label_noise);
        db->scene[i] = g;
    }
    if (query) {
        emb_alloc(query, c->n_query, D);
        query->labels = xmalloc((size_t)(c->n_query > 0 ? c->n_query : 1) * 8);
        query->scene = xmalloc((size_t)(c->n_query > 0 ? c->n_query : 1) * 8);
        set_names(query);
        for (int i = 0; i < c->n_query; i++) {
            int src = (int)rng_below(&r, (uint32_t)c->n_db);
            for (int j = 0; j < D; j++) query->x[(size_t)i * D + j] = db->x[(size_t)src * D + j] + qd * rng_normal(&r);
            query->labels[i] = clab[db->scene[src]] ^ (rng_uniform(&r) < c->label_noise);
            query->scene[i] = db->scene[src];
            if (match) match[i] = db->ids[src];
        }
    }
    free(cent); free(w); free(clab);
}
