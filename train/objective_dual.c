/* objective_dual.c — the dual-backbone triplet objective for the training loop (objective_dual.h). */
#include "train/objective_dual.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/image_cache.h"
#include "datasets/manifest.h"
#include "infer/eval/retrieval_loo.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "nn/losses/triplet.h"
#include "nn/models/vit_lora.h"
#include "nn/ops.h"
#include "train/host_batch.h"

/* ---------------------------------------------------------------- config */

/* The reference's settings (spec section 2.8): AdamW 1e-4, wd 1e-4, 30 epochs, batch 32, clip 2, seed 43. */
static void dual_defaults(void *cfg, loop_keys *k) {
    dual_cfg *c = cfg;
    cfg_set_str(&c->miner, "semihard");
    c->miner_margin = 0.3;
    c->margin = 0.6;
    cfg_set_str(&c->split, "train");
    cfg_set_str(&c->val_split, "val");
    cfg_set_str(&c->label, "label");
    cfg_set_str(&c->sampler, "random");
    c->m_per_class = 4;
    cfg_set_str(&c->aug, "light");
    k->epochs = 30; k->seed = 43; k->lr = 1e-4; k->weight_decay = 1e-4; k->clip = 2.0; /* batch 32, beta2 0.999: the loop's */
}

static void dual_specs(void *cfg, key_table *t) {
    dual_cfg *c = cfg;
#define KEY OBJ_KEY_ROW
#include "train/dual_keys.def"
#undef KEY
}

/* ---------------------------------------------------------------- state */

typedef struct {
    dual_cfg cfg;
    model *model;
    dual_net *net;
    param_list all;        /* the model's tensors + best_map */
    tensor *best_map;      /* [1] buffer: best validation mAP so far (-1 = none) */
    miner_kind miner;
    int aug_none, mpc;
    train_run run;           /* batch, shard, threads, seed (train/loop.h) */
    image_cache data;
    int *label;            /* per cached row: class id */
    int nclass, present; /* class ids in the manifest, classes with training rows */
    int *cfirst, *ccount, *crows; /* rows grouped by class (m_per_class) */
    host_batch *hb;        /* a slot: this rank's images [b, 3, S, S], then the global batch's labels [B] */
    size_t lab_off;
    int *rows;             /* the fill's scratch: the global batch's rows */
    view_rows val;         /* data.val_split */
    int *val_label;
} dual_objective;

static void dual_objective_free(void *self) {
    dual_objective *o = self;
    if (!o) return;
    host_batch_free(o->hb); /* first: waits for a fill still reading the data on the worker */
    tensor_free(o->best_map);
    free(o->all.t);
    model_free(o->model);
    image_cache_free(&o->data);
    free(o->rows);
    free(o->label); free(o->cfirst); free(o->ccount); free(o->crows);
    view_rows_free(&o->val); free(o->val_label);
    free(o);
}

/* The key table checks each value's range; here only what spans several keys. */
static int check_cfg(const dual_cfg *c, const loop_keys *k, miner_kind *mk) {
    int rc;
    if ((rc = miner_parse(c->miner, "loss.miner", mk))) return rc;
    if (k->batch < 2) return er_fail(ER_INPUT, "train.batch = %d: triplets and batch norm need >= 2 images", k->batch);
    if (!strcmp(c->sampler, "m_per_class") && (c->m_per_class < 2 || k->batch % c->m_per_class))
        return er_fail(ER_INPUT, "data.m_per_class = %d must be >= 2 and divide train.batch = %d", c->m_per_class, k->batch);
    return ER_OK;
}

/* ---------------------------------------------------------------- step */

/* m_per_class: B / m classes without replacement, m rows of each (without replacement when the class
 * has m, else with), all drawn from the batch's own stream */
static void sample_m_per_class(dual_objective *o, int64_t g, int *rows) {
    int B = o->run.batch, m = o->cfg.m_per_class, nc = 0;
    int *cls = xmalloc(sizeof(int) * (size_t)o->nclass), *tmp = xmalloc(sizeof(int) * (size_t)(o->data.n));
    for (int c = 0; c < o->nclass; c++)
        if (o->ccount[c] > 0) cls[nc++] = c;
    rng_t r = rng_make(o->run.seed, rng_stream(RNG_SAMPLING, (uint32_t)g, 0x51000000u));
    int k = 0;
    for (int t = 0; k < B; t++) {
        int left = nc - t % nc, pick = t % nc + (int)rng_below(&r, (uint32_t)left);
        int c = cls[pick];
        cls[pick] = cls[t % nc];
        cls[t % nc] = c;
        int cnt = o->ccount[c];
        const int *cr = o->crows + o->cfirst[c];
        memcpy(tmp, cr, sizeof(int) * (size_t)cnt);
        for (int j = 0; j < m && k < B; j++) {
            if (cnt >= m) { /* partial Fisher-Yates */
                int q = j + (int)rng_below(&r, (uint32_t)(cnt - j));
                int v = tmp[q]; tmp[q] = tmp[j]; tmp[j] = v;
                rows[k++] = tmp[j];
            } else {
                rows[k++] = cr[rng_below(&r, (uint32_t)cnt)];
            }
        }
    }
    free(cls);
    free(tmp);
}

/* Micro-batch g into a host slot: the global batch's rows and labels, this rank's images j0 .. j0 + b
 * augmented (streams keyed by the global index j). */
static int dual_fill(void *self, int64_t g, void *slot, const fill_scratch *sc) {
    dual_objective *o = self;
    int B = o->run.batch, S = o->cfg.model.img, fail = 0;
    float *x = slot;
    int *lab = (int *)((char *)slot + o->lab_off);
    if (o->mpc) sample_m_per_class(o, g, o->rows);
    else for (int j = 0; j < B; j++) o->rows[j] = host_batch_item(o->hb, g * B + j);
    for (int j = 0; j < B; j++) lab[j] = o->label[o->rows[j]];
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->run.threads)
    for (int i = 0; i < o->run.local_batch; i++) {
        int t = omp_get_thread_num(), j = o->run.first + i;
        rng_t r = rng_make(o->run.seed, rng_stream(RNG_AUGMENT, (uint32_t)g, (uint32_t)j));
        image_cache_get(&o->data.imgs[o->rows[j]], &sc->src[t]);
        image out = {.c = 3, .h = S, .w = S, .data = x + (size_t)i * 3 * S * S, .cap = (size_t)3 * S * S};
        int rc = o->aug_none ? aug_eval(&sc->src[t], S, &sc->ws[t], &out) : aug_scene_train(&r, &sc->src[t], S, &sc->ws[t], &out);
        if (rc || out.data != x + (size_t)i * 3 * S * S) fail = 1;
    }
    return fail ? er_fail(ER_RUNTIME, "augmentation failed at micro-batch %lld", (long long)g) : ER_OK;
}

static tensor *dual_step(void *self, int64_t step, int micro, loss_terms *terms) {
    dual_objective *o = self;
    int S = o->cfg.model.img;
    tensor *xt;
    char *slot = host_batch_step(o->hb, step, micro, &xt, 4, SHAPE(o->run.local_batch, 3, S, S));
    if (!slot) return NULL;
    nn_ctx ctx = nn_ctx_train(o->run.seed, step, micro, o->run.precision);
    /* the miner sees every rank's embeddings (gradient back to their owner): the global batch's triplets */
    tensor *e = op_allgather_rows(dual_forward(o->net, &ctx, xt));
    triplet_stats st;
    tensor *loss = triplet_loss(e, (const int *)(slot + o->lab_off), o->miner, o->cfg.miner_margin, o->cfg.margin, &st);
    if (loss) loss_terms_set(terms, "triplet", st.loss);
    return loss;
}

/* ---------------------------------------------------------------- eval, export */

static int save_exports(dual_objective *o, const char *name, int64_t step) {
    char *path = path_join(o->run.keys->out, name);
    int rc = dual_model_save_merged(o->model, path, step);
    free(path);
    return rc;
}

static int dual_eval(void *self, int64_t step, char *buf, size_t n) {
    dual_objective *o = self;
    int D = o->model->dim;
    float *E = xmalloc(sizeof(float) * (size_t)o->val.n * D);
    int rc = objective_embed(o->model, o->run.precision, o->val.x, o->val.n, 32, E);
    retrieval_scores sc;
    if (!rc) rc = retrieval_loo(E, o->val_label, o->val.n, D, &sc, 0, NULL);
    free(E);
    if (rc) return rc;
    float best;
    int improved = objective_best_update(o->best_map, sc.map, &best);
    if (improved && (rc = save_exports(o, "best.safetensors", step))) return rc;
    snprintf(buf, n, "\"val_mAP\": %.4f, \"val_R1\": %.4f, \"val_R5\": %.4f, \"val_queries\": %d, \"best_mAP\": %.4f%s",
             sc.map, sc.recall1, sc.recall5, sc.queries, improved ? sc.map : best, improved ? ", \"saved_best\": true" : "");
    return ER_OK;
}

static int dual_on_checkpoint(void *self, int64_t step, int final) {
    dual_objective *o = self;
    (void)final;
    int rc = save_exports(o, "dual.safetensors", step);
    for (int i = 0; i < DUAL_NBRANCH && !rc; i++)
        if (o->net->v[i] && o->net->v[i]->loras) {
            char name[64];
            snprintf(name, sizeof name, "%s_adapter", dual_branch_name[i]);
            char *dir = path_join(o->run.keys->out, name);
            rc = vit_lora_save_adapter(o->net->v[i], dir);
            free(dir);
        }
    return rc;
}

static void dual_describe(void *self, FILE *f) {
    dual_objective *o = self;
    fprintf(f, "%lld trainable of %lld tensors' values; %d images (%d classes by %s), %d val; batch %d (%s), "
               "miner %s %.2f, margin %.2f",
            (long long)dual_trainable(o->net), (long long)params_numel(&o->net->params), o->data.n, o->present,
            o->cfg.label, o->val.n, o->run.batch, o->cfg.sampler, o->cfg.miner, o->cfg.miner_margin, o->cfg.margin);
}

/* ---------------------------------------------------------------- create, registry entry */

/* The loop's hooks (objective_create adds self and the run): the merged weights and LoRA adapters are written
 * on each checkpoint, not by a plain model_save. */
static const train_objective dual_hooks = {.name = "dual", .step = dual_step, .eval = dual_eval,
                                           .on_checkpoint = dual_on_checkpoint, .describe = dual_describe,
                                           .free = dual_objective_free, .exports = "dual.safetensors"};

static int dual_create(const void *cfg, const train_run *run, void *self, train_objective *out) {
    const dual_cfg *c = cfg;
    const loop_keys *k = run->keys;
    int device = run->device, rc;
    miner_kind mk;
    if ((rc = check_cfg(c, k, &mk))) return rc;
    dual_objective *o = self;
    o->cfg = *c;
    o->miner = mk;
    o->aug_none = !strcmp(c->aug, "none");
    o->mpc = !strcmp(c->sampler, "m_per_class");
    o->run = *run;
    int side = c->cache_side > 0 ? c->cache_side : c->model.img * 8 / 7, nl = 0;
    /* the manifest's labels first (cheap): a missing file or label fails before the model is built */
    if ((rc = manifest_class_ids(c->manifest, c->split, c->label, "data.label", &o->label, &nl, &o->nclass))) return rc;
    if ((rc = dual_arch.create(&c->model, run->seed, &o->model))) return rc;
    if ((rc = model_to_device(o->model, device))) return rc;
    o->net = dual_model_net(o->model);
    params_add_all(&o->all, &o->net->params);
    o->best_map = objective_best_new(&o->all, device, "dual.best_val_map");
    if ((rc = image_cache_load(&o->data, c->manifest, c->split, side))) return rc;
    if (nl != o->data.n) return er_fail(ER_RUNTIME, "%s: %d cached rows, %d labels", c->manifest, o->data.n, nl);
    rows_group_by(o->label, o->data.n, o->nclass, &o->cfirst, &o->ccount, &o->crows);
    int classes = 0;
    for (int cl = 0; cl < o->nclass; cl++) classes += o->ccount[cl] > 0;
    o->present = classes;
    if (classes < 2)
        return er_fail(ER_INPUT, "%s split '%s': %d class(es) by data.label = %s: triplets need two", c->manifest, c->split,
                       classes, c->label);
    if (c->val_split && c->val_split[0]) {
        int ncls;
        if ((rc = view_rows_load(&o->val, c->manifest, c->val_split, c->model.img))) return rc;
        if ((rc = manifest_class_ids(c->manifest, c->val_split, c->label, "data.label", &o->val_label, &nl, &ncls))) return rc;
    }
    int S = c->model.img;
    o->rows = xmalloc(sizeof(int) * (size_t)k->batch);
    size_t bytes = 0;
    host_batch_reserve(&bytes, sizeof(float) * (size_t)o->run.local_batch * 3 * S * S);
    o->lab_off = host_batch_reserve(&bytes, sizeof(int) * (size_t)k->batch);
    if (!(o->hb = host_batch_new(run, o->data.n, bytes, dual_fill, o))) return ER_RUNTIME;
    return objective_ready(out, o->model, &o->all, o->data.n, 1, o->val.n > 0);
}

OBJECTIVE_DEF(dual, dual_cfg, dual_objective, &dual_arch,
              "dual-backbone retrieval (GastroNet + DINOv2, LoRA, fusion head, cosine triplet loss)",
              "configs/dual_backbone.cfg, configs/demo_dual.cfg");
