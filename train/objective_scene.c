/* objective_scene.c — EndoFinder-Scene's objective for the training loop (objective_scene.h). */
#include "train/objective_scene.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/image_cache.h"
#include "infer/eval/scene_reid.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/memory.h"
#include "nn/base/rng.h"
#include "nn/losses/mae_loss.h"
#include "nn/losses/sscd.h"
#include "nn/models/scene_frozen.h"
#include "nn/models/vit_memory.h"
#include "nn/ops.h"
#include "train/host_batch.h"
#include "train/objective_image.h"

/* ---------------------------------------------------------------- config */

static void scene_defaults(void *cfg, loop_keys *k) {
    scene_cfg *c = cfg;
    c->views = 4;
    c->mask_ratio = 0.5;
    cfg_set_str(&c->recon, "all");
    cfg_set_str(&c->aug, "scene");
    c->encode_batch = 64;
    c->w_mse = 0.5; c->w_con = 1.0; c->tau = 0.05; c->entropy_weight = 5;
    cfg_set_str(&c->split, "train");
    cfg_set_str(&c->eval_split, "");
    image_loop_defaults(k); /* EndoFinder's AdamW (beta2 0.95, 5 warm-up epochs), then the scene's */
    k->epochs = 200; k->batch = 128; k->lr = 1e-4;
}

static void scene_specs(void *cfg, key_table *t) {
    scene_cfg *c = cfg;
#define KEY OBJ_KEY_ROW
#include "train/scene_keys.def"
#undef KEY
}


/* ---------------------------------------------------------------- state */

enum { AUG_SCENE, AUG_ADVANCED, AUG_MAE, AUG_EVAL };

typedef struct {
    scene_cfg cfg;
    model *model;           /* frozen ViT + scene encoder (+ decoder): model->params is what is exported */
    vit *enc;
    scene_net *net;
    train_run run;           /* batch, shard, threads, seed (train/loop.h) */
    int V, N, S, L, K, D, T;  /* views, combinations per micro-batch, image side, patches, kept, width, latent tokens */
    int use_mse, use_con, recon_all, aug;  /* aug: AUG_SCENE | AUG_ADVANCED | AUG_MAE | AUG_EVAL */
    image_cache data;
    int nscenes;            /* scenes with >= V views */
    int *scene_first, *scene_count, *scene_rows; /* rows of scene s: scene_rows[first .. first + count) */
    int nskipped;           /* scenes with fewer than V views */
    /* per micro-batch host buffers */
    int *rows;              /* B * V dataset rows (the chosen views) */
    host_batch *hb;         /* a slot: this rank's input then target images, then rec (train/host_batch.h) */
    size_t rec_off;
    void *what;             /* the fill's scratch: which image is which (scene_images) */
    scene_frozen fz;        /* the frozen encoder's [CLS], latents and targets, on the model's device */
    float *mask;            /* [N, L] 1 = removed */
    int32_t *shuffle, *restore, *keep, *rec_restore;
    uint8_t *match;
    int *ids;
    view_rows eval;
} scene_objective;

/* The footprint of a step (nn/base/memory.h) for train.device = cpu, from the config and the image
 * encoder's size: frozen encoder weights, trainable scene encoder + decoder with gradients and AdamW
 * state, the chunked encoder forward (no tape: its activations die after each chunk, counted as
 * the training-time activations of one chunk, an upper bound), the kept latents and targets, and
 * the scene encoder's and decoder's activations (scene_train_bytes). */
static int scene_memory_check(const scene_objective *o, const loop_keys *k) {
    const vit_config *v = &o->enc->cfg;
    const scene_config *c = &o->net->cfg;
    double N = (double)o->run.local_batch * o->V, nrec = o->recon_all ? N : o->run.local_batch, L = o->L, T = o->T; /* this rank's */
    double trainable = scene_encoder_param_count(c) + (o->use_mse ? scene_decoder_param_count(c) : 0);
    mem_estimate m = loop_keys_mem_state(k, vit_param_count(v) + trainable, trainable); /* the ViT frozen */
    double chunk = vit_blocks_train_bytes(v->dim, v->depth, v->heads, v->mlp_ratio, o->cfg.encode_batch, 1 + v->registers + L);
    double step = scene_train_bytes(c, N, o->V, o->use_mse ? nrec : 0, o->L); /* nn/models/scene.h */
    m.activations = chunk > step ? chunk : step;
    /* the host batch: every input and target image of the micro-batch, twice with prefetch */
    double pd = 3.0 * v->patch * v->patch, ninputs = o->cfg.share_views ? N : N * (o->V - 1), nslots = o->run.prefetch ? 2 : 1;
    m.data = 4 * (nslots * (ninputs + (o->use_mse ? nrec : 0)) * 3.0 * o->S * o->S + N * o->V * v->dim * 2 + nrec * (T * v->dim + L * pd) + N * L * 4);
    return mem_check(&m, "train scene", "train.batch, scene.views or scene.encode_batch");
}

static void scene_free(void *self) {
    scene_objective *o = self;
    if (!o) return;
    host_batch_free(o->hb); /* first: waits for a fill still reading the data on the worker */
    scene_frozen_free(&o->fz);
    model_free(o->model);
    image_cache_free(&o->data);
    free(o->scene_first); free(o->scene_count); free(o->scene_rows);
    free(o->rows); free(o->what);
    free(o->mask); free(o->shuffle); free(o->restore); free(o->keep); free(o->rec_restore);
    free(o->match); free(o->ids);
    view_rows_free(&o->eval);
    free(o);
}

/* The training scenes: those with at least V views (image_cache_scenes_min); scenes with fewer are
 * counted in nskipped. */
static int group_scenes(scene_objective *o) {
    if (!image_cache_scenes_min(&o->data, o->V, &o->scene_first, &o->scene_count, &o->scene_rows, &o->nscenes, &o->nskipped))
        return er_fail(ER_INPUT, "%s: no scene column (the scene objective needs scene and view ids; "
                                 "see `endoret data import --layout scenes`)", o->cfg.manifest);
    if (o->nscenes < 2)
        return er_fail(ER_INPUT, "%s: %d scene(s) with at least scene.views = %d views in split '%s': the contrastive "
                                 "loss needs two", o->cfg.manifest, o->nscenes, o->V, o->cfg.split ? o->cfg.split : "");
    return ER_OK;
}

/* ---------------------------------------------------------------- one micro-batch */

/* Scene index of the i-th scene drawn since the start (epoch-wise reshuffled without replacement). */
static int scene_at(scene_objective *o, int64_t i) { return host_batch_item(o->hb, i); }

/* The image of view slot u of scene j, augmented with stream `stream`, into dst [3, S, S]. */
static int augment(scene_objective *o, const fill_scratch *sc, int64_t g, int j, int u, uint32_t stream, float *dst) {
    int t = omp_get_thread_num(), S = o->S;
    image *src = &sc->src[t];
    aug_workspace *ws = &sc->ws[t];
    rng_t r = rng_make(o->run.seed, rng_stream(RNG_AUGMENT, (uint32_t)g, stream));
    image_cache_get(&o->data.imgs[o->rows[j * o->V + u]], src);
    image out = {.c = 3, .h = S, .w = S, .data = dst, .cap = (size_t)3 * S * S};
    int rc = o->aug == AUG_ADVANCED ? aug_sscd_advanced(&r, src, NULL, S, ws, &out, NULL)
             : o->aug == AUG_MAE    ? aug_mae(&r, src, NULL, S, ws, &out, NULL)
             : o->aug == AUG_EVAL   ? aug_eval(src, S, ws, &out)
                                    : aug_scene_train(&r, src, S, ws, &out);
    return rc || out.data != dst ? ER_RUNTIME : ER_OK;
}

/* Image q of a micro-batch is (scene j, slot u, augmentation stream). */
typedef struct { int j, u; uint32_t stream; } slot;

/* This rank's images of micro-batch g: the inputs (as the code, every (combination, other view) is its
 * own augmented image; shared: each view once), then the reconstruction targets (the combination's
 * own draw, stream N V + i, or the view's shared draw). Streams use global indices, so a rank draws
 * what one process would. Returns how many; rec (the reconstructed combinations) and *nrec filled. */
static int scene_images(scene_objective *o, int64_t g, slot *what, int32_t *rec, int *nrec) {
    const scene_cfg *c = &o->cfg;
    int B = o->run.batch, V = o->V, N = o->N, b = o->run.local_batch, j0 = o->run.first, i0 = j0 * V, Nl = b * V, q = 0;
    *nrec = 0;
    for (int j = j0; j < j0 + b; j++) {
        int tsel = 0;
        if (!o->recon_all) {
            rng_t r = rng_make(o->run.seed, rng_stream(RNG_SAMPLING, (uint32_t)g, (uint32_t)(B + j)));
            tsel = (int)rng_below(&r, (uint32_t)V);
        }
        for (int t = 0; t < V; t++)
            if (o->recon_all || t == tsel) rec[(*nrec)++] = j * V + t;
    }
    if (c->share_views) {
        for (int j = j0; j < j0 + b; j++) for (int u = 0; u < V; u++) what[q++] = (slot){j, u, (uint32_t)(j * V + u)};
    } else {
        for (int i = i0; i < i0 + Nl; i++)
            for (int u = 0; u < V; u++)
                if (u != i % V) what[q++] = (slot){i / V, u, (uint32_t)(i * V + u)};
    }
    for (int r = 0; o->use_mse && r < *nrec; r++) {
        int i = rec[r], j = i / V, t = i % V;
        what[q++] = (slot){j, t, c->share_views ? (uint32_t)(j * V + t) : (uint32_t)(N * V + i)};
    }
    return q;
}

/* Micro-batch g into a host slot: this rank's scenes and V of each scene's views (a random V-subset
 * when it has more), then every input and target image augmented (scene_images). */
static int scene_fill(void *self, int64_t g, void *slotp, const fill_scratch *sc) {
    scene_objective *o = self;
    int B = o->run.batch, V = o->V, nrec, fail = 0;
    size_t img = (size_t)3 * o->S * o->S;
    for (int j = o->run.first; j < o->run.first + o->run.local_batch; j++) {
        int s = scene_at(o, g * B + j), cnt = o->scene_count[s];
        int pick[256], *pk = cnt <= 256 ? pick : xmalloc(cnt * sizeof(int));
        for (int i = 0; i < cnt; i++) pk[i] = i;
        if (cnt > V) {
            rng_t r = rng_make(o->run.seed, rng_stream(RNG_SAMPLING, (uint32_t)g, (uint32_t)j));
            rng_shuffle(&r, pk, cnt);
        }
        for (int u = 0; u < V; u++) o->rows[j * V + u] = o->scene_rows[o->scene_first[s] + pk[u]];
        if (pk != pick) free(pk);
    }
    float *x = slotp;
    slot *what = o->what;
    int n = scene_images(o, g, what, (int32_t *)((char *)slotp + o->rec_off), &nrec);
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->run.threads)
    for (int q = 0; q < n; q++)
        if (augment(o, sc, g, what[q].j, what[q].u, what[q].stream, x + q * img)) fail = 1;
    return fail ? er_fail(ER_RUNTIME, "augmentation failed at micro-batch %lld", (long long)g) : ER_OK;
}

/* Frozen-encoder pass over the n images at byte `off` of the slot, chunk by chunk, into o->fz on the
 * model's device (nn/models/scene_frozen.h); masked: the target forward (keep indices of
 * combination rec[q]) and the reconstruction targets, into rows q; else the [CLS] into row q. Each
 * chunk is uploaded from the slot (page-locked on a GPU: asynchronous, no wait) and its
 * activations die at the chunk's nn_step_end. */
static int encode(scene_objective *o, const void *slot, size_t off, int n, const int32_t *rec, int masked) {
    int S = o->S, L = o->L, K = o->K, cb = o->cfg.encode_batch;
    size_t img = (size_t)3 * S * S * sizeof(float);
    nn_ctx ctx = nn_ctx_eval(o->run.precision); /* the frozen encoder: eval mode, no tape */
    for (int q0 = 0; q0 < n; q0 += cb) {
        int nb = n - q0 < cb ? n - q0 : cb, rc = ER_OK;
        tensor *chunk = host_batch_upload(o->hb, slot, off + (size_t)q0 * img, 4, SHAPE(nb, 3, S, S));
        NO_GRAD {
            if (masked) {
                for (int q = 0; q < nb; q++)
                    memcpy(o->keep + (size_t)q * K, o->shuffle + (size_t)rec[q0 + q] * L, K * sizeof(int32_t));
                rc = scene_frozen_masked(&o->fz, o->enc, &ctx, chunk, o->keep, K, q0);
            } else {
                rc = scene_frozen_cls(&o->fz, o->enc, &ctx, chunk, q0);
            }
        }
        nn_step_end(); /* the chunk's activations die here: nothing of this step is live yet */
        if (rc) return rc;
    }
    return ER_OK;
}

static tensor *scene_step(void *self, int64_t step, int micro, loss_terms *terms) {
    scene_objective *o = self;
    const scene_cfg *c = &o->cfg;
    /* global: B scenes, N = B V combinations (i = j V + t); this rank: scenes j0 .. j0 + b - 1, i.e.
     * combinations V j0 .. V (j0 + b) - 1, in the same order (local il = i - V j0) */
    int V = o->V, N = o->N, L = o->L, b = o->run.local_batch, j0 = o->run.first, Nl = b * V, i0 = j0 * V;
    int64_t g = step * o->run.keys->accum + micro;
    char *sl = host_batch_get(o->hb, g);
    if (!sl) return NULL;
    const int32_t *rec = (const int32_t *)(sl + o->rec_off);
    /* every combination's mask (pure functions of the seed, g, i: the same on every rank) */
    mae_masking(N, L, o->K, NULL, NULL, o->run.seed, (uint64_t)g, o->shuffle, o->restore, o->mask);
    int nrec = o->recon_all ? Nl : b; /* this rank's reconstructed combinations (global indices in rec) */
    int ninputs = c->share_views ? b * V : Nl * (V - 1);
    int rc = encode(o, sl, 0, ninputs, NULL, 0);
    if (!rc && o->use_mse) rc = encode(o, sl, (size_t)ninputs * 3 * o->S * o->S * sizeof(float), nrec, rec, 1);
    if (rc) return NULL;
    /* the trainable part */
    nn_ctx ctx = nn_ctx_train(o->run.seed, step, micro, o->run.precision);
    tensor *vt = scene_frozen_views(&o->fz, b, V, c->share_views);      /* [Nl, V-1, D] on the device */
    tensor *z = scene_net_encode(o->net, &ctx, vt);                     /* [Nl, D] */
    if (!z) return NULL;
    tensor *loss = NULL;
    if (o->use_con) {
        /* every rank's descriptors (rank order = combination order): the whole batch's negatives */
        tensor *zall = o->run.world_size > 1 ? op_allgather_rows(z) : z;
        sscd_terms st;
        tensor *lc = sscd_loss_terms(zall, o->match, c->tau, c->entropy_weight, 0, &st);
        if (!lc) return NULL;
        loss_terms_defer(terms, "infonce", st.infonce);
        loss_terms_defer(terms, "entropy", st.entropy);
        loss_terms_defer(terms, "pos_sim", st.pos_sim);
        loss = op_mul_scalar(lc, (float)c->w_con);
    }
    if (o->use_mse) {
        /* this rank's MSE: every rank holds as many targets with as many masked patches, so the
         * mean over ranks (the loop averages gradients and losses) is the one-process MSE */
        float *mk = xmalloc((size_t)nrec * L * sizeof(float));
        int32_t *loc = xmalloc((size_t)nrec * sizeof(int32_t));
        for (int r = 0; r < nrec; r++) {
            memcpy(mk + (size_t)r * L, o->mask + (size_t)rec[r] * L, L * sizeof(float));
            memcpy(o->rec_restore + (size_t)r * L, o->restore + (size_t)rec[r] * L, L * sizeof(int32_t));
            loc[r] = rec[r] - i0;
        }
        tensor *zr = nrec == Nl ? z : op_index_select(z, 0, loc, nrec);
        free(loc);
        tensor *pred = scene_net_decode(o->net, &ctx, zr, o->fz.latent, o->enc->cfg.registers, o->rec_restore);
        tensor *lm = mae_loss_t(pred, o->fz.target, mk); /* targets in MAE's patch order (dy, dx, c), as the reference */
        free(mk);
        if (!lm) return NULL;
        loss_terms_defer(terms, "mse", lm);
        lm = op_mul_scalar(lm, (float)c->w_mse);
        loss = loss ? op_add(loss, lm) : lm;
    }
    return loss;
}

/* ---------------------------------------------------------------- export, eval, interface */


/* Held-out scene re-ID on pairs of views 0+1 against 2+3 (infer/eval/scene_reid.h). */
static int scene_eval(void *self, int64_t step, char *buf, size_t n) {
    scene_objective *o = self;
    reid_view_result r = {0};
    int rc = scene_pairs_reid(o->model, o->eval.x, o->eval.scene, o->eval.view, o->eval.n, o->cfg.eval_manifest, &r);
    if (!rc) snprintf(buf, n, "\"scene_reid_uAP\": %.4f, \"acc1\": %.4f, \"recall_p90\": %.4f, \"scenes\": %d",
                      r.r.uap, r.r.acc1, r.r.recall_p90, r.nqueries);
    reid_view_result_free(&r);
    (void)step;
    return rc;
}

static void scene_describe(void *self, FILE *f) {
    scene_objective *o = self;
    fprintf(f, "%lld trainable parameters (image encoder frozen), %d scenes x %d views (%d with fewer views skipped), "
               "batch %d scenes x %d combinations, recon %s, %s views",
            (long long)(params_numel(scene_model_all_params(o->model)) - params_numel(&o->enc->params)), o->nscenes,
            o->V, o->nskipped, o->run.batch, o->V, o->cfg.recon, o->cfg.share_views ? "shared" : "per-combination");
}

/* The loop's hooks (objective_create adds self and the run); the export is the inference model (frozen ViT +
 * scene encoder, no decoder): what `embed --scene` and `serve` load. */
static const train_objective scene_hooks = {.name = "scene", .rate_unit = "scenes", /* progress in scenes/s */
                                            .step = scene_step, .eval = scene_eval, .describe = scene_describe,
                                            .free = scene_free, .export_name = "scene_encoder.safetensors",
                                            .exports = "scene_encoder.safetensors"};

static int scene_create(const void *cfg, const train_run *run, void *self, train_objective *out) {
    const scene_cfg *c = cfg;
    const loop_keys *k = run->keys;
    int device = run->device, rc;
    if (c->w_mse <= 0 && c->w_con <= 0) return er_fail(ER_INPUT, "both loss weights are 0: nothing to train");
    scene_objective *o = self;
    o->cfg = *c;
    o->run = *run;
    o->V = c->views;
    o->use_mse = c->w_mse > 0;
    o->use_con = c->w_con > 0;
    o->recon_all = !strcmp(c->recon, "all");
    o->aug = !strcmp(c->aug, "advanced") ? AUG_ADVANCED : !strcmp(c->aug, "mae") ? AUG_MAE : !strcmp(c->aug, "eval") ? AUG_EVAL : AUG_SCENE;
    if ((rc = scene_model_new(&c->model, run->seed, o->use_mse, &o->model))) return rc;
    if (device != DEV_CPU) { /* built on the host, then every tensor moves (the decoder's too) */
        if ((rc = params_to_device(scene_model_all_params(o->model), device))) return rc;
        o->model->device = device;
    }
    o->enc = scene_model_vit(o->model);
    o->net = scene_model_net(o->model);
    o->S = o->enc->cfg.img;
    o->L = o->enc->L;
    o->K = mae_len_keep(o->L, c->mask_ratio);
    o->D = o->enc->cfg.dim;
    o->T = 1 + o->enc->cfg.registers + o->K;
    o->N = k->batch * o->V;
    if ((rc = scene_memory_check(o, k))) return rc;
    int side = c->cache_side > 0 ? c->cache_side : o->S * 8 / 7;
    if ((rc = image_cache_load(&o->data, c->manifest, c->split, side))) return rc;
    if ((rc = group_scenes(o))) return rc;
    if (c->eval_manifest && c->eval_manifest[0] &&
        (rc = view_rows_load(&o->eval, c->eval_manifest, c->eval_split, o->S)))
        return rc;
    int B = k->batch, V = o->V, N = o->N, L = o->L, Nl = o->run.local_batch * V, nrec = o->recon_all ? Nl : o->run.local_batch;
    int ninputs = c->share_views ? o->run.local_batch * V : Nl * (V - 1); /* this rank's */
    size_t img = (size_t)3 * o->S * o->S;
    o->rows = xmalloc((size_t)B * V * sizeof(int));
    o->what = xmalloc((size_t)(ninputs + nrec) * 3 * sizeof(int)); /* slot: 3 ints */
    size_t bytes = 0;
    host_batch_reserve(&bytes, (size_t)(ninputs + (o->use_mse ? nrec : 0)) * img * sizeof(float));
    o->rec_off = host_batch_reserve(&bytes, (size_t)nrec * sizeof(int32_t));
    if (!(o->hb = host_batch_new(run, o->nscenes, bytes, scene_fill, o))) return ER_RUNTIME;
    if ((rc = scene_frozen_new(&o->fz, o->enc, ninputs, o->use_mse ? nrec : 0, o->K))) return rc;
    o->mask = xmalloc((size_t)N * L * sizeof(float));
    o->shuffle = xmalloc((size_t)N * L * sizeof(int32_t));
    o->restore = xmalloc((size_t)N * L * sizeof(int32_t));
    o->keep = xmalloc((size_t)c->encode_batch * o->K * sizeof(int32_t));
    o->rec_restore = xmalloc((size_t)nrec * L * sizeof(int32_t));
    o->match = xmalloc((size_t)N * N); /* the V combinations of a scene are mutual positives: fixed */
    o->ids = xmalloc(N * sizeof(int));
    for (int i = 0; i < N; i++) o->ids[i] = i / V;
    sscd_match_from_ids(o->ids, N, o->match);
    return objective_ready(out, o->model, scene_model_all_params(o->model), o->nscenes, 1, o->eval.n > 0);
}

OBJECTIVE_DEF(scene, scene_cfg, scene_objective, &scene_arch,
              "EndoFinder-Scene: scene encoder + cross-attention reconstruction on a frozen image encoder",
              "configs/endofinder_scene.cfg, configs/demo_scene.cfg");
