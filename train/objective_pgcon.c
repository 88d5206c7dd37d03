/* objective_pgcon.c — PGCon / WINCon for the training loop (objective_pgcon.h). */
#include "train/objective_pgcon.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/image_cache.h"
#include "infer/eval/split_eval.h"
#include "kernels/profile.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/memory.h"
#include "nn/base/rng.h"
#include "nn/losses/memory_bank.h"
#include "nn/losses/pgcon_loss.h"
#include "nn/ops.h"
#include "train/host_batch.h"

/* ---------------------------------------------------------------- config */

/* The paper's settings; its optimisation (spec 1.8, loop_keys_sgd_restarts) with lr 0.012 over 700
 * epochs, the restarts stepped per iteration. */
static void pgcon_defaults(void *cfg, loop_keys *k) {
    pgcon_cfg *c = cfg;
    c->model.proj = 128;
    c->model.jigsaw = 9;
    cfg_set_str(&c->variant, "pgcon");
    c->negatives = 200;
    c->tau = 0.07; c->momentum = 0.5; c->w_jig = 0.5; c->w_mem = 0.5;
    c->prior_out = 120; c->tile_out = 90; c->win_out = 224;
    c->eval_crop = 280.0 / 336.0; /* CenterCrop(280) of a Kvasir-Capsule image (300 / 360 of KID) */
    cfg_set_str(&c->split, "train");
    cfg_set_str(&c->eval_split, "val");
    cfg_set_str(&c->eval_bank_split, "train");
    c->knn_k = 290; c->knn_tau = 0.1;
    loop_keys_sgd_restarts(k);
    k->epochs = 700; k->lr = 0.012;
}

static void pgcon_specs(void *cfg, key_table *t) {
    pgcon_cfg *c = cfg;
#define KEY OBJ_KEY_ROW
#include "train/pgcon_keys.def"
#undef KEY
}

/* ---------------------------------------------------------------- state */

typedef struct {
    pgcon_cfg cfg;
    model *model;          /* the ResNet + heads behind the model interface (export, eval) */
    resnet *net;
    memory_bank mem;       /* memory_bank [N, D]: a buffer of the training state, with its host copy */
    int mem_ready;         /* mem.M holds the bank (filled, or read back after --resume) */
    param_list all;        /* the network's parameters and buffers + the bank */
    int wincon, D, k;
    train_run run;           /* batch, shard, threads, seed (train/loop.h) */
    image_cache data;
    pgcon_geometry geom;   /* the configured view sizes (0 = the reference's by image size) */
    pgcon_views *views;
    uint8_t *seen;         /* N bytes a thread for the negative sampler (thread t at t N) */
    /* a host slot (train/host_batch.h): this rank's prior views, tiles, WIN views, the global batch's
     * instances [B] and this rank's negatives' indices [b, 2, k]: pure functions of (seed, g) */
    host_batch *hb;
    size_t xt_off, xw_off, inst_off, negi_off;
    float *xp;             /* the bank fill's prior views; the step's gather buffer */
    float *neg1, *neg2, *pos_mem, *z_all; /* [b, k, D], [b, k, D], [b, D], [B, D] */
    /* periodic evaluation */
    labelled_rows bank, query;
} pgcon_objective;

static void pgcon_free(void *self) {
    pgcon_objective *o = self;
    if (!o) return;
    host_batch_free(o->hb); /* first: waits for a fill still reading the data on the worker */
    model_free(o->model); /* owns the network's tensors; the bank is ours */
    memory_bank_free(&o->mem);
    free(o->all.t);
    image_cache_free(&o->data);
    for (int t = 0; o->views && t < o->run.threads; t++) pgcon_views_free(&o->views[t]);
    free(o->views); free(o->seen);
    const er_backend *be = backend_get(o->run.device);
    if (o->neg1) be->host_free(o->neg1);
    if (o->neg2) be->host_free(o->neg2);
    if (o->pos_mem) be->host_free(o->pos_mem);
    free(o->xp); free(o->z_all);
    labelled_rows_free(&o->bank); labelled_rows_free(&o->query);
    free(o);
}

/* ---------------------------------------------------------------- views and the bank */

/* The views of training row `id` drawn from r into thread t's buffers; copies the prior view to
 * xp[slot], the tiles to xt[9 slot ..] and (WINCon) the WIN view to xw[slot]. */
static int make_views(pgcon_objective *o, const fill_scratch *sc, int t, int id, rng_t *r, int slot, int prior_only, float *xp, float *xt, float *xw) {
    const pgcon_cfg *c = &o->cfg;
    image_cache_get(&o->data.imgs[id], &sc->src[t]);
    pgcon_geometry g = pgcon_geometry_with(sc->src[t].h, sc->src[t].w, &o->geom);
    pgcon_views *v = &o->views[t];
    unsigned views = prior_only ? PGCON_PRIOR : PGCON_PRIOR | PGCON_TILES | (o->wincon ? PGCON_WIN : 0);
    int rc = pgcon_make_views(r, &sc->src[t], &g, views, &sc->ws[t], v);
    if (rc) return rc;
    size_t P = (size_t)3 * c->prior_out * c->prior_out, T = (size_t)27 * c->tile_out * c->tile_out,
           W = (size_t)3 * c->win_out * c->win_out;
    memcpy(xp + slot * P, v->prior.data, P * sizeof(float));
    if (prior_only) return ER_OK;
    memcpy(xt + slot * T, v->tiles.data, T * sizeof(float));
    if (o->wincon) memcpy(xw + slot * W, v->win.data, W * sizeof(float));
    return ER_OK;
}

/* The bank before training (spec 1.6): the untrained network's prior-view embeddings of every
 * training row, in chunks of the batch (this rank's share of each chunk, gathered). Runs once: a
 * resumed run reads the bank from its checkpoint. */
static int bank_fill(pgcon_objective *o) {
    const pgcon_cfg *c = &o->cfg;
    int N = o->data.n, B = o->run.batch, D = o->D, S = c->prior_out, fail = 0, rc = ER_OK;
    float *z = xmalloc((size_t)o->run.local_batch * D * sizeof(float));
    for (int c0 = 0; c0 < N && !rc; c0 += B) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->run.threads)
        for (int j = 0; j < o->run.local_batch; j++) {
            int i = (c0 + o->run.first + j) % N; /* the last chunk wraps: its extra rows are not written */
            rng_t r = rng_make(o->run.seed, rng_stream(RNG_AUGMENT, 0xffffffffu, (uint32_t)i));
            if (make_views(o, host_batch_scratch(o->hb), omp_get_thread_num(), i, &r, j, 1, o->xp, NULL, NULL)) fail = 1;
        }
        if (fail) { rc = er_fail(ER_RUNTIME, "pgcon: prior view of a training image failed while filling the memory bank"); break; }
        nn_ctx ctx = nn_ctx_train(o->run.seed, -1, 0, o->run.precision);
        NO_GRAD {
            tensor *x = tensor_upload(o->run.device, 4, SHAPE(o->run.local_batch, 3, S, S), o->xp);
            tensor *e = op_l2_normalize(resnet_project(o->net, &ctx, x), -1, 1e-12f);
            if (!e) rc = ER_RUNTIME;
            else tensor_to_host(e, z);
        }
        nn_step_end();
        if (!rc) rc = train_run_allgather(&o->run, z, (int64_t)o->run.local_batch * D, o->z_all);
        if (!rc) memory_bank_set(&o->mem, c0, N - c0 < B ? N - c0 : B, o->z_all);
    }
    free(z);
    return rc;
}

/* At the first step of this process: the bank from the checkpoint (--resume), or filled now. */
static int bank_ready(pgcon_objective *o) {
    if (o->mem_ready) return ER_OK;
    int rc = memory_bank_pull(&o->mem) ? ER_OK : bank_fill(o);
    o->mem_ready = rc == ER_OK;
    return rc;
}

/* ---------------------------------------------------------------- the step */

/* Micro-batch g into a host slot: the global batch's instances, this rank's views and the indices of
 * its negatives (the rows come from the bank in the step: the bank changes every step). */
static int pgcon_fill(void *self, int64_t g, void *slot, const fill_scratch *sc) {
    pgcon_objective *o = self;
    int B = o->run.batch, k = o->k, N = o->data.n, fail = 0;
    char *sl = slot;
    int *inst = (int *)(sl + o->inst_off);
    int32_t *negi = (int32_t *)(sl + o->negi_off);
    for (int j = 0; j < B; j++) inst[j] = host_batch_item(o->hb, g * B + j);
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->run.threads)
    for (int j = 0; j < o->run.local_batch; j++) {
        int t = omp_get_thread_num(), i = inst[o->run.first + j];
        rng_t r = rng_make(o->run.seed, rng_stream(RNG_AUGMENT, (uint32_t)g, (uint32_t)(o->run.first + j)));
        if (make_views(o, sc, t, i, &r, j, 0, (float *)sl, (float *)(sl + o->xt_off), (float *)(sl + o->xw_off))) fail = 1;
        for (int term = 0; term < 2; term++) { /* independent draws per term (spec 1.7) */
            rng_t rn = rng_make(o->run.seed, rng_stream(RNG_SAMPLING, (uint32_t)g, 2u * (uint32_t)(o->run.first + j) + (uint32_t)term));
            pgcon_sample_negatives(&rn, N, i, k, o->seen + (size_t)t * N, negi + ((size_t)j * 2 + term) * k);
        }
    }
    return fail ? er_fail(ER_RUNTIME, "pgcon: views failed at micro-batch %lld", (long long)g) : ER_OK;
}

static tensor *pgcon_step(void *self, int64_t step, int micro, loss_terms *terms) {
    pgcon_objective *o = self;
    const pgcon_cfg *c = &o->cfg;
    if (bank_ready(o)) return NULL; /* before the first fill: the bank fill uses the fill's scratch */
    int B = o->run.batch, b = o->run.local_batch, D = o->D, k = o->k;
    int64_t g = step * o->run.keys->accum + micro; /* global micro-batch index */
    int phase = prof_phase(PROF_DATA); /* views, negatives, memory rows */
    char *sl = host_batch_get(o->hb, g);
    if (!sl) { prof_phase(phase); return NULL; }
    const int *inst = (const int *)(sl + o->inst_off);
    const int32_t *negi = (const int32_t *)(sl + o->negi_off);
    for (int j = 0; j < b; j++) {
        for (int term = 0; term < 2; term++)
            pgcon_memory_rows(o->mem.M, D, negi + ((size_t)j * 2 + term) * k, k, (term ? o->neg2 : o->neg1) + (size_t)j * k * D);
        memcpy(o->pos_mem + (size_t)j * D, o->mem.M + (size_t)inst[o->run.first + j] * D, (size_t)D * sizeof(float));
    }
    nn_ctx ctx = nn_ctx_train(o->run.seed, step, micro, o->run.precision);
    int P = c->prior_out, T = c->tile_out, W = c->win_out;
    tensor *xp = host_batch_upload(o->hb, sl, 0, 4, SHAPE(b, 3, P, P));
    tensor *xt = host_batch_upload(o->hb, sl, o->xt_off, 4, SHAPE(9 * b, 3, T, T));
    tensor *xw = o->wincon ? host_batch_upload(o->hb, sl, o->xw_off, 4, SHAPE(b, 3, W, W)) : NULL;
    prof_phase(phase);
    tensor *zp = op_l2_normalize(resnet_project(o->net, &ctx, xp), -1, 1e-12f);
    tensor *zd = op_l2_normalize(resnet_jigsaw(o->net, &ctx, xt), -1, 1e-12f);
    tensor *zw = NULL;
    if (o->wincon) /* every rank's WIN views: the negatives of the global batch (gradient to each rank's own) */
        zw = op_allgather_rows(op_l2_normalize(resnet_project(o->net, &ctx, xw), -1, 1e-12f));
    if (!zp || !zd || (o->wincon && !zw)) return NULL;
    /* page-locked, no wait: written again only at the next micro-batch, after this one's
     * tensor_to_host(zp) below has waited for the stream, so these copies have run by then */
    tensor *n1 = host_upload_pinned(o->run.device, o->neg1, 3, SHAPE(b, k, D));
    tensor *n2 = host_upload_pinned(o->run.device, o->neg2, 3, SHAPE(b, k, D));
    tensor *mi = host_upload_pinned(o->run.device, o->pos_mem, 2, SHAPE(b, D));
    tensor *pos_jig = NULL, *pos_mem = NULL;
    tensor *l1 = pgcon_infonce(zp, zd, n1, zw, (float)c->tau, &pos_jig);
    tensor *l2 = pgcon_infonce(zp, mi, n2, zw, (float)c->tau, &pos_mem);
    if (!l1 || !l2) return NULL;
    loss_terms_defer(terms, "jigsaw", l1);
    loss_terms_defer(terms, "memory", l2);
    loss_terms_defer(terms, "pos_jig", pos_jig);
    loss_terms_defer(terms, "pos_mem", pos_mem);
    tensor *loss = op_add(op_mul_scalar(l1, (float)c->w_jig), op_mul_scalar(l2, (float)c->w_mem));
    /* the bank takes this micro-batch's prior embeddings (every rank the whole batch's, in order) */
    tensor_to_host(zp, o->xp); /* xp is free now: the forward has its copy */
    if (train_run_allgather(&o->run, o->xp, (int64_t)b * D, o->z_all)) return NULL;
    pgcon_memory_update(o->mem.M, D, inst, o->z_all, B, (float)c->momentum);
    memory_bank_push_rows(&o->mem, inst, B);
    return loss;
}

/* ---------------------------------------------------------------- eval, export */

/* Weighted kNN (spec 1.9) of the eval split against the bank split, on the normalised projection. */
static int pgcon_eval(void *self, int64_t step, char *buf, size_t n) {
    pgcon_objective *o = self;
    int D = o->model->dim;
    float *eb = xmalloc((size_t)o->bank.n * D * sizeof(float)), *eq = xmalloc((size_t)o->query.n * D * sizeof(float));
    int rc = objective_embed(o->model, o->run.precision, o->bank.x, o->bank.n, 64, eb);
    if (!rc) rc = objective_embed(o->model, o->run.precision, o->query.x, o->query.n, 64, eq);
    double acc;
    if (!rc) rc = knn_split_accuracy(eb, o->bank.y, o->bank.n, eq, o->query.y, o->query.n, D, o->bank.nclass, o->cfg.knn_k, 1,
                                     o->cfg.knn_tau, &acc);
    if (!rc) snprintf(buf, n, "\"knn_acc\": %.4f, \"queries\": %d, \"bank\": %d, \"k\": %d", acc, o->query.n, o->bank.n, o->cfg.knn_k);
    free(eb); free(eq);
    (void)step;
    return rc;
}

static void pgcon_describe(void *self, FILE *f) {
    pgcon_objective *o = self;
    const pgcon_cfg *c = &o->cfg;
    fprintf(f, "%s%s, %d images, batch %d x accum %d, %d negatives per term, views %d / %d x 9%s", c->variant,
            o->wincon ? " (with WIN negatives)" : "", o->data.n, o->run.batch, o->run.keys->accum, o->k, c->prior_out,
            c->tile_out, o->wincon ? " + WIN" : "");
}

/* ---------------------------------------------------------------- create */

/* The footprint of a training step (nn/base/memory.h) before anything is allocated: the ResNet and
 * its heads (weights, gradients, SGD momentum), the three forwards of this rank's micro-batch kept
 * for backward (nn/models/resnet.h resnet_train_bytes: prior views, 9 tiles each, WIN views) and
 * their host buffers. The bank and image cache (known after the manifest is read) are not counted.
 * CPU runs only, as the image objective. */
static int pgcon_memory_check(const pgcon_cfg *c, const train_run *run) {
    resnet_config rc; /* the network resnet_arch.create builds */
    if (resnet_args_config(&c->model, &rc) || run->device != DEV_CPU) return ER_OK; /* a bad arch fails later, named */
    double b = run->local_batch, params = resnet_param_count(&rc);
    mem_estimate m = loop_keys_mem_state(run->keys, params, params);
    m.activations = resnet_train_bytes(&rc, b, c->prior_out, c->prior_out) + resnet_train_bytes(&rc, 9 * b, c->tile_out, c->tile_out);
    if (!strcmp(c->variant, "wincon")) m.activations += resnet_train_bytes(&rc, b, c->win_out, c->win_out);
    m.data = 4.0 * b * 3 * (c->prior_out * c->prior_out + 9.0 * c->tile_out * c->tile_out + c->win_out * c->win_out);
    return mem_check(&m, "train pgcon", "train.batch (with train.accum for the same effective batch), the view sizes or the model");
}

/* The loop's hooks (objective_create adds self and the run); the export is the ResNet with its heads and the
 * WCE input rule. */
static const train_objective pgcon_hooks = {.name = "pgcon", .step = pgcon_step, .eval = pgcon_eval,
                                            .describe = pgcon_describe, .free = pgcon_free,
                                            .export_name = "encoder.safetensors", .exports = "encoder.safetensors"};

static int pgcon_create(const void *cfgv, const train_run *run, void *self, train_objective *out) {
    const pgcon_cfg *c = cfgv;
    const loop_keys *k = run->keys;
    int device = run->device, rc;
    if (c->model.proj < 1) return er_fail(ER_INPUT, "model.proj = 0: PGCon needs its projection head (128 in the paper)");
    if (c->model.jigsaw != 9) return er_fail(ER_INPUT, "model.jigsaw = %d: the jigsaw view has 9 tiles", c->model.jigsaw);
    if (c->w_jig <= 0 && c->w_mem <= 0) return er_fail(ER_INPUT, "loss.jigsaw_weight and loss.memory_weight are both 0");
    if (c->box == 1) return er_fail(ER_INPUT, "pgcon.box = 1: the prior box needs a side of at least 2");
    if ((rc = pgcon_memory_check(c, run))) return rc; /* before anything is allocated */
    pgcon_objective *o = self;
    o->cfg = *c;
    o->wincon = !strcmp(c->variant, "wincon");
    o->geom = (pgcon_geometry){c->side, c->box / 2, c->jigsaw, c->prior_out, c->tile_out, c->win_out};
    o->run = *run;
    if ((rc = resnet_arch.create(&c->model, run->seed, &o->model))) return rc;
    o->net = o->model->impl;
    o->D = c->model.proj;
    model_input in = objective_input("wce", (float)c->eval_crop);
    model_set_input(o->model, in);
    if ((rc = image_cache_load(&o->data, c->manifest, c->split, c->cache_side > 0 ? c->cache_side : 1 << 30))) return rc;
    int N = o->data.n;
    if (c->negatives > N - 1)
        return er_fail(ER_INPUT, "pgcon.negatives = %d: %s split '%s' has %d images, so at most %d other rows to draw from",
                       c->negatives, c->manifest, c->split ? c->split : "", N, N - 1);
    o->k = c->negatives;
    params_add_all(&o->all, &o->net->params);
    if ((rc = model_to_device(o->model, device)) || (rc = memory_bank_new(&o->mem, "memory_bank", N, o->D, device))) return rc;
    params_add(&o->all, o->mem.t); /* zeros: filled at the first step */
    if (c->eval_manifest && c->eval_manifest[0] &&
        ((rc = labelled_rows_load(&o->bank, c->eval_manifest, c->eval_bank_split, o->model->img, &in)) ||
         (rc = labelled_rows_load(&o->query, c->eval_manifest, c->eval_split, o->model->img, &in))))
        return rc;
    int B = k->batch, b = o->run.local_batch, k2 = o->k, D = o->D;
    o->views = xcalloc(o->run.threads, sizeof(pgcon_views));
    o->seen = xcalloc((size_t)o->run.threads * N, 1);
    size_t prior = (size_t)3 * c->prior_out * c->prior_out, bytes = 0;
    o->xp = xmalloc((size_t)(b > 1 ? b : 1) * (prior > (size_t)D ? prior : (size_t)D) * sizeof(float));
    host_batch_reserve(&bytes, (size_t)b * prior * sizeof(float));
    o->xt_off = host_batch_reserve(&bytes, (size_t)b * 27 * c->tile_out * c->tile_out * sizeof(float));
    o->xw_off = host_batch_reserve(&bytes, o->wincon ? (size_t)b * 3 * c->win_out * c->win_out * sizeof(float) : 0);
    o->inst_off = host_batch_reserve(&bytes, (size_t)B * sizeof(int));
    o->negi_off = host_batch_reserve(&bytes, (size_t)b * 2 * k2 * sizeof(int32_t));
    if (!(o->hb = host_batch_new(run, N, bytes, pgcon_fill, o))) return ER_RUNTIME;
    /* the memory rows of a step, page-locked on a GPU: uploaded without a wait (pgcon_step) */
    const er_backend *be = backend_get(run->device);
    o->neg1 = be->host_alloc((size_t)b * k2 * D * sizeof(float));
    o->neg2 = be->host_alloc((size_t)b * k2 * D * sizeof(float));
    o->pos_mem = be->host_alloc((size_t)b * D * sizeof(float));
    if (!o->neg1 || !o->neg2 || !o->pos_mem) return er_fail(ER_RUNTIME, "pgcon: no page-locked memory for the memory rows");
    o->z_all = xmalloc((size_t)B * D * sizeof(float));
    return objective_ready(out, o->model, &o->all, N, 1, o->query.n > 0);
}

OBJECTIVE_DEF(pgcon, pgcon_cfg, pgcon_objective, &resnet_arch,
              "PGCon / WINCon (ResNet, redness-prior + jigsaw views, memory bank, within-instance negatives)",
              "configs/pgcon.cfg, configs/wincon.cfg, configs/demo_pgcon.cfg");
