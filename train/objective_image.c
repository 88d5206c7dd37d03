/* objective_image.c — MAE + SSCD image objective (EndoFinder section 3.3) for the training loop. */
#include "train/objective_image.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "datasets/image_cache.h"
#include "datasets/manifest.h"
#include "datasets/seq_positive.h"
#include "infer/retrieval/embeddings.h"
#include "infer/eval/multiview.h"
#include "kernels/profile.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/memory.h"
#include "nn/models/mae.h"
#include "nn/models/vit_memory.h"
#include "nn/ops.h"
#include "train/host_batch.h"
#include "nn/base/rng.h"
#include "nn/losses/sscd.h"

/* ---------------------------------------------------------------- config */

void image_cfg_defaults(image_cfg *c) {
    memset(c, 0, sizeof *c);
    vit_args_defaults(&c->model);
    c->head_dim = 512;
    c->dec_dim = 512; c->dec_depth = 8; c->dec_heads = 16;
    c->mask_ratio = 0.5;
    cfg_set_str(&c->masking, "guided");
    c->w_mae = 0.5; c->w_con = 1.0; c->tau = 0.05; c->entropy_weight = 5; c->mix_prob = 0.05;
    cfg_set_str(&c->split, "train");
    cfg_set_str(&c->aug, "advanced");
    aug_view_params v = aug_view_defaults();
    c->view.crop_min = v.crop_min, c->view.rotate = v.rotate, c->view.vflip = v.vflip;
    c->view.jitter = v.jitter, c->view.jitter_prob = v.jitter_prob, c->view.grey_prob = v.grey_prob;
    c->view.blur_prob = v.blur_prob, c->view.blur_max = v.blur_max, c->view.jpeg_prob = v.jpeg_prob;
    cfg_set_str(&c->positives, "crops");
    cfg_set_str(&c->eval_split, "");
}

void image_loop_defaults(loop_keys *k) {
    k->lr = 1.25e-4; k->beta2 = 0.95; k->warmup_epochs = 5;
}

const cfg_spec *image_cfg_specs(image_cfg *c, int *n) {
    static __thread cfg_spec s[64];
    int k = 0;
    int nm;
    const cfg_spec *m = vit_args_keys(&c->model, &nm); /* the encoder's keys, first */
    for (int i = 0; i < nm; i++) s[k++] = m[i];
#define KEY(field, type, key, range, help) s[k++] = (cfg_spec){key, CFG_##type, &c->field, help, range};
#define VIEW_KEY(field, type, key, range, help) KEY(view.field, type, key, range, help)
#include "train/image_keys.def"
#undef KEY
#undef VIEW_KEY
    *n = k;
    return s;
}

void image_cfg_free(image_cfg *c) {
    int n;
    const cfg_spec *s = image_cfg_specs(c, &n);
    cfg_free_strings(s, n);
}

/* ---------------------------------------------------------------- data */

struct image_objective {
    image_cfg cfg;
    vit_config vc;
    model *model;         /* the encoder behind the model interface (export, eval) */
    vit *enc;             /* the same encoder, for the masked training forward */
    mae_decoder dec;
    sscd_head head;
    param_list all;       /* encoder + decoder + head (the training state) */
    int use_mae, use_con, K, guided, advanced, views;
    aug_view_params view_aug; /* aug.preset = views */
    int *scene_first, *scene_count, *scene_rows; /* positives = views: the rows of each scene (image_cache_scenes) */
    int gap_rows, gap_alone; /* data.positive_gap*: scene rows, and those with no view beyond the gap (a crop view) */
    int device;           /* where parameters, activations and optimizer state live */
    train_run run;        /* batch, shard, threads, seed (train/loop.h) */
    image_cache data;     /* the training split (data.manifest, data.split) */
    /* the host batch (train/host_batch.h): a slot holds the 2B augmented views x, their lesion
     * masks mx, instances and has_mask; the rest is per-step scratch of the step's thread */
    host_batch *hb;
    size_t mx_off, inst_off, has_mask_off;
    float *scores, *mask, *lam;
    int32_t *shuffle, *restore, *keep;
    int *partner;
    uint8_t *match;
    /* data parallel: this rank trains images [j0, j0 + b) of every micro-batch of B (run.first,
     * run.local_batch), i.e. views j0.. and B + j0..; the SSCD loss sees every rank's views in
     * gathered order (rank 0's 2b views, then rank 1's...), match_gathered is the match matrix in
     * that order */
    int ranks, b, j0;
    int *gathered_view;
    uint8_t *match_gathered;
    /* held-out re-ID evaluation (eval.manifest): preprocessed images and their scene/view ids */
    view_rows eval;
};

/* The footprint of a training step (nn/base/memory.h), from the config alone: encoder, MAE decoder
 * and SSCD head weights, their gradients and optimizer state, and the activations of one
 * micro-batch of 2B views (nn/models/vit_memory.h), 2B / ranks in a data-parallel run. On a GPU the activations live in device
 * memory, which this host check does not see: it runs for train.device = cpu. The image cache
 * (rows x 3 x short side^2 bytes) is not counted: the manifest is not read yet. */
static int image_memory_check(const image_cfg *c, const train_run *run) {
    const loop_keys *k = run->keys;
    vit_config v;
    int rc = vit_args_config(&c->model, &v);
    if (rc || run->device != DEV_CPU) return rc;
    double g = (double)(v.img / v.patch), L = g * g, M = 2.0 * run->local_batch; /* this rank's views */
    double K = c->mask_ratio > 0 ? mae_len_keep((int)L, c->mask_ratio) : L, R = v.registers;
    double enc = vit_param_count(&v), fixed = v.pos_fixed ? (v.pos_prefix + L) * v.dim : 0;
    double dd = c->dec_dim, pdim = 3.0 * v.patch * v.patch, dec = 0, head = 0;
    if (c->w_mae > 0) /* decoder_embed, mask_token, decoder_pos_embed, blocks (mlp 4), norm, decoder_pred */
        dec = dd * v.dim + dd + dd + (1 + L) * dd + c->dec_depth * vit_block_param_count((int)dd, 4, 1, 0) + 2 * dd +
              pdim * dd + pdim;
    if (c->w_con > 0 && c->head_dim > 0) head = (double)c->head_dim * v.dim + c->head_dim;
    double trainable = enc - fixed + dec + head;
    mem_estimate m = loop_keys_mem_state(k, enc + dec + head, trainable);
    m.activations = vit_blocks_train_bytes(v.dim, v.depth, v.heads, v.mlp_ratio, M, K + 1 + R);
    if (c->w_mae > 0) m.activations += vit_blocks_train_bytes((int)dd, c->dec_depth, c->dec_heads, 4, M, L + 1 + R) +
                                       2 * 4 * M * L * pdim * 2; /* prediction, target and their gradients */
    m.data = 4 * M * 3.0 * v.img * v.img * 3; /* the augmented views: host buffer, device tensor, patches */
    m.data += 4 * (2.0 * k->batch - M) * 3.0 * v.img * v.img; /* data parallel: the host buffer holds all 2B */
    return mem_check(&m, "train image", "train.batch, model.img or the model size");
}

/* positives = views: the training rows grouped by scene (datasets/image_cache.h). */
static int group_views(image_objective *o) {
    int ns, multi = 0;
    image_cache_scenes(&o->data, &o->scene_first, &o->scene_count, &o->scene_rows, &ns);
    if (ns == 0)
        return er_fail(ER_INPUT, "data.positives = views: %s has no scene column (views of one scene are the positives)",
                       o->cfg.manifest);
    for (int s = 0; s < ns; s++) multi += o->scene_count[s] > 1;
    if (!multi)
        return er_fail(ER_INPUT, "data.positives = views: no scene of %s split '%s' has two views", o->cfg.manifest,
                       o->cfg.split ? o->cfg.split : "");
    if (o->cfg.positive_gap > 0 || o->cfg.positive_gap_frac > 0) /* positions are the view values */
        for (int i = 0; i < o->data.n; i++)
            if (o->data.scene[i] >= 0 && o->data.pos[i] < 0)
                return er_fail(ER_INPUT, "data.positive_gap: row %d of %s split '%s' has a scene but no view (its position)", i,
                               o->cfg.manifest, o->cfg.split ? o->cfg.split : "");
    if (o->cfg.positive_gap > 0 || o->cfg.positive_gap_frac > 0)
        for (int i = 0; i < o->data.n; i++) {
            int sc = o->data.scene[i];
            if (sc < 0) continue;
            o->gap_rows++;
            o->gap_alone += !seq_positive_count(o->scene_rows + o->scene_first[sc], o->scene_count[sc], o->data.pos, i,
                                                o->cfg.positive_gap, o->cfg.positive_gap_frac);
        }
    return ER_OK;
}

static int image_fill(void *self, int64_t g, void *slot, const fill_scratch *fs);

/* Builds the objective into the zeroed o; on failure the caller frees o (image_objective_free). The
 * key table checks each value's range; here only what spans several keys. */
static int image_build(image_objective *o, const image_cfg *c, const train_run *run) {
    const loop_keys *k = run->keys;
    int device = run->device, rc0;
    if (strcmp(c->aug, "views")) { /* the strengths belong to the views preset: refuse them, not ignore them */
        image_cfg d;
        image_cfg_defaults(&d);
        int n;
        /* the key table binds addresses only (the same table the caller parsed into): names for c->view's fields */
        const cfg_spec *sp = image_cfg_specs((image_cfg *)c, &n);
        const char *lo = (const char *)&c->view;
        for (int i = 0; i < n; i++) {
            const char *at = (const char *)sp[i].dst;
            if (at < lo || at >= lo + sizeof c->view) continue;
            if (*(const double *)at != *(const double *)((const char *)&d.view + (at - lo))) {
                image_cfg_free(&d);
                return er_fail(ER_INPUT, "%s is set but aug.preset = %s: the aug.* strengths apply to aug.preset = views",
                               sp[i].key, c->aug);
            }
        }
        image_cfg_free(&d);
    }
    if ((c->positive_gap > 0 || c->positive_gap_frac > 0) && !(c->positives && !strcmp(c->positives, "views")))
        return er_fail(ER_INPUT, "data.positive_gap / data.positive_gap_frac are set but data.positives = %s: they apply to views",
                       c->positives ? c->positives : "crops");
    if (c->w_mae <= 0 && c->w_con <= 0) return er_fail(ER_INPUT, "both loss weights are 0: nothing to train");
    if (c->w_mae > 0 && c->mask_ratio <= 0) return er_fail(ER_INPUT, "MAE needs mae.mask_ratio > 0");
    if ((rc0 = image_memory_check(c, run))) return rc0; /* before anything is allocated */
    o->cfg = *c; /* strings stay owned by the caller's config */
    o->device = device;
    o->run = *run;
    int rc = vit_arch.create(&c->model, run->seed, &o->model); /* on the host, then moved */
    if (rc || (rc = model_to_device(o->model, device))) return rc;
    o->enc = vit_model_vit(o->model);
    o->vc = o->enc->cfg;
    params_add_all(&o->all, &o->enc->params);
    o->use_mae = c->w_mae > 0;
    o->use_con = c->w_con > 0;
    o->guided = !strcmp(c->masking, "guided");
    o->advanced = !strcmp(c->aug, "advanced");
    o->views = !strcmp(c->aug, "views");
    o->view_aug = (aug_view_params){(float)c->view.crop_min, (float)c->view.rotate, (float)c->view.vflip,
                                    (float)c->view.jitter, (float)c->view.jitter_prob, (float)c->view.grey_prob,
                                    (float)c->view.blur_prob, (float)c->view.blur_max, (float)c->view.jpeg_prob};
    o->K = c->mask_ratio > 0 ? mae_len_keep(o->enc->L, c->mask_ratio) : o->enc->L;
    if (o->use_mae && (rc = mae_decoder_init_on(device, &o->dec, &o->vc, c->dec_dim, c->dec_depth, c->dec_heads,
                                                run->seed + 1, &o->all))) return rc;
    if (o->use_con && (rc = sscd_head_init_on(device, &o->head, o->vc.dim, c->head_dim, run->seed + 2, &o->all)))
        return rc;
    int side = c->cache_side > 0 ? c->cache_side : c->model.img * 8 / 7;
    if ((rc = image_cache_load(&o->data, c->manifest, c->split, side))) return rc;
    if (c->eval_manifest && c->eval_manifest[0] &&
        (rc = view_rows_load(&o->eval, c->eval_manifest, c->eval_split, c->model.img)))
        return rc;
    if (c->positives && !strcmp(c->positives, "views") && (rc = group_views(o))) return rc;
    int M = 2 * k->batch, L = o->enc->L, S = c->model.img;
    size_t bytes = 0;
    host_batch_reserve(&bytes, (size_t)M * 3 * S * S * sizeof(float));
    o->mx_off = host_batch_reserve(&bytes, (size_t)M * S * S * sizeof(float));
    o->inst_off = host_batch_reserve(&bytes, (size_t)M * sizeof(int));
    o->has_mask_off = host_batch_reserve(&bytes, (size_t)M);
    if (!(o->hb = host_batch_new(run, o->data.n, bytes, image_fill, o))) return ER_RUNTIME;
    o->scores = xmalloc((size_t)M * L * sizeof(float));
    o->mask = xmalloc((size_t)M * L * sizeof(float));
    o->lam = xmalloc(M * sizeof(float));
    o->shuffle = xmalloc((size_t)M * L * sizeof(int32_t));
    o->restore = xmalloc((size_t)M * L * sizeof(int32_t));
    o->keep = xmalloc((size_t)M * L * sizeof(int32_t));
    o->partner = xmalloc(M * sizeof(int));
    o->match = xmalloc((size_t)M * M);
    o->ranks = run->world_size;
    o->b = run->local_batch;
    o->j0 = run->first;
    if (o->ranks > 1) {
        int Ml = 2 * o->b;
        o->gathered_view = xmalloc(M * sizeof(int));
        for (int g = 0; g < M; g++) { /* row g of the gather: view l of rank r */
            int r = g / Ml, l = g % Ml;
            o->gathered_view[g] = (l < o->b ? 0 : k->batch) + r * o->b + l % o->b;
        }
        o->match_gathered = xmalloc((size_t)M * M);
    }
    return ER_OK;
}

int image_objective_new(const image_cfg *c, const loop_keys *k, image_objective **out) {
    train_run run;
    int rc = loop_keys_run(k, &run);
    image_objective *o = rc ? NULL : xcalloc(1, sizeof *o);
    if (o && (rc = image_build(o, c, &run))) image_objective_free(o), o = NULL;
    *out = o;
    return rc;
}

void image_objective_free(image_objective *o) {
    if (!o) return;
    host_batch_free(o->hb); /* first: waits for a fill still reading the data on the worker */
    free(o->scene_first); free(o->scene_count); free(o->scene_rows);
    /* the encoder owns its tensors; decoder/head tensors are only in `all` */
    for (int i = o->enc ? o->enc->params.n : 0; i < o->all.n; i++) tensor_free(o->all.t[i]);
    free(o->all.t);
    model_free(o->model);
    mae_decoder_free(&o->dec);
    image_cache_free(&o->data);
    free(o->scores); free(o->mask); free(o->lam);
    free(o->shuffle); free(o->restore); free(o->keep); free(o->partner);
    free(o->match); free(o->gathered_view); free(o->match_gathered);
    view_rows_free(&o->eval);
    free(o);
}

param_list *image_objective_params(image_objective *o) { return &o->all; }

/* Instance of the i-th image drawn since the start (epoch-wise reshuffled without replacement). */
static int instance_at(image_objective *o, int64_t i) { return host_batch_item(o->hb, i); }

/* Data parallel: whether view s (0..2B-1) of a micro-batch is one of this rank's. */
static int view_is_mine(const image_objective *o, int s) {
    int j = s % o->run.batch;
    return j >= o->j0 && j < o->j0 + o->b;
}

/* Moves this rank's 2b rows (views j0.. and B + j0.., of row_bytes each) of a per-view buffer to its
 * front, in that order. Every destination lies at or before its source and rows move in increasing
 * order, so no row is overwritten before it is moved. */
static void shard_rows(const image_objective *o, void *rows, size_t row_bytes) {
    char *p = rows;
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < o->b; i++)
            memmove(p + ((size_t)v * o->b + i) * row_bytes, p + ((size_t)v * o->run.batch + o->j0 + i) * row_bytes, row_bytes);
}

/* The 2B views of micro-batch g (instances, augmentation; a pure function of the seed, g and the
 * view) into a host slot: x, mx, has_mask, inst. Runs on the step's thread or on the prefetch
 * worker, never both at once (they share the per-thread scratch). */
static int image_fill(void *self, int64_t g, void *slot, const fill_scratch *fs) {
    image_objective *o = self;
    const int B = o->run.batch, M = 2 * B, S = o->cfg.model.img;
    const uint64_t seed = o->run.seed;
    float *x = slot, *mx = (float *)((char *)slot + o->mx_off);
    int *inst = (int *)((char *)slot + o->inst_off);
    uint8_t *has_mask = (uint8_t *)slot + o->has_mask_off;
    for (int j = 0; j < B; j++) inst[j] = inst[B + j] = instance_at(o, g * B + j);
    /* MixUp/CutMix mixes view s with view M-1-s (datasets/augment.h): with it a rank also augments
     * the partners of its views */
    int mixed = o->use_con && o->cfg.mix_prob > 0, fail = 0;
    /* num_threads: on the prefetch worker the team is sized like the step's (per-thread scratch) */
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->run.threads)
    for (int s = 0; s < M; s++) {
        if (!view_is_mine(o, s) && !(mixed && view_is_mine(o, M - 1 - s))) { /* unused here: defined for the masking rows */
            has_mask[s] = 0;
            memset(mx + (size_t)s * S * S, 0, (size_t)S * S * sizeof(float));
            continue;
        }
        int t = omp_get_thread_num();
        int id = inst[s];
        int sc = o->scene_rows && s >= B ? o->data.scene[id] : -1;
        const int gapped = o->cfg.positive_gap > 0 || o->cfg.positive_gap_frac > 0;
        if (sc >= 0 && o->scene_count[sc] > 1 && gapped) { /* a view beyond the gap, uniformly; none: itself */
            rng_t rv = rng_make(seed, rng_stream(RNG_SAMPLING, (uint32_t)g, 0x40000000u + (uint32_t)s));
            id = seq_positive_pick(o->scene_rows + o->scene_first[sc], o->scene_count[sc], o->data.pos, id,
                                   o->cfg.positive_gap, o->cfg.positive_gap_frac, &rv);
        } else if (sc >= 0 && o->scene_count[sc] > 1) { /* another view of the scene, uniformly */
            rng_t rv = rng_make(seed, rng_stream(RNG_SAMPLING, (uint32_t)g, 0x40000000u + (uint32_t)s));
            int cnt = o->scene_count[sc], k = (int)rng_below(&rv, (uint32_t)(cnt - 1));
            const int *rows = o->scene_rows + o->scene_first[sc];
            if (rows[k] == id) k = cnt - 1; /* skip itself: k ranges over the cnt - 1 others */
            id = rows[k];
        }
        rng_t r = rng_make(seed, rng_stream(RNG_AUGMENT, (uint32_t)g, (uint32_t)s));
        image_cache_get(&o->data.imgs[id], &fs->src[t]);
        const u8_image *mk = &o->data.masks[id];
        image out = {.c = 3, .h = S, .w = S, .data = x + (size_t)s * 3 * S * S, .cap = (size_t)3 * S * S};
        image mout = {.c = 1, .h = S, .w = S, .data = mx + (size_t)s * S * S, .cap = (size_t)S * S};
        if (mk->px) image_cache_get(mk, &fs->mask[t]);
        const image *ms = mk->px ? &fs->mask[t] : NULL;
        image *mo = mk->px ? &mout : NULL;
        int rc = o->advanced ? aug_sscd_advanced(&r, &fs->src[t], ms, S, &fs->ws[t], &out, mo)
                 : o->views  ? aug_views(&r, &fs->src[t], ms, S, &o->view_aug, &fs->ws[t], &out, mo)
                             : aug_mae(&r, &fs->src[t], ms, S, &fs->ws[t], &out, mo);
        if (rc || out.data != x + (size_t)s * 3 * S * S) fail = 1; /* outputs must stay in place */
        has_mask[s] = mk->px != NULL;
        if (!mk->px) memset(mx + (size_t)s * S * S, 0, (size_t)S * S * sizeof(float));
    }
    return fail ? er_fail(ER_RUNTIME, "augmentation failed at micro-batch %lld", (long long)g) : ER_OK;
}

static tensor *image_step(void *self, int64_t step, int micro, loss_terms *terms) {
    image_objective *o = self;
    const image_cfg *c = &o->cfg;
    int B = o->run.batch, M = 2 * B, S = c->model.img, L = o->enc->L, K = o->K, p = o->vc.patch;
    int64_t g = step * o->run.keys->accum + micro; /* global micro-batch index */
    int phase = prof_phase(PROF_DATA); /* augmentation, mixing, masking, upload */
    int mixed = o->use_con && c->mix_prob > 0;
    char *slot = host_batch_get(o->hb, g);
    if (!slot) { prof_phase(phase); return NULL; }
    float *x = (float *)slot, *mx = (float *)(slot + o->mx_off);
    const uint8_t *has_mask = (const uint8_t *)slot + o->has_mask_off;
    /* MixUp / CutMix on the 2B views: extra positives (ContrastiveMixup) */
    if (mixed) {
        rng_t r = rng_make(o->run.seed, rng_stream(RNG_SAMPLING, (uint32_t)g, 1));
        mixup_config mc = MIXUP_SSCD;
        mc.mix_prob = (float)c->mix_prob;
        mixup_batch(&r, &mc, x, M, 3, S, S, o->lam, o->partner);
        mixup_match_matrix(o->lam, o->partner, M, B, o->match);
    } else {
        int ids[1024];
        int *idp = M <= 1024 ? ids : xmalloc(M * sizeof(int));
        for (int s = 0; s < M; s++) idp[s] = s % B;
        sscd_match_from_ids(idp, M, o->match);
        if (idp != ids) free(idp);
    }
    /* masking */
    const int32_t *keep = NULL;
    if (K < L) {
        if (o->guided) mae_patch_scores(mx, M, S, S, p, o->scores);
        mae_masking(M, L, K, o->guided ? o->scores : NULL, o->guided ? has_mask : NULL, o->run.seed,
                    (uint64_t)g, o->shuffle, o->restore, o->mask);
        for (int s = 0; s < M; s++) memcpy(o->keep + (size_t)s * K, o->shuffle + (size_t)s * L, K * sizeof(int32_t));
        keep = o->keep;
    }
    int Ml = 2 * o->b; /* this rank's views */
    if (o->ranks > 1) {
        shard_rows(o, x, (size_t)3 * S * S * sizeof(float));
        shard_rows(o, o->mask, (size_t)L * sizeof(float));
        shard_rows(o, o->restore, (size_t)L * sizeof(int32_t));
        if (keep) shard_rows(o, o->keep, (size_t)K * sizeof(int32_t));
    }
    /* the 2B views go to the device once; patchify, the MAE target and both losses run there.
     * Host-side per step: augmentation, masking indices (gathered on the device by op_gather) and
     * the B*L patch mask / N*N match masks (tiny). */
    nn_ctx ctx = nn_ctx_train(o->run.seed, step, micro, o->run.precision);
    tensor *xt = host_batch_upload(o->hb, slot, 0, 4, SHAPE(Ml, 3, S, S));
    prof_phase(phase);
    tensor *latent = vit_forward_t(o->enc, &ctx, xt, keep, K);
    if (!latent) return NULL;
    tensor *loss = NULL;
    if (o->use_mae) {
        tensor *target = mae_target_t(xt, p, c->norm_pix);
        tensor *pred = mae_decoder_forward(&o->dec, &ctx, latent, o->vc.registers, o->restore);
        tensor *lm = mae_loss_t(pred, target, o->mask);
        if (!lm) return NULL;
        loss_terms_defer(terms, "mae", lm);
        loss = op_mul_scalar(lm, (float)c->w_mae);
    }
    if (o->use_con) {
        tensor *cls = op_reshape(op_slice(latent, 1, 0, 1), 2, SHAPE(Ml, o->vc.dim));
        tensor *e = sscd_descriptor(&o->head, &ctx, cls);
        const uint8_t *match = o->match;
        if (o->ranks > 1) { /* every rank's descriptors: the whole batch's negatives */
            e = op_allgather_rows(e);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < M; j++)
                    o->match_gathered[(size_t)i * M + j] = o->match[(size_t)o->gathered_view[i] * M + o->gathered_view[j]];
            match = o->match_gathered;
        }
        sscd_terms st;
        tensor *lc = sscd_loss_terms(e, match, c->tau, c->entropy_weight, mixed, &st);
        if (!lc) return NULL;
        loss_terms_defer(terms, "infonce", st.infonce);
        loss_terms_defer(terms, "entropy", st.entropy);
        loss_terms_defer(terms, "pos_sim", st.pos_sim);
        lc = op_mul_scalar(lc, (float)c->w_con);
        loss = loss ? op_add(loss, lc) : lc;
    }
    return loss;
}

/* Held-out single-view re-ID: query view 0 against reference view 2 of every eval scene, k = 10,
 * ISC2021 uAP / Acc@1 / Recall@P90 (infer/eval/multiview.h), on the L2-normalised [CLS]. */
static int image_eval(void *self, int64_t step, char *buf, size_t n) {
    image_objective *o = self;
    int D = o->model->dim;
    emb_set e;
    emb_alloc(&e, o->eval.n, D);
    e.scene = xmalloc(o->eval.n * sizeof(int64_t));
    e.view = xmalloc(o->eval.n * sizeof(int64_t));
    memcpy(e.scene, o->eval.scene, o->eval.n * sizeof(int64_t));
    memcpy(e.view, o->eval.view, o->eval.n * sizeof(int64_t));
    int rc = objective_embed(o->model, o->run.precision, o->eval.x, o->eval.n, 64, e.x);
    mv_row rows[9];
    if (!rc) rc = multiview_eval(&e, 10, 0, 0, rows);
    if (!rc) snprintf(buf, n, "\"reid_Q1_R1_uAP\": %.4f, \"acc1\": %.4f, \"recall_p90\": %.4f, \"scenes\": %d",
                      rows[0].r.uap, rows[0].r.acc1, rows[0].r.recall_p90, rows[0].nscenes);
    emb_free(&e);
    (void)step;
    return rc;
}

static void image_free_self(void *self) { image_objective_free(self); }

/* The start line of `endoret train image` (unless --quiet). */
static void image_describe(void *self, FILE *f) {
    image_objective *o = self;
    const image_cfg *c = &o->cfg;
    fprintf(f, "%s, %d heads, %lld parameters, %d images, batch %d x %d views x accum %d", c->model.arch,
            o->enc->cfg.heads, (long long)params_numel(&o->all), o->data.n, o->run.batch, 2, o->run.keys->accum);
    if (o->gap_rows)
        fprintf(f, "; positives: another frame of the scene >= %d positions and >= %g of it away, %d of %d scene rows have "
                   "none (a crop view, as the %d rows without a scene)", c->positive_gap, c->positive_gap_frac,
                o->gap_alone, o->gap_rows, o->data.n - o->gap_rows);
}

/* The loop's hooks (objective_create adds self and the run); the export is the encoder alone, timm names +
 * our config metadata: what `embed --model` and timm users load. */
static const train_objective image_hooks = {.name = "image", .step = image_step, .eval = image_eval,
                                            .describe = image_describe, .free = image_free_self,
                                            .export_name = "encoder.safetensors", .exports = "encoder.safetensors"};

train_objective image_objective_iface(image_objective *o) {
    train_objective t = image_hooks;
    t.self = o, t.run = o->run;
    objective_ready(&t, o->model, &o->all, o->data.n, 2, o->eval.n > 0);
    return t;
}

/* ---------------------------------------------------------------- registry entry */

static void image_defaults(void *cfg, loop_keys *k) {
    image_cfg_defaults(cfg);
    image_loop_defaults(k);
}

static void image_specs(void *cfg, key_table *t) {
    int n;
    const cfg_spec *s = image_cfg_specs(cfg, &n);
    key_table_add(t, s, n);
}

static int image_create(const void *cfg, const train_run *run, void *self, train_objective *out) {
    int rc = image_build(self, cfg, run);
    if (!rc) *out = image_objective_iface(self); /* the same hooks, self and run objective_create set */
    return rc;
}

OBJECTIVE_DEF(image, image_cfg, image_objective, NULL, "EndoFinder image encoder (ViT, MAE with lesion-guided masking + SSCD)",
              "configs/endofinder_image.cfg, configs/demo_image.cfg");
