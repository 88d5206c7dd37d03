/* objective.c — the objective registry and the combined (objective + loop) config. */
#include "train/objective.h"

#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/image_cache.h"
#include "nn/base/base.h"
#include "nn/base/suggest.h"
#include "nn/models/model.h"
#include "train/objective_dual.h"
#include "train/objective_finetune.h"
#include "train/objective_image.h"
#include "train/objective_pgcon.h"
#include "train/objective_scene.h"

/* Every objective `endoret train` knows, in --help order. Add a new one here. */
static const objective_def *const objectives[] = {
    &objective_image,
    &objective_scene,
    &objective_pgcon,
    &objective_finetune,
    &objective_dual,
};

const objective_def *const *objective_list(int *n) {
    *n = (int)(sizeof objectives / sizeof objectives[0]);
    return objectives;
}

const objective_def *objective_find(const char *name) {
    int n;
    const objective_def *const *all = objective_list(&n);
    char known[256] = "";
    size_t o = 0;
    suggest near;
    suggest_init(&near, name ? name : "");
    for (int i = 0; i < n; i++) {
        if (name && !strcmp(all[i]->name, name)) return all[i];
        suggest_offer(&near, all[i]->name);
        o += snprintf(known + o, o < sizeof known ? sizeof known - o : 0, "%s%s", i ? ", " : "", all[i]->name);
    }
    const char *best = suggest_best(&near);
    if (best) er_fail(ER_INPUT, "unknown objective '%s' (did you mean '%s'? known: %s)", name ? name : "", best, known);
    else er_fail(ER_INPUT, "unknown objective '%s' (known: %s)", name ? name : "", known);
    return NULL;
}

void objective_config_init(objective_config *oc, const objective_def *def) {
    memset(oc, 0, sizeof *oc);
    oc->def = def;
    oc->cfg = xcalloc(1, def->cfg_size);
    loop_keys_defaults(&oc->loop, def->name);
    void *model_args = (char *)oc->cfg + def->model_offset;
    if (def->arch) def->arch->args_defaults(model_args);
    def->defaults(oc->cfg, &oc->loop);
    key_table t = {0};
    if (def->arch) { /* the model's keys first */
        int n;
        const cfg_spec *s = def->arch->keys(model_args, &n);
        key_table_add(&t, s, n);
    }
    def->specs(oc->cfg, &t);
    oc->nobjective = t.n;
    int nl;
    const cfg_spec *sl = loop_keys_specs(&oc->loop, &nl);
    key_table_add(&t, sl, nl);
    oc->specs = t.s;
    oc->nspecs = t.n;
}

void key_table_add(key_table *t, const cfg_spec *s, int n) {
    if (t->n + n > t->cap) {
        t->cap = 2 * (t->n + n);
        t->s = xrealloc(t->s, (size_t)t->cap * sizeof *t->s);
    }
    memcpy(t->s + t->n, s, (size_t)n * sizeof *s);
    t->n += n;
}

int objective_config_load(objective_config *oc, const char *path, char **sets, int nsets) {
    int rc = path ? cfg_load(path, oc->specs, oc->nspecs) : ER_OK;
    for (int i = 0; rc == ER_OK && i < nsets; i++) rc = cfg_set(sets[i], "--set", oc->specs, oc->nspecs);
    return rc;
}

char *objective_config_text(const objective_config *oc) { return cfg_to_string(oc->specs, oc->nspecs); }

int objective_create(const objective_config *oc, train_objective *out) {
    train_run run;
    int rc = loop_keys_run(&oc->loop, &run);
    for (int i = 0; i < oc->nobjective && !rc; i++) { /* every objective trains from data.manifest */
        if (strcmp(oc->specs[i].key, "data.manifest")) continue;
        const char *m = *(char **)oc->specs[i].dst; /* a CFG_STR key: only its dst is a char * */
        if (!m || !m[0]) rc = er_fail(ER_INPUT, TRAIN_NO_MANIFEST);
    }
    if (rc) return rc;
    const objective_def *def = oc->def;
    void *self = xcalloc(1, def->state_size);
    *out = *def->hooks;
    out->self = self, out->run = run;
    if ((rc = def->create(oc->cfg, &run, self, out))) {
        def->hooks->free(self);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

int objective_ready(train_objective *t, model *m, param_list *params, int64_t samples, int views, int has_eval) {
    t->model = m, t->params = params;
    if (!has_eval) t->eval = NULL;
    int64_t per = samples / ((int64_t)t->run.batch * t->run.keys->accum);
    t->steps_per_epoch = per > 0 ? per : 1;
    t->images_per_step = views * t->run.batch * t->run.keys->accum;
    return ER_OK;
}

int objective_embed(model *m, int precision, const float *x, int n, int chunk, float *out) {
    size_t img = (size_t)3 * m->img * m->img;
    int rc = ER_OK;
    model_set_precision(m, precision);
    for (int b0 = 0; b0 < n && !rc; b0 += chunk)
        rc = model_embed(m, x + b0 * img, n - b0 < chunk ? n - b0 : chunk, out + (size_t)b0 * m->dim);
    return rc;
}

int labelled_rows_load(labelled_rows *r, const char *manifest, const char *split, int side, const model_input *in) {
    return labelled_set_load(manifest, split, side, in->crop, in->mean, in->std, &r->x, &r->y, &r->n, &r->nclass);
}

void labelled_rows_free(labelled_rows *r) {
    free(r->x);
    free(r->y);
}

int view_rows_load(view_rows *r, const char *manifest, const char *split, int side) {
    return eval_set_load(manifest, split, side, &r->x, &r->scene, &r->view, &r->n);
}

void view_rows_free(view_rows *r) {
    free(r->x);
    free(r->scene);
    free(r->view);
}

tensor *objective_best_new(param_list *params, int device, const char *name) {
    tensor *t = tensor_param_on(device, name, 1, SHAPE(1));
    tensor_set_requires_grad(t, 0); /* a buffer: checkpointed, never optimised */
    tensor_fill(t, -1.0f);
    params_add(params, t);
    return t;
}

int objective_best_update(tensor *best, double v, float *before) {
    tensor_to_host(best, before);
    if (!(v > *before)) return 0;
    float f = (float)v;
    tensor_copy_from_host(best, &f);
    return 1;
}

model_input objective_input(const char *stats, float crop) {
    int wce = !strcmp(stats, "wce");
    model_input in = {.crop = crop};
    memcpy(in.mean, wce ? PGCON_MEAN : IMAGENET_MEAN, sizeof in.mean);
    memcpy(in.std, wce ? PGCON_STD : IMAGENET_STD, sizeof in.std);
    return in;
}

void objective_describe(const train_objective *obj, const train_loop_config *lc, FILE *f) {
    char d[512] = "";
    if (obj->model) model_describe(obj->model, d, sizeof d);
    fprintf(f, "train %s: %s", obj->name, d);
    if (obj->describe) fputs("; ", f), obj->describe(obj->self, f);
    fprintf(f, ", lr %.3g%s -> %s\n", lc->lr, lc->restart_epochs > 0 ? " (cosine with warm restarts)" : "", lc->out_dir);
    if (obj->run.keys) train_run_describe(&obj->run, f);
}

void objective_config_free(objective_config *oc) {
    if (!oc->def) return;
    cfg_free_strings(oc->specs, oc->nobjective);
    loop_keys_free(&oc->loop);
    free(oc->cfg);
    free(oc->specs);
    memset(oc, 0, sizeof *oc);
}
